"""Beat layouts: the wire encoding of a STeP stream as an Amaranth data layout.

Every stream edge is an :mod:`amaranth.lib.stream` interface whose payload is one *beat*
(``docs/wire.md``, semantics section 2)::

    StructLayout({"data": <element layout>, "has_data": 1, "stop": W, "last": 1})

with ``W = max(1, ceil(log2(rank + 1)))``. ``data`` occupies the least significant bits, then
``has_data``, ``stop`` and ``last`` (the most significant bit). The testbench and the reference
interpreter pack and unpack beats through the *same* layout object that types the hardware port
(:func:`pack_beat` uses ``layout.const(...).as_bits()``, :func:`unpack_beat` uses
``layout.from_bits(...)``), so the two sides cannot drift apart.

Element encoding
----------------
==========================  ================================================  ======================
element type                ``data`` layout                                   interpreter value
==========================  ================================================  ======================
``Tile(d, r, c)``, static   ``ArrayLayout(ArrayLayout(S(d), c), r)``          ``numpy`` array
                            row-major: element ``[i, j]`` at bit              ``(r, c)`` of ``d``
                            ``(i * c + j) * bits(d)``
``Tile(d, R_sym, c)``       ``StructLayout({"rows": range(R + 1),``           ``numpy`` array
with bound ``R``            ``"data": ArrayLayout(ArrayLayout(S(d), c), R)})``  ``(n, c)``, ``n <= R``
                            valid rows first, the remaining rows zero
``Index()``                 ``unsigned(32)``                                  ``int``
``Bool()``                  ``unsigned(1)``                                   ``int`` (or ``bool``)
``Select(n)``               ``unsigned(n)``, bit ``i`` = target ``i``         ``int`` bit mask
``Buffer(...)``             ``unsigned(16)``, the buffer id                   object with ``.id``
                                                                              (unpacks to ``int``)
``Tuple(a, b, ...)``        ``StructLayout({"f0": L(a), "f1": L(b), ...})``   ``tuple``
==========================  ================================================  ======================

``S(d)`` is ``signed(bits)`` for the integer dtypes (int8, int16, int32) and the raw IEEE bits as
``unsigned(16)`` (bf16, ``ml_dtypes.bfloat16``) or ``unsigned(32)`` (fp32) for the float dtypes.
Floats are moved bit for bit (``ndarray.view(np.uint16 / np.uint32)``): NaN payloads, signed zeros
and subnormals survive a round trip unchanged. Decoding relies on this convention: inside a tile, a
signed element shape is an integer dtype, ``unsigned(16)`` is bf16 and ``unsigned(32)`` is fp32.

A beat with ``has_data = 0`` packs its ``data`` field as all zeros; unpacking such a beat gives
``data = None`` whatever the data bits hold (the field is ignored, semantics section 2).

Values are range-checked when packed (an int16 element outside ``[-32768, 32767]``, an ``Index``
of ``2**32``, a float array that is not exactly representable in the tile's dtype, a stop level
that does not fit its field): a :class:`ValueError` is raised rather than silently truncated.
"""

import numbers
from collections.abc import Mapping

import ml_dtypes
import numpy as np
from amaranth.hdl import Const, Shape, Value, signed, unsigned
from amaranth.lib import data, stream

from ..compiler.types import Bool, Buffer, DType, ElemType, Index, Select, Tile, Tuple
from .tokens import Beat

__all__ = [
    "INDEX_BITS", "BUFFER_ID_BITS",
    "stop_width", "stop_above", "dtype_shape", "element_layout", "beat_layout", "beat_signature",
    "pack_element", "unpack_element", "pack_beat", "unpack_beat",
]

#: Width of an ``Index`` element.
INDEX_BITS = 32
#: Width of a ``Buffer`` element (the buffer id).
BUFFER_ID_BITS = 16

_FLOAT_NP = {16: (ml_dtypes.bfloat16, np.uint16), 32: (np.float32, np.uint32)}
_INT_NP = {8: np.int8, 16: np.int16, 32: np.int32}


def stop_width(rank):
    """Width of the ``stop`` field of a stream of ``rank``: ``max(1, ceil(log2(rank + 1)))``.

    Parameters
    ----------
    rank : int
        The stream's rank, ``>= 0``.

    Returns
    -------
    int
    """
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise ValueError(f"a stream rank must be an int >= 0, not {rank!r}")
    return max(1, rank.bit_length())


