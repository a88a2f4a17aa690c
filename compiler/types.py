"""Element types of STeP streams and their data types.

=========================  ==========================================================
type                       meaning
=========================  ==========================================================
``Tile(dtype, r, c)``      a 2-D tile; ``r`` and ``c`` static or bounded dynamic
``Buffer(elem, shape)``    a read-only reference to on-chip memory made by Bufferize
``Select(n)``              a multi-hot selector over ``n`` targets (bit ``i`` = target ``i``)
``Tuple(a, b, ...)``       made by Zip
``Index()``                an integer tile index or address (32 bits)
``Bool()``                 a flag (store acknowledgements, padding flags)
=========================  ==========================================================
"""

from dataclasses import dataclass

import ml_dtypes
import numpy as np
import sympy

from .dims import dim_eq, norm_dim

__all__ = [
    "DType", "int8", "int16", "int32", "bf16", "fp32", "DTYPES",
    "ElemType", "Tile", "Buffer", "Select", "Tuple", "Index", "Bool",
]


@dataclass(frozen=True)
class DType:
    """A scalar data type of tile elements.

    Integer arithmetic wraps modulo ``2**bits`` (two's complement), exactly as a hardware adder
    or multiplier of that width does; see ``docs/arithmetic.md``.
    """
    name: str
    bits: int
    is_float: bool
    numpy: object

    def __repr__(self):
        return self.name

    @property
    def nbytes(self):
        return self.bits // 8

    @property
    def np(self):
        return np.dtype(self.numpy)

    @property
    def min(self):
        return -(1 << (self.bits - 1))

    @property
    def max(self):
        return (1 << (self.bits - 1)) - 1


int8 = DType("int8", 8, False, np.int8)
int16 = DType("int16", 16, False, np.int16)
int32 = DType("int32", 32, False, np.int32)
bf16 = DType("bf16", 16, True, ml_dtypes.bfloat16)
fp32 = DType("fp32", 32, True, np.float32)
DTYPES = {d.name: d for d in (int8, int16, int32, bf16, fp32)}


class ElemType:
    """Base class of element types."""

    def nbytes(self):
        """Bytes of one element as a SymPy expression (or int) of the program's symbols."""
        raise NotImplementedError(type(self).__name__)

    def same(self, other):
        """Structural equality with symbolic dimensions compared by value."""
        return self == other


@dataclass(frozen=True, eq=False)
class Tile(ElemType):
    """A 2-D tile of ``dtype`` with ``rows`` x ``cols`` elements (either may be symbolic)."""
    dtype: DType
    rows: object
    cols: object

    def __post_init__(self):
        if not isinstance(self.dtype, DType):
            raise TypeError(f"Tile dtype must be a DType, not {self.dtype!r}")
        object.__setattr__(self, "rows", norm_dim(self.rows))
        object.__setattr__(self, "cols", norm_dim(self.cols))

    def __repr__(self):
        return f"Tile({self.dtype!r}, {self.rows}, {self.cols})"

    def __eq__(self, other):
        return (isinstance(other, Tile) and self.dtype == other.dtype
                and dim_eq(self.rows, other.rows) and dim_eq(self.cols, other.cols))

    def __hash__(self):
        return hash((Tile, self.dtype, str(self.rows), str(self.cols)))

    @property
    def is_static(self):
        return isinstance(self.rows, int) and isinstance(self.cols, int)

    @property
    def shape(self):
        return (self.rows, self.cols)

    def nbytes(self):
        return norm_dim(sympy.sympify(self.rows) * self.cols * self.dtype.nbytes)


@dataclass(frozen=True, eq=False)
class Buffer(ElemType):
    """A reference to an on-chip buffer holding a ``shape`` of ``elem`` (outermost first)."""
    elem: ElemType
    shape: tuple

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(norm_dim(d) for d in self.shape))

    def __repr__(self):
        return f"Buffer({self.elem!r}, {list(self.shape)})"

    def __eq__(self, other):
        return (isinstance(other, Buffer) and self.elem == other.elem
                and len(self.shape) == len(other.shape)
                and all(dim_eq(a, b) for a, b in zip(self.shape, other.shape)))

    def __hash__(self):
        return hash((Buffer, self.elem, len(self.shape)))

    @property
    def rank(self):
        """Rank of the stream that Streamify replays (``len(shape) - 1``)."""
        return len(self.shape) - 1

    def nbytes(self):
        return 2  # a 16-bit buffer id on the wire (contract/beat.py BUFFER_ID_BITS)

    def contents_nbytes(self):
        n = sympy.Integer(1)
        for d in self.shape:
            n = n * d
        return norm_dim(n * self.elem.nbytes())


@dataclass(frozen=True)
class Select(ElemType):
    """A multi-hot selector over ``n`` targets; values are ``int`` bit masks (bit i = target i)."""
    n: int

    def __repr__(self):
        return f"Select({self.n})"

    def nbytes(self):
        return (self.n + 7) // 8


@dataclass(frozen=True, eq=False)
class Tuple(ElemType):
    """A tuple of element types, made by Zip."""
    elems: tuple

    def __init__(self, *elems):
        object.__setattr__(self, "elems", tuple(elems))

    def __repr__(self):
        return "Tuple(" + ", ".join(repr(e) for e in self.elems) + ")"

    def __eq__(self, other):
        return (isinstance(other, Tuple) and len(self.elems) == len(other.elems)
                and all(a == b for a, b in zip(self.elems, other.elems)))

    def __hash__(self):
        return hash((Tuple, self.elems))

    def nbytes(self):
        return norm_dim(sum((sympy.sympify(e.nbytes()) for e in self.elems), sympy.Integer(0)))


@dataclass(frozen=True)
class Index(ElemType):
    """An integer tile index or address (32 bits, unsigned)."""

    def __repr__(self):
        return "Index()"

    def nbytes(self):
        return 4


@dataclass(frozen=True)
class Bool(ElemType):
    """A one-bit flag."""

    def __repr__(self):
        return "Bool()"

    def nbytes(self):
        return 1
