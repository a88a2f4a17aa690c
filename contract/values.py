"""Interpreter values of each element type, and their conversion from user data.

===============  ==================================================================
element type     interpreter value
===============  ==================================================================
``Tile``         a 2-D ``numpy.ndarray`` of the tile's dtype (bf16: ``ml_dtypes.bfloat16``)
``Buffer``       a :class:`BufferRef` (an id and the buffered tokens)
``Select(n)``    an ``int`` bit mask (bit ``i`` selects target ``i``)
``Index``        an ``int``
``Bool``         a ``bool``
``Tuple``        a Python ``tuple`` of the above
===============  ==================================================================
"""

import numpy as np

from ..compiler.errors import StepRuntimeError
from ..compiler.types import Bool, Buffer, Index, Select, Tile, Tuple

__all__ = ["BufferRef", "to_value", "values_equal", "pad_value"]


class BufferRef:
    """A reference to an on-chip buffer: its id and its contents as tokens."""
    __slots__ = ("id", "tokens")

    def __init__(self, id, tokens):
        self.id = id
        self.tokens = tokens

    def __repr__(self):
        return f"BufferRef({self.id})"


def to_value(x, dtype, op="input"):
    """Convert user data ``x`` to the interpreter value of element type ``dtype``."""
    if isinstance(dtype, Tile):
        arr = np.asarray(x)
        if arr.ndim == 0:
            arr = arr.reshape(1, 1)
        if arr.ndim != 2:
            raise StepRuntimeError(f"{op}: a {dtype!r} element must be 2-D, got shape {list(arr.shape)}", op=op)
        for got, want, what in ((arr.shape[0], dtype.rows, "rows"), (arr.shape[1], dtype.cols, "cols")):
            if isinstance(want, int) and got != want:
                raise StepRuntimeError(f"{op}: a {dtype!r} element needs {want} {what}, got shape "
                                       f"{list(arr.shape)}", op=op)
        return arr.astype(dtype.dtype.np)
    if isinstance(dtype, Select):
        if isinstance(x, (list, tuple, np.ndarray)):
            bits = list(x)
            if len(bits) != dtype.n:
                raise StepRuntimeError(f"{op}: a {dtype!r} element needs {dtype.n} flags, got {len(bits)}", op=op)
            return sum(1 << i for i, v in enumerate(bits) if v)
        x = int(x)
        if not 0 <= x < (1 << dtype.n):
            raise StepRuntimeError(f"{op}: {x} is not a mask of {dtype.n} bits", op=op)
        return x
    if isinstance(dtype, Index):
        x = int(x)
        if not 0 <= x < (1 << 32):
            raise StepRuntimeError(f"{op}: index {x} is not a 32-bit unsigned int", op=op)
        return x
    if isinstance(dtype, Bool):
        return bool(x)
    if isinstance(dtype, Tuple):
        if len(x) != len(dtype.elems):
            raise StepRuntimeError(f"{op}: a {dtype!r} element needs {len(dtype.elems)} fields", op=op)
        return tuple(to_value(v, t, op) for v, t in zip(x, dtype.elems))
    if isinstance(dtype, Buffer):
        raise StepRuntimeError(f"{op}: buffer references cannot come from the host", op=op)
    raise TypeError(f"unknown element type {dtype!r}")


def values_equal(a, b):
    """Bit-exact equality of two interpreter values (NaNs equal when their bits are)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        return a.tobytes() == b.tobytes()
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    return a == b


def pad_value(dtype, pad):
    """The padding element of an element type: a tile filled with ``pad``."""
    if isinstance(dtype, Tile) and dtype.is_static:
        return np.full((dtype.rows, dtype.cols), pad, dtype=dtype.dtype.np)
    if isinstance(dtype, Tile):
        raise StepRuntimeError(f"cannot pad a stream of dynamically sized tiles {dtype!r}")
    return pad
