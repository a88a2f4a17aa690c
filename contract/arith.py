"""Bit-exact arithmetic of the tile functions: the numbers the hardware must reproduce.

The contract, in full in ``docs/arithmetic.md``:

* **fp32** operations are IEEE 754 binary32 with round-to-nearest-even, subnormals kept (no
  flush to zero). Every primitive rounds its result once per basic operation, in the order given
  here; nothing is fused (no FMA).
* **bf16** operands are widened exactly to fp32, the primitive runs in fp32 exactly as for fp32
  tiles, and its result is rounded once, to nearest-even, to bf16. Sums (matmul, mac, row_sum)
  therefore accumulate in fp32 and round once at the end.
* Every NaN result is the canonical quiet NaN (``0x7FC00000``; bf16 ``0x7FC0``).
* **Integers** wrap modulo ``2**bits`` (two's complement); division truncates toward zero,
  ``x / 0 = -1`` and ``MIN / -1 = MIN``.
* On int8/int16 tiles ``exp``, ``silu`` and ``rsqrt`` are fixed point (Q4.4 / Q8.8), computed by
  :func:`stepforge.contract.fixedpoint.evaluate_q` with integer operations only.
* Sums run in one running sum from ``+0`` in index order (``k`` for matmul, columns for
  row_sum); ``exp`` is a fixed sequence of fp32 operations (Cody-Waite reduction, a degree-5
  polynomial, scaling by ``2**n`` with one rounding); ``silu(x) = x / (1 + exp(-x))``;
  ``rsqrt(x) = 1 / sqrt(x)``.

Every function takes and returns 2-D NumPy arrays of the tile's dtype (bf16 as
``ml_dtypes.bfloat16``). :func:`evaluate` applies a
:class:`~stepforge.compiler.functions.TileFunction` to interpreter values.
"""

import ml_dtypes
import numpy as np

from ..compiler.functions import TileFunction
from ..compiler.types import DTYPES, Tile, Tuple, bf16
from . import fixedpoint

__all__ = [
    "ArithError", "dtype_of", "CANONICAL_NAN_FP32", "CANONICAL_NAN_BF16",
    "fp32_bits", "bf16_bits", "from_fp32_bits", "from_bf16_bits", "widen", "round_bf16",
    "add", "sub", "mul", "div", "maximum", "exp", "silu", "rsqrt", "row_sum", "row_max",
    "matmul", "mac", "cast", "retile_row", "retile_col", "constant", "exp_fp32",
    "init_value", "evaluate", "EXP_CONSTANTS",
]

CANONICAL_NAN_FP32 = 0x7FC00000
CANONICAL_NAN_BF16 = 0x7FC0

_NP_TO_DTYPE = {d.np: d for d in DTYPES.values()}


class ArithError(ValueError):
    """Operands that do not fit a primitive at run time (e.g. dynamic tile sizes that differ)."""


def dtype_of(x):
    """The :class:`~stepforge.compiler.types.DType` of an array."""
    try:
        return _NP_TO_DTYPE[np.asarray(x).dtype]
    except KeyError:
        raise ArithError(f"not a tile dtype: {np.asarray(x).dtype}") from None


# -- bit views and rounding ----------------------------------------------------------------------

def fp32_bits(x):
    """The binary32 bit patterns of an fp32 array, as ``uint32``."""
    return np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)


def bf16_bits(x):
    """The bit patterns of a bf16 array, as ``uint16``."""
    return np.ascontiguousarray(x, dtype=ml_dtypes.bfloat16).view(np.uint16)


def from_fp32_bits(bits):
    return np.ascontiguousarray(bits, dtype=np.uint32).view(np.float32)


def from_bf16_bits(bits):
    return np.ascontiguousarray(bits, dtype=np.uint16).view(ml_dtypes.bfloat16)


def widen(x):
    """A float tile as fp32 (exact: bf16 is the upper half of binary32)."""
    x = np.asarray(x)
    if x.dtype == np.float32:
        return x
    if x.dtype == ml_dtypes.bfloat16:
        return from_fp32_bits(bf16_bits(x).astype(np.uint32) << 16)
    raise ArithError(f"not a float tile: {x.dtype}")


def _canon32(r):
    r = np.asarray(r, dtype=np.float32)
    nan = np.isnan(r)
    if nan.any():
        r = np.where(nan, from_fp32_bits(np.uint32(CANONICAL_NAN_FP32)), r)
    return r


