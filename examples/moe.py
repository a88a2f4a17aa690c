"""The paper's simplified mixture of experts (ASPLOS'26 Fig. 6/7, Listing 1): static, dynamic tiles,
and dynamic tiles as a ragged stream of hardware tiles over a weight held on chip.

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
expert starts multiplying as soon as ``rows`` of its tokens have arrived. With **stream tiling**
(``-p tiling=stream``, weight-stationary) an expert's tokens are packed as ``bounded`` packs them
(tiles of at most ``rows``, the last ragged, nothing padded), but its weight is read once per
expert, as ``dynamic`` reads it (none for an expert without tokens), held in a PMU and replayed
for each of its row tiles: the expert's tiles form one chunk (Promote) of a one-input
EagerMerge, whose selector beat leaves with the chunk's *first* tile and triggers the weight's
LinearOffChipLoad; Bufferize holds the ``N / n`` column tiles and Streamify replays them once per
row tile (the tiles are its reference; ``_stationary``). The weight's read starts at an
expert's first tile, not at the end of the batch, and no beat is wider than ``rows`` rows.
(An Accum over the tiles, the other way to get one element per active expert, would close
only at the end of the batch; the EagerMerge's selector has one element per active expert,
sent with its first tile, and shares the tiles' outer dimension, as Streamify's reference form
needs.) It does not combine with ``regions`` (``ValueError``).

All four tilings run in hardware (``stepforge run examples/moe.py [-p tiling=static]``) on int16
tokens and weights with int32 sums. Dynamic tiling multiplies tiles whose row count is
data-dependent: the PCU is built for the bound ``T`` and spends ``ceil(D_e * D * n /
multipliers)`` cycles per weight tile, so it follows the actual tokens (``docs/compute.md``).
It reads each used expert's weight once (static tiling: once per padded tile), but an expert
multiplies only after all of its tokens have arrived, so it overlaps less: on
``traces/moe_skewed_t32_e4_top2.json`` it reads 1,536 instead of 4,864 bytes in 725 instead of
468 cycles: the tokens' arrival, the hot expert's matmul and the gather run one after the other
(``docs/paper.md``, "Why dynamic tiling is slower in RTL"); bounded tiles overlap them.
``-p dtype=fp32`` runs the float version in the reference interpreter against NumPy.

**Configuration time-multiplexing** (``-p regions=R``, ``R`` dividing ``E``; the paper's
section 5.3, Fig. 11): the experts share ``R`` matmul regions, ``E / R`` consecutive experts
each. A region's EagerMerge takes its experts' packed tiles in whatever order they are ready;
its selector (which expert's tile arrived) drives an address generator and a RandomOffChipLoad
of that expert's weight column tiles out of one stacked ``[E * D, N]`` weight ``W``, one Map +
Accum multiplies, and the same selector routes the rows back to their expert (Partition) after
the padded rows are dropped (the padding flags follow the tiles by a Reassemble on that
selector). Without ``regions`` every expert has its own region and its own ``W{e}`` (the
program above, unchanged); ``data`` gives the same values either way, so the results are
identical. With every tiling but ``stream``: each expert's dynamic or bounded tile has a row count symbol of
its own, and the EagerMerge gives the merged tiles a fresh ragged row count bounded by the
largest (``docs/routing.md``, decision 7; ``docs/paper.md``, "Configuration
time-multiplexing"). A merged tile waits in the region for the next ones (the
selector carries no stop to say that none follows), so an expert's padding flags wait before the
Reassemble that orders them; the lowering sizes their FIFO for it (``docs/perf.md``, "Routing").
"""

import numpy as np

from stepforge import (Accum, AddrGen, Bufferize, EagerMerge, Filter, Flatten, LinearOffChipLoad,
                       LinearOffChipStore, Map, Partition, Program, Promote, RandomOffChipLoad,
                       Reassemble, RepeatStatic, Reshape, RetileStreamify, Select, Streamify, Tile,
                       fp32, int16, int32, matmul, retile_col, retile_row)


