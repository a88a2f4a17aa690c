"""Fixed-point ``exp``, ``silu`` and ``rsqrt`` on integer tiles: the hardware contract.

On an ``int8`` or ``int16`` tile the nonlinear primitives read every element as a two's
complement fixed-point number with :data:`FRAC_BITS` fraction bits (``int8``: Q4.4, ``int16``:
Q8.8) and return the same format, saturated to the dtype's range. ``int32`` (and any other
integer width) has no fixed-point form: cast to ``int16`` first.

Every function is a table-driven piecewise-linear (PWL) approximation evaluated with integer
operations only (multiplications, additions, shifts with floor, comparisons, a leading-one
position). The tables and every constant come from :func:`spec`, which both this module and the
hardware (:mod:`stepforge.hdl.tile_ops`) call, so the two compute identical bits by construction.
The sequences, in terms of the :class:`QSpec` fields (``B`` = bits, ``F`` = fraction bits):

``exp``
    ``t = x * L`` (``L = round(log2(e) * 2**LB)``), ``n = t >> (F + LB)`` (floor),
    ``r = t - (n << (F + LB))``; segment ``j = r >> (F + LB - K)``, fraction
    ``f = (r >> (F + LB - K - FB)) mod 2**FB``; ``y = pwl(j, f, FB)`` (``2**r`` scaled by
    ``2**P``). If ``n >= B - 1 - F`` the result saturates to ``MAX``; if ``n < -F - 2`` it is 0;
    else it is ``round_shift(y, P - F - n)``.
``silu``
    ``a = |x|``; if ``a >= 2**(S + K)`` then ``g = a``, else ``g = round_shift(pwl(a >> S,
    a mod 2**S, S), G)`` (the table holds ``silu`` on ``[0, 2**(S+K-F))`` scaled by
    ``2**(F+G)``); the result is ``g`` for ``x >= 0`` and ``g - a`` for ``x < 0`` (``silu(-a) =
    silu(a) - a``).
``rsqrt``
    ``x <= 0`` gives ``MAX``. Else ``e`` = the position of the leading one of ``x``,
    ``h = e mod 2``, ``u = x << (B - 2 - e)`` (leading one at bit ``B - 2``), segment
    ``j = h * (2**K + 1) + ((u >> (B - 2 - K)) mod 2**K)``, fraction ``f = u mod 2**(B-2-K)``,
    ``y = pwl(j, f, B - 2 - K)`` (``(1 + i / 2**K) ** -0.5 * 2 ** (-h / 2)`` scaled by ``2**P``);
    the result is ``round_shift(y, P - F + (e - h - F) / 2)``.

with ``pwl(j, f, w) = T[j] + (((T[j+1] - T[j]) * f) >> w)`` and
``round_shift(v, s) = ((v >> (s - 1)) + 1) >> 1`` (round half up, ``s >= 1``); every ``>>`` is
an arithmetic shift (floor). Finally the result is clamped to ``[MIN, MAX]``.

Tables are generated in 60-digit decimal arithmetic and rounded half-to-even, so they do not
depend on the host's ``libm``. Accuracy against float64 over the whole domain is measured by
``benchmarks/nonlinear.py`` and listed in ``docs/arithmetic.md``.
"""

import decimal
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ..compiler.types import DType, int8, int16

__all__ = ["FRAC_BITS", "NAMES", "QSpec", "spec", "table", "evaluate_q", "unclamped_range",
           "to_real", "from_real", "supports"]

#: Fraction bits of the fixed-point format of each integer dtype that has one.
FRAC_BITS = {int8: 4, int16: 8}

#: The nonlinear primitives with a fixed-point form.
NAMES = ("exp", "silu", "rsqrt")

# Per dtype bit width: the design parameters of each approximation (see QSpec).
_PARAMS = {
    ("exp", 8): dict(K=4, FB=7, P=10, LB=12),
    ("exp", 16): dict(K=6, FB=11, P=18, LB=20),
    ("silu", 8): dict(K=5, S=2, G=4),
    ("silu", 16): dict(K=7, S=5, G=4),
    ("rsqrt", 8): dict(K=3, P=10),
    ("rsqrt", 16): dict(K=5, P=18),
}