def stop_above(stop, limit):
    """``stop > limit`` as a signal, or a constant 0 when the stop field cannot hold a level above
    ``limit`` (a unit's check for stops beyond its stream's rank)."""
    width = Value.cast(stop).shape().width
    return stop > limit if (1 << width) - 1 > limit else Const(0)


def dtype_shape(dtype):
    """The Amaranth shape of one tile element of ``dtype``.

    Parameters
    ----------
    dtype : stepforge.compiler.types.DType

    Returns
    -------
    amaranth.hdl.Shape
        ``signed(bits)`` for integer dtypes, ``unsigned(bits)`` (raw IEEE bits) for bf16 and fp32.
    """
    if not isinstance(dtype, DType):
        raise TypeError(f"expected a DType, not {dtype!r}")
    return unsigned(dtype.bits) if dtype.is_float else signed(dtype.bits)


def _resolve_bound(tile, row_bound):
    rows = tile.rows
    if row_bound is None:
        raise ValueError(f"{tile!r} has a dynamic row count {rows}; pass row_bound= (an int, or a "
                         f"mapping from the row expression to its upper bound)")
    if isinstance(row_bound, Mapping):
        if rows in row_bound:
            bound = row_bound[rows]
        elif str(rows) in row_bound:
            bound = row_bound[str(rows)]
        else:
            raise ValueError(f"{tile!r}: row_bound has no entry for the row count {rows}")
    else:
        bound = row_bound
    if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
        raise ValueError(f"{tile!r}: the row bound of {rows} must be an int >= 1, not {bound!r}")
    return bound


def element_layout(elem_type, *, row_bound=None):
    """The ``data`` field's shape for one element of ``elem_type`` (table in the module doc).

    Parameters
    ----------
    elem_type : stepforge.compiler.types.ElemType
        ``Tile``, ``Index``, ``Bool``, ``Select``, ``Buffer`` or ``Tuple`` of these.
    row_bound : int or Mapping, optional
        Upper bound of a dynamic (SymPy) tile row count: an int that applies to every dynamic
        tile in ``elem_type``, or a mapping from the row expression (or its ``str``) to the bound.
        Required when ``elem_type`` holds a tile with a dynamic row count.

    Returns
    -------
    amaranth.hdl.Shape or amaranth.lib.data.Layout

    Raises
    ------
    ValueError
        A dynamic row count without a bound, a dynamic column count, an empty tile, ``Select(0)``
        or an empty ``Tuple``.
    """
    if isinstance(elem_type, Tile):
        cols = elem_type.cols
        if not isinstance(cols, int):
            raise ValueError(f"{elem_type!r}: a dynamic column count ({cols}) has no wire encoding; "
                             f"hierarchical tiling must make the columns static first")
        if cols < 1:
            raise ValueError(f"{elem_type!r}: a tile needs at least one column")
        row = data.ArrayLayout(dtype_shape(elem_type.dtype), cols)
        if isinstance(elem_type.rows, int):
            if elem_type.rows < 1:
                raise ValueError(f"{elem_type!r}: a tile needs at least one row")
            return data.ArrayLayout(row, elem_type.rows)
        bound = _resolve_bound(elem_type, row_bound)
        return data.StructLayout({"rows": range(bound + 1), "data": data.ArrayLayout(row, bound)})
    if isinstance(elem_type, Index):
        return unsigned(INDEX_BITS)
    if isinstance(elem_type, Bool):
        return unsigned(1)
    if isinstance(elem_type, Select):
        if isinstance(elem_type.n, bool) or not isinstance(elem_type.n, int) or elem_type.n < 1:
            raise ValueError(f"{elem_type!r}: a selector needs at least one target")
        return unsigned(elem_type.n)
    if isinstance(elem_type, Buffer):
        return unsigned(BUFFER_ID_BITS)
    if isinstance(elem_type, Tuple):
        if not elem_type.elems:
            raise ValueError("an empty Tuple has no wire encoding")
        return data.StructLayout({f"f{i}": element_layout(e, row_bound=row_bound)
                                  for i, e in enumerate(elem_type.elems)})
    if isinstance(elem_type, ElemType):
        raise ValueError(f"{elem_type!r} has no wire encoding")
    raise TypeError(f"expected a STeP element type, not {elem_type!r}")


