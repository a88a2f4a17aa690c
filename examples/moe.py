"""The paper's simplified mixture of experts (ASPLOS'26 Fig. 6/7, Listing 1), static or dynamic tiling.

Each of ``T`` tokens (a ``[1, D]`` row) is routed to ``k`` of ``E`` experts by a multi-hot
selector; every expert is one matmul with a ``[D, N]`` weight. Partition sends each token to its
experts; with **dynamic tiling** (the default) each expert packs all of its tokens into one tile
of ``D_e`` rows (Promote + Accum RetileRow: ``D_e`` is data-dependent, bounded by ``T``), loads its
weight once per packed tile (a reference-driven LinearOffChipLoad: an expert that receives no
token loads nothing), multiplies, packs the column tiles back into rows and unpacks them
(RetileStreamify). Reassemble gathers each token's expert outputs in token order and an Accum sums
them. With **static tiling** (``-p tiling=static``) tokens are packed into padded tiles of
``rows`` (Reshape + RetileRow) and the padded rows are filtered after the matmul (the Reshape's
padding flags), as in the paper's Listing 1. With **bounded dynamic tiling** (``-p
tiling=bounded``) an expert's tile closes when it holds ``rows`` tokens or at the end of the
batch, whichever comes first: the Reshape's padding is filtered out *before* packing, so the
last tile of each expert has a data-dependent row count (at most ``rows``) and nothing is
padded; the weight is read once per tile, ``ceil(D_e / rows)`` times. With ``rows >= T`` it
packs what ``dynamic`` packs, but the hardware is built for ``rows`` instead of ``T``, and an
expert starts multiplying as soon as ``rows`` of its tokens have arrived.

All three tilings run in hardware (``stepforge run examples/moe.py [-p tiling=static]``) on int16
tokens and weights with int32 sums. Dynamic tiling multiplies tiles whose row count is
data-dependent: the PCU is built for the bound ``T`` and spends ``ceil(D_e * D * n /
multipliers)`` cycles per weight tile, so it follows the actual tokens (``docs/compute.md``).
It reads each used expert's weight once (static tiling: once per padded tile), but an expert
multiplies only after all of its tokens have arrived, so it overlaps less: on
``traces/moe_skewed_t32_e4_top2.json`` it reads 1,536 instead of 4,864 bytes in 725 instead of
468 cycles: the tokens' arrival, the hot expert's matmul and the gather run one after the other
(``docs/paper.md``, "Why dynamic tiling is slower in RTL"); bounded tiles overlap them.
``-p dtype=fp32`` runs the float version in the reference interpreter against NumPy.
"""

import numpy as np

from stepforge import (Accum, Filter, Flatten, LinearOffChipLoad, LinearOffChipStore, Map,
                       Partition, Program, Promote, Reassemble, RepeatStatic, Reshape,
                       RetileStreamify, Select, Tile, fp32, int16, int32, matmul, retile_col,
                       retile_row)