def round_bf16(x):
    """fp32 to bf16, round to nearest, ties to even; NaN becomes the canonical NaN.

    On the bits ``u`` of a non-NaN value: ``(u + 0x7FFF + ((u >> 16) & 1)) >> 16``.
    """
    u = fp32_bits(x).astype(np.uint32)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    r = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    r = np.where(nan, np.uint32(CANONICAL_NAN_BF16), r).astype(np.uint16)
    return from_bf16_bits(r)


def _finish(r32, dtype):
    """An fp32 result as a value of the float ``dtype``: canonical NaN, one rounding for bf16."""
    if dtype is bf16:
        return round_bf16(r32)
    return _canon32(r32)


def _wrap(x64, dtype):
    """An int64 result wrapped to the int ``dtype`` (two's complement, modulo ``2**bits``)."""
    return np.asarray(x64, dtype=np.int64).astype(dtype.np)


def _check_fp_env():
    tiny = np.float32(1.401298464324817e-45)  # the smallest subnormal
    with np.errstate(all="ignore"):
        if np.float32(tiny * np.float32(2)) == 0 or np.float32(tiny + np.float32(0)) == 0:
            raise RuntimeError("the floating-point unit flushes subnormals to zero (FTZ/DAZ is on); "
                               "the reference arithmetic needs IEEE subnormals")


_check_fp_env()


# -- elementwise ---------------------------------------------------------------------------------

def _same(a, b, op):
    da, db = dtype_of(a), dtype_of(b)
    if da is not db:
        raise ArithError(f"{op} needs operands of one dtype, got {da!r} and {db!r}")
    try:
        np.broadcast_shapes(np.shape(a), np.shape(b))
    except ValueError:
        raise ArithError(f"{op}: shapes {list(np.shape(a))} and {list(np.shape(b))} do not "
                         f"broadcast") from None
    return da


def _binary(a, b, op, ffloat, fint):
    dt = _same(a, b, op)
    with np.errstate(all="ignore"):
        if dt.is_float:
            return _finish(ffloat(widen(a), widen(b)), dt)
        return _wrap(fint(np.asarray(a, np.int64), np.asarray(b, np.int64)), dt)


def add(a, b):
    """``a + b`` (size-1 dimensions broadcast)."""
    return _binary(a, b, "add", np.add, np.add)


def sub(a, b):
    """``a - b``."""
    return _binary(a, b, "sub", np.subtract, np.subtract)


def mul(a, b):
    """``a * b``."""
    return _binary(a, b, "mul", np.multiply, np.multiply)


def _idiv(a, b):
    zero = b == 0
    bs = np.where(zero, 1, b)
    q = np.abs(a) // np.abs(bs)
    q = np.where((a < 0) ^ (bs < 0), -q, q)
    return np.where(zero, -1, q)


def div(a, b):
    """``a / b``; integers truncate toward zero, ``x / 0 = -1``, ``MIN / -1 = MIN``."""
    return _binary(a, b, "div", np.divide, _idiv)


def _order_key(x32):
    """Signed integers that order fp32 values like the reals, with ``-0 < +0``."""
    i = fp32_bits(x32).view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF) - 1, i)


def _fmax(a, b):
    r = np.where(_order_key(a) >= _order_key(b), a, b)
    return np.where(np.isnan(a) | np.isnan(b), np.float32(np.nan), r)


def maximum(a, b):
    """The larger of ``a`` and ``b``; ``max(-0, +0) = +0``; NaN if either is NaN."""
    dt = _same(a, b, "maximum")
    if dt.is_float:
        a32, b32 = np.broadcast_arrays(widen(a), widen(b))
        return _finish(_fmax(a32, b32), dt)
    return np.maximum(a, b).astype(dt.np)


# -- exp, silu, rsqrt ----------------------------------------------------------------------------

_F = np.float32
EXP_CONSTANTS = {
    # every constant is the binary32 value nearest to the decimal given (docs/arithmetic.md lists the bits)
    "LOG2E": _F(1.44269504088896341),
    "LN2_HI": _F(0.693359375),
    "LN2_LO": _F(-2.12194440e-4),
    "P0": _F(1.9875691500e-4),
    "P1": _F(1.3981999507e-3),
    "P2": _F(8.3334519073e-3),
    "P3": _F(4.1665795894e-2),
    "P4": _F(1.6666665459e-1),
    "P5": _F(5.0000001201e-1),
    "X_MIN": _F(-104.0),
    "X_MAX": _F(89.0),
}


def _pow2(n):
    """``2.0 ** n`` as fp32 for integer ``n`` in ``[-126, 127]`` (exact, built from bits)."""
    return from_fp32_bits(((n.astype(np.int64) + 127) << 23).astype(np.uint32))


