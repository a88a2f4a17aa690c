"""Flatten as hardware: a stop-level rewrite with no storage."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..contract.beat import beat_signature
from .unit import StatusSignature, check_int

__all__ = ["FlattenUnit"]


class FlattenUnit(wiring.Component):
    """Merge stop levels ``lo..hi`` of a stream (semantics section 4, Flatten).

    A beat's stop ``s`` becomes ``s`` when ``s <= lo``, ``lo`` when ``lo < s <= hi`` (0: no stop)
    and ``s - (hi - lo)`` when ``s > hi``. A beat left with nothing to carry (no data, no stop,
    no ``last``: a removed empty fibre) is dropped. Combinational: one beat per cycle, zero
    latency, no state.

    Parameters
    ----------
    elem_type : stepforge.compiler.types.ElemType
        Element type of the stream.
    rank : int
        Rank of the input stream.
    lo, hi : int
        The merged levels, ``0 <= lo < hi <= rank``.

    Members
    -------
    in0 : ``In(beat_signature(elem_type, rank))``
        Input beats.
    out : ``Out(beat_signature(elem_type, rank - (hi - lo)))``
        Output beats.
    status : ``Out(StatusSignature)``
        ``busy`` while a beat is offered; never raises ``error``.
    """

    def __init__(self, elem_type, rank, lo, hi, *, row_bound=None):
        check_int("FlattenUnit", "rank", rank, 1)
        check_int("FlattenUnit", "hi", hi, 1, rank)
        check_int("FlattenUnit", "lo", lo, 0, hi - 1)
        self.elem_type, self.rank, self.lo, self.hi = elem_type, rank, lo, hi
        super().__init__({
            "in0": In(beat_signature(elem_type, rank, row_bound=row_bound)),
            "out": Out(beat_signature(elem_type, rank - (hi - lo), row_bound=row_bound)),
            "status": Out(StatusSignature),
        })

    def __repr__(self):
        return f"FlattenUnit({self.elem_type!r}, {self.rank}, {self.lo}, {self.hi})"

    def elaborate(self, platform):
        m = Module()
        i, o = self.in0, self.out
        lo, hi = self.lo, self.hi
        s = i.payload.stop
        new_stop = Signal.like(o.payload.stop, name="new_stop")
        with m.If(s <= lo):
            m.d.comb += new_stop.eq(s)
        with m.Elif(s <= hi):
            m.d.comb += new_stop.eq(lo)
        with m.Else():
            m.d.comb += new_stop.eq(s - (hi - lo))
        empty = Signal(name="empty")
        m.d.comb += empty.eq(~i.payload.has_data & (new_stop == 0) & ~i.payload.last)
        m.d.comb += [
            o.payload.data.eq(i.payload.data),
            o.payload.has_data.eq(i.payload.has_data),
            o.payload.stop.eq(new_stop),
            o.payload.last.eq(i.payload.last),
            o.valid.eq(i.valid & ~empty),
            i.ready.eq(o.ready | empty),
            self.status.busy.eq(i.valid),
            self.status.stall_in.eq(~i.valid),
            self.status.stall_out.eq(o.valid & ~o.ready),
        ]
        return m
