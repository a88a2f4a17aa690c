"""The paper's simplified mixture of experts (ASPLOS'26 Fig. 6/7, Listing 1), with dynamic tiling.

Each of ``T`` tokens (a ``[1, D]`` row) is routed to ``k`` of ``E`` experts by a multi-hot
selector; every expert is one matmul with a ``[D, N]`` weight. Partition sends each token to its
experts; with **dynamic tiling** (the default) each expert packs all of its tokens into one tile
of ``D_e`` rows (Promote + Accum RetileRow: ``D_e`` is data-dependent), loads its weight once per
packed tile (a reference-driven LinearOffChipLoad: an expert that receives no token loads
nothing), multiplies, packs the column tiles back into rows and unpacks them (RetileStreamify).
Reassemble gathers each token's expert outputs in token order and an Accum sums them. With
``tiling="static"`` tokens are packed into padded tiles of ``rows`` (Reshape + RetileRow) and the
padded rows are filtered after the matmul, as in the paper's Listing 1.
"""

import numpy as np

from stepforge import (Accum, Filter, Flatten, LinearOffChipLoad, LinearOffChipStore, Map,
                       Partition, Program, Promote, Reassemble, RepeatStatic, Reshape,
                       RetileStreamify, Select, Tile, fp32, matmul, retile_col, retile_row)


def program(T=10, D=64, N=256, E=2, k=1, n=64, tiling="dynamic", rows=4):
    p = Program("moe")
    X = p.tensor("X", (T, D), fp32)
    Ws = [p.tensor(f"W{e}", (D, N), fp32) for e in range(E)]
    Y = p.tensor("Y", (T, N), fp32, role="output")
    sel = p.input("sel", [1, T], Select(E))                   # which experts each token visits
    x = LinearOffChipLoad(X, (1, D), out_shape=(T,), stride=(1,))   # [1, T] of [1, D]
    routed = Partition(x, sel, E, 0)                           # E streams [D_e] of [1, D]
    outs = []
    for e in range(E):
        tokens = routed[e]
        if tiling == "dynamic":
            packed = Accum(retile_row, None, Promote(tokens), b=1)      # [1 if D_e > 0] of [D_e, D]
        else:
            padded = Reshape(tokens, rows, 0, pad=0.0, flags=True)      # [ceil(D_e/rows), rows]
            packed = Accum(retile_row, None, padded[0], b=1)            # of [rows, D]
        w = LinearOffChipLoad(Ws[e], (D, n), out_shape=(N // n,), stride=(1,), ref=packed)
        prod = Map(matmul, RepeatStatic(packed, N // n), w)           # [.., N/n] of [D_e, n]
        wide = Accum(retile_col, None, prod, b=1)                       # [..] of [D_e, N]
        if tiling == "dynamic":
            outs.append(RetileStreamify(wide, "row"))                   # [D_e] of [1, N]
        else:
            split = RetileStreamify(wide, "row", b=1)                   # [C_e, rows] of [1, N]
            kept = Filter(split, padded[1], keep=False)                 # padded rows dropped
            outs.append(Flatten(kept, 0, 1))                            # [D_e] of [1, N]
    gathered = Reassemble(outs, sel, 0)                          # [1, T, D_sel] of [1, N]
    y = Accum(lambda acc, r: acc + r, Tile(fp32, 1, N), gathered, b=1)   # [1, T]
    LinearOffChipStore(y, Y)
    return p


def data(program, seed=0, k=None):
    rng = np.random.default_rng(seed)
    T, D = program.tensors["X"].shape
    E = sum(1 for name in program.tensors if name.startswith("W"))
    k = k or 1
    sel = []
    for _ in range(T):
        experts = rng.choice(E, size=k, replace=False)
        sel.append(sum(1 << int(e) for e in experts))
    tensors = {"X": rng.standard_normal((T, D)).astype(np.float32)}
    for e in range(E):
        tensors[f"W{e}"] = (rng.standard_normal(program.tensors[f"W{e}"].shape) * 0.1).astype(np.float32)
    return {"tensors": tensors, "inputs": {"sel": [sel]}}


def reference(program, tensors, inputs):
    x = tensors["X"].astype(np.float64)
    sel = inputs["sel"][0]
    y = np.zeros((x.shape[0], program.tensors["Y"].shape[1]))
    for t, mask in enumerate(sel):
        for e in range(mask.bit_length()):
            if mask >> e & 1:
                y[t] += x[t] @ tensors[f"W{e}"].astype(np.float64)
    return {"Y": y}