def program(T=10, D=8, N=16, E=2, k=1, n=4, tiling="dynamic", rows=4, dtype="int",
            regions=None):
    p = Program("moe")
    xt, yt = (int16, int32) if dtype == "int" else (fp32, fp32)
    if tiling not in TILINGS:
        raise ValueError(f"moe: tiling must be 'dynamic', 'bounded', 'static' or 'stream', "
                         f"not {tiling!r}")
    if regions is not None and (not isinstance(regions, int) or isinstance(regions, bool)
                                or regions < 1 or E % regions):
        raise ValueError(f"moe: regions must be a positive int dividing E={E}, not {regions!r}")
    if tiling == "stream" and regions is not None:
        raise ValueError(
            f"moe: tiling='stream' does not take regions={regions!r}: it holds each expert's "
            f"weight in a PMU of its own for all of the expert's row tiles, so a shared region "
            f"would have to merge whole experts (an EagerMerge of level-1 chunks), and an "
            f"expert's tiles close only at the end of the batch: the region would serve its "
            f"experts one after the other. Use tiling='static' or 'bounded' with regions, or "
            f"'stream' without")
    X = p.tensor("X", (T, D), xt)
    if regions is None:                                        # one matmul region per expert
        Ws = [p.tensor(f"W{e}", (D, N), xt) for e in range(E)]
    else:                                                      # E / regions experts per region
        W = p.tensor("W", (E * D, N), xt)                      # expert e: rows e*D .. e*D+D-1
    Y = p.tensor("Y", (T, N), yt, role="output")
    sel = p.input("sel", [1, T], Select(E))                   # which experts each token visits
    x = LinearOffChipLoad(X, (1, D), out_shape=(T,), stride=(1,))   # [1, T] of [1, D]
    routed = Partition(x, sel, E, 0)                           # E streams [D_e] of [1, D]
    if regions is None:
        outs = []
        for e in range(E):
            chunks, flags = _chunks(routed[e], tiling, rows)
            packed = _pack(chunks)
            if tiling == "stream":
                outs.append(_stationary(packed, Ws[e], (D, n)))
                continue
            w = LinearOffChipLoad(Ws[e], (D, n), out_shape=(N // n,), stride=(1,), ref=packed)
            outs.append(_unpack(_matmul(packed, w, N // n), tiling, flags))
    else:
        per, outs = E // regions, []
        chunks = [_chunks(routed[e], tiling, rows) for e in range(E)]   # (chunks, pad flags)
        for r in range(regions):
            padded, flags = zip(*chunks[r * per:(r + 1) * per])
            outs += _region([_pack(c) for c in padded], flags, W, r * per, (D, n))
    gathered = Reassemble(outs, sel, 0)                          # [1, T, D_sel] of [1, N]
    y = Accum(lambda acc, r: acc + r, Tile(yt, 1, N), gathered, b=1)     # [1, T]
    LinearOffChipStore(y, Y)
    return p


TILINGS = ("dynamic", "bounded", "static", "stream")


def _chunks(tokens, tiling, rows):
    """An expert's tokens ``[D_e] of [1, D]`` grouped into the chunks of rows that become its
    tiles, and the Reshape's padding flags (``None`` unless static tiling filters the padded
    rows after the matmul)."""
    if tiling == "dynamic":
        return Promote(tokens), None                                 # [1 if D_e > 0, D_e]
    padded = Reshape(tokens, rows, 0, pad=0, flags=True)            # [ceil(D_e/rows), rows]
    if tiling in ("bounded", "stream"):
        return Filter(padded[0], padded[1], keep=False), None       # the last chunk ragged
    return padded[0], padded[1]


def _pack(chunks):
    """Each chunk of ``[1, D]`` rows packed into one tile (dynamic: ``[D_e, D]``; bounded and
    stream: at most ``[rows, D]``; static: ``[rows, D]``)."""
    return Accum(retile_row, None, chunks, b=1)


def _matmul(packed, w, cols):
    """Each packed tile times the ``cols`` weight column tiles of ``w``, packed back into one
    wide tile per packed tile: ``[..] of [rows, N]``."""
    prod = Map(matmul, RepeatStatic(packed, cols), w)                # [.., N/n] of [rows, n]
    return Accum(retile_col, None, prod, b=1)


def _stationary(packed, W, tile):
    """An expert's row tiles times its weight, read once and held on chip (``tiling="stream"``).

    The expert's tiles ``[C_e] of [<=rows, D]`` become one chunk (Promote) that a one-input
    EagerMerge forwards unchanged while its selector beat, sent with the chunk's *first* tile,
    triggers the weight's read (none for an expert without tokens). Bufferize holds the ``N / n``
    column tiles in a PMU and Streamify replays them once per row tile (the tile stream is its
    reference).

    Parameters
    ----------
    packed : Stream
        The expert's row tiles ``[C_e] of [<=rows, D]`` (bounded packing).
    W : Tensor
        The expert's ``[D, N]`` weight.
    tile : (int, int)
        The weight's column tile ``(D, n)``.

    Returns
    -------
    Stream
        The expert's output rows ``[D_e] of [1, N]``, in the order of its tokens.
    """
    cols = W.shape[1] // tile[1]
    data, which = EagerMerge([Promote(packed)], 1)               # [M, C] of tiles, [M]
    w = LinearOffChipLoad(W, tile, out_shape=(cols,), stride=(1,),
                          ref=Promote(which, 0))                 # [M, 1, N/n] of [D, n]
    held = Bufferize(w, 1)                                       # [M, 1] of Buffer[N/n]
    weights = Streamify(held, ref=data, expand_rank=1)           # [M, C, N/n] of [D, n]
    prod = Map(matmul, RepeatStatic(data, cols), weights)        # [M, C, N/n] of [<=rows, n]
    wide = Accum(retile_col, None, prod, b=1)                    # [M, C] of [<=rows, N]
    return Flatten(RetileStreamify(wide, "row", b=1), 0, 2)      # [D_e] of [1, N]


def _unpack(wide, tiling, flags):
    """An expert's output tiles as its token rows ``[D_e] of [1, N]``, padded rows dropped."""
    if tiling == "dynamic":
        return RetileStreamify(wide, "row")                          # [D_e] of [1, N]
    split = RetileStreamify(wide, "row", b=1)                       # [C_e, rows] of [1, N]
    if tiling == "static":
        split = Filter(split, flags, keep=False)                    # padded rows dropped
    return Flatten(split, 0, 1)                                     # [D_e] of [1, N]


def _region(tiles, flags, W, first, tile):
    """One matmul region time-multiplexed between the experts ``first, first + 1, ..``.

    EagerMerge takes the experts' packed ``tiles`` as they come; its selector (which expert's
    tile arrived) drives the RandomOffChipLoad of that expert's weight column tiles (``tile =
    (D, n)``) out of the stacked ``W`` and, after the matmul, routes the rows back to their
    expert. The padding ``flags`` follow the tiles in the merge's order (Reassemble by the same
    selector) and the padded rows are dropped in the region. Returns each expert's rows ``[D_e]
    of [1, N]``.
    """
    cols = W.shape[1] // tile[1]
    data, which = EagerMerge(list(tiles), 0)                     # [M] of [rows, D], [M]
    # each tile closes a level of its own (stop S1): the Promote holds a tile until the next
    # one is merged (the selector has no stops to say that none follows), and nothing after it
    # holds; without it the AddrGen, RepeatStatic and RetileStreamify each hold a tile, so a
    # tile's last row would wait for the tile after next
    data, each = Promote(data, 0), Promote(which, 0)             # [M, 1]
    addr = AddrGen(each, (1, cols), (0, 1), scale=cols, offset=first * cols)  # [M, 1, cols]
    wide = _matmul(data, RandomOffChipLoad(addr, W, tile), cols)         # [M, 1] of [rows, N]
    split = RetileStreamify(wide, "row", b=1)                    # [M, 1, rows] of [1, N]
    if flags[0] is not None:
        merged_flags = Reassemble(list(flags), which, 1, count=1)          # [M, 1, rows]
        split = Filter(split, merged_flags, keep=False)                    # padded rows dropped
    return [Flatten(rows, 0, 2) for rows in Partition(split, which, len(tiles), 2)]


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


def experts(program):
    """The expert weights' tensors: ``{e: (tensor name, first row)}``, one ``W{e}`` per expert,
    or the rows ``e * D ..`` of one ``W`` shared by the time-multiplexed regions."""
    D = program.tensors["X"].shape[1]
    if "W" in program.tensors:
        return {e: ("W", e * D) for e in range(program.tensors["W"].shape[0] // D)}
    return {e: (f"W{e}", 0) for e in range(sum(1 for name in program.tensors
                                                if name.startswith("W")))}


def expert_weight(program, tensors, e):
    """Expert ``e``'s ``[D, N]`` weight out of ``tensors``."""
    name, row = experts(program)[e]
    return tensors[name][row:row + program.tensors["X"].shape[1]]


def data(program, seed=0, k=None, trace=None):
    """Random tokens and weights; routing from ``trace["routing"]`` if given, else ``k``
    distinct random experts per token. The same seed gives the same values with and without
    ``regions`` (the experts' weights stacked into ``W``)."""
    rng = np.random.default_rng(seed)
    T, D = program.tensors["X"].shape
    N = program.tensors["Y"].shape[1]
    E = len(experts(program))
    if trace is not None and "routing" in trace:
        sel = routing_masks(trace["routing"], T, E)
    else:
        k = k or 1
        sel = [sum(1 << int(e) for e in rng.choice(E, size=k, replace=False)) for _ in range(T)]
    if program.tensors["X"].dtype.is_float:
        tensors = {"X": rng.standard_normal((T, D)).astype(np.float32)}
        ws = [(rng.standard_normal((D, N)) * 0.1).astype(np.float32) for _ in range(E)]
    else:
        tensors = {"X": rng.integers(-100, 100, (T, D), dtype=np.int16)}
        ws = [rng.integers(-100, 100, (D, N), dtype=np.int16) for _ in range(E)]
    if "W" in program.tensors:
        tensors["W"] = np.concatenate(ws)
    else:
        tensors.update({f"W{e}": w for e, w in enumerate(ws)})
    return {"tensors": tensors, "inputs": {"sel": [sel]}}


def reference(program, tensors, inputs):
    exact = not program.tensors["X"].dtype.is_float
    x = tensors["X"].astype(np.int64 if exact else np.float64)
    sel = inputs["sel"][0]
    y = np.zeros((x.shape[0], program.tensors["Y"].shape[1]), dtype=x.dtype)
    for t, mask in enumerate(sel):
        for e in range(mask.bit_length()):
            if mask >> e & 1:
                y[t] += x[t] @ expert_weight(program, tensors, e).astype(x.dtype)
    if exact:   # int32 sums wrap
        y = ((y + 2**31) % 2**32 - 2**31).astype(np.int32)
    return {"Y": y}
