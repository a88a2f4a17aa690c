"""A retiling PCU (``retile_row``/``retile_col`` as the whole function of an Accum or Scan): its
growing accumulator, a count and a register of the output's bound."""

import sympy
from amaranth.hdl import Signal

from ...compiler import functions as F
from ...compiler.types import Tile
from ...contract.beat import element_layout
from ..tile_ops import HTile
from .checks import _check_hw_type

__all__ = []


class _Retile:
    """The retiling accumulator of :class:`~stepforge.hdl.pcu.PCU` (a mixin)."""

    def _setup_retile(self, init, elem, out_type):
        if self.mode == "map" or self.fn.primitive is None:
            raise ValueError(f"PCU: {self.fn!r} grows its accumulator: only as the whole function "
                             f"of an Accum or Scan")
        if len(self.in_types) != 1 or not isinstance(elem, Tile):
            raise ValueError(f"PCU: {self.fn!r} needs one stream of tiles, got {list(self.in_types)!r}")
        self.init = F.as_init(init, elem, self.fn)
        it = self.init.type
        grow_rows = self.retile == "rows"
        if not isinstance(it, Tile) or it.dtype != elem.dtype or (it.rows if grow_rows else it.cols) != 0:
            raise ValueError(f"PCU: {self.fn!r} starts from an empty tile of the elements' dtype "
                             f"(empty_rows/empty_cols), not {self.init!r}")
        if out_type is None:
            if not grow_rows:
                raise ValueError("PCU: a retile_col accumulator needs out_type (its width must be "
                                 "static: a dynamic column count has no wire encoding)")
            out_type = Tile(elem.dtype, sympy.Symbol("R_acc", integer=True, nonnegative=True), elem.cols)
        if not isinstance(out_type, Tile) or out_type.dtype != elem.dtype:
            raise ValueError(f"PCU: out_type {out_type!r} must be a tile of the elements' dtype")
        if grow_rows and out_type.cols != elem.cols or not grow_rows and out_type.rows != elem.rows:
            raise ValueError(f"PCU: out_type {out_type!r} does not fit {self.fn!r} of {elem!r}")
        if not isinstance(out_type.cols, int):
            raise ValueError(f"PCU: out_type {out_type!r}: a dynamic column count has no wire encoding")
        layout = element_layout(out_type, row_bound=self.row_bound)
        self._dynamic = not isinstance(out_type.rows, int)
        if grow_rows:
            self._bound = layout.members["data"].length if self._dynamic else out_type.rows
        else:
            self._bound = out_type.cols
        _check_hw_type(out_type, "the accumulator")
        self.out_type = out_type
        self._arg_types = [it, elem]
        self.ii = 1
        self._nodes, self._order = {}, []
        self.latency, self._delay, self._merged = 0, {}, None

    def _elaborate_retile(self, m, stream_args, hd, over, row_bad):
        """The growing accumulator of retile_row/retile_col: a count and a bounded register.

        Elements with a dynamic row count add their ``rows`` rows (retile_row), or must all have
        the row count of the first element since the reset (retile_col; else ``row_bad``)."""
        (x,) = stream_args
        t = self.out_type
        xrows = self._count
        rows_mode = self.retile == "rows"
        bound = self._bound
        shape = (bound, t.cols) if rows_mode else (x.rows, bound)
        count = Signal(range(bound + 1), name="acc_count")
        acc = HTile.signals(t.dtype, *shape, "acc")
        nxt = HTile.signals(t.dtype, *shape, "acc_n")
        new_count = Signal(range(2 * bound + 2), name="acc_count_n")
        step = x.rows if rows_mode else x.cols
        grow = xrows if rows_mode and xrows is not None else step
        m.d.comb += [new_count.eq(count + grow),
                     over.eq(hd & (new_count > bound))]
        m.d.comb += [n.eq(a) for n, a in zip(nxt.flat(), acc.flat())]
        for q in range(bound):
            for k in range(min(step, q + 1)):
                place = count == q - k
                if rows_mode and xrows is not None:
                    place = place & (xrows > k)
                with m.If(place):
                    if rows_mode:
                        m.d.comb += [nxt.elems[q][j].eq(x.elems[k][j]) for j in range(t.cols)]
                    else:
                        m.d.comb += [nxt.elems[i][q].eq(x.elems[i][k]) for i in range(x.rows)]
        zero = HTile.const(t.dtype, 0, *shape)
        if rows_mode or xrows is None:
            m.d.comb += row_bad.eq(0)
            dynamic = rows_mode and self._dynamic
            return (_GrowingTile(new_count, nxt, new_count if dynamic else None),
                    _GrowingTile(count, acc, count if dynamic else None),
                    _GrowingTile(0, zero, 0 if dynamic else None))
        acc_rows = Signal(range(self.dyn_bound + 1), name="acc_rows")
        m.d.comb += row_bad.eq(hd & (count != 0) & (xrows != acc_rows))
        return (_GrowingTile(new_count, nxt, xrows), _GrowingTile(count, acc, acc_rows),
                _GrowingTile(0, zero, 0))


class _GrowingTile:
    """A retiling accumulator value: ``count`` rows (or columns) of the ``tile`` register, and
    the row count of a dynamic-row result (``None`` when the rows are static)."""

    def __init__(self, count, tile, rows=None):
        self.count, self.tile, self.rows = count, tile, rows
