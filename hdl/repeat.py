"""RepeatStatic as hardware: every element ``n`` times, in a new innermost dimension."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..contract.beat import beat_signature
from .held_beat import HeldBeat
from .unit import StatusSignature, check_int

__all__ = ["RepeatStaticUnit"]


class RepeatStaticUnit(wiring.Component):
    """Emit each element ``n`` times (semantics section 4, RepeatStatic).

    Copies ``1 .. n-1`` of an element carry no stop; the last copy carries ``S_(s+1)`` when the
    element is followed by the stop ``S_s``, else ``S_1``. A stop that does not follow an element
    becomes ``S_(s+1)``; ``Done`` passes unchanged (a bare ``Done`` stays bare: the stream of zero
    tensors stays empty).

    Which stop the last copy carries depends on the *next token*, which a legal framing may put
    in the next beat (a stop-only beat after an element beat with no stop, or a bare ``Done``).
    So the element of a beat ``(d, has_data 1, stop 0, last 0)`` is moved into a holding register
    (the unit's one register stage) and its last copy waits for the next beat: a stop-only beat or
    a bare ``Done`` is merged into it, an element beat resolves it to ``S_1``. A beat enters the
    register only when it must wait; otherwise the unit is combinational from ``in0`` to ``out``.
    Once the register holds a beat, the following beats flow through it, so the unit sustains one
    output beat per cycle (``n`` cycles per element) with at most one cycle of latency.

    Parameters
    ----------
    elem_type : stepforge.compiler.types.ElemType
        Element type of the stream.
    rank : int
        Rank of the input stream (``>= 0``).
    n : int
        Copies of every element (``>= 1``).
    row_bound : int or Mapping, optional
        Bound of a dynamic tile row count (see :func:`~stepforge.contract.beat.element_layout`).

    Members
    -------
    in0 : ``In(beat_signature(elem_type, rank))``
        Input beats.
    out : ``Out(beat_signature(elem_type, rank + 1))``
        Output beats.
    status : ``Out(StatusSignature)``
        ``busy`` while a beat is held or offered; ``stall_in`` while the unit waits for an input
        beat; never raises ``error``.

    Raises
    ------
    ValueError
        ``rank`` is not an int ``>= 0`` or ``n`` is not an int ``>= 1``.
    """

    def __init__(self, elem_type, rank, n, *, row_bound=None):
        check_int("RepeatStaticUnit", "rank", rank, 0)
        check_int("RepeatStaticUnit", "n", n, 1)
        self.elem_type, self.rank, self.n = elem_type, rank, n
        self._row_bound = row_bound
        super().__init__({
            "in0": In(beat_signature(elem_type, rank, row_bound=row_bound)),
            "out": Out(beat_signature(elem_type, rank + 1, row_bound=row_bound)),
            "status": Out(StatusSignature),
        })

    def __repr__(self):
        rb = f", row_bound={self._row_bound!r}" if self._row_bound is not None else ""
        return f"RepeatStaticUnit({self.elem_type!r}, {self.rank}, {self.n}{rb})"

    def elaborate(self, platform):
        m = Module()
        i, o = self.in0, self.out
        n = self.n
        hb = HeldBeat(m, i)  # ``cur`` is the beat being repeated
        held_valid, cur, cur_valid, nxt = hb.held_valid, hb.cur, hb.cur_valid, hb.next
        copy = Signal(range(max(n, 2)), name="copy")  # copies of ``cur`` already sent

        final = Signal(name="final")        # this output is the last one for ``cur``
        lookahead = Signal(name="lookahead")  # ... and its stop depends on the next beat
        merge = Signal(name="merge")        # ... which carries that stop (or a bare Done)
        stash = Signal(name="stash")        # move the port's beat into the register, no output
        m.d.comb += [
            final.eq(~cur.has_data | (copy == n - 1)),
            lookahead.eq(cur.has_data & final & (cur.stop == 0) & ~cur.last),
            merge.eq(lookahead & held_valid & i.valid & ~nxt.has_data),
            stash.eq(lookahead & ~held_valid & i.valid),
        ]

        stop_out = Signal.like(o.payload.stop, name="stop_out")
        last_out = Signal(name="last_out")
        with m.If(~final):
            m.d.comb += [stop_out.eq(0), last_out.eq(0)]
        with m.Elif(merge):
            m.d.comb += [stop_out.eq(nxt.stop + 1), last_out.eq(nxt.last)]
            with m.If(nxt.stop == 0):  # a bare Done: the element's stop is S_1
                m.d.comb += stop_out.eq(1)
        with m.Elif(lookahead):  # resolved by an element beat
            m.d.comb += [stop_out.eq(1), last_out.eq(0)]
        with m.Else():
            m.d.comb += last_out.eq(cur.last)
            with m.If(cur.stop != 0):
                m.d.comb += stop_out.eq(cur.stop + 1)
            with m.Elif(cur.has_data):
                m.d.comb += stop_out.eq(1)
        m.d.comb += [
            o.payload.data.eq(cur.data),
            o.payload.has_data.eq(cur.has_data),
            o.payload.stop.eq(stop_out),
            o.payload.last.eq(last_out),
            o.valid.eq(cur_valid & (~lookahead | (held_valid & i.valid))),
        ]

        go = Signal(name="go")
        m.d.comb += go.eq(o.valid & o.ready)
        # ``in0`` is taken into the register (load), consumed by a merge, or consumed as ``cur``.
        with m.If(held_valid):
            m.d.comb += i.ready.eq(go & final)
        with m.Else():
            m.d.comb += i.ready.eq(go | stash)
        load = Signal(name="load")
        m.d.comb += load.eq(i.valid & i.ready & ~merge & (held_valid | ~final | stash))
        hb.update(m, load, release=go & final & held_valid)
        with m.If(go):
            m.d.sync += copy.eq(0)
            with m.If(~final):
                m.d.sync += copy.eq(copy + 1)

        m.d.comb += [
            self.status.busy.eq(cur_valid),
            self.status.stall_in.eq(~cur_valid | (lookahead & held_valid & ~i.valid)),
            self.status.stall_out.eq(o.valid & ~o.ready),
        ]
        return m
