"""Matrix-vector product ``y = x @ W`` for a batch of one: every weight tile is read once.

``x_reuse="onchip"`` (the default, the STeP way): the vector's ``k = K/t`` tiles are read from
off-chip memory once, kept in on-chip memory (Bufferize, one buffer of ``k`` tiles) and replayed
once per output column tile (Streamify, ``repeat=n``). ``x_reuse="offchip"``: the vector is
re-read from off-chip memory once per output column tile (a stride-0 walk), ``n`` times in all.
Either way W is read once and a Zip+Map+Accum reduces over the K tiles; off-chip reads are
``K*N + K`` bytes on chip, ``K*N + n*K`` off chip. Memory-bound: its roofline is the weight
traffic.
"""

import numpy as np

from stepforge import (Accum, Bufferize, LinearOffChipLoad, LinearOffChipStore, Program, Streamify,
                       Tile, int8, int32, matmul)


def program(K=256, N=256, t=4, x_reuse="onchip"):
    p = Program("gemv")
    X = p.tensor("X", (1, K), int8)
    W = p.tensor("W", (K, N), int8)
    Y = p.tensor("Y", (1, N), int32, role="output")
    k, n = K // t, N // t
    if x_reuse == "onchip":
        xb = Bufferize(LinearOffChipLoad(X, (1, t), out_shape=(k,), stride=(1,)), 1)  # [1] of Buffer[k]
        x = Streamify(xb, repeat=n)                                                     # [1, n, k]
    elif x_reuse == "offchip":
        x = LinearOffChipLoad(X, (1, t), out_shape=(n, k), stride=(0, 1))             # [1, n, k]
    else:
        raise ValueError(f"x_reuse must be 'onchip' or 'offchip', not {x_reuse!r}")
    w = LinearOffChipLoad(W, (t, t), out_shape=(n, k), stride=(1, n))                  # [1, n, k]
    y = Accum(lambda acc, a, b: acc + matmul(a, b), Tile(int32, 1, t), x, w, b=1)     # [1, n]
    LinearOffChipStore(y, Y)
    return p


def data(program, seed=0):
    rng = np.random.default_rng(seed)
    return {"tensors": {name: rng.integers(-128, 128, program.tensors[name].shape, dtype=np.int8)
                        for name in ("X", "W")}}


def reference(program, tensors, inputs):
    return {"Y": tensors["X"].astype(np.int32) @ tensors["W"].astype(np.int32)}
