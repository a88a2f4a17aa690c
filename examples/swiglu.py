"""A SwiGLU expert ``Y = (silu(X @ Wg) * (X @ Wu)) @ Wd`` (the paper's HDL-validation workload).

Sizes default to the paper's sweep point: batch 64, hidden 256, intermediate 512, in tiles of
the simulation machine (4 x 4). The gate and up projections share one walk over X; their product
is buffered one row of tiles at a time (Bufferize, rank 1) and replayed once per output column
tile (Streamify) for the down projection.

``dtype="int"`` (the default, what the hardware runs): int8 activations and weights, int32 sums
(wrapping), ``silu`` in Q8.8 fixed point on int16 (``docs/arithmetic.md`` section 7), the gated
product wrapping in int16, int16 down weights and int32 outputs. ``dtype="fp32"``: the same
program in float32, compared against float64 NumPy within rounding.
"""

import numpy as np

from stepforge import (Accum, Bufferize, LinearOffChipLoad, LinearOffChipStore, Map, Program,
                       Streamify, Tile, cast, fp32, int8, int16, int32, matmul, silu)


def program(B=64, H=256, I=512, t=4, dtype="int"):
    p = Program("swiglu")
    xt, wt, dt, yt, acc_t = ((int8, int8, int16, int32, int32) if dtype == "int"
                             else (fp32, fp32, fp32, fp32, fp32))
    X = p.tensor("X", (B, H), xt)
    Wg = p.tensor("Wg", (H, I), wt)
    Wu = p.tensor("Wu", (H, I), wt)
    Wd = p.tensor("Wd", (I, H), dt)
    Y = p.tensor("Y", (B, H), yt, role="output")
    b, h, i = B // t, H // t, I // t
    tile = (t, t)
    mac = lambda acc, a, w: acc + matmul(a, w)  # noqa: E731
    acc = Tile(acc_t, t, t)

    x = LinearOffChipLoad(X, tile, out_shape=(b, i, h), stride=(h, 0, 1))
    gate = Accum(mac, acc, x, LinearOffChipLoad(Wg, tile, out_shape=(b, i, h), stride=(0, 1, i)), b=1)
    up = Accum(mac, acc, x, LinearOffChipLoad(Wu, tile, out_shape=(b, i, h), stride=(0, 1, i)), b=1)
    if dtype == "int":
        act = Map(lambda g, u: silu(cast(int16)(g)) * cast(int16)(u), gate, up)
    else:
        act = Map(lambda g, u: silu(g) * u, gate, up)                # [1, b, i] of t x t
    rows = Bufferize(act, 1)                                          # [1, b] of Buffer[i]
    act_rep = Streamify(rows, repeat=h)                               # [1, b, h, i]
    wd = LinearOffChipLoad(Wd, tile, out_shape=(b, h, i), stride=(0, 1, h))
    y = Accum(mac, acc, act_rep, wd, b=1)                             # [1, b, h]
    LinearOffChipStore(y, Y)
    return p


def data(program, seed=0):
    rng = np.random.default_rng(seed)
    t = program.tensors
    if t["X"].dtype.is_float:
        return {"tensors": {name: (rng.standard_normal(t[name].shape) * scale).astype(np.float32)
                            for name, scale in (("X", 1.0), ("Wg", 0.1), ("Wu", 0.1), ("Wd", 0.1))}}
    return {"tensors": {"X": rng.integers(-2, 3, t["X"].shape, dtype=np.int8),
                        "Wg": rng.integers(-2, 3, t["Wg"].shape, dtype=np.int8),
                        "Wu": rng.integers(-2, 3, t["Wu"].shape, dtype=np.int8),
                        "Wd": rng.integers(-4, 5, t["Wd"].shape, dtype=np.int16)}}


def _wrap(v, bits):
    return (v + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))


def reference(program, tensors, inputs):
    if program.tensors["X"].dtype.is_float:
        x, wg, wu, wd = (tensors[k].astype(np.float64) for k in ("X", "Wg", "Wu", "Wd"))
        g = x @ wg
        return {"Y": ((g / (1 + np.exp(-g))) * (x @ wu)) @ wd}
    from stepforge.contract.fixedpoint import evaluate_q
    x, wg, wu, wd = (tensors[k].astype(np.int64) for k in ("X", "Wg", "Wu", "Wd"))
    g = _wrap(_wrap(x @ wg, 32), 16).astype(np.int16)
    u = _wrap(_wrap(x @ wu, 32), 16)
    act = _wrap(evaluate_q("silu", g, int16).astype(np.int64) * u, 16)
    return {"Y": _wrap(act @ wd, 32).astype(np.int32)}
