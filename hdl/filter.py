"""Filter as hardware: keep the elements whose flag equals ``keep``."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..compiler.types import Bool
from ..contract.beat import beat_signature, stop_width
from .lockstep import LockStep
from .retile import FlatMapOutput, PieceGenerator
from .unit import StatusSignature, check_int

__all__ = ["FilterUnit"]


class FilterUnit(wiring.Component):
    """Keep the elements whose ``Bool`` flag equals ``keep`` (semantics section 4, FlatMap; Filter).

    ``in0`` and ``flags`` are consumed in lock step on tokens (see
    :class:`~stepforge.hdl.lockstep.LockStep`): a stop or ``Done`` may be framed differently on the
    two ports, but the token sequences must agree. A kept element is forwarded; a dropped one
    yields nothing, and its stop is raised onto the last element kept in its fibre, or becomes a
    stop-only beat when the fibre kept nothing (``b = 0`` FlatMap algebra, module doc of
    :mod:`stepforge.hdl.retile`). The last kept element waits in the unit's hold register until
    the next input beat decides its stop; one input beat per cycle.

    Parameters
    ----------
    elem_type : stepforge.compiler.types.ElemType
        Element type of ``in0`` (and of ``out``).
    rank : int
        Rank of both inputs and of the output (``>= 0``).
    keep : bool, default True
        The flag value that keeps an element (``keep=False`` drops Reshape's padding).
    row_bound : int or Mapping, optional
        Bound of a dynamic tile row count (see :func:`~stepforge.contract.beat.element_layout`).

    Members
    -------
    in0 : ``In(beat_signature(elem_type, rank))``
        Input elements.
    flags : ``In(beat_signature(Bool(), rank))``
        One flag per element, with ``in0``'s stops.
    out : ``Out(beat_signature(elem_type, rank))``
        The kept elements.
    status : ``Out(StatusSignature)``
        ``busy`` while a beat is held or offered. Raises ``STOP_MISMATCH`` (``in0`` and ``flags``
        disagree on a token) and ``BAD_STOP`` (a stop above ``rank``).

    Raises
    ------
    ValueError
        ``rank`` is not an int ``>= 0``.
    """

    def __init__(self, elem_type, rank, *, keep=True, row_bound=None):
        self.elem_type, self.rank, self.keep = elem_type, rank, bool(keep)
        check_int("FilterUnit", "rank", rank, 0)
        super().__init__({
            "in0": In(beat_signature(elem_type, rank, row_bound=row_bound)),
            "flags": In(beat_signature(Bool(), rank)),
            "out": Out(beat_signature(elem_type, rank, row_bound=row_bound)),
            "status": Out(StatusSignature),
        })

    def __repr__(self):
        extra = "" if self.keep else ", keep=False"
        return f"FilterUnit({self.elem_type!r}, {self.rank}{extra})"

    def elaborate(self, platform):
        m = Module()
        vb = LockStep(m, [("in0", self.in0), ("flags", self.flags)], self.status)
        gen = PieceGenerator(self.out.payload.data.shape(), stop_width(self.rank))
        value, flag = vb.data
        m.d.comb += [
            gen.empty.eq(flag != int(self.keep)),
            gen.data.eq(value),
            gen.final.eq(1),
        ]
        FlatMapOutput(m, vb, gen, self.out, 0, self.rank, self.status)
        return m
