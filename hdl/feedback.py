"""The feedback edge as hardware: a wire between two FIFOs (``compiler/ops/feedback.py``)."""

from amaranth.hdl import Module, Signal
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
    count : int, optional
        The declared number of elements of a rank-0 feedback stream. The unit then ends the
        stream itself: the ``count``-th element carries ``last``, and everything the bound
        stream sends after it (its end, which comes only once the cycle has drained) is
        swallowed. Without it the end of the declared stream would wait for the end of the
        bound one, which waits for the end of the declared one: the cycle would deadlock on
        its own end-of-stream.

    Members
    -------
    in0 : ``In(beat_signature(elem_type, rank))``
    out : ``Out(beat_signature(elem_type, rank))``
    status : ``Out(StatusSignature)``
        ``busy`` while a beat is offered; never raises ``error``.
    """

    def __init__(self, elem_type, rank, *, row_bound=None, count=None):
        check_int("FeedbackUnit", "rank", rank, 0)
        if count is not None:
            check_int("FeedbackUnit", "count", count, 1)
            if rank != 0:
                raise ValueError(f"FeedbackUnit: count is for a rank-0 stream, got rank {rank}")
        self.elem_type, self.rank, self.count = elem_type, rank, count
        sig = beat_signature(elem_type, rank, row_bound=row_bound)
        super().__init__({"in0": In(sig), "out": Out(sig), "status": Out(StatusSignature)})

    def __repr__(self):
        return f"FeedbackUnit({self.elem_type!r}, {self.rank})"

    def elaborate(self, platform):
        m = Module()
        i, o = self.in0, self.out
        m.d.comb += o.payload.eq(i.payload)
        if self.count is None:
            m.d.comb += [o.valid.eq(i.valid), i.ready.eq(o.ready)]
        else:
            sent = Signal(range(self.count + 1), name="sent")
            done = Signal(name="done")
            m.d.comb += done.eq(sent == self.count)
            with m.If(done):
                m.d.comb += [o.valid.eq(0), i.ready.eq(1)]        # the bound stream's tail
            with m.Else():
                m.d.comb += [o.valid.eq(i.valid), i.ready.eq(o.ready)]
                with m.If(i.payload.has_data & (sent == self.count - 1)):
                    m.d.comb += o.payload.last.eq(1)
            with m.If(o.valid & o.ready & i.payload.has_data):
                m.d.sync += sent.eq(sent + 1)
        m.d.comb += [
            self.status.busy.eq(i.valid),
            self.status.stall_in.eq(~i.valid),
            self.status.stall_out.eq(o.valid & ~o.ready),
        ]
        return m
