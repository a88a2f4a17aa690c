"""Tile values of the datapath (:class:`HTile`) and the wrapping and clamping of its integers."""

from amaranth.hdl import Const, Mux, Signal, signed

__all__ = ["HTile", "ceil_div", "wrap", "clamp"]


def ceil_div(a, b):
    """``ceil(a / b)`` for positive ints."""
    return -(-a // b)


class HTile:
    """A tile of hardware values: ``elems[i][j]`` is element ``[i, j]``, a ``signed(bits)`` value.

    Parameters
    ----------
    dtype : stepforge.compiler.types.DType
        An integer dtype.
    elems : list of list of amaranth.hdl.Value
        Row-major, ``rows x cols``.
    """

    def __init__(self, dtype, elems):
        self.dtype = dtype
        self.elems = [list(r) for r in elems]

    @property
    def rows(self):
        return len(self.elems)

    @property
    def cols(self):
        return len(self.elems[0]) if self.elems else 0

    def at(self, i, j):
        """Element ``[i, j]`` with size-1 dimensions broadcast."""
        return self.elems[0 if self.rows == 1 else i][0 if self.cols == 1 else j]

    def flat(self):
        return [v for r in self.elems for v in r]

    @classmethod
    def signals(cls, dtype, rows, cols, name, init=0):
        """A tile of fresh signals named ``{name}_{i}_{j}`` (reset value ``init``)."""
        return cls(dtype, [[Signal(signed(dtype.bits), name=f"{name}_{i}_{j}", init=init)
                            for j in range(cols)] for i in range(rows)])

    @classmethod
    def const(cls, dtype, value, rows, cols):
        """A tile holding the constant ``value`` everywhere."""
        c = Const(value, signed(dtype.bits))
        return cls(dtype, [[c] * cols for _ in range(rows)])

    def __repr__(self):
        return f"HTile({self.dtype!r}, {self.rows}x{self.cols})"


def wrap(value, bits):
    """``value`` modulo ``2**bits`` as ``signed(bits)`` (two's complement wrap)."""
    return value[:bits].as_signed()


def clamp(value, lo, hi):
    """``value`` clamped to ``[lo, hi]`` (Python ints)."""
    return Mux(value < lo, lo, Mux(value > hi, hi, value))


def _abs_unsigned(value, bits):
    """``|value|`` of a ``signed(bits)`` value as ``unsigned(bits)`` (``|MIN| = 2**(bits-1)``)."""
    return Mux(value < 0, -value, value)[:bits]
