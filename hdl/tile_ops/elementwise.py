"""An elementwise primitive on ``lanes`` ALUs (:class:`ElementwiseNode`)."""

from amaranth.hdl import Signal, signed

from ...contract import fixedpoint
from .alu import Stager, lane_depth, lane_op
from .divide import DIVIDE_BITS_PER_CUT
from .dsp import _operand_regs, pipelined_product
from .fixed_point import segment_rom
from .node import _Node
from .tile import HTile, ceil_div

__all__ = ["ElementwiseNode"]


class ElementwiseNode(_Node):
    """An elementwise primitive on ``lanes`` ALUs, ``ceil(elements / lanes)`` steps.

    Pipelined, ``mul`` lanes are :func:`pipelined_product` (:attr:`depth` 2, 3 for
    ``family="ice40"``), ``div`` a restoring divider and ``exp``/``silu``/``rsqrt`` the
    fixed-point ALUs in five cuts (:func:`lane_depth`); the other primitives are one adder
    or less and never pipelined.

    Parameters
    ----------
    op : str
        ``add sub mul div maximum cast exp silu rsqrt``.
    attrs : dict
        The primitive's attributes.
    in_dtype, out_dtype : DType
    rows, cols : int
        The result's shape (operands broadcast to it).
    lanes : int
    name : str
        Prefix of the node's signals.
    dynamic : bool, default False
        ``rows`` is the bound of a dynamic row count (see :meth:`steps_for`).
    family : {None, "ecp5", "ice40"}, optional
        As for :class:`MatmulNode`.
    """

    def __init__(self, op, attrs, in_dtype, out_dtype, rows, cols, lanes, name, *, dynamic=False,
                 family=None):
        self.op, self.attrs = op, attrs
        self.in_dtype, self.out_dtype = in_dtype, out_dtype
        self.rows, self.cols, self.name = rows, cols, name
        self.lanes = min(lanes, rows * cols)
        self.steps = ceil_div(rows * cols, self.lanes)
        self.dynamic = dynamic
        self.operand_regs = _operand_regs(family)
        self.family = family
        if op == "mul":
            self.depth = self.operand_regs + 1
        else:
            self.depth = lane_depth(op, out_dtype.bits, family)

    def _row_steps(self, rows):
        return ceil_div(rows * self.cols, self.lanes)

    #: operands from the input ports may be read early (:meth:`elaborate`'s ``early``)
    early_inputs = True

    def elaborate(self, m, issue, operands, *, start, keep_reg=True, early=None):
        """Build the node: ``operands`` are HTiles (or ints for constants), read when a step is
        issued (``issue``, an :class:`Issue`); ``start`` is its first step. Returns ``nxt``
        (an HTile). ``early``, ``(issue0, delay, flags)``: the operands ``k`` with
        ``flags[k]`` (the input ports, which a beat holds only until its last step) are read
        at the sequencer's issue ``issue0`` and carried through ``delay`` registers per lane to
        this node's issue, ``delay`` pipeline moves later."""
        self.start = start
        self._alloc(self.out_dtype, self.rows, self.cols, self.name, keep_reg)
        self._default(m)
        rom = None
        if self.op in fixedpoint.NAMES:
            rom = segment_rom(self.op, self.in_dtype)
            m.submodules[f"{self.name}_rom"] = rom
        operand_tiles = [HTile.const(self.in_dtype, v, 1, 1) if isinstance(v, int) else v
                         for v in operands]
        lane_in, lane_out = [], []
        for lane in range(self.lanes):
            ins = [Signal(signed(self.in_dtype.bits), name=f"{self.name}_l{lane}_x{k}")
                   for k in range(len(operand_tiles))]
            name = f"{self.name}_l{lane}"
            if self.latency and self.op == "mul":
                y = pipelined_product(m, ins[0], ins[1], self.out_dtype.bits, issue.enable,
                                      name, issue.family, self.operand_regs)
            elif self.latency:
                stage = Stager(m, issue.enable, name, DIVIDE_BITS_PER_CUT[self.family],
                               issue.family)
                y = lane_op(m, self.op, self.attrs, self.in_dtype, self.out_dtype, ins,
                            rom=rom.read_port(domain="comb") if rom is not None else None,
                            name=name, stage=stage)
                assert stage.cut == self.latency + 1, (self.op, stage.cut, self.latency)
            else:
                y = lane_op(m, self.op, self.attrs, self.in_dtype, self.out_dtype, ins,
                            rom=rom.read_port(domain="comb") if rom is not None else None,
                            name=name)
            out = Signal(signed(self.out_dtype.bits), name=f"{name}_y")
            m.d.comb += out.eq(y)
            lane_in.append(ins)
            lane_out.append(out)
        at = self._write_stage(m, issue)
        flags = [False] * len(operand_tiles) if early is None else list(early[2])
        now = [k for k, f in enumerate(flags) if not f]
        soon = [k for k, f in enumerate(flags) if f]
        lane_early = [[None] * len(operand_tiles) for _ in range(self.lanes)]
        for lane in range(self.lanes):
            for k in soon:  # read at the sequencer's issue, delayed to this node's
                v = Signal(signed(self.in_dtype.bits), name=f"{self.name}_l{lane}_e{k}")
                lane_early[lane][k] = v
                for d in range(early[1]):
                    r = Signal(signed(self.in_dtype.bits), name=f"{self.name}_l{lane}_e{k}_{d}",
                               reset_less=True)
                    with m.If(issue.enable):
                        m.d.sync += r.eq(v)
                    v = r
                m.d.comb += lane_in[lane][k].eq(v)
        for stage, assign, ks in ((issue, "in", now), (early and early[0], "in", soon),
                                  (at, "out", None)):
            if assign == "in" and not ks:
                continue
            with m.Switch(stage.step):
                for c in range(self.steps):
                    with m.Case(start + c):
                        for lane in range(self.lanes):
                            e = c * self.lanes + lane
                            if e >= self.rows * self.cols:
                                break
                            i, j = divmod(e, self.cols)
                            if assign == "out":
                                m.d.comb += self.nxt.elems[i][j].eq(lane_out[lane])
                                continue
                            dst = lane_in[lane] if stage is issue else lane_early[lane]
                            m.d.comb += [dst[k].eq(operand_tiles[k].at(i, j)) for k in ks]
        self._write(m, at)
        return self.nxt