def program(T=10, D=8, N=16, E=2, k=1, n=4, tiling="dynamic", rows=4, dtype="int"):
    p = Program("moe")
    xt, yt = (int16, int32) if dtype == "int" else (fp32, fp32)
    X = p.tensor("X", (T, D), xt)
    Ws = [p.tensor(f"W{e}", (D, N), xt) for e in range(E)]
    Y = p.tensor("Y", (T, N), yt, role="output")
    sel = p.input("sel", [1, T], Select(E))                   # which experts each token visits
    x = LinearOffChipLoad(X, (1, D), out_shape=(T,), stride=(1,))   # [1, T] of [1, D]
    routed = Partition(x, sel, E, 0)                           # E streams [D_e] of [1, D]
    outs = []
    for e in range(E):
        tokens = routed[e]
        if tiling == "dynamic":
            packed = Accum(retile_row, None, Promote(tokens), b=1)      # [1 if D_e > 0] of [D_e, D]
        elif tiling == "bounded":
            padded = Reshape(tokens, rows, 0, pad=0, flags=True)        # [ceil(D_e/rows), rows]
            kept = Filter(padded[0], padded[1], keep=False)             # the last chunk ragged
            packed = Accum(retile_row, None, kept, b=1)                 # of [<= rows, D]
        elif tiling == "static":
            padded = Reshape(tokens, rows, 0, pad=0, flags=True)        # [ceil(D_e/rows), rows]
            packed = Accum(retile_row, None, padded[0], b=1)            # of [rows, D]
        else:
            raise ValueError(f"moe: tiling must be 'dynamic', 'bounded' or 'static', not {tiling!r}")
        w = LinearOffChipLoad(Ws[e], (D, n), out_shape=(N // n,), stride=(1,), ref=packed)
        prod = Map(matmul, RepeatStatic(packed, N // n), w)           # [.., N/n] of [D_e, n]
        wide = Accum(retile_col, None, prod, b=1)                       # [..] of [D_e, N]
        if tiling == "dynamic":
            outs.append(RetileStreamify(wide, "row"))                   # [D_e] of [1, N]
        elif tiling == "bounded":
            outs.append(Flatten(RetileStreamify(wide, "row", b=1), 0, 1))   # [D_e] of [1, N]
        else:
            split = RetileStreamify(wide, "row", b=1)                   # [C_e, rows] of [1, N]
            kept = Filter(split, padded[1], keep=False)                 # padded rows dropped
            outs.append(Flatten(kept, 0, 1))                            # [D_e] of [1, N]
    gathered = Reassemble(outs, sel, 0)                          # [1, T, D_sel] of [1, N]
    y = Accum(lambda acc, r: acc + r, Tile(yt, 1, N), gathered, b=1)     # [1, T]
    LinearOffChipStore(y, Y)
    return p


def routing_masks(routing, T, E):
    """A trace's ``routing`` (the experts of each token) as the selector's multi-hot masks."""
    if not isinstance(routing, list) or len(routing) != T:
        raise SystemExit(f"moe: the trace's routing must list the experts of each of the {T} "
                         f"tokens, got {len(routing) if isinstance(routing, list) else routing!r}")
    masks = []
    for t, experts in enumerate(routing):
        if (not isinstance(experts, list) or not experts
                or not all(isinstance(e, int) and 0 <= e < E for e in experts)
                or len(set(experts)) != len(experts)):
            raise SystemExit(f"moe: token {t} of the trace is routed to {experts!r}; expected "
                             f"distinct expert ids in 0..{E - 1}")
        masks.append(sum(1 << e for e in experts))
    return masks


def data(program, seed=0, k=None, trace=None):
    """Random tokens and weights; routing from ``trace["routing"]`` if given, else ``k``
    distinct random experts per token."""
    rng = np.random.default_rng(seed)
    T, D = program.tensors["X"].shape
    E = sum(1 for name in program.tensors if name.startswith("W"))
    if trace is not None and "routing" in trace:
        sel = routing_masks(trace["routing"], T, E)
    else:
        k = k or 1
        sel = [sum(1 << int(e) for e in rng.choice(E, size=k, replace=False)) for _ in range(T)]
    if program.tensors["X"].dtype.is_float:
        tensors = {"X": rng.standard_normal((T, D)).astype(np.float32)}
        for e in range(E):
            tensors[f"W{e}"] = (rng.standard_normal(program.tensors[f"W{e}"].shape) * 0.1).astype(np.float32)
    else:
        tensors = {"X": rng.integers(-100, 100, (T, D), dtype=np.int16)}
        for e in range(E):
            tensors[f"W{e}"] = rng.integers(-100, 100, program.tensors[f"W{e}"].shape, dtype=np.int16)
    return {"tensors": tensors, "inputs": {"sel": [sel]}}


def reference(program, tensors, inputs):
    exact = not program.tensors["X"].dtype.is_float
    x = tensors["X"].astype(np.int64 if exact else np.float64)
    sel = inputs["sel"][0]
    y = np.zeros((x.shape[0], program.tensors["Y"].shape[1]), dtype=x.dtype)
    for t, mask in enumerate(sel):
        for e in range(mask.bit_length()):
            if mask >> e & 1:
                y[t] += x[t] @ tensors[f"W{e}"].astype(x.dtype)
    if exact:   # int32 sums wrap
        y = ((y + 2**31) % 2**32 - 2**31).astype(np.int32)
    return {"Y": y}
