"""Zip as hardware: pair lock-step streams into a stream of tuples."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..compiler.types import Tuple
from ..contract.beat import beat_signature
from .lockstep import LockStep
from .unit import StatusSignature, check, check_int

__all__ = ["ZipUnit"]


class ZipUnit(wiring.Component):
    """Pair streams of identical shape and stops (semantics section 4, Zip).

    The inputs advance in lock step: each output beat pairs the inputs' elements and carries
    their common stop and ``Done``. When the inputs' beats are framed alike (the usual case) one
    beat of every input makes one output beat, one per cycle, combinationally. Because a legal
    framing may carry a stop or ``Done`` in a beat of its own (semantics section 2: checkers
    compare tokens, not beats), the lock step is on *tokens*: each input keeps a cursor into its
    current beat, an output beat takes the tokens that every input shows, and an input whose beat
    is used up is taken while the others keep the rest of theirs for the next output beat. So
    ``a S1`` in one beat on ``in0`` and ``a`` then ``S1`` in two beats on ``in1`` pair up
    (in two output beats) instead of being a fault.

    A token that differs between the inputs (an element against a stop or ``Done``, two stop
    levels, a stop against ``Done``) raises ``STOP_MISMATCH``; the unit then stops accepting
    input.

    Parameters
    ----------
    elem_types : sequence of stepforge.compiler.types.ElemType
        Element type of each input (at least two).
    rank : int
        Rank of every input (``>= 0``).
    row_bound : int or Mapping, optional
        Bound of a dynamic tile row count (see :func:`~stepforge.contract.beat.element_layout`).

    Members
    -------
    in0, in1, ... : ``In(beat_signature(elem_types[k], rank))``
        Input beats.
    out : ``Out(beat_signature(Tuple(*elem_types), rank))``
        Output beats; element field ``f{k}`` comes from ``in{k}``.
    status : ``Out(StatusSignature)``
        ``busy`` while a beat is offered; raises ``STOP_MISMATCH``.

    Raises
    ------
    ValueError
        Fewer than two element types, or ``rank`` is not an int ``>= 0``.
    """

    def __init__(self, elem_types, rank, *, row_bound=None):
        elem_types = tuple(elem_types)
        check(len(elem_types) >= 2, "ZipUnit", "elem_types", "two or more element types",
              elem_types)
        check_int("ZipUnit", "rank", rank, 0)
        self.elem_types, self.rank = elem_types, rank
        members = {f"in{k}": In(beat_signature(t, rank, row_bound=row_bound))
                   for k, t in enumerate(elem_types)}
        members["out"] = Out(beat_signature(Tuple(*elem_types), rank, row_bound=row_bound))
        members["status"] = Out(StatusSignature)
        super().__init__(members)

    def __repr__(self):
        return f"ZipUnit({list(self.elem_types)!r}, {self.rank})"

    def elaborate(self, platform):
        m = Module()
        o = self.out
        ports = [(f"in{k}", getattr(self, f"in{k}")) for k in range(len(self.elem_types))]
        vb = LockStep(m, ports, self.status)       # raises STOP_MISMATCH on disagreement

        empty = Signal(name="empty")  # a virtual beat with no token (not on legal input beats)
        offer = Signal(name="offer")
        m.d.comb += [
            empty.eq(~vb.elem & (vb.stop == 0) & ~vb.last),
            offer.eq(vb.valid & ~self.status.error),
            o.valid.eq(offer & ~empty),
            vb.take.eq(offer & (empty | o.ready)),
            o.payload.has_data.eq(vb.elem),
            o.payload.stop.eq(vb.stop),
            o.payload.last.eq(vb.last),
            self.status.busy.eq(vb.any_valid),
            self.status.stall_in.eq(~vb.all_valid),
            self.status.stall_out.eq(o.valid & ~o.ready),
        ]
        with m.If(vb.elem):
            for k, data in enumerate(vb.data):
                m.d.comb += o.payload.data[f"f{k}"].eq(data)
        return m
