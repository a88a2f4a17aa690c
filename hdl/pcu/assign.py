"""Statements that write the PCU's values into registers and into the ``data`` of a beat."""

from amaranth.hdl import Cat, Const, Mux, Value

from .checks import _is_dynamic
from .retile import _GrowingTile

__all__ = []


class _Assign:
    """Assignments of the PCU's value structures (tiles, tuples, growing tiles; a mixin)."""

    @staticmethod
    def _assign_value(dst, src):
        """Statements ``dst = src`` for matching register structures (HTile, tuple, growing)."""
        if isinstance(dst, tuple):
            return [st for d, v in zip(dst, src) for st in _Assign._assign_value(d, v)]
        if isinstance(dst, _GrowingTile):
            rows = [dst.rows.eq(src.rows)] if dst.rows is not None and dst.rows is not dst.count else []
            return [dst.count.eq(src.count)] + rows + _Assign._assign_value(dst.tile, src.tile)
        return [d.eq(v) for d, v in zip(dst.flat(), src.flat())]

    def _assign(self, view, value, t):
        """Statements writing ``value`` of type ``t`` into the ``data`` view of a beat. A tile
        with a dynamic row count gets its count, and its rows beyond the count are zero."""
        if isinstance(value, tuple):
            return [st for i, (v, f) in enumerate(zip(value, t.elems))
                    for st in self._assign(view[f"f{i}"], v, f)]
        rows = self._out_rows if _is_dynamic(t) else None
        if isinstance(value, _GrowingTile):
            value, rows = value.tile, value.rows
        if rows is None:
            return _assign_tile(view, value.elems)
        return [view.rows.eq(rows)] + _assign_tile(
            view.data, [[Mux(rows > i, e, 0) for e in row] for i, row in enumerate(value.elems)])


def _assign_tile(view, elems):
    """Statements writing the rows ``elems`` into the tile ``view`` (row-major, as its layout
    lies). A value that covers the whole tile is one statement: Amaranth checks every statement
    bit by bit over its whole target signal, so one statement per element of a wide beat would
    cost elements x beat bits."""
    fields = [view[i][j] for i, row in enumerate(elems) for j in range(len(row))]
    values = [e for row in elems for e in row]
    if sum(len(Value.cast(f)) for f in fields) != len(Value.cast(view)):
        return [f.eq(v) for f, v in zip(fields, values)]
    return [Value.cast(view).eq(Cat(*(_fit(v, Value.cast(f).shape().width)
                                      for f, v in zip(fields, values))))]


def _fit(value, width):
    """``value`` at ``width`` bits, truncated or extended by its own signedness, as ``.eq`` would."""
    value = Value.cast(value)
    if len(value) >= width:
        return value[:width]
    if len(value) == 0:
        return Const(0, width)
    fill = value[-1] if value.shape().signed else Const(0, 1)
    return Cat(value, fill.replicate(width - len(value)))
