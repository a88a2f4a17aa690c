"""``row_sum`` and ``row_max`` on ``lanes`` ALUs, one column per step (:class:`RowReduceNode`)."""

from amaranth.hdl import Mux, Signal, signed

from .node import _Node
from .tile import ceil_div, wrap

__all__ = ["RowReduceNode"]


class RowReduceNode(_Node):
    """``row_sum``/``row_max`` of an ``[R, C]`` tile: lane ``l`` folds rows ``l, l + lanes, ...``
    one column per step, ``ceil(R / lanes) * C`` steps (never pipelined: a fold step reads the
    previous one's result).

    Parameters
    ----------
    op : str
        ``"row_sum"`` or ``"row_max"``.
    dtype : DType
    rows, cols : int
        The operand's shape.
    lanes : int
    name : str
    dynamic : bool, default False
        ``rows`` is the bound of a dynamic row count (see :meth:`steps_for`).
    """

    def __init__(self, op, dtype, rows, cols, lanes, name, *, dynamic=False):
        self.op, self.dtype, self.rows, self.cols, self.name = op, dtype, rows, cols, name
        self.lanes = min(lanes, rows)
        self.steps = ceil_div(rows, self.lanes) * cols
        self.dynamic = dynamic

    def _row_steps(self, rows):
        return ceil_div(rows, self.lanes) * self.cols

    def elaborate(self, m, issue, operands, *, start, keep_reg=True):
        self.start = start
        self._alloc(self.dtype, self.rows, 1, self.name, keep_reg)
        self._default(m)
        (x,) = operands
        bits = self.dtype.bits
        lane_acc, lane_x, lane_out = [], [], []
        for lane in range(self.lanes):
            acc = Signal(signed(bits), name=f"{self.name}_l{lane}_acc")
            xv = Signal(signed(bits), name=f"{self.name}_l{lane}_x")
            out = Signal(signed(bits), name=f"{self.name}_l{lane}_y")
            fold = wrap(acc + xv, bits) if self.op == "row_sum" else Mux(xv > acc, xv, acc)
            m.d.comb += out.eq(fold)
            lane_acc.append(acc)
            lane_x.append(xv)
            lane_out.append(out)
        src = self.reg
        with m.Switch(issue.step):
            for c in range(self.steps):
                g, j = divmod(c, self.cols)
                with m.Case(start + c):
                    for lane in range(self.lanes):
                        i = g * self.lanes + lane
                        if i >= self.rows:
                            break
                        if j == 0:  # the row's first column starts the fold
                            m.d.comb += self.nxt.elems[i][0].eq(x.at(i, 0))
                        else:
                            m.d.comb += [lane_acc[lane].eq(src.elems[i][0]), lane_x[lane].eq(x.at(i, j)),
                                         self.nxt.elems[i][0].eq(lane_out[lane])]
        self._write(m, issue)
        return self.nxt
