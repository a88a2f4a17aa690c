"""Symbolic dimensions.

A dimension of a stream's shape is a Python ``int`` (static) or a SymPy expression of the
program's symbols (dynamic-regular or ragged). A :class:`SymbolTable` records, for every symbol,
its kind and its declared upper bound; it implements the absorbing rule (an expression that
involves a ragged symbol becomes a fresh ragged symbol) and bound propagation (every expression
the front end builds is monotone in its symbols, so substituting the bounds bounds it).
"""

import itertools
import math
from dataclasses import dataclass

import sympy

__all__ = ["Dim", "SymbolInfo", "SymbolTable", "nonzero", "norm_dim", "dim_eq", "fmt_shape",
           "is_static", "product"]

Dim = int | sympy.Expr


class nonzero(sympy.Function):
    """``nonzero(D)`` is 1 when ``D > 0`` and 0 otherwise: the size of Promote's new outer dimension.

    Reads better than the equivalent ``Piecewise`` in shapes and metrics, and substitutes the same.
    """
    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(cls, x):
        if x.is_Integer:
            return sympy.Integer(1 if x > 0 else 0)
        if x.is_positive:
            return sympy.Integer(1)
        return None


def norm_dim(d):
    """Return ``d`` as an ``int`` when it is a number, else as a SymPy expression."""
    if isinstance(d, bool):
        raise TypeError(f"a dimension must be an int or a SymPy expression, not {d!r}")
    if isinstance(d, int):
        return d
    d = sympy.sympify(d)
    if d.is_Integer:
        return int(d)
    if d.is_Number:
        raise TypeError(f"a dimension must be integral, not {d!r}")
    return d


def is_static(d):
    return isinstance(norm_dim(d), int)


def dim_eq(a, b):
    """Whether two dimensions are provably equal."""
    a, b = norm_dim(a), norm_dim(b)
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return sympy.simplify(sympy.sympify(a) - sympy.sympify(b)) == 0


def product(dims):
    """The product of dimensions (an ``int`` when every one is)."""
    p = sympy.Integer(1)
    for d in dims:
        p = p * d
    return norm_dim(p)


def fmt_shape(shape):
    return "[" + ", ".join(str(d) for d in shape) + "]"


@dataclass(frozen=True)
class SymbolInfo:
    """What the program knows of one symbol.

    Attributes
    ----------
    kind : str
        ``"dynamic"`` (the same value everywhere in a stream), ``"ragged"`` (may differ between
        occurrences) or ``"count"`` (the number of elements of one ragged stream).
    bound : int or None
        Declared upper bound; hardware buffers and FIFOs are sized from it.
    origin : str
        Who introduced the symbol (``"user"`` or the operator that made it fresh).
    """
    kind: str
    bound: int | None
    origin: str = "user"


class SymbolTable:
    """The symbols of one program, their kinds and bounds."""

    def __init__(self):
        self._info = {}
        self._counter = itertools.count()

    def __contains__(self, sym):
        return sym in self._info

    def __iter__(self):
        return iter(self._info)

    def info(self, sym):
        return self._info[sym]

    def symbol(self, name, *, ragged=False, bound=None, origin="user"):
        """Declare a symbol; declaring the same name twice returns the same symbol."""
        sym = sympy.Symbol(name, integer=True, nonnegative=True)
        kind = "ragged" if ragged else "dynamic"
        if bound is not None:
            if not isinstance(bound, int) or bound < 0:
                raise ValueError(f"bound of symbol {name!r} must be a non-negative int, not {bound!r}")
        old = self._info.get(sym)
        if old is not None and (old.kind, old.bound) != (kind, bound):
            raise ValueError(f"symbol {name!r} is already declared as {old.kind} with bound {old.bound}")
        self._info[sym] = SymbolInfo(kind, bound, origin)
        return sym

    def fresh(self, hint, *, ragged, bound, origin):
        """A new symbol named after ``hint`` that no other part of the program uses."""
        while True:
            name = f"{hint}_{next(self._counter)}"
            sym = sympy.Symbol(name, integer=True, nonnegative=True)
            if sym not in self._info:
                break
        self._info[sym] = SymbolInfo("ragged" if ragged else "dynamic", bound, origin)
        return sym

    def count_symbol(self, stream_name, bounds):
        """The symbol ``n_<stream_name>`` counting a ragged stream's elements (kind ``"count"``)."""
        sym = sympy.Symbol("n_" + stream_name.replace(".", "_"), integer=True, nonnegative=True)
        if sym not in self._info:
            bound = None if None in bounds else math.prod(bounds)
            self._info[sym] = SymbolInfo("count", bound, stream_name)
        return sym

    def set_bound(self, sym, bound):
        info = self._info[sym]
        self._info[sym] = SymbolInfo(info.kind, bound, info.origin)

    def is_ragged(self, d):
        d = norm_dim(d)
        if isinstance(d, int):
            return False
        return any(self._info.get(s, SymbolInfo("dynamic", None)).kind == "ragged" for s in d.free_symbols)

    def bound(self, d):
        """An ``int`` upper bound of ``d``, or ``None`` if a symbol in it has no bound."""
        d = norm_dim(d)
        if isinstance(d, int):
            return d
        subs = {}
        for s in d.free_symbols:
            info = self._info.get(s)
            if info is None or info.bound is None:
                return None
            subs[s] = info.bound
        value = d.subs(subs)
        value = sympy.ceiling(value)
        return int(value)

    def absorb(self, expr, *, hint, origin):
        """Apply the absorbing rule: ``expr`` itself, or a fresh ragged symbol bounded like it."""
        expr = norm_dim(expr)
        if self.is_ragged(expr) and not (isinstance(expr, sympy.Symbol)):
            return self.fresh(hint, ragged=True, bound=self.bound(expr), origin=origin)
        return expr
