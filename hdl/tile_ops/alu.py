"""One lane of an elementwise primitive (:func:`lane_op`) and the pipeline cuts of a pipelined
lane (:class:`Stager`, :func:`lane_depth`)."""

from amaranth.hdl import Mux, Signal, Value

from ...contract import fixedpoint
from .divide import DIVIDE_BITS_PER_CUT, _divide, _pipelined_divide
from .fixed_point import CUTS, fixed_point_alu
from .tile import ceil_div, clamp, wrap

__all__ = ["lane_op", "Stager", "lane_depth"]


def lane_op(m, op, attrs, in_dtype, out_dtype, operands, *, rom=None, name, stage=None):
    """One element of an elementwise primitive, combinationally or (``stage``) pipelined.

    Parameters
    ----------
    m : amaranth.hdl.Module
    op : str
        ``add sub mul div maximum cast exp silu rsqrt``.
    attrs : dict
        The primitive's attributes (``cast``: ``dtype``, ``saturate``).
    in_dtype, out_dtype : DType
        Operand and result dtypes.
    operands : list of amaranth.hdl.Value
        ``signed(in_dtype.bits)`` values.
    rom : amaranth.lib.memory.ReadPort, optional
        The lane's read port of the segment ROM (fixed-point ops).
    name : str
        Prefix of the signals created.
    stage : Stager, optional
        Registers the ALU's values at its pipeline cuts (``div``, ``exp``, ``silu``,
        ``rsqrt``: :func:`lane_depth` cuts); without it the ALU is combinational.

    Returns
    -------
    amaranth.hdl.Value
        ``signed(out_dtype.bits)``, the reference's bits (:mod:`stepforge.contract.arith`).
    """
    bits = out_dtype.bits
    if op == "add":
        return wrap(operands[0] + operands[1], bits)
    if op == "sub":
        return wrap(operands[0] - operands[1], bits)
    if op == "mul":
        return wrap(operands[0] * operands[1], bits)
    if op == "maximum":
        a, b = operands
        return Mux(a > b, a, b)
    if op == "div":
        if stage is not None:
            return _pipelined_divide(operands[0], operands[1], bits, stage)
        return _divide(m, operands[0], operands[1], bits, name)
    if op == "cast":
        x = operands[0]
        if attrs.get("saturate") and out_dtype.bits < in_dtype.bits:
            return wrap(clamp(x, out_dtype.min, out_dtype.max), bits)
        if out_dtype.bits < in_dtype.bits:
            return wrap(x, bits)
        return x
    if op in fixedpoint.NAMES:
        return fixed_point_alu(m, op, in_dtype, operands[0], rom, name=name, stage=stage)
    raise ValueError(f"no elementwise ALU for {op!r}")


class Stager:
    """The pipeline cuts of an ALU: ``stage(value, tag)`` is ``value`` through a register (no
    reset) with the clock enable ``enable``; each call belongs to the cut :attr:`cut` (the ALU
    moves to the next with :meth:`next`). ``per``: a divider's quotient bits per cut."""

    def __init__(self, m, enable, name, per=2, family=None):
        self.m, self.enable, self.name, self.cut, self.per = m, enable, name, 1, per
        self.family = family

    def __call__(self, value, tag):
        value = Value.cast(value)
        reg = Signal(value.shape(), name=f"{self.name}_c{self.cut}_{tag}", reset_less=True)
        with self.m.If(self.enable):
            self.m.d.sync += reg.eq(value)
        return reg

    def next(self):
        self.cut += 1


def lane_depth(op, bits, family=None):
    """Pipeline cuts of a pipelined ALU (0: not pipelined): ``div`` one for the magnitudes and
    one per :data:`DIVIDE_BITS_PER_CUT` quotient bits, the fixed-point ALUs five
    (:data:`~stepforge.hdl.tile_ops.fixed_point.CUTS`: the operand; the segment's ROM entry and
    fraction, at the multiplier's inputs; the product; the interpolated value; the rounded
    value before the sign or range selection and the clamp)."""
    if op == "div":
        return 1 + ceil_div(bits, DIVIDE_BITS_PER_CUT[family])
    if op in fixedpoint.NAMES:
        return CUTS
    return 0
