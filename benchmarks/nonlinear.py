"""Accuracy of the fixed-point exp, silu and rsqrt against float64 over the whole int8/int16 domain.

For every raw input ``x`` of the dtype, the fixed-point result (``contract/fixedpoint.py``, the
hardware's bits) is compared with the exact value ``f(x / 2**F) * 2**F`` clamped to the dtype's
range (the best any Q-format result can do is to round that). Errors are in output LSBs
(``2**-F``); ``ideal`` is the error of correctly rounding the exact value, ``exact`` counts the
inputs where the approximation equals that correctly rounded result. ``rsqrt`` is measured on
``x > 0`` (``x <= 0`` gives ``MAX`` by definition). Run: ``python benchmarks/nonlinear.py``.
"""

import argparse

import numpy as np

from stepforge.compiler.types import int8, int16
from stepforge.contract import fixedpoint as FP

__all__ = ["REFERENCE", "measure", "main"]

REFERENCE = {
    "exp": np.exp,
    "silu": lambda v: v / (1.0 + np.exp(-v)),
    "rsqrt": lambda v: 1.0 / np.sqrt(v),
}


def measure(name, dtype):
    """Error statistics of the fixed-point ``name`` on every ``dtype`` input.

    Returns
    -------
    dict
        ``max``, ``mean`` (abs error in LSBs), ``worst_x`` (the raw input of the largest
        error), ``ideal_max`` (error of correct rounding), ``exact`` and ``inputs`` (counts).
    """
    x = np.arange(dtype.min, dtype.max + 1, dtype=np.int64)
    if name == "rsqrt":
        x = x[x > 0]
    scale = float(1 << FP.FRAC_BITS[dtype])
    got = FP.evaluate_q(name, x, dtype).astype(np.float64)
    with np.errstate(over="ignore"):
        want = np.clip(REFERENCE[name](x / scale) * scale, dtype.min, dtype.max)
    err = np.abs(got - want)
    rounded = np.clip(np.floor(want + 0.5), dtype.min, dtype.max)
    return {
        "max": float(err.max()),
        "mean": float(err.mean()),
        "worst_x": int(x[np.argmax(err)]),
        "ideal_max": float(np.abs(rounded - want).max()),
        "exact": int((got == rounded).sum()),
        "inputs": int(x.size),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.parse_args()
    print(f"{'dtype':6} {'fn':6} {'format':6} {'segments':>8} {'max LSB':>8} {'mean LSB':>9} "
          f"{'max (real)':>11} {'ideal max':>9} {'exact':>15} worst x")
    for dtype in (int8, int16):
        f = FP.FRAC_BITS[dtype]
        for name in FP.NAMES:
            s = FP.spec(name, dtype)
            segs = (1 << s.index_bits) * (2 if name == "rsqrt" else 1)
            r = measure(name, dtype)
            print(f"{dtype.name:6} {name:6} Q{dtype.bits - f}.{f:<4} {segs:8d} {r['max']:8.3f} "
                  f"{r['mean']:9.4f} {r['max'] / (1 << f):11.2e} {r['ideal_max']:9.3f} "
                  f"{r['exact']:7d}/{r['inputs']:<7d} {r['worst_x']} ({r['worst_x'] / (1 << f):g})")


if __name__ == "__main__":
    main()
