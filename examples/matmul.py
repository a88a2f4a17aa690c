"""Tiled matrix multiply ``Y = X @ W`` (the paper's tiled-matmul walk, notes section 5.3).

X is read once per output column tile and W once per output row tile (stride 0 re-reads); a
Zip+Map+Accum reduces over the K tiles.
"""

import numpy as np

from stepforge import (Accum, LinearOffChipLoad, LinearOffChipStore, Program, Tile, int8, int32,
                       matmul)


def program(M=64, K=64, N=64, t=4):
    p = Program("matmul")
    X = p.tensor("X", (M, K), int8)
    W = p.tensor("W", (K, N), int8)
    Y = p.tensor("Y", (M, N), int32, role="output")
    m, k, n = M // t, K // t, N // t
    x = LinearOffChipLoad(X, (t, t), out_shape=(m, n, k), stride=(k, 0, 1))
    w = LinearOffChipLoad(W, (t, t), out_shape=(m, n, k), stride=(0, 1, n))
    y = Accum(lambda acc, a, b: acc + matmul(a, b), Tile(int32, t, t), x, w, b=1)
    LinearOffChipStore(y, Y)
    return p


def data(program, seed=0):
    rng = np.random.default_rng(seed)
    X, W = program.tensors["X"], program.tensors["W"]
    return {"tensors": {"X": rng.integers(-128, 128, X.shape, dtype=np.int8),
                        "W": rng.integers(-128, 128, W.shape, dtype=np.int8)}}


def reference(program, tensors, inputs):
    return {"Y": tensors["X"].astype(np.int32) @ tensors["W"].astype(np.int32)}
