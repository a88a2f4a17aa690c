"""Promote as hardware: a new size-1 dimension at level ``b``."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..contract.beat import beat_signature
from .held_beat import HeldBeat
from .repeat import RepeatStaticUnit
from .unit import StatusSignature, check_int

__all__ = ["PromoteUnit"]


class PromoteUnit(wiring.Component):
    """Insert a size-1 dimension at level ``b`` (semantics section 4, Promote).

    * ``1 <= b <= rank``: stops ``>= b`` are incremented. Combinational, no state.
    * ``b = 0``: every element gets ``S_1``, or ``S_(s+1)`` when the stop ``S_s`` follows it;
      other stops are incremented. This is :class:`~stepforge.hdl.repeat.RepeatStaticUnit` with
      ``n = 1`` (used as a submodule): an element beat without stop or ``last`` waits in its
      holding register for the next beat, which may carry the element's stop.
    * ``b = rank + 1`` (the default): the whole stream becomes one tensor of size
      ``1 if D_N > 0 else 0``. The final tensor's closing stop ``S_N`` becomes ``S_(N+1)``
      (for ``rank = 0``: the last element gets ``S_1``); an empty stream (a bare ``Done``) stays
      empty. Because ``Done`` may arrive as a bare beat, a beat that may be the final one
      (``stop = N``, or an element for ``rank = 0``) without ``last`` is held back in a
      register until the next beat shows whether ``Done`` follows: a bare ``Done`` is merged
      into it, anything else releases it unchanged. Held beats keep flowing through the
      register, so the unit sustains one beat per cycle after at most one cycle of latency.

    Parameters
    ----------
    elem_type : stepforge.compiler.types.ElemType
        Element type of the stream.
    rank : int
        Rank of the input stream (``>= 0``).
    b : int, optional
        The new dimension's level, ``0 <= b <= rank + 1``; default ``rank + 1``.
    row_bound : int or Mapping, optional
        Bound of a dynamic tile row count (see :func:`~stepforge.contract.beat.element_layout`).

    Members
    -------
    in0 : ``In(beat_signature(elem_type, rank))``
        Input beats.
    out : ``Out(beat_signature(elem_type, rank + 1))``
        Output beats.
    status : ``Out(StatusSignature)``
        ``busy`` while a beat is held or offered; never raises ``error``.

    Raises
    ------
    ValueError
        ``rank`` is not an int ``>= 0`` or ``b`` is outside ``0 .. rank + 1``.
    """

    def __init__(self, elem_type, rank, b=None, *, row_bound=None):
        check_int("PromoteUnit", "rank", rank, 0)
        if b is None:
            b = rank + 1
        check_int("PromoteUnit", "b", b, 0, rank + 1)
        self.elem_type, self.rank, self.b = elem_type, rank, b
        self._row_bound = row_bound
        super().__init__({
            "in0": In(beat_signature(elem_type, rank, row_bound=row_bound)),
            "out": Out(beat_signature(elem_type, rank + 1, row_bound=row_bound)),
            "status": Out(StatusSignature),
        })

    def __repr__(self):
        rb = f", row_bound={self._row_bound!r}" if self._row_bound is not None else ""
        return f"PromoteUnit({self.elem_type!r}, {self.rank}, b={self.b}{rb})"

    def elaborate(self, platform):
        m = Module()
        if self.b == 0:
            m.submodules.repeat = rep = RepeatStaticUnit(self.elem_type, self.rank, 1,
                                                         row_bound=self._row_bound)
            wiring.connect(m, wiring.flipped(self.in0), rep.in0)
            wiring.connect(m, rep.out, wiring.flipped(self.out))
            wiring.connect(m, rep.status, wiring.flipped(self.status))
        elif self.b <= self.rank:
            self._elaborate_inner(m)
        else:
            self._elaborate_outer(m)
        return m

    def _elaborate_inner(self, m):
        i, o = self.in0, self.out
        new_stop = Signal.like(o.payload.stop, name="new_stop")
        with m.If(i.payload.stop >= self.b):
            m.d.comb += new_stop.eq(i.payload.stop + 1)
        with m.Else():
            m.d.comb += new_stop.eq(i.payload.stop)
        m.d.comb += [
            o.payload.data.eq(i.payload.data),
            o.payload.has_data.eq(i.payload.has_data),
            o.payload.stop.eq(new_stop),
            o.payload.last.eq(i.payload.last),
            o.valid.eq(i.valid),
            i.ready.eq(o.ready),
            self.status.busy.eq(i.valid),
            self.status.stall_in.eq(~i.valid),
            self.status.stall_out.eq(o.valid & ~o.ready),
        ]

    def _elaborate_outer(self, m):
        i, o = self.in0, self.out
        rank = self.rank
        hb = HeldBeat(m, i)  # ``cur`` is the beat on offer
        held_valid, cur, cur_valid, nxt = hb.held_valid, hb.cur, hb.cur_valid, hb.next

        # ``closing``: ``cur`` ends a tensor (rank > 0) or is an element (rank 0), so it is the
        # stream's final one if Done follows.
        closing = Signal(name="closing")
        if rank == 0:
            m.d.comb += closing.eq(cur.has_data)
        else:
            m.d.comb += closing.eq(cur.stop == rank)
        lookahead = Signal(name="lookahead")
        merge = Signal(name="merge")  # the next beat is a bare Done: fuse it
        stash = Signal(name="stash")
        m.d.comb += [
            lookahead.eq(closing & ~cur.last),
            merge.eq(lookahead & held_valid & i.valid
                     & ~nxt.has_data & (nxt.stop == 0) & nxt.last),
            stash.eq(lookahead & ~held_valid & i.valid),
        ]
        stop_out = Signal.like(o.payload.stop, name="stop_out")
        last_out = Signal(name="last_out")
        with m.If(closing & (cur.last | merge)):
            m.d.comb += [stop_out.eq(rank + 1), last_out.eq(1)]
        with m.Else():
            m.d.comb += [stop_out.eq(cur.stop), last_out.eq(cur.last)]
        m.d.comb += [
            o.payload.data.eq(cur.data),
            o.payload.has_data.eq(cur.has_data),
            o.payload.stop.eq(stop_out),
            o.payload.last.eq(last_out),
            o.valid.eq(cur_valid & (~lookahead | (held_valid & i.valid))),
        ]

        go = Signal(name="go")
        m.d.comb += go.eq(o.valid & o.ready)
        with m.If(held_valid):
            m.d.comb += i.ready.eq(go)
        with m.Else():
            m.d.comb += i.ready.eq(go | stash)
        load = Signal(name="load")
        m.d.comb += load.eq(i.valid & i.ready & ~merge & (held_valid | stash))
        hb.update(m, load, release=go)
        m.d.comb += [
            self.status.busy.eq(cur_valid),
            self.status.stall_in.eq(~cur_valid | (lookahead & held_valid & ~i.valid)),
            self.status.stall_out.eq(o.valid & ~o.ready),
        ]
