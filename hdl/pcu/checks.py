"""What a PCU accepts: its modes, the dtypes of its datapath, and the checks of element types."""

from ...compiler.types import Tile, Tuple

__all__ = ["MODES", "HW_DTYPES"]

#: What a PCU implements: the compute operators of semantics section 4.
MODES = ("map", "accum", "scan")
#: Tile dtypes of the hardware datapath.
HW_DTYPES = ("int8", "int16", "int32")


def _check_hw_type(t, what):
    """An element type the datapath can hold: static integer tiles and tuples of them."""
    if isinstance(t, Tuple):
        for e in t.elems:
            _check_hw_type(e, what)
        return
    if not isinstance(t, Tile):
        raise ValueError(f"PCU: {what} is {t!r}; the PCU computes on integer tiles (and tuples "
                         f"of them) only")
    if t.dtype.is_float or t.dtype.name not in HW_DTYPES:
        raise ValueError(f"PCU: {what} has dtype {t.dtype!r}; the hardware datapath supports "
                         f"{', '.join(HW_DTYPES)} only (floating-point tiles are not implemented)")


def _tiles(t):
    """The tiles of an element type (a tile, or the fields of a tuple, recursively)."""
    if isinstance(t, Tuple):
        return [x for e in t.elems for x in _tiles(e)]
    return [t] if isinstance(t, Tile) else []


def _is_dynamic(t):
    return isinstance(t, Tile) and not isinstance(t.rows, int)


def _check_static(t, what):
    for x in _tiles(t):
        if _is_dynamic(x) or x.rows < 1 or not isinstance(x.cols, int) or x.cols < 1:
            raise ValueError(f"PCU: {what} {t!r} needs a static, non-empty shape (hierarchical "
                             f"tiling makes tiles static; only a retile_row/retile_col "
                             f"accumulator grows a dynamic one)")


def _check_rows(t, what):
    """Static columns, and rows that are static and non-empty or dynamic (bounded)."""
    for x in _tiles(t):
        if not isinstance(x.cols, int) or x.cols < 1 or isinstance(x.rows, int) and x.rows < 1:
            raise ValueError(f"PCU: {what} {t!r} needs static, non-empty columns and static "
                             f"non-empty or dynamic (bounded) rows")
