"""Issue 11: FIFO sizing around data-dependent routing covers the worst routing the bounds allow.

Static-tile MoE (``examples/moe.py``, ``tiling="static"``, rows 4, E=2, T=32) on a skewed
routing: token 0 and token 31 go to expert 0, the 30 tokens between them to expert 1. Reassemble
waits, in token order, for token 0's row from expert 0, whose padded tile closes only with token
31; meanwhile expert 1 must take 30 tokens, and the padding flags of each of them wait in its
bypass FIFO (Reshape -> Filter). The depth the lowering gave that FIFO before, 14 (sized for the
tile and the expert's latency, a balanced routing), deadlocks; the sizing now gives every path
of a Partition's branch room for the branch's whole stream (``compiler/fifo_sizing.py``,
``routed_needs``). One Verilator build (about 30 s; cached afterwards)."""

import warnings

import numpy as np
import pytest

from stepforge.compiler.lower import lower
from stepforge.loader import load
from stepforge.perf import Deadlock, predict
from stepforge.sim.ref.interpreter import run

from .helpers import EXAMPLES

T = 32
ROUTING = [[0]] + [[1]] * (T - 2) + [[0]]
OLD_FLAGS = 14           # the lowering's depth before issue 11's fix
OLD = {"Partition_0.out1": 2, "Reshape_1.flags": OLD_FLAGS, "Filter_1": 2, "Flatten_1": 2}


def _moe():
    pf = load(EXAMPLES / "moe.py")
    program = pf.build(T=T, D=4, N=4, n=4, E=2, k=1, tiling="static", rows=4)
    return pf, program, pf.data(program, seed=5, trace={"routing": ROUTING})


def _edges(hw):
    return {e.name: e for e in hw.edges}


def test_a_routed_branch_holds_its_whole_stream_and_the_old_depth_is_reported():
    pf, program, data = _moe()
    hw = lower(program)
    assert hw.deadlocks == []
    e = _edges(hw)
    # the flags' path from the Partition to the Reassemble: 30 of the 31 elements expert 1 may
    # get while expert 0 waits (the Reshape keeps one, the Flatten one); the flags are narrowest
    path = ["Partition_0.out1", "Reshape_1.flags", "Filter_1", "Flatten_1"]
    assert sum(e[n].depth for n in path) >= T - 2
    assert e["Reshape_1.flags"].depth > OLD_FLAGS
    # the selector's bypass never needs more than its 32 beats (2 of them in the Broadcast)
    assert e["Broadcast_sel_0.out1"].depth == T - 2
    ref = run(hw.program, data["tensors"], data["inputs"], keep_edges=True)
    assert predict(hw, ref).cycles > 0                   # the model's schedule settles

    # the path pinned at the old lowering's depths (pinning the flags alone, the sizing deepens
    # the rest of the path): found before simulation, and the model deadlocks
    program = _moe()[1]
    old = {s: OLD[s.name] for s in program.streams if s.name in OLD}
    with pytest.warns(UserWarning, match="would be stuck"):
        pinned = lower(program, depths=old)
    found = [f for f in pinned.deadlocks if "Reshape_1.flags (depth 14)" in f]
    assert found and found[0].startswith(
        "deadlock: Partition_0 routes by data: Partition_0.out1 [N_sel_1] may receive all of its "
        "32 elements (at the bounds) while Reassemble_0 waits for an element of another branch")
    assert ("the path Partition_0.out1 (depth 2), Reshape_1.flags (depth 14), Filter_1 (depth 2), "
            "Flatten_1 (depth 2) to Reassemble_0 holds 20 elements of Partition_0.out1: "
            "10 elements of Partition_0.out1 [N_sel_1] of Tile(int16, 1, 4) would be stuck"
            in found[0])
    ref = run(pinned.program, data["tensors"], data["inputs"], keep_edges=True)
    with pytest.raises(Deadlock):
        predict(pinned, ref)


@pytest.mark.slow
def test_the_skewed_routing_runs_bit_exact_in_verilator():
    from stepforge.sim.rtl import deadlock_report, error_report, run_rtl
    pf, program, data = _moe()
    tensors, inputs = data["tensors"], data["inputs"]
    res = run_rtl(program, tensors, inputs)
    if res.status == "deadlock":
        pytest.fail(deadlock_report(res))
    assert res.status == "done", error_report(res)
    ref = run(program, tensors=tensors, inputs=inputs)
    assert np.array_equal(ref.tensors["Y"], pf.reference(program, tensors, inputs)["Y"])
    assert np.array_equal(res.tensors["Y"], ref.tensors["Y"])


# --- time-multiplexed regions (examples/moe.py -p regions=R): the perf model only, fast ------

def _tm(routing, **params):
    pf = load(EXAMPLES / "moe.py")
    program = pf.build(**dict(dict(D=4, N=4, n=4, k=1, tiling="static", rows=4), **params))
    return program, pf.data(program, seed=5, trace={"routing": routing})


def _predict(program, data, depths=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hw = lower(program, depths=depths)
    return hw, predict(hw, run(hw.program, data["tensors"], data["inputs"], keep_edges=True))


def test_a_shared_region_does_not_deadlock_on_the_worst_routing():
    # two experts on one region; tokens 0 and 23 to expert 1, the 22 between them to expert 0.
    # The model replays the interpreter's merge order (round-robin): the merge waits for expert
    # 1's tile, which closes only with token 23, so expert 0's padding flags must all wait before
    # the Reassemble that puts them in the merge's order
    T = 24
    program, data = _tm([[1]] + [[0]] * (T - 2) + [[1]], T=T, E=2, regions=1)
    hw, res = _predict(program, data)
    assert hw.deadlocks == [] and res.cycles > 0
    assert _edges(hw)["Reshape_0.flags"].depth >= T - 2
    # the depths the lowering gave before: reported statically, and the model names the FIFOs
    old = {s: d for s in program.streams for n, d in (("Partition_0.out0", 2),
                                                        ("Reshape_0.flags", 6)) if s.name == n}
    with pytest.raises(Deadlock, match=r"full: .*Reshape_0\.flags \(holds 6 of 6; 8 of 24 beats "
                                       r"pushed\).*; empty: ") as e:
        _predict(program, data, old)
    assert ("Reshape_0.flags", 6, 24) in e.value.edges
    assert any(f[0] == "Reshape_0.flags" for f in e.value.full)
    with pytest.warns(UserWarning, match="would be stuck"):
        pinned = lower(program, depths=old)
    assert any("Partition_0 routes by data" in f and "to Reassemble_0 holds 8 elements" in f
               for f in pinned.deadlocks)


@pytest.mark.parametrize("regions", [1, 2])
def test_a_merged_tile_held_for_the_next_ones_does_not_block_its_flags(regions):
    # tests/test_paper_tm.py's program: the units after the merge hold a tile until the next ones
    # arrive, so one expert's padding flags of several tiles wait before the Reassemble; the
    # model deadlocked here with the lowering's depths before (paper_mixtral_t8_e4_top2)
    routing = [[2, 3], [0, 3], [2, 3], [0, 3], [2, 3], [2, 3], [0, 3], [0, 3]]
    program, data = _tm(routing, T=8, E=4, k=2, regions=regions)
    hw, res = _predict(program, data)
    assert hw.deadlocks == [] and res.cycles > 0
