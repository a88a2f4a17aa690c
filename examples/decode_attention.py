"""Decode attention over requests of uneven KV lengths, dispatched to parallel regions (ASPLOS'26
section 5.4, P2 Fig. 14-16): dynamic parallelization, a cyclic graph, against static dispatch.

Each of ``B`` requests has one query row ``q_b`` (``[1, d]`` int16) and ``L_b`` cached keys and
values (``1 <= L_b <= Lmax``; request ``b``'s key ``j`` is column ``b * Lmax + j`` of the
transposed key cache ``KT [d, B * Lmax]``, its value row ``b * Lmax + j`` of ``V [B * Lmax,
d]``). A region computes, per request, one attention output row::

    w_j = exp(q_b @ k_j)            (int16 Q8.8 fixed point, the library's exp)
    o_b = (sum_j w_j * v_j) / (sum_j w_j)      (int32 sums, integer division)

the softmax of the scores applied to the values, without the running maximum (the scores of
the synthetic data stay in ``[-1, 1]``, where the fixed-point exp is exact enough; a fixed-point
stand-in for FlashAttention's streaming softmax). It reads its keys and values with two
RandomOffChipLoads driven by the request's addresses (a host stream ``addr [B, L]``, the KV
lengths of a trace), and writes ``o_b`` to row ``b`` of ``O`` with a RandomOffChipStore (the
request id ``rid``), so the output does not depend on which region served which request.

``P`` regions serve the requests; ``mode`` says how requests are dispatched to them:

``"dynamic"`` (the default; the paper's dynamic parallelization)
    A Partition routes each request to a region by a selector that is a **feedback edge**:
    the first ``P * inflight`` entries are a seeded round-robin (``init``: request ``r`` to
    region ``r mod P``; ``inflight`` requests per region, 1 by default), the rest come from
    the regions themselves. Each region signals "ready for the next
    request" once all keys of its current request have been fetched (an Accum over the keys,
    the paper's ``SignalReqAllRead``); an EagerMerge of the ``P`` signals says which region
    became free, a Partition by the host stream ``keep`` drops the last ``P * inflight`` of them
    (no request is left for them), and a second EagerMerge puts the seeds before them. The
    merged stream is bound to the feedback declared at the top (``p.feedback``, ``p.bind``):
    a cycle from the dispatching Partition through the regions back to it.
``"interleaved"``
    The static round-robin of the paper's baselines: request ``b`` to region ``b mod P``
    (a host selector).
``"coarse"``
    Static coarse-grained dispatch: contiguous blocks of ``block`` requests per region (default
    ``ceil(B / P)``; the paper's baseline has 16, so at ``B = 16`` one region serves every
    request and the others idle).

Every mode computes the same ``O``. The interpreter runs the cyclic graph to its fixed point
(``docs/routing.md``, "Cycles"): its EagerMerge takes the regions' signals round-robin, so it
dispatches like ``interleaved``; in hardware the merge takes them as they arrive and the
dispatch follows the regions' actual progress (``docs/paper.md``, "Decode attention").

Traces: ``traces/attn_*.json`` (``benchmarks/attention_traces.py``) give ``kv_lengths`` of a
low, medium or high variance batch of 16, 32 or 64 requests; without a trace the lengths are
drawn uniformly.

``signal`` is a region's "ready for the next request" in the dynamic mode: ``"fetched"`` (the
default, the paper's SignalReqAllRead: all keys of the current request fetched) or ``"done"``
(its output row written: the store's acknowledgement), which lets the dispatch give the next
request to the region that *finishes* first; with ``inflight=2`` a region then always has one
request waiting while the cycle brings the next.

``addressing`` says where the KV addresses come from:

``"host"`` (the default)
    A host stream ``addr [B, L]``, one beat per key, read by a pipelined
    :class:`~stepforge.hdl.beat_io.BeatReader` (one beat per cycle) and routed key by key by the
    dispatching Partition: a request's keys pass in order, so a region that is slow to take
    them holds up the requests behind it (``docs/paper.md``, "Decode attention").
``"region"``
    The paper's design: the dispatching Partition routes one token per request (its row
    ``rid`` and its KV length ``length``, host streams ``[B, 1]``), and each region loads its
    request's query and generates its key addresses itself, ``rid * Lmax + j`` for ``j < L_b``,
    with an :class:`~stepforge.AddrGen` whose innermost length is the request's (``count=``, a
    ragged range). A static dispatch gives each region its own ``rid<r>`` and ``length<r>``.
"""

