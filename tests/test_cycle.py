"""Feedback edges and cyclic programs (issue 10 item 4): the language, the interpreter's fixed
point, the metrics and the cycle's FIFO sizing (``compiler/ops/feedback.py``,
``docs/routing.md`` "Cycles"), on ``examples/decode_attention.py``."""

from pathlib import Path

import numpy as np
import pytest

from stepforge import EagerMerge, Index, Partition, Program, Select, StepRuntimeError, StepShapeError, StepTypeError
from stepforge.compiler.fifo_sizing import check_deadlocks, cycle_needs, cycle_paths
from stepforge.compiler.lower import lower
from stepforge.compiler.metrics import metrics
from stepforge.loader import ProgramError, load
from stepforge.sim.ref.interpreter import run

ROOT = Path(__file__).resolve().parent.parent
ATTN = ROOT / "examples" / "decode_attention.py"


def _lengths(pf, program, lengths):
    """The example's data with the given KV lengths (a trace)."""
    return pf.data(program, seed=4, trace={"kv_lengths": lengths})


def test_unbound_feedback_is_refused_naming_it_and_its_readers():
    p = Program("loop")
    fb = p.feedback("ready", (4,), Select(2))
    x = p.input("x", (4,), Index())
    Partition(x, fb, 2, 0, name="route")
    msg = (r"ready: feedback \[4\] of Select\(2\) is never bound \(read by route\): close the "
           r"cycle with Program.bind\(ready, stream\)")
    with pytest.raises(StepShapeError, match=msg):
        run(p, inputs={"x": [0, 1, 2, 3]})
    with pytest.raises(StepShapeError, match=msg):
        metrics(p)
    with pytest.raises(StepShapeError, match=msg):
        lower(p)


def test_bind_checks_type_rank_and_static_sizes():
    p = Program("loop")
    fb = p.feedback("ready", (4,), Select(2))
    with pytest.raises(StepTypeError, match=r"ready: port 'in0' is declared as \[4\] of "
                       r"Select\(2\), but other carries Select\(3\) \[4\]"):
        p.bind(fb, p.input("other", (4,), Select(3)))
    with pytest.raises(StepShapeError, match=r"ready: port 'in0' is declared with rank 0 \[4\], "
                       r"but deep has rank 1 \[4, 2\]"):
        p.bind(fb, p.input("deep", (4, 2), Select(2)))
    with pytest.raises(StepShapeError, match=r"ready: port 'in0' is declared as \[4\], but "
                       r"five is \[5\] \(dimension 0: 4 vs 5\)"):
        p.bind(fb, p.input("five", (5,), Select(2)))
    p.bind(fb, p.input("ok", (4,), Select(2)))
    with pytest.raises(StepShapeError, match=r"ready: port 'in0' is already bound to ok; cannot "
                       r"bind it again to again"):
        p.bind(fb, p.input("again", (4,), Select(2)))
    with pytest.raises(StepTypeError, match=r"must be a feedback stream of this program"):
        p.bind(p.input("plain", (4,), Select(2)), fb)


@pytest.mark.parametrize("inflight", [1, 2])
@pytest.mark.parametrize("addressing,signal", [("host", "fetched"), ("region", "fetched"),
                                               ("region", "done"), ("host", "done")])
def test_dynamic_dispatch_computes_the_reference_with_lengths_1_and_at_the_bound(
        inflight, addressing, signal):
    pf = load(ATTN)
    program = pf.build(B=8, P=2, Lmax=8, inflight=inflight, addressing=addressing,
                       signal=signal)
    lengths = [1, 8, 3, 1, 8, 2, 5, 1]
    data = _lengths(pf, program, lengths)
    res = run(program, tensors=data["tensors"], inputs=data["inputs"], keep_edges=True)
    want = pf.reference(program, data["tensors"], data["inputs"])["O"]
    assert np.array_equal(res.tensors["O"], want)
    # the same O as both static dispatches
    for mode, block in (("interleaved", None), ("coarse", None), ("coarse", 8)):
        static = pf.build(B=8, P=2, Lmax=8, mode=mode, addressing=addressing, block=block)
        d = _lengths(pf, static, lengths)
        assert np.array_equal(run(static, tensors=d["tensors"], inputs=d["inputs"]).tensors["O"],
                              want)
    # the fixed point: the seeds, then the regions' completions in the merge's order
    fb = program.node("dispatch")
    assert res.tokens(fb.outputs[0]) == [1, 2] * 4
    # each iteration dispatches the requests the previous one freed: the seeds, then as many
    assert res.cycle_iterations == 8 // (2 * inflight) + 1


