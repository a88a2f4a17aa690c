"""An elementwise chain ``Y = max(A * B + A, C) - 3 * B`` over int16 tiles, wrapping on overflow.

Three tensors stream in once, one tensor streams out; every operator is a Map, so the program is
a pure stream with no reuse: its roofline is the off-chip traffic.
"""

import numpy as np

from stepforge import (LinearOffChipLoad, LinearOffChipStore, Map, Program, int16, maximum, scale)


def program(M=64, N=64, t=4):
    p = Program("elementwise")
    A, B, C = (p.tensor(name, (M, N), int16) for name in ("A", "B", "C"))
    Y = p.tensor("Y", (M, N), int16, role="output")
    walk = dict(out_shape=(M // t, N // t), stride=(N // t, 1))
    a, b, c = (LinearOffChipLoad(T, (t, t), **walk) for T in (A, B, C))
    fma = Map(lambda u, v: u * v + u, a, b)
    y = Map(lambda f, w, v: maximum(f, w) - scale(3)(v), fma, c, b)
    LinearOffChipStore(y, Y)
    return p


def data(program, seed=0):
    rng = np.random.default_rng(seed)
    return {"tensors": {name: rng.integers(-2**15, 2**15, program.tensors[name].shape, dtype=np.int16)
                        for name in ("A", "B", "C")}}


def reference(program, tensors, inputs):
    a, b, c = (tensors[k].astype(np.int64) for k in ("A", "B", "C"))
    wrap = lambda v: ((v + 2**15) % 2**16 - 2**15)  # noqa: E731 (int16 two's complement)
    return {"Y": wrap(np.maximum(wrap(a * b + a), c) - wrap(3 * b)).astype(np.int16)}
