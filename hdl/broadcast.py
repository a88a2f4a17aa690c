"""Broadcast as hardware: one stream copied to several consumers, each behind its own FIFO."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..contract.beat import beat_layout, beat_signature
from .fifo import StreamFIFO
from .unit import StatusSignature, check_int

__all__ = ["BroadcastUnit"]


class BroadcastUnit(wiring.Component):
    """Copy a stream to ``n`` consumers (semantics section 4, Broadcast).

    Every output has its own :class:`~stepforge.hdl.fifo.StreamFIFO` of ``depth`` entries
    (spec Decision): a beat is taken from ``in0`` when every FIFO has room and is written into
    all of them at once, and each consumer drains its own FIFO at its own pace. A slow consumer
    therefore stalls the producer only once its FIFO is full; the others run ahead by up to
    ``depth`` beats. With ``depth >= 2`` the unit sustains one beat per cycle; a beat taken in
    cycle ``t`` is offered on every output in cycle ``t + 1``. Beats are copied unchanged (a
    bare ``Done`` stays bare).

    Parameters
    ----------
    elem_type : stepforge.compiler.types.ElemType
        Element type of the stream.
    rank : int
        Rank of the stream (``>= 0``).
    n : int
        Number of outputs (``>= 1``).
    depth : int, default 2
        Entries of each output FIFO (``>= 1``; depth 1 moves at most one beat every other cycle).
    row_bound : int or Mapping, optional
        Bound of a dynamic tile row count (see :func:`~stepforge.contract.beat.element_layout`).

    Members
    -------
    in0 : ``In(beat_signature(elem_type, rank))``
        Input beats.
    out0, out1, ... : ``Out(beat_signature(elem_type, rank))``
        One copy of the stream each.
    status : ``Out(StatusSignature)``
        ``busy`` while a beat is offered or buffered; ``stall_in`` while ``in0`` offers nothing
        before its ``Done``; ``stall_out`` while some output holds a beat its consumer does not
        take; never raises ``error``.

    Raises
    ------
    ValueError
        ``rank``, ``n`` or ``depth`` out of range.
    """

    def __init__(self, elem_type, rank, n, *, depth=2, row_bound=None):
        check_int("BroadcastUnit", "rank", rank, 0)
        check_int("BroadcastUnit", "n", n, 1)
        check_int("BroadcastUnit", "depth", depth, 1)
        self.elem_type, self.rank, self.n, self.depth = elem_type, rank, n, depth
        self._layout = beat_layout(elem_type, rank, row_bound=row_bound)
        members = {"in0": In(beat_signature(elem_type, rank, row_bound=row_bound))}
        for k in range(n):
            members[f"out{k}"] = Out(beat_signature(elem_type, rank, row_bound=row_bound))
        members["status"] = Out(StatusSignature)
        super().__init__(members)

    def __repr__(self):
        return f"BroadcastUnit({self.elem_type!r}, {self.rank}, {self.n}, depth={self.depth})"

    def elaborate(self, platform):
        m = Module()
        i = self.in0
        fifos = []
        for k in range(self.n):
            q = StreamFIFO(self._layout, self.depth)
            m.submodules[f"fifo{k}"] = q
            wiring.connect(m, q.o, wiring.flipped(getattr(self, f"out{k}")))
            fifos.append(q)

        room = Signal(name="room")  # every FIFO can take a beat
        v = fifos[0].i.ready
        for q in fifos[1:]:
            v = v & q.i.ready
        m.d.comb += [room.eq(v), i.ready.eq(room)]
        for q in fifos:
            m.d.comb += [q.i.payload.eq(i.payload), q.i.valid.eq(i.valid & room)]

        buffered = fifos[0].level != 0
        stall_out = fifos[0].o.valid & ~fifos[0].o.ready
        for q in fifos[1:]:
            buffered = buffered | (q.level != 0)
            stall_out = stall_out | (q.o.valid & ~q.o.ready)
        ended = Signal(name="ended")  # in0's Done was taken: the unit waits for nothing more
        with m.If(i.valid & i.ready & i.payload.last):
            m.d.sync += ended.eq(1)
        m.d.comb += [
            self.status.busy.eq(i.valid | buffered),
            self.status.stall_in.eq(~i.valid & ~ended),
            self.status.stall_out.eq(stall_out),
        ]
        return m