def exp_fp32(x32):
    """``exp`` of an fp32 array by the contract's fixed sequence of fp32 operations.

    1. NaN stays NaN; ``x`` is clamped to ``[-104, 89]`` (beyond, the result is 0 or inf anyway).
    2. ``n = rint(x * LOG2E)``; ``r = (x - n * LN2_HI) - n * LN2_LO``.
    3. ``p = ((((P0 r + P1) r + P2) r + P3) r + P4) r + P5``; ``y = (p * r*r + r) + 1``.
    4. ``n1 = floor(n / 2)``, ``n2 = n - n1``; result ``(y * 2**n1) * 2**n2`` (the first product
       is exact, so the result is rounded once, subnormals included).

    Every step is one fp32 operation rounded to nearest-even.
    """
    c = EXP_CONSTANTS
    x32 = np.asarray(x32, dtype=np.float32)
    with np.errstate(all="ignore"):
        nan = np.isnan(x32)
        x = np.clip(np.where(nan, _F(0), x32), c["X_MIN"], c["X_MAX"]).astype(np.float32)
        n = np.rint(x * c["LOG2E"])
        r = (x - n * c["LN2_HI"]) - n * c["LN2_LO"]
        z = r * r
        p = c["P0"] * r + c["P1"]
        p = p * r + c["P2"]
        p = p * r + c["P3"]
        p = p * r + c["P4"]
        p = p * r + c["P5"]
        y = (p * z + r) + _F(1)
        ni = n.astype(np.int64)
        n1 = ni >> 1
        n2 = ni - n1
        out = (y * _pow2(n1)) * _pow2(n2)
        return np.where(nan, _F(np.nan), out).astype(np.float32)


def _float_unary(x, op):
    dt = dtype_of(x)
    if not dt.is_float:
        raise ArithError(f"{op} needs a float tile, got {dt!r} (fixed point exists for int8 and "
                         f"int16 only)")
    return dt, widen(x)


def _fixed_point(x, op):
    """The fixed-point result of ``op`` when ``x`` is an int8/int16 tile, else ``None``."""
    dt = dtype_of(x)
    if dt.is_float or not fixedpoint.supports(dt):
        return None
    return fixedpoint.evaluate_q(op, x, dt)


def exp(x):
    """``e ** x`` (see :func:`exp_fp32`); on int8/int16 tiles the fixed-point approximation of
    :mod:`stepforge.contract.fixedpoint` (Q4.4 / Q8.8)."""
    q = _fixed_point(x, "exp")
    if q is not None:
        return q
    dt, x32 = _float_unary(x, "exp")
    return _finish(exp_fp32(x32), dt)


def silu(x):
    """``x / (1 + exp(-x))``: three rounded fp32 steps after ``exp``; fixed point on int8/int16
    tiles."""
    q = _fixed_point(x, "silu")
    if q is not None:
        return q
    dt, x32 = _float_unary(x, "silu")
    with np.errstate(all="ignore"):
        e = exp_fp32(-x32)
        return _finish(x32 / (_F(1) + e), dt)


def rsqrt(x):
    """``1 / sqrt(x)``: a correctly rounded square root, then a correctly rounded division; fixed
    point on int8/int16 tiles (``x <= 0`` gives the dtype's maximum)."""
    q = _fixed_point(x, "rsqrt")
    if q is not None:
        return q
    dt, x32 = _float_unary(x, "rsqrt")
    with np.errstate(all="ignore"):
        return _finish(_F(1) / np.sqrt(x32), dt)


# -- reductions and matmul -----------------------------------------------------------------------

def _2d(x, op):
    x = np.asarray(x)
    if x.ndim != 2:
        raise ArithError(f"{op} needs a 2-D tile, got shape {list(x.shape)}")
    return x


def row_sum(x):
    """``[R, C] -> [R, 1]``: per row, ``((+0 + x0) + x1) + ...`` (fp32 for bf16, one rounding)."""
    x = _2d(x, "row_sum")
    dt = dtype_of(x)
    if not dt.is_float:
        return _wrap(np.asarray(x, np.int64).sum(axis=1, keepdims=True), dt)
    x32 = widen(x)
    acc = np.zeros((x.shape[0], 1), np.float32)
    with np.errstate(all="ignore"):
        for j in range(x.shape[1]):
            acc = acc + x32[:, j:j + 1]
    return _finish(acc, dt)