def test_a_cycle_short_of_its_data_is_the_partitions_error():
    # keep drops one completion too many: the dispatch selector ends one request early, which
    # deadlocks in hardware; the interpreter reports it after the fixed point
    pf = load(ATTN)
    program = pf.build(B=6, P=2, Lmax=4)
    data = pf.data(program, seed=1)
    data["inputs"]["keep"] = [1, 1, 1, 0, 0, 0]
    with pytest.raises(StepRuntimeError, match=r"the cycle reached its fixed point after \d+ "
                       r"iterations \(dispatch carries 5 elements\), short of what the program "
                       r"needs \(in hardware: a deadlock\): Partition_\d+: the selector ended"):
        run(program, tensors=data["tensors"], inputs=data["inputs"])


def test_the_feedback_must_have_its_declared_size():
    pf = load(ATTN)
    program = pf.build(B=6, P=2, Lmax=4)
    data = pf.data(program, seed=1)
    data["inputs"]["keep"] = [1, 1, 1, 1, 1, 0]        # one completion too many is kept
    with pytest.raises(StepRuntimeError):
        run(program, tensors=data["tensors"], inputs=data["inputs"])


def test_symbolic_metrics_of_the_cyclic_program_match_the_run():
    from stepforge.compiler.metrics import bind
    pf = load(ATTN)
    program = pf.build(B=8, P=2, Lmax=8)
    data = _lengths(pf, program, [1, 8, 3, 1, 8, 2, 5, 1])
    res = run(program, tensors=data["tensors"], inputs=data["inputs"])
    m = metrics(program).subs(bind(program, res.trace))
    assert m.offchip_read == sum(res.offchip_read.values())
    assert m.offchip_write == sum(res.offchip_written.values()) == 8 * 4 * 4


def test_cycle_sizing_holds_the_seeds_and_the_check_names_the_cycle():
    pf = load(ATTN)
    program = pf.build(B=8, P=2, Lmax=4, inflight=4)
    hw = lower(program, deadlock_check="off")
    fb = hw.program.node("dispatch")
    cons = hw.program.consumers()
    paths = cycle_paths(fb, cons)
    assert len(paths) == 2                               # one through each region
    needs = cycle_needs(hw.program, fb, cons)
    assert {n.beats for n in needs} == {8}               # 4 requests in flight on 2 regions
    depths = {e.stream: e.depth for e in hw.edges}
    assert all(n.holds(depths) >= n.beats for n in needs)
    assert check_deadlocks(hw.program, depths, lambda node: _timing(hw, node)) == []
    shallow = {s: 1 for s in paths[0]}
    found = check_deadlocks(hw.program, {**depths, **shallow}, lambda node: _timing(hw, node))
    assert any(f.startswith("deadlock: the cycle dispatch -> ") and "carries up to 8 elements "
               "of dispatch (seeded by init)" in f for f in found)


def _timing(hw, node):
    from stepforge.compiler.fifo_sizing import unit_timing
    unit = next(u for u in hw.units if u.node is node)
    return unit_timing(unit.component, node)