def beat_layout(elem_type, rank, *, row_bound=None):
    """The beat layout ``{data, has_data, stop, last}`` of a stream.

    Parameters
    ----------
    elem_type : stepforge.compiler.types.ElemType
        The stream's element type.
    rank : int
        The stream's rank (``>= 0``); sizes the ``stop`` field (:func:`stop_width`).
    row_bound : int or Mapping, optional
        See :func:`element_layout`.

    Returns
    -------
    amaranth.lib.data.StructLayout
    """
    return data.StructLayout({
        "data": element_layout(elem_type, row_bound=row_bound),
        "has_data": unsigned(1),
        "stop": unsigned(stop_width(rank)),
        "last": unsigned(1),
    })


def beat_signature(elem_type, rank, *, row_bound=None):
    """The stream signature of a STeP edge: ``stream.Signature(beat_layout(...))``.

    Parameters
    ----------
    elem_type, rank, row_bound
        As for :func:`beat_layout`.

    Returns
    -------
    amaranth.lib.stream.Signature
    """
    return stream.Signature(beat_layout(elem_type, rank, row_bound=row_bound))


# Encoding: a Python value -> what ``layout.const()`` accepts (nested lists/dicts of ints). -------

def _is_tile(shape):
    return (isinstance(shape, data.ArrayLayout) and isinstance(shape.elem_shape, data.ArrayLayout)
            and not isinstance(shape.elem_shape.elem_shape, data.Layout))


def _is_dynamic_tile(shape):
    return (isinstance(shape, data.StructLayout) and set(dict(shape.members)) == {"rows", "data"}
            and _is_tile(shape.members["data"]))


def _tile_kind(tile_shape):
    """(numpy value dtype, numpy bits dtype or None) of a tile layout's element shape."""
    s = Shape.cast(tile_shape.elem_shape.elem_shape)
    if s.signed and s.width in _INT_NP:
        return np.dtype(_INT_NP[s.width]), None
    if not s.signed and s.width in _FLOAT_NP:
        value_dt, bits_dt = _FLOAT_NP[s.width]
        return np.dtype(value_dt), np.dtype(bits_dt)
    raise ValueError(f"{s!r} is not the element shape of any tile dtype")


def _tile_elements(tile_shape, value, nrows, what):
    """Tile ``value`` as a nested list of ints (the raw bits for floats), shape-checked."""
    cols = tile_shape.elem_shape.length
    value_dt, bits_dt = _tile_kind(tile_shape)
    arr = np.asarray(value)
    if arr.ndim != 2 or arr.shape[1] != cols or not nrows(arr.shape[0]):
        raise ValueError(f"{what}: a tile value of shape {arr.shape} does not fit {tile_shape!r}")
    if bits_dt is not None:  # float: exact representability, then the raw bits
        if arr.dtype != value_dt:
            if arr.dtype.kind in "OSUaMm":
                raise TypeError(f"{what}: cannot encode a {arr.dtype} array as {value_dt} bits")
            conv = arr.astype(value_dt)
            if not np.array_equal(conv.astype(np.float64), arr.astype(np.float64), equal_nan=True):
                raise ValueError(f"{what}: the values are not exactly representable in {value_dt}")
            arr = conv
        return arr.view(bits_dt).tolist()
    if arr.dtype.kind not in "iub":
        raise TypeError(f"{what}: an integer tile needs an integer array, not {arr.dtype}")
    info = np.iinfo(value_dt)
    if arr.size and (int(arr.min()) < info.min or int(arr.max()) > info.max):
        raise ValueError(f"{what}: values outside [{info.min}, {info.max}] do not fit {value_dt}")
    return arr.astype(np.int64).tolist()


def _encode(shape, value, what):
    if _is_tile(shape):
        return _tile_elements(shape, value, lambda n: n == shape.length, what)
    if _is_dynamic_tile(shape):
        tile = shape.members["data"]
        rows = _tile_elements(tile, value, lambda n: n <= tile.length, what)
        pad = [0] * tile.elem_shape.length
        return {"rows": len(rows), "data": rows + [pad] * (tile.length - len(rows))}
    if isinstance(shape, data.StructLayout):  # Tuple
        names = list(dict(shape.members))
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") \
                or len(value) != len(names):
            raise ValueError(f"{what}: expected a tuple of {len(names)} values, not {value!r}")
        return {name: _encode(shape.members[name], v, f"{what}.{name}")
                for name, v in zip(names, value)}
    if isinstance(shape, data.Layout):
        raise ValueError(f"{what}: {shape!r} is not a beat element layout")
    s = Shape.cast(shape)
    if hasattr(value, "id") and not isinstance(value, numbers.Integral):
        value = value.id  # a Buffer reference
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if not isinstance(value, numbers.Integral):
        raise TypeError(f"{what}: expected an int for {s!r}, not {value!r}")
    value = int(value)
    if not 0 <= value < (1 << s.width):
        raise ValueError(f"{what}: {value} does not fit {s!r}")
    return value