class QSpec(NamedTuple):
    """Everything that defines one fixed-point approximation (module doc for the sequences).

    Attributes
    ----------
    name : str
        ``"exp"``, ``"silu"`` or ``"rsqrt"``.
    bits, frac_bits : int
        ``B`` and ``F``: the dtype's width and its fraction bits.
    index_bits : int
        ``K``: a table half holds ``2**K`` segments (``2**K + 1`` breakpoints).
    table : tuple of int
        The breakpoints ``T`` (``rsqrt``: two halves, for even and odd exponents).
    frac_width : int
        Bits of the in-segment fraction ``f`` (``FB`` for exp, ``S`` for silu, ``B - 2 - K``
        for rsqrt).
    precision : int
        ``P`` (exp, rsqrt): the table's scale ``2**P``; ``G`` (silu): its guard bits.
    log2e : int
        exp only: ``L = round(log2(e) * 2**LB)``.
    log2e_bits : int
        exp only: ``LB``.
    """
    name: str
    bits: int
    frac_bits: int
    index_bits: int
    table: tuple
    frac_width: int
    precision: int
    log2e: int = 0
    log2e_bits: int = 0

    @property
    def min(self):
        return -(1 << (self.bits - 1))

    @property
    def max(self):
        return (1 << (self.bits - 1)) - 1


def supports(dtype):
    """Whether ``dtype`` has a fixed-point form of the nonlinear primitives."""
    return dtype in FRAC_BITS


def _check(name, dtype):
    if name not in NAMES:
        raise ValueError(f"no fixed-point form of {name!r} (only {', '.join(NAMES)})")
    if not isinstance(dtype, DType) or dtype not in FRAC_BITS:
        raise ValueError(f"{name} has a fixed-point form on int8 (Q4.4) and int16 (Q8.8) tiles, "
                         f"not {dtype!r}")


def _ctx():
    return decimal.Context(prec=60, rounding=decimal.ROUND_HALF_EVEN)


def _rint(v):
    """A Decimal rounded half-to-even to a Python int."""
    return int(v.to_integral_value(rounding=decimal.ROUND_HALF_EVEN))


@lru_cache(maxsize=None)
def spec(name, dtype):
    """The :class:`QSpec` of the fixed-point ``name`` on ``dtype`` tiles.

    Parameters
    ----------
    name : str
        ``"exp"``, ``"silu"`` or ``"rsqrt"``.
    dtype : stepforge.compiler.types.DType
        ``int8`` or ``int16``.

    Raises
    ------
    ValueError
        Another primitive or dtype.
    """
    _check(name, dtype)
    B, F = dtype.bits, FRAC_BITS[dtype]
    p = _PARAMS[name, B]
    K = p["K"]
    with decimal.localcontext(_ctx()):
        D = decimal.Decimal
        if name == "exp":
            P = p["P"]
            tab = tuple(_rint((D(i) / (1 << K) * D(2).ln()).exp() * (1 << P)) for i in range((1 << K) + 1))
            L = _rint((1 / D(2).ln()) * (1 << p["LB"]))
            return QSpec(name, B, F, K, tab, p["FB"], P, L, p["LB"])
        if name == "silu":
            S, G = p["S"], p["G"]

            def silu(v):
                return v / (1 + (-v).exp())
            tab = tuple(_rint(silu(D(i << S) / (1 << F)) * (1 << (F + G))) for i in range((1 << K) + 1))
            return QSpec(name, B, F, K, tab, S, G)
        P = p["P"]
        tab = []
        for h in (0, 1):
            for i in range((1 << K) + 1):
                m = (1 + D(i) / (1 << K)) * (1 << h)
                tab.append(_rint((1 / m.sqrt()) * (1 << P)))
        return QSpec(name, B, F, K, tuple(tab), B - 2 - K, P)


def table(name, dtype):
    """``(index bits, breakpoint table)`` of the fixed-point ``name`` on ``dtype``.

    The table is a tuple of Python ints; segment ``j`` interpolates between ``T[j]`` and
    ``T[j + 1]`` (``rsqrt`` has two halves of ``2**K + 1`` entries, see the module doc).
    """
    s = spec(name, dtype)
    return s.index_bits, s.table


# -- evaluation on integers ----------------------------------------------------------------------

def _round_shift(v, s):
    """``floor(v / 2**s + 1/2)`` for ``s >= 1`` as ``((v >> (s - 1)) + 1) >> 1``."""
    return ((v >> (s - 1)) + 1) >> 1