def row_max(x):
    """``[R, C] -> [R, 1]``: per row the largest element (``-inf``/``MIN`` when ``C = 0``)."""
    x = _2d(x, "row_max")
    dt = dtype_of(x)
    if not dt.is_float:
        if x.shape[1] == 0:
            return np.full((x.shape[0], 1), dt.min, dt.np)
        return x.max(axis=1, keepdims=True).astype(dt.np)
    acc = np.full((x.shape[0], 1), -np.inf, np.float32)
    x32 = widen(x)
    for j in range(x.shape[1]):
        acc = _fmax(acc, x32[:, j:j + 1])
    return _finish(acc, dt)


def _mm_operands(a, b, transpose_b, op):
    a, b = _2d(a, op), _2d(b, op)
    da, db = dtype_of(a), dtype_of(b)
    if da is not db:
        raise ArithError(f"{op} needs operands of one dtype, got {da!r} and {db!r}")
    if transpose_b:
        b = b.T
    if a.shape[1] != b.shape[0]:
        form = "a @ b.T" if transpose_b else "a @ b"
        raise ArithError(f"{op}: {form} with a of shape {list(a.shape)} and b of shape "
                         f"{list(b.T.shape if transpose_b else b.shape)}")
    return a, b, da


def _float_mac(acc32, a32, b32):
    with np.errstate(all="ignore"):
        for k in range(a32.shape[1]):
            acc32 = acc32 + a32[:, k:k + 1] * b32[k:k + 1, :]
    return acc32


def matmul(a, b, *, transpose_b=False, out=None):
    """``a @ b`` (or ``a @ b.T``) as a value of ``out`` (default: the operands' dtype for floats,
    ``int32`` for integers).

    Floats: ``c[i, j] = (((+0 + p0) + p1) + ...)`` with ``p_k = a[i, k] * b[k, j]``, every
    product and sum an fp32 operation; one rounding to ``out``. Integers: the exact sum of
    products wrapped to ``out``.
    """
    a, b, dt = _mm_operands(a, b, transpose_b, "matmul")
    out = out or (dt if dt.is_float else DTYPES["int32"])
    if out.is_float != dt.is_float:
        raise ArithError(f"matmul of {dt!r} tiles cannot produce {out!r}")
    if not dt.is_float:
        return _wrap(np.asarray(a, np.int64) @ np.asarray(b, np.int64), out)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    return _finish(_float_mac(acc, widen(a), widen(b)), out)


def mac(acc, a, b, *, transpose_b=False):
    """``acc + a @ b``: the products are added to ``acc`` one by one in ``k`` order."""
    a, b, dt = _mm_operands(a, b, transpose_b, "mac")
    acc = _2d(acc, "mac")
    out = dtype_of(acc)
    if acc.shape != (a.shape[0], b.shape[1]):
        raise ArithError(f"mac: accumulator of shape {list(acc.shape)} for a product of shape "
                         f"{[a.shape[0], b.shape[1]]}")
    if out.is_float != dt.is_float:
        raise ArithError(f"mac cannot accumulate {dt!r} products into {out!r}")
    if not dt.is_float:
        return _wrap(np.asarray(acc, np.int64) + np.asarray(a, np.int64) @ np.asarray(b, np.int64), out)
    return _finish(_float_mac(widen(acc).copy(), widen(a), widen(b)), out)


# -- conversions and retiling --------------------------------------------------------------------

def cast(x, dtype, *, saturate=False):
    """Convert ``x`` to ``dtype``.

    float -> float: via fp32, one rounding to bf16. float -> int: round to nearest-even,
    saturate to the range, NaN -> 0. int -> float: round to fp32 (nearest-even), then to bf16.
    int -> int: wrap, or clamp with ``saturate``.
    """
    x = np.asarray(x)
    src = dtype_of(x)
    with np.errstate(all="ignore"):
        if src.is_float and dtype.is_float:
            return _finish(widen(x), dtype)
        if src.is_float:
            r = np.rint(widen(x)).astype(np.float64)
            r = np.where(np.isnan(r), 0.0, np.clip(r, dtype.min, dtype.max))
            return r.astype(np.int64).astype(dtype.np)
        if dtype.is_float:
            return _finish(np.asarray(x, np.int64).astype(np.float32), dtype)
        x64 = np.asarray(x, np.int64)
        if saturate:
            x64 = np.clip(x64, dtype.min, dtype.max)
        return _wrap(x64, dtype)


