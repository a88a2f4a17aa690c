"""The feedback edge as hardware: a wire between two FIFOs (``compiler/ops/feedback.py``)."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..contract.beat import beat_signature
from .unit import StatusSignature, check_int

__all__ = ["FeedbackUnit"]


class FeedbackUnit(wiring.Component):
    """Pass the beats of the stream that closes a cycle on, unchanged.

    A :class:`~stepforge.compiler.ops.feedback.Feedback` node only names a stream before the
    operator that produces it exists; in hardware it is the FIFO of the bound stream followed by
    the FIFO of the declared one, joined by this wire (combinational: no state, no latency).

    Parameters
    ----------
    elem_type : stepforge.compiler.types.ElemType
    rank : int
        Rank of the stream.
    row_bound : dict, optional
        Row bounds of dynamic tiles (``beat_signature``).

    Members
    -------
    in0 : ``In(beat_signature(elem_type, rank))``
    out : ``Out(beat_signature(elem_type, rank))``
    status : ``Out(StatusSignature)``
        ``busy`` while a beat is offered; never raises ``error``.
    """

    def __init__(self, elem_type, rank, *, row_bound=None):
        check_int("FeedbackUnit", "rank", rank, 0)
        self.elem_type, self.rank = elem_type, rank
        sig = beat_signature(elem_type, rank, row_bound=row_bound)
        super().__init__({"in0": In(sig), "out": Out(sig), "status": Out(StatusSignature)})

    def __repr__(self):
        return f"FeedbackUnit({self.elem_type!r}, {self.rank})"

    def elaborate(self, platform):
        m = Module()
        i, o = self.in0, self.out
        m.d.comb += [
            o.payload.eq(i.payload),
            o.valid.eq(i.valid),
            i.ready.eq(o.ready),
            self.status.busy.eq(i.valid),
            self.status.stall_in.eq(~i.valid),
            self.status.stall_out.eq(o.valid & ~o.ready),
        ]
        return m