def _pwl(t, j, f, w):
    lo, hi = t[j], t[j + 1]
    return lo + (((hi - lo) * f) >> w)


def _exp(s, x):
    B, F, K, FB, P, LB = s.bits, s.frac_bits, s.index_bits, s.frac_width, s.precision, s.log2e_bits
    sh_r = F + LB
    tv = x * s.log2e
    n = tv >> sh_r
    r = tv - (n << sh_r)
    j = r >> (sh_r - K)
    f = (r >> (sh_r - K - FB)) & ((1 << FB) - 1)
    y = _pwl(np.asarray(s.table, np.int64), j, f, FB)
    sh = np.clip(P - F - n, 1, P + 2)   # n < -F - 2 (sh > P + 2) gives 0 either way
    res = _round_shift(y, sh)
    res = np.where(n >= B - 1 - F, s.max, res)
    return np.where(n < -F - 2, 0, res)


def _silu(s, x):
    K, S, G = s.index_bits, s.frac_width, s.precision
    a = np.abs(x)
    inside = a < (1 << (S + K))
    ai = np.where(inside, a, 0)
    g = _round_shift(_pwl(np.asarray(s.table, np.int64), ai >> S, ai & ((1 << S) - 1), S), G)
    g = np.where(inside, g, a)
    return np.where(x < 0, g - a, g)


def _leading_one(x, width):
    """Position of the leading one of positive ``x`` (< ``2**width``), by comparisons."""
    e = np.zeros_like(x)
    for k in range(1, width):
        e = e + (x >= (1 << k))
    return e


def _rsqrt(s, x):
    B, F, K, W, P = s.bits, s.frac_bits, s.index_bits, s.frac_width, s.precision
    pos = x > 0
    xp = np.where(pos, x, 1)
    e = _leading_one(xp, B - 1)
    h = e & 1
    u = xp << (B - 2 - e)
    j = h * ((1 << K) + 1) + ((u >> W) & ((1 << K) - 1))
    f = u & ((1 << W) - 1)
    y = _pwl(np.asarray(s.table, np.int64), j, f, W)
    sh = P - F + ((e - h - F) >> 1)
    return np.where(pos, _round_shift(y, sh), s.max)


_EVAL = {"exp": _exp, "silu": _silu, "rsqrt": _rsqrt}


@lru_cache(maxsize=None)
def unclamped_range(name, dtype):
    """``(lowest, highest)`` value of ``name`` before the final clamp, over every input of
    ``dtype`` (evaluated exhaustively: 65,536 values for ``int16``).

    The hardware clamps only a side this range crosses: for every table today neither side is
    ever crossed, so a lane ends in its last adder or multiplexer instead of two comparisons
    behind it (``docs/arithmetic.md``).
    """
    s = spec(name, dtype)
    x = np.arange(s.min, s.max + 1, dtype=np.int64)
    r = _EVAL[name](s, x)
    return int(r.min()), int(r.max())


def evaluate_q(name, x_int, dtype):
    """The fixed-point ``name`` of the integer array ``x_int`` (values of ``dtype``).

    Parameters
    ----------
    name : str
        ``"exp"``, ``"silu"`` or ``"rsqrt"``.
    x_int : array_like of int
        Raw fixed-point values (``x_int / 2**FRAC_BITS[dtype]`` is the number), in the dtype's
        range.
    dtype : stepforge.compiler.types.DType
        ``int8`` or ``int16``.

    Returns
    -------
    numpy.ndarray
        Of ``dtype.np``, the shape of ``x_int``.
    """
    s = spec(name, dtype)
    x = np.asarray(x_int)
    x64 = x.astype(np.int64)
    if x64.size and (x64.min() < s.min or x64.max() > s.max):
        raise ValueError(f"{name}: values outside the {dtype!r} range")
    out = _EVAL[name](s, x64)
    return np.clip(out, s.min, s.max).astype(dtype.np).reshape(x.shape)


def to_real(x_int, dtype):
    """Raw fixed-point values as float64 numbers."""
    return np.asarray(x_int, np.float64) / (1 << FRAC_BITS[dtype])


def from_real(v, dtype):
    """Float numbers as the nearest raw fixed-point values of ``dtype`` (half to even,
    saturated)."""
    r = np.rint(np.asarray(v, np.float64) * (1 << FRAC_BITS[dtype]))
    return np.clip(r, dtype.min, dtype.max).astype(dtype.np)
