"""Random tile functions as Python source (``lambda a, b: maximum(a * 3, b) - a``).

An expression is built bottom-up from the function's parameters, small integer constants and the
primitives the hardware computes on integer tiles (``docs/arithmetic.md``): ``+ - * /``,
``maximum``, ``scale``, ``cast``, the fixed-point ``exp``/``silu``/``rsqrt`` (int8 and int16
only), ``row_sum``/``row_max`` (whose ``[R, 1]`` result broadcasts back over the columns) and
``@``. Every sub-expression carries its tile type, so the text is well typed by construction.
"""

from dataclasses import dataclass

__all__ = ["Term", "random_expr", "INT_DTYPES"]

INT_DTYPES = ("int8", "int16", "int32")
_RANGE = {"int8": (-128, 127), "int16": (-32768, 32767), "int32": (-2**31, 2**31 - 1)}


@dataclass(frozen=True)
class Term:
    """A typed piece of source: ``text`` computes a ``[rows, cols]`` tile of ``dtype``."""
    text: str
    dtype: str
    rows: object
    cols: object

    def same_type(self, other):
        return (self.dtype, self.rows, self.cols) == (other.dtype, other.rows, other.cols)


def _const(rng, dtype):
    lo, hi = _RANGE[dtype]
    return int(rng.integers(max(lo, -5), min(hi, 5) + 1))


def _broadcast(a, b):
    """The shape of ``a op b`` (size-1 sides broadcast), or None."""
    out = []
    for x, y in ((a.rows, b.rows), (a.cols, b.cols)):
        if x == y:
            out.append(x)
        elif x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        else:
            return None
    return tuple(out)


def _step(rng, t, args, *, static_rows, allow_cast):
    """``t`` with one more random primitive applied."""
    partners = [a for a in args if a.dtype == t.dtype and _broadcast(t, a) is not None]
    choice = rng.choice(["binary", "const", "scale", "unary", "row", "cast"],
                        p=[0.35, 0.2, 0.1, 0.13, 0.12, 0.1])
    if choice == "binary" and partners:
        other = partners[int(rng.integers(len(partners)))]
        rows, cols = _broadcast(t, other)
        op = rng.choice(["+", "-", "*", "/", "max"], p=[0.3, 0.25, 0.2, 0.1, 0.15])
        if op == "max":
            text = f"maximum({t.text}, {other.text})"
        else:
            text = f"({t.text} {op} {other.text})"
        return Term(text, t.dtype, rows, cols)
    if choice == "unary" and t.dtype in ("int8", "int16"):
        fn = rng.choice(["exp", "silu", "rsqrt"])
        return Term(f"{fn}({t.text})", t.dtype, t.rows, t.cols)
    if choice == "row" and static_rows and t.cols != 1:
        fn = rng.choice(["row_sum", "row_max"])
        if rng.random() < 0.5:
            return Term(f"{fn}({t.text})", t.dtype, t.rows, 1)
        return Term(f"({t.text} - {fn}({t.text}))", t.dtype, t.rows, t.cols)
    if choice == "scale":
        return Term(f"scale({_const(rng, t.dtype)})({t.text})", t.dtype, t.rows, t.cols)
    if choice == "cast" and allow_cast:
        to = str(rng.choice([d for d in INT_DTYPES if d != t.dtype]))
        sat = ", saturate=True" if rng.random() < 0.3 else ""
        return Term(f"cast({to}{sat})({t.text})", to, t.rows, t.cols)
    op = rng.choice(["+", "-", "*", "max"])
    c = _const(rng, t.dtype)
    if op == "max":
        return Term(f"maximum({t.text}, {c})", t.dtype, t.rows, t.cols)
    return Term(f"({t.text} {op} {c})", t.dtype, t.rows, t.cols)


def random_expr(rng, args, *, steps=None, static_rows=True, allow_cast=True, start=None):
    """A random expression over the parameters ``args`` (a list of :class:`Term`).

    Parameters
    ----------
    rng : numpy.random.Generator
    args : list of Term
        The parameters (``Term("a", "int16", 2, 2)``); the expression starts from ``start`` or
        the first one and may combine the others where their types allow.
    steps : int, optional
        Primitives to apply (default 1-3).
    static_rows : bool
        Whether row reductions are allowed (not on tiles with a dynamic row count).
    allow_cast : bool
        Whether the result may change dtype.
    """
    t = start or args[0]
    n = int(rng.integers(1, 4)) if steps is None else steps
    for _ in range(n):
        t = _step(rng, t, args, static_rows=static_rows, allow_cast=allow_cast)
    return t
