"""A SwiGLU expert ``Y = (silu(X @ Wg) * (X @ Wu)) @ Wd`` (the paper's HDL-validation workload).

Sizes default to the paper's sweep point: batch 64, hidden 256, intermediate 512, 16x16 tiles.
The gate and up projections share one walk over X; their product is buffered one row of tiles at
a time (Bufferize, rank 1) and replayed once per output column tile (Streamify) for the down
projection.
"""

import numpy as np

from stepforge import (Accum, Bufferize, LinearOffChipLoad, LinearOffChipStore, Map, Program,
                       Streamify, Tile, fp32, matmul, silu)


def program(B=64, H=256, I=512, t=16):
    p = Program("swiglu")
    X = p.tensor("X", (B, H), fp32)
    Wg = p.tensor("Wg", (H, I), fp32)
    Wu = p.tensor("Wu", (H, I), fp32)
    Wd = p.tensor("Wd", (I, H), fp32)
    Y = p.tensor("Y", (B, H), fp32, role="output")
    b, h, i = B // t, H // t, I // t
    tile = (t, t)
    mac = lambda acc, a, w: acc + matmul(a, w)  # noqa: E731
    acc = Tile(fp32, t, t)

    x = LinearOffChipLoad(X, tile, out_shape=(b, i, h), stride=(h, 0, 1))
    gate = Accum(mac, acc, x, LinearOffChipLoad(Wg, tile, out_shape=(b, i, h), stride=(0, 1, i)), b=1)
    up = Accum(mac, acc, x, LinearOffChipLoad(Wu, tile, out_shape=(b, i, h), stride=(0, 1, i)), b=1)
    act = Map(lambda g, u: silu(g) * u, gate, up)                  # [1, b, i] of t x t
    rows = Bufferize(act, 1)                                         # [1, b] of Buffer[i]
    act_rep = Streamify(rows, repeat=h)                              # [1, b, h, i]
    wd = LinearOffChipLoad(Wd, tile, out_shape=(b, h, i), stride=(0, 1, h))
    y = Accum(mac, acc, act_rep, wd, b=1)                            # [1, b, h]
    LinearOffChipStore(y, Y)
    return p


def data(program, seed=0):
    rng = np.random.default_rng(seed)
    return {"tensors": {name: (rng.standard_normal(program.tensors[name].shape) * scale).astype(np.float32)
                        for name, scale in (("X", 1.0), ("Wg", 0.1), ("Wu", 0.1), ("Wd", 0.1))}}


def reference(program, tensors, inputs):
    x, wg, wu, wd = (tensors[k].astype(np.float64) for k in ("X", "Wg", "Wu", "Wd"))
    g = x @ wg
    return {"Y": ((g / (1 + np.exp(-g))) * (x @ wu)) @ wd}