def retile_row(acc, x):
    """Stack the rows of ``x`` under ``acc`` (one dtype, equal widths). An empty ``[0, 0]``
    accumulator (the start of a tile whose width is dynamic) takes ``x``'s width."""
    if np.shape(acc) == (0, 0) and dtype_of(acc) is dtype_of(x):
        return np.array(x, copy=True)
    if dtype_of(acc) is not dtype_of(x) or np.shape(acc)[1] != np.shape(x)[1]:
        raise ArithError(f"retile_row of {dtype_of(acc)!r} {list(np.shape(acc))} and "
                         f"{dtype_of(x)!r} {list(np.shape(x))}")
    return np.concatenate([acc, x], axis=0)


def retile_col(acc, x):
    """Append the columns of ``x`` to ``acc`` (one dtype, equal heights). An empty ``[0, 0]``
    accumulator (the start of a tile whose height is dynamic) takes ``x``'s height."""
    if np.shape(acc) == (0, 0) and dtype_of(acc) is dtype_of(x):
        return np.array(x, copy=True)
    if dtype_of(acc) is not dtype_of(x) or np.shape(acc)[0] != np.shape(x)[0]:
        raise ArithError(f"retile_col of {dtype_of(acc)!r} {list(np.shape(acc))} and "
                         f"{dtype_of(x)!r} {list(np.shape(x))}")
    return np.concatenate([acc, x], axis=1)


def constant(value, dtype):
    """A Python number as a ``[1, 1]`` tile of ``dtype``: rounded to fp32 (nearest-even), then
    to bf16; integers must be in range."""
    if dtype.is_float:
        with np.errstate(all="ignore"):
            return _finish(np.full((1, 1), value, np.float64).astype(np.float32), dtype)
    if int(value) != value or not dtype.min <= value <= dtype.max:
        raise ArithError(f"constant {value!r} is not an {dtype!r} value")
    return np.full((1, 1), int(value), dtype.np)


def init_value(init):
    """The interpreter value of an :class:`~stepforge.compiler.functions.Init`."""
    t = init.type
    if isinstance(t, Tuple):
        return tuple(init_value(f) for f in init.fill)
    if isinstance(t, Tile) and 0 in t.shape:
        # an empty retiling start: a dynamic other side is fixed by the first element
        return np.zeros(tuple(d if isinstance(d, int) else 0 for d in t.shape), t.dtype.np)
    if not isinstance(t, Tile) or not all(isinstance(d, int) for d in t.shape):
        raise ArithError(f"an initial value needs a static tile type, not {t!r}")
    return np.broadcast_to(constant(init.fill, t.dtype), (t.rows, t.cols)).copy()


# -- evaluation of tile functions ----------------------------------------------------------------

def _const_partner(v, other):
    return constant(v, dtype_of(other))


def _elementwise(fn):
    def run(e, args):
        a, b = args
        ca, cb = e.args[0].op == "const", e.args[1].op == "const"
        if ca:
            a = _const_partner(a, b)
        if cb:
            b = _const_partner(b, a)
        return fn(a, b)
    return run


_EVAL = {
    "add": _elementwise(add), "sub": _elementwise(sub), "mul": _elementwise(mul),
    "div": _elementwise(div), "maximum": _elementwise(maximum),
    "exp": lambda e, a: exp(a[0]), "silu": lambda e, a: silu(a[0]),
    "rsqrt": lambda e, a: rsqrt(a[0]),
    "row_sum": lambda e, a: row_sum(a[0]), "row_max": lambda e, a: row_max(a[0]),
    "matmul": lambda e, a: matmul(a[0], a[1], transpose_b=e.attrs["transpose_b"], out=e.attrs["out"]),
    "mac": lambda e, a: mac(a[0], a[1], a[2], transpose_b=e.attrs["transpose_b"]),
    "cast": lambda e, a: cast(a[0], e.attrs["dtype"], saturate=e.attrs["saturate"]),
    "retile_row": lambda e, a: retile_row(a[0], a[1]),
    "retile_col": lambda e, a: retile_col(a[0], a[1]),
    "get": lambda e, a: a[0][e.attrs["index"]],
    "tuple": lambda e, a: tuple(a),
}


def evaluate(fn, *args):
    """Apply the tile function ``fn`` to interpreter values (tiles, tuples of tiles)."""
    if not isinstance(fn, TileFunction):
        raise TypeError(f"evaluate() needs a TileFunction, not {fn!r}")
    if len(args) != fn.arity:
        raise ArithError(f"{fn.name} takes {fn.arity} arguments, got {len(args)}")
    vals = {}
    for e in fn.expressions():
        if e.op == "arg":
            vals[id(e)] = args[e.attrs["index"]]
        elif e.op == "const":
            vals[id(e)] = e.attrs["value"]
        else:
            vals[id(e)] = _EVAL[e.op](e, [vals[id(a)] for a in e.args])
    return vals[id(fn.body)]

