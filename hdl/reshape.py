"""Reshape as hardware: split dimension ``b`` into chunks, padding a partial chunk."""

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..compiler.types import Bool
from ..contract.values import pad_value
from ..contract.beat import beat_signature, element_layout, pack_element
from .held_beat import HeldBeat
from .unit import ErrorCode, StatusSignature, check, check_int, raise_error

__all__ = ["ReshapeUnit"]


class ReshapeUnit(wiring.Component):
    """Split dimension ``b`` into ``[ceil(D_b / chunk), chunk]`` (semantics section 4, Reshape).

    ``b = 0`` counts elements. Every ``chunk``-th element gets ``S_1``, or ``S_(s+1)`` when the
    stop ``S_s`` follows it. A stop that arrives inside a partial chunk pads the chunk with
    ``pad`` elements, the last pad carrying ``S_(s+1)``; ``Done`` inside a partial chunk (a
    rank-0 stream) pads it and closes it with ``S_1``. A stop that does not end a chunk becomes
    ``S_(s+1)``. Padding emits several beats for one input beat, which is held on ``in0`` (not
    accepted) meanwhile. The stop of a chunk's last element depends on the *next token*, which
    a legal framing may put in the next beat (a stop-only beat, a bare ``Done``), so such an
    element waits in a holding register (the unit's one register stage) for the next beat,
    which is merged into it when it carries no element. Held beats keep flowing through the
    register, so the unit sustains one output beat per cycle after at most one cycle of latency.
    Without ``pad`` a partial chunk is a run-time error: ``BAD_STOP`` when a stop ends it,
    ``EARLY_END`` when ``Done`` does.

    ``b > 0`` counts stops of level ``>= b``: every ``chunk``-th one becomes ``S_(s+1)``, the
    others must be exactly ``S_b`` (a higher stop inside a partial group raises ``BAD_STOP``).
    Combinational apart from the counter: one beat per cycle, zero latency.

    With ``flags=True`` a second output carries a ``Bool`` stream with the same stops, true on
    padded elements. The two outputs present each beat together and each takes it on its own
    ``ready``; the next beat comes once both have taken it.

    Parameters
    ----------
    elem_type : stepforge.compiler.types.ElemType
        Element type of the stream.
    rank : int
        Rank of the input stream (``>= 0``).
    chunk : int
        Chunk size (``>= 1``).
    b : int, default 0
        The split dimension, ``0 <= b <= rank``.
    pad : int or float, optional
        Padding value: fills a tile of ``elem_type`` (or is the element, for scalar types).
        Used only for ``b = 0``.
    flags : bool, default False
        Add the ``flags`` output.
    row_bound : int or Mapping, optional
        Bound of a dynamic tile row count (see :func:`~stepforge.contract.beat.element_layout`).

    Members
    -------
    in0 : ``In(beat_signature(elem_type, rank))``
        Input beats.
    out : ``Out(beat_signature(elem_type, rank + 1))``
        Output beats.
    flags : ``Out(beat_signature(Bool(), rank + 1))``
        Only with ``flags=True``: ``1`` on padded elements, ``0`` on the others.
    status : ``Out(StatusSignature)``
        ``busy`` while a beat is held or offered; raises ``BAD_STOP`` or ``EARLY_END`` (above).

    Raises
    ------
    ValueError
        A parameter out of range, or a ``pad`` that does not fit the element type.
    """

    def __init__(self, elem_type, rank, chunk, b=0, *, pad=None, flags=False, row_bound=None):
        check_int("ReshapeUnit", "rank", rank, 0)
        check_int("ReshapeUnit", "chunk", chunk, 1)
        check_int("ReshapeUnit", "b", b, 0, rank)
        self.elem_type, self.rank, self.chunk, self.b = elem_type, rank, chunk, b
        self.pad, self.flags_enabled = pad, bool(flags)
        self._row_bound = row_bound
        self._pad_bits = None
        if pad is not None and b == 0:
            shape = element_layout(elem_type, row_bound=row_bound)
            problem = None
            try:
                self._pad_bits = pack_element(shape, pad_value(elem_type, pad))
            except (OverflowError, TypeError, ValueError) as exc:
                problem = exc
            check(problem is None, "ReshapeUnit", "pad", f"a value of {elem_type!r} ({problem})",
                  pad)
        members = {
            "in0": In(beat_signature(elem_type, rank, row_bound=row_bound)),
            "out": Out(beat_signature(elem_type, rank + 1, row_bound=row_bound)),
        }
        if self.flags_enabled:
            members["flags"] = Out(beat_signature(Bool(), rank + 1))
        members["status"] = Out(StatusSignature)
        super().__init__(members)

    def __repr__(self):
        extra = "" if self.pad is None else f", pad={self.pad!r}"
        extra += ", flags=True" if self.flags_enabled else ""
        extra += f", row_bound={self._row_bound!r}" if self._row_bound is not None else ""
        return f"ReshapeUnit({self.elem_type!r}, {self.rank}, {self.chunk}, b={self.b}{extra})"

    def elaborate(self, platform):
        m = Module()
        o = self.out
        # The beat on offer (driven by the level logic below) and the handshake with both outputs.
        beat = Signal(o.payload.shape(), name="beat")
        is_pad = Signal(name="is_pad")
        offer = Signal(name="offer")  # ``beat`` is valid
        go = Signal(name="go")        # every output has taken ``beat`` (this cycle or before)
        if self.flags_enabled:
            f = self.flags
            sent_out = Signal(name="sent_out")
            sent_flags = Signal(name="sent_flags")
            m.d.comb += [
                o.valid.eq(offer & ~sent_out),
                f.valid.eq(offer & ~sent_flags),
                f.payload.data.eq(is_pad),
                f.payload.has_data.eq(beat.has_data),
                f.payload.stop.eq(beat.stop),
                f.payload.last.eq(beat.last),
                go.eq(offer & (sent_out | o.ready) & (sent_flags | f.ready)),
            ]
            with m.If(go):
                m.d.sync += [sent_out.eq(0), sent_flags.eq(0)]
            with m.Else():
                m.d.sync += [sent_out.eq(sent_out | (o.valid & o.ready)),
                             sent_flags.eq(sent_flags | (f.valid & f.ready))]
            stall_out = (o.valid & ~o.ready) | (f.valid & ~f.ready)
        else:
            m.d.comb += [o.valid.eq(offer), go.eq(offer & o.ready)]
            stall_out = o.valid & ~o.ready
        m.d.comb += [o.payload.eq(beat), self.status.stall_out.eq(stall_out)]
        if self.b == 0:
            self._elaborate_elements(m, beat, is_pad, offer, go)
        else:
            self._elaborate_stops(m, beat, offer, go)
        return m

    def _elaborate_stops(self, m, beat, offer, go):
        i, b, chunk = self.in0, self.b, self.chunk
        count = Signal(range(chunk), name="count")  # level->=b stops of the current group
        s = i.payload.stop
        bad = Signal(name="bad")
        m.d.comb += [
            beat.data.eq(i.payload.data),
            beat.has_data.eq(i.payload.has_data),
            beat.stop.eq(s),
            beat.last.eq(i.payload.last),
        ]
        with m.If(s >= b):
            with m.If(count == chunk - 1):
                m.d.comb += beat.stop.eq(s + 1)
            with m.Elif(s > b):
                m.d.comb += bad.eq(1)
        raise_error(m, self.status, ErrorCode.BAD_STOP, i.valid & bad)
        m.d.comb += [
            offer.eq(i.valid & ~bad & ~self.status.error),
            i.ready.eq(go),
        ]
        with m.If(go & (s >= b)):
            m.d.sync += count.eq(0)
            with m.If(count != chunk - 1):
                m.d.sync += count.eq(count + 1)
        with m.If(go & i.payload.last):
            m.d.sync += count.eq(0)
        m.d.comb += [
            self.status.busy.eq(i.valid),
            self.status.stall_in.eq(~i.valid),
        ]

    def _elaborate_elements(self, m, beat, is_pad, offer, go):
        i, chunk = self.in0, self.chunk
        hb = HeldBeat(m, i)  # ``cur`` is the beat being rewritten
        held_valid, cur, cur_valid, nxt = hb.held_valid, hb.cur, hb.cur_valid, hb.next

        count = Signal(range(chunk), name="count")     # elements of the open chunk
        step = Signal(range(chunk + 1), name="step")   # beats already sent for ``cur``
        full = Signal(name="full")          # ``cur``'s element completes the chunk
        closes = Signal(name="closes")      # ``cur`` ends a partial chunk: pad it
        final = Signal(name="final")        # this output is the last one for ``cur``
        lookahead = Signal(name="lookahead")
        merge = Signal(name="merge")
        stash = Signal(name="stash")
        ends = cur.last | (cur.stop != 0)
        m.d.comb += [
            full.eq(cur.has_data & (count == chunk - 1)),
            closes.eq(Mux(cur.has_data, ~full & ends, count != 0)),
            final.eq(~closes | (step == chunk - 1 - count)),
            lookahead.eq(full & ~ends),
            merge.eq(lookahead & held_valid & i.valid & ~nxt.has_data),
            stash.eq(lookahead & ~held_valid & i.valid),
        ]

        # Without a pad value a partial chunk cannot be closed.
        bad = Signal(name="bad")
        if self._pad_bits is None:
            m.d.comb += bad.eq(cur_valid & closes)
            raise_error(m, self.status, ErrorCode.BAD_STOP, bad & (cur.stop != 0))
            raise_error(m, self.status, ErrorCode.EARLY_END, bad & (cur.stop == 0))
            pad_bits = 0
        else:
            pad_bits = self._pad_bits
        stopped = Signal(name="stopped")
        m.d.comb += stopped.eq(bad | self.status.error)

        # The outgoing beat.
        elem_here = cur.has_data & (step == 0)  # this output is ``cur``'s element (else a pad)
        with m.If(closes & ~elem_here):
            m.d.comb += [Value.cast(beat.data).eq(pad_bits), is_pad.eq(1)]
        with m.Else():
            m.d.comb += beat.data.eq(cur.data)
        m.d.comb += beat.has_data.eq(cur.has_data | closes)
        with m.If(closes):
            with m.If(final):
                m.d.comb += [beat.stop.eq(cur.stop + 1), beat.last.eq(cur.last)]
                with m.If(cur.stop == 0):  # Done closes a partial chunk
                    m.d.comb += beat.stop.eq(1)
        with m.Elif(merge):
            m.d.comb += [beat.stop.eq(nxt.stop + 1), beat.last.eq(nxt.last)]
            with m.If(nxt.stop == 0):  # merged a bare Done
                m.d.comb += beat.stop.eq(1)
        with m.Elif(full):
            m.d.comb += [beat.stop.eq(cur.stop + 1), beat.last.eq(cur.last)]
            with m.If(cur.stop == 0):  # no stop follows (or an element does)
                m.d.comb += beat.stop.eq(1)
        with m.Else():
            m.d.comb += beat.last.eq(cur.last)
            with m.If(cur.stop != 0):
                m.d.comb += beat.stop.eq(cur.stop + 1)
        m.d.comb += offer.eq(cur_valid & ~stopped & (~lookahead | (held_valid & i.valid)))

        with m.If(stopped):
            m.d.comb += i.ready.eq(0)
        with m.Elif(held_valid):
            m.d.comb += i.ready.eq(go & final)
        with m.Else():
            m.d.comb += i.ready.eq((go & final) | stash)
        load = Signal(name="load")
        m.d.comb += load.eq(i.valid & i.ready & ~merge & (held_valid | stash))
        hb.update(m, load, release=go & final)
        with m.If(go):
            m.d.sync += step.eq(step + 1)
            with m.If(final):
                m.d.sync += step.eq(0)
                with m.If(cur.has_data & ~full & ~ends):
                    m.d.sync += count.eq(count + 1)
                with m.Else():
                    m.d.sync += count.eq(0)
        m.d.comb += [
            self.status.busy.eq(cur_valid),
            self.status.stall_in.eq(~cur_valid | (lookahead & held_valid & ~i.valid)),
        ]

