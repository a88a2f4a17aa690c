"""Matrix-vector product ``y = x @ W`` for a batch of one: every weight tile is read once.

The vector is read once per output column tile (stride 0 re-reads it), W once in total; a
Zip+Map+Accum reduces over the K tiles. Memory-bound: its roofline is the weight traffic.
"""

import numpy as np

from stepforge import (Accum, LinearOffChipLoad, LinearOffChipStore, Program, Tile, int8, int32,
                       matmul)


def program(K=256, N=256, t=4):
    p = Program("gemv")
    X = p.tensor("X", (1, K), int8)
    W = p.tensor("W", (K, N), int8)
    Y = p.tensor("Y", (1, N), int32, role="output")
    k, n = K // t, N // t
    x = LinearOffChipLoad(X, (1, t), out_shape=(n, k), stride=(0, 1))
    w = LinearOffChipLoad(W, (t, t), out_shape=(n, k), stride=(1, n))
    y = Accum(lambda acc, a, b: acc + matmul(a, b), Tile(int32, 1, t), x, w, b=1)
    LinearOffChipStore(y, Y)
    return p


def data(program, seed=0):
    rng = np.random.default_rng(seed)
    return {"tensors": {name: rng.integers(-128, 128, program.tensors[name].shape, dtype=np.int8)
                        for name in ("X", "W")}}


def reference(program, tensors, inputs):
    return {"Y": tensors["X"].astype(np.int32) @ tensors["W"].astype(np.int32)}