def _decode(shape, const):
    if _is_tile(shape):
        value_dt, bits_dt = _tile_kind(shape)
        rows = [[const[i][j] for j in range(shape.elem_shape.length)] for i in range(shape.length)]
        if bits_dt is not None:
            return np.array(rows, dtype=bits_dt).reshape(shape.length, -1).view(value_dt)
        return np.array(rows, dtype=value_dt).reshape(shape.length, -1)
    if _is_dynamic_tile(shape):
        n = const.rows
        if n > shape.members["data"].length:
            raise ValueError(f"a dynamic tile claims {n} rows, more than its bound "
                             f"{shape.members['data'].length}")
        return _decode(shape.members["data"], const.data)[:n]
    if isinstance(shape, data.StructLayout):  # Tuple
        return tuple(_decode(shape.members[name], const[name]) for name in dict(shape.members))
    return int(const)


def pack_element(shape, value):
    """The bits of one element ``value`` in the element layout ``shape``.

    Parameters
    ----------
    shape : amaranth.hdl.ShapeLike
        An element layout from :func:`element_layout`.
    value : object
        The interpreter-side value (see the module doc).

    Returns
    -------
    int
        Non-negative, ``< 2 ** Shape.cast(shape).width``.
    """
    enc = _encode(shape, value, "element")
    if isinstance(shape, data.Layout):
        return shape.const(enc).as_bits()
    return enc


def unpack_element(shape, bits):
    """The interpreter-side value of the element bits ``bits`` in layout ``shape``."""
    width = Shape.cast(shape).width
    if not 0 <= bits < (1 << width):
        raise ValueError(f"{bits} does not fit {width} bits")
    if isinstance(shape, data.Layout):
        return _decode(shape, shape.from_bits(bits))
    return bits


def _check_beat_layout(layout):
    if not (isinstance(layout, data.StructLayout)
            and list(dict(layout.members)) == ["data", "has_data", "stop", "last"]):
        raise TypeError(f"expected a beat layout from beat_layout(), not {layout!r}")


def pack_beat(layout, beat):
    """The payload bits of ``beat`` in the beat layout ``layout``.

    Parameters
    ----------
    layout : amaranth.lib.data.StructLayout
        A layout returned by :func:`beat_layout`.
    beat : stepforge.contract.tokens.Beat
        ``data`` is ignored (packed as zeros) when ``has_data`` is 0.

    Returns
    -------
    int
        ``layout.const(...).as_bits()``.

    Raises
    ------
    ValueError
        A field or element value that does not fit the layout.
    """
    _check_beat_layout(layout)
    data_, has_data, stop, last = beat
    fields = {}
    for name, v in (("has_data", has_data), ("stop", stop), ("last", last)):
        width = Shape.cast(layout.members[name]).width
        if isinstance(v, bool):
            v = int(v)
        if not isinstance(v, numbers.Integral) or not 0 <= v < (1 << width):
            raise ValueError(f"beat field {name}={v!r} does not fit {width} bit(s)")
        fields[name] = int(v)
    if has_data:
        if data_ is None:
            raise ValueError(f"{beat!r} has has_data=1 but no data")
        fields["data"] = _encode(layout.members["data"], data_, "beat data")
    return layout.const(fields).as_bits()


def unpack_beat(layout, bits):
    """The :class:`~stepforge.contract.tokens.Beat` of the payload bits ``bits``.

    Parameters
    ----------
    layout : amaranth.lib.data.StructLayout
        A layout returned by :func:`beat_layout`.
    bits : int
        ``0 <= bits < 2 ** layout.size``.

    Returns
    -------
    stepforge.contract.tokens.Beat
        ``data`` is ``None`` when ``has_data`` is 0.
    """
    _check_beat_layout(layout)
    bits = int(bits)
    if not 0 <= bits < (1 << layout.size):
        raise ValueError(f"{bits:#x} does not fit the {layout.size}-bit beat layout")
    c = layout.from_bits(bits)
    has_data = int(c.has_data)
    value = _decode(layout.members["data"], c.data) if has_data else None
    return Beat(value, has_data, int(c.stop), int(c.last))