def _promoted_query_program(B=4, P=2, d=2, Lmax=4):
    """The first decode-attention program's cycle: each region promotes its query (a rank-0
    Promote: a look-ahead unit) for the Expand over its keys."""
    from stepforge import (Accum, Expand, Map, Promote, RandomOffChipLoad, Tile, int16)
    p = Program("promoted")
    KT = p.tensor("KT", (d, B * Lmax), int16)
    L = p.symbol("L", bound=Lmax, ragged=True)
    q = p.input("q", (B,), Tile(int16, 1, d))
    addr = p.input("addr", (B, L), Index())
    dispatch = p.feedback("dispatch", (B,), Select(P))
    qs = Partition(q, dispatch, P, 0)
    addrs = Partition(addr, dispatch, P, 1)
    ready = []
    for r in range(P):
        k = RandomOffChipLoad(addrs[r], KT, (d, 1))
        qx = Expand(Promote(qs[r], 0, name=f"promote{r}"), k, 1, name=f"expand{r}")
        p.output(Map(lambda a, b: a @ b, qx, k), f"s{r}")
        ready.append(Accum(lambda acc, x: acc + x, Tile(int16, d, 1), k, b=1))
    _, free = EagerMerge(ready, 0)
    keep = p.input("keep", free.shape, Select(1))
    kept = Partition(free, keep, 1, 0)[0]
    init = p.input("init", (P,), Select(P))
    seeded, _ = EagerMerge([init, kept], 0)
    p.bind(dispatch, seeded)
    return p


def test_a_look_ahead_unit_on_a_side_branch_of_a_cycle_is_a_deadlock_at_any_depth():
    from stepforge.compiler.fifo_sizing import cycle_lookaheads
    program = _promoted_query_program()
    hw = lower(program, deadlock_check="off")
    cons = hw.program.consumers()
    found = cycle_lookaheads(hw.program, hw.program.node("dispatch"), cons)
    assert [f.split(" (")[0] for f in found] == ["deadlock: promote0", "deadlock: promote1"]
    assert found[0].startswith(
        "deadlock: promote0 (Promote) looks ahead: it holds an element of Partition_0.out0 "
        "until the next one arrives, on a side branch of the cycle dispatch -> ")
    assert found[0].endswith(" that joins it again at expand0 (with Broadcast_RandomOffChipLoad"
                             "_0_0.out0); the next element comes round the cycle only after "
                             "expand0 has taken the held one, at any FIFO depth")
    # at any depth: deep FIFOs everywhere do not silence it
    deep = {e.stream: 64 for e in hw.edges}
    assert set(found) <= set(check_deadlocks(hw.program, deep, lambda node: _timing(hw, node)))
    with pytest.raises(Exception, match=r"deadlock: promote0 \(Promote\) looks ahead"):
        lower(_promoted_query_program(), deadlock_check="raise")
    # the example loads its queries as [B, 1] and needs no Promote: nothing to report
    pf = load(ATTN)
    ok = lower(pf.build(B=8, P=2, Lmax=4), deadlock_check="off")
    assert cycle_lookaheads(ok.program, ok.program.node("dispatch"), ok.program.consumers()) == []


def test_a_cycle_through_a_partition_with_a_rank_1_selector():
    # the dispatch selector is [B, 1] (each request's mask in a fibre of its own): the
    # interpreter cuts it after the masks that have their chunk, with the stops that follow
    from stepforge import Promote
    B, P = 6, 2
    p = Program("loop1")
    fb = p.feedback("dispatch", (B, 1), Select(P))
    x = p.input("x", (B, 1), Index())
    outs = Partition(x, fb, P, 0)
    _, free = EagerMerge(outs, 0)
    kept = Partition(free, p.input("keep", free.shape, Select(1)), 1, 0)[0]
    seeded, _ = EagerMerge([p.input("init", (P,), Select(P)), kept], 0)
    p.bind(fb, Promote(seeded, 0))
    res = run(p, inputs={"x": [[i] for i in range(B)], "init": [1, 2],
                         "keep": [1] * (B - P) + [0] * P}, keep_edges=True)
    assert res.tokens(outs[0]) == [0, 2, 4] and res.tokens(outs[1]) == [1, 3, 5]
    assert [t for t in res.tokens(fb) if isinstance(t, int)] == [1, 2] * 3
    assert res.cycle_iterations == B // P + 1


def test_attention_parameters_are_checked():
    pf = load(ATTN)
    with pytest.raises(ProgramError, match=r"addressing must be one of 'host', 'region', not 'disk'"):
        pf.build(addressing="disk")
    with pytest.raises(ProgramError, match=r"signal must be one of 'fetched', 'done', not 'late'"):
        pf.build(signal="late")
    with pytest.raises(ProgramError, match=r"block must be an int >= 1 with block \* P >= B \(every "
                       r"request in a region\), got block=3, P=2, B=8"):
        pf.build(B=8, P=2, mode="coarse", block=3)