import numpy as np

from stepforge import (Accum, AddrGen, EagerMerge, Expand, Flatten, Index, LinearOffChipLoad,
                       Map, Partition, Program, RandomOffChipLoad, RandomOffChipStore, Select,
                       Tile, cast, div, function, int16, int32, matmul)
from stepforge.compiler.functions import zeros

MODES = ("dynamic", "interleaved", "coarse")
ADDRESSING = ("host", "region")
SIGNALS = ("fetched", "done")


def program(B=8, P=2, d=4, Lmax=8, mode="dynamic", inflight=1, addressing="host", block=None,
            signal="fetched"):
    if mode not in MODES:
        raise ValueError(f"decode_attention: mode must be one of {', '.join(map(repr, MODES))}, "
                         f"not {mode!r}")
    if block is not None and (not isinstance(block, int) or isinstance(block, bool)
                              or block < 1 or block * P < B):
        raise ValueError(f"decode_attention: block must be an int >= 1 with block * P >= B "
                         f"(every request in a region), got block={block!r}, P={P}, B={B}")
    if signal not in SIGNALS:
        raise ValueError(f"decode_attention: signal must be one of "
                         f"{', '.join(map(repr, SIGNALS))}, not {signal!r}")
    if addressing not in ADDRESSING:
        raise ValueError(f"decode_attention: addressing must be one of "
                         f"{', '.join(map(repr, ADDRESSING))}, not {addressing!r}")
    for name, value, lo in (("B", B, 1), ("P", P, 1), ("d", d, 1), ("Lmax", Lmax, 1),
                            ("inflight", inflight, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < lo:
            raise ValueError(f"decode_attention: {name} must be an int >= {lo}, not {value!r}")
    if mode == "dynamic" and B < P * inflight:
        raise ValueError(f"decode_attention: dynamic dispatch seeds {inflight} request(s) per "
                         f"region, so it needs B >= P * inflight, got B={B}, P={P}, "
                         f"inflight={inflight}")
    p = Program("decode_attention")
    p.dispatch_mode, p.inflight, p.addressing = mode, inflight, addressing
    Q = p.tensor("Q", (B, d), int16)
    KT = p.tensor("KT", (d, B * Lmax), int16)          # request b's key j: column b*Lmax + j
    V = p.tensor("V", (B * Lmax, d), int16)            # its value: row b*Lmax + j
    O = p.tensor("O", (B, d), int32, role="output")
    p.regions, p.block, p.signal = P, block, signal
    # the dispatch selector: the feedback of the cycle, or a host stream (a static dispatch of
    # region-addressed requests needs none: each region reads its own)
    dispatch = (p.feedback("dispatch", (B,), Select(P)) if mode == "dynamic"
                else p.input("sel", (B,), Select(P)) if addressing == "host" else None)
    build = _host_addressed if addressing == "host" else _region_addressed
    ready = build(p, dispatch, B, P, Lmax, mode, Q, KT, V, O)
    if mode == "dynamic":
        _, free = EagerMerge(ready, 0)                  # [M] of Select(P): the region now free
        keep = p.input("keep", free.shape, Select(1))   # 1 but for the last P * inflight
        kept = Partition(free, keep, 1, 0)[0]           # [N] of Select(P)
        init = p.input("init", (P * inflight,), Select(P))  # seeds: request r to region r mod P
        seeded, _ = EagerMerge([init, kept], 0)         # [P * inflight + N] of Select(P)
        p.bind(dispatch, seeded)
    return p


def _host_addressed(p, dispatch, B, P, Lmax, mode, Q, KT, V, O):
    """The regions fed by a host stream of every key's address, routed key by key."""
    d = Q.shape[1]
    rid = p.input("rid", (B,), Index())                 # [B]: each request's output row
    L = p.symbol("L", bound=Lmax, ragged=True)          # a request's KV length
    addr = p.input("addr", (B, L), Index())             # [B, L]: each request's KV rows
    # [1, B, 1] of [1, d] -> [B, 1]: each query a fibre of its own, so that a region's Expand
    # needs no Promote (a look-ahead unit: it would hold a request's query until the next one
    # is dispatched, which in the cycle waits for this request's keys: a deadlock)
    q = Flatten(LinearOffChipLoad(Q, (1, d), out_shape=(B, 1), stride=(1, 0)), 1, 2)
    qs = Partition(q, dispatch, P, 1)                   # [N_r, 1] of [1, d] each
    addrs = Partition(addr, dispatch, P, 1)             # [N_r, L] of Index
    rids = Partition(rid, dispatch, P, 0)               # [N_r] of Index
    return [_region(qs[r], addrs[r], rids[r], KT, V, O, p.signal) for r in range(P)]


def _region_addressed(p, dispatch, B, P, Lmax, mode, Q, KT, V, O):
    """The regions fed by one token per request (its row and KV length): each region loads
    its request's query and generates its KV addresses. Dynamic dispatch routes the tokens by
    the cycle's selector; a static dispatch is known when the design is built, so each region
    reads its own requests' tokens from the host (no routing at run time; a region given no
    request is not built)."""
    # [B, 1]: each request's row and KV length a fibre of its own, so that a region's AddrGen
    # knows a request's last address when it generates it (without the stop it would hold that
    # address until the next request, which the cycle dispatches only after this one's keys: a
    # deadlock)
    if mode == "dynamic":
        rids = Partition(p.input("rid", (B, 1), Index()), dispatch, P, 1)      # [N_r, 1]
        lens = Partition(p.input("length", (B, 1), Index()), dispatch, P, 1)   # [N_r, 1]
    else:
        sizes = [sum(1 for m in masks(mode, B, P, p.block) if m >> r & 1) for r in range(P)]
        rids = [p.input(f"rid{r}", (n, 1), Index()) for r, n in enumerate(sizes) if n]
        lens = [p.input(f"length{r}", (n, 1), Index()) for r, n in enumerate(sizes) if n]
    d = Q.shape[1]
    ready = []
    for rid, length in zip(rids, lens):
        q = RandomOffChipLoad(rid, Q, (1, d))           # [N_r, 1] of [1, d]
        # the request's KV rows, rid * Lmax + j for j < L_b
        addr = AddrGen(rid, (Lmax,), (1,), scale=Lmax, count=length)    # [N_r, L]
        ready.append(_region(q, addr, rid, KT, V, O, p.signal))
    return ready


score = function(lambda q, k: (q @ k).cast(int16).exp(), name="score")


def _region(q, addr, rid, KT, V, O, signal="fetched"):
    """One attention region: its requests' queries ``q [N, 1] of [1, d]``, KV addresses ``addr
    [N, L]`` and output rows ``rid [N]`` (or ``[N, 1]``); writes each output row to ``O`` and
    returns its "ready for the next request" signal, one per request: after its last key is
    fetched (``signal="fetched"``, the paper's SignalReqAllRead) or once its output row is
    written (``"done"``: the store's acknowledgement)."""
    d = KT.shape[0]
    k = RandomOffChipLoad(addr, KT, (d, 1))             # [N, L] of [d, 1]
    v = RandomOffChipLoad(addr, V, (1, d))              # [N, L] of [1, d]
    qx = Expand(q, k, 1)                                # [N, L] of [1, d]
    w = Map(score, qx, k)                               # [N, L] of [1, 1] int16 (Q8.8)
    num = Accum(lambda acc, x: acc + x, Tile(int32, 1, d), Map(matmul, w, v), b=1)  # [N] [1, d]
    den = Accum(lambda acc, x: acc + x, Tile(int32, 1, 1), Map(cast(int32), w), b=1)  # [N] [1, 1]
    ack = RandomOffChipStore(rid, Map(div, num, den), O)                # rid's shape, Bool
    if signal == "done":
        return Flatten(ack, 0, 1) if len(ack.shape) > 1 else ack        # [N] of Bool
    return Accum(lambda acc, x: acc + x, Tile(int16, d, 1), k, b=1)    # [N] of [d, 1]


def masks(mode, B, P, block=None):
    """The static dispatch selector: one one-hot mask per request (``block``: the coarse
    block, default ``ceil(B / P)``)."""
    if mode == "interleaved":
        return [1 << (b % P) for b in range(B)]
    per = block or -(-B // P)
    return [1 << (b // per) for b in range(B)]


def kv_lengths(program, seed=0, trace=None):
    """The KV length of every request: the trace's ``kv_lengths``, else uniform in 1..Lmax."""
    B = program.tensors["Q"].shape[0]
    Lmax = program.tensors["V"].shape[0] // B
    if trace is not None and "kv_lengths" in trace:
        lengths = trace["kv_lengths"]
        if (not isinstance(lengths, list) or len(lengths) != B
                or not all(isinstance(x, int) and 1 <= x <= Lmax for x in lengths)):
            raise SystemExit(f"decode_attention: the trace's kv_lengths must list {B} ints in "
                             f"1..{Lmax} (B and Lmax of the program), got {lengths!r}")
        return list(lengths)
    rng = np.random.default_rng(seed + 1)
    return [int(x) for x in rng.integers(1, Lmax + 1, B)]


def data(program, seed=0, trace=None):
    """Queries and keys in -8..8 (scores in [-1, 1] in Q8.8), values in -512..512, the KV addresses of the
    lengths (trace or random) and the dispatch streams of the program's mode."""
    rng = np.random.default_rng(seed)
    B, d = program.tensors["Q"].shape
    Lmax = program.tensors["V"].shape[0] // B
    P = program.regions
    lengths = kv_lengths(program, seed, trace)
    tensors = {
        "Q": rng.integers(-8, 9, (B, d), dtype=np.int16),
        "KT": rng.integers(-8, 9, (d, B * Lmax), dtype=np.int16),
        "V": rng.integers(-512, 513, (B * Lmax, d), dtype=np.int16),
    }
    mode = program.dispatch_mode
    if program.addressing == "host":
        inputs = {"rid": list(range(B)),
                  "addr": [[b * Lmax + j for j in range(n)] for b, n in enumerate(lengths)]}
        if mode != "dynamic":
            inputs["sel"] = masks(mode, B, P, program.block)
    elif mode == "dynamic":
        inputs = {"rid": [[b] for b in range(B)], "length": [[n] for n in lengths]}
    else:                                   # each region's own requests
        sel = masks(mode, B, P, program.block)
        inputs = {}
        for r in range(P):
            mine = [b for b in range(B) if sel[b] >> r & 1]
            if mine:
                inputs[f"rid{r}"] = [[b] for b in mine]
                inputs[f"length{r}"] = [[lengths[b]] for b in mine]
    if mode == "dynamic":
        seeds = P * program.inflight
        inputs["init"] = [1 << (r % P) for r in range(seeds)]
        inputs["keep"] = [1] * (B - seeds) + [0] * seeds
    return {"tensors": tensors, "inputs": inputs}


def reference(program, tensors, inputs):
    """``O`` in NumPy: the same fixed-point exp (``stepforge.contract.fixedpoint``), int32 sums
    and division truncating toward zero."""
    from stepforge.contract.fixedpoint import evaluate_q
    B, d = program.tensors["Q"].shape
    q = tensors["Q"].astype(np.int64)
    out = np.zeros((B, d), dtype=np.int64)
    Lmax = program.tensors["V"].shape[0] // B
    if "addr" in inputs:
        rids, kv = inputs["rid"], inputs["addr"]
    else:                                   # [[b], ...] and [[L_b], ...], or per region
        keys = ["rid"] if "rid" in inputs else sorted(k for k in inputs if k.startswith("rid"))
        rids = [b for k in keys for (b,) in inputs[k]]
        lens = [n for k in keys for (n,) in inputs["length" + k[3:]]]
        kv = [[b * Lmax + j for j in range(n)] for b, n in zip(rids, lens)]
    for b, rows in zip(rids, kv):
        k = tensors["KT"][:, rows].astype(np.int64)            # [d, L]
        v = tensors["V"][rows].astype(np.int64)                # [L, d]
        s = (q[b] @ k).astype(np.int16)                        # int32 -> int16 wraps (small)
        w = np.asarray(evaluate_q("exp", s.astype(np.int64), int16), dtype=np.int64)
        num, den = w @ v, w.sum()
        out[b] = np.sign(num) * (np.abs(num) // den)          # den > 0: exp is positive
    return {"O": out.astype(np.int32)}
