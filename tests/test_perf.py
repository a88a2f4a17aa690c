"""The performance model's engine, the LP FIFO sizing and the static deadlock check (no RTL).

The model against Verilator is ``tests/test_perf_rtl.py``; the sweep on Dask is
``tests/test_perf_sweep.py``.
"""

import warnings

import numpy as np
import pytest

from stepforge import (Accum, Expand, LinearOffChipLoad, LinearOffChipStore, Map, Program,
                       Promote, Tile, int16)
from stepforge.compiler.errors import LoweringError
from stepforge.compiler.lower import lower
from stepforge.compiler.passes import insert_broadcasts
from stepforge.loader import load
from stepforge.perf import Deadlock, predict
from stepforge.perf.beats import beats_of, fit, mapping_in, mapping_out
from stepforge.perf.engine import Edge, StepSeq, chain, solve
from stepforge.sim.ref.interpreter import run

from .helpers import EXAMPLES


def test_chain_is_the_max_plus_recurrence():
    a = np.array([0, 0, 10, 3, 3], dtype=np.int64)
    cost = np.array([2, 2, 1, 1, 1], dtype=np.int64)
    assert chain(a, cost).tolist() == [0, 2, 10, 11, 12]


def test_mappings_cover_every_beat_once_in_order():
    assert mapping_in(2, 5).tolist() == [0, -1, -1, 1, -1]
    assert mapping_out(2, 5).tolist() == [-1, -1, 0, -1, 1]
    # a bare Done beyond the emitting steps goes to the last free step
    assert fit(np.array([1, 0, 1, 0, 0], bool), 3, 5).tolist() == [0, -1, 1, -1, 2]


def test_beats_fuse_a_stop_into_the_element_before_it():
    from stepforge.contract.tokens import stop
    b = beats_of([1, 2, stop(1), stop(2), 3])
    assert b.has.tolist() == [1, 1, 0, 1] and b.stop.tolist() == [0, 1, 2, 0]


def _pipe(depth, n=8, cost=1):
    """A producer of ``n`` beats, one a cycle, into a consumer that takes one every ``cost``."""
    e = Edge("e", n, depth)
    prod = StepSeq("p", np.ones(n, np.int64), outs=[(e, np.arange(n), 1, 1)])
    cons = StepSeq("c", np.full(n, cost, np.int64), ins=[(e, np.arange(n))],
                   pop_off=cost - 1)
    assert solve([prod, cons]) is not None
    return e


def test_a_depth_1_fifo_halves_the_rate_and_depth_2_does_not():
    assert np.diff(_pipe(1).P).tolist() == [2] * 7
    assert np.diff(_pipe(2).P).tolist() == [1] * 7
    # a consumer that keeps each beat 4 cycles at the head: depth 1 costs a cycle per beat
    assert np.diff(_pipe(1, cost=4).C).tolist() == [5] * 7
    assert np.diff(_pipe(2, cost=4).C).tolist() == [4] * 7


def deadlock_program():
    """x is read three times: summed per row, the sum spread back over the row (Promote at level
    0 looks one beat ahead), and subtracted: a reconvergent fork whose branch to the Accum
    swallows two rows (16 beats) before the join sees anything from it."""
    p = Program("reconverge")
    X = p.tensor("X", (4, 32), int16)
    Y = p.tensor("Y", (4, 32), int16, role="output")
    x = LinearOffChipLoad(X, (1, 4), out_shape=(4, 8), stride=(8, 1))      # [1, 4, 8]
    total = Accum(lambda acc, v: acc + v, Tile(int16, 1, 4), x, b=1)        # [1, 4]
    spread = Expand(Promote(total, 0), x, 1)                                 # [1, 4, 8]
    LinearOffChipStore(Map(lambda v, s: v - s, x, spread), Y)
    return p


X = np.arange(128, dtype=np.int16).reshape(4, 32)


def _zip_side(p):
    insert_broadcasts(p)
    bc = next(n for n in p.nodes if n.op == "Broadcast")
    return bc, [s for s in bc.outputs if any(n.op == "Map" for n, _ in p.consumers()[s])][0]


def test_lp_sizes_a_reconvergent_fork_to_its_imbalance_with_fewer_bits():
    rule = lower(deadlock_program(), fifo_sizing="rule")
    area = lower(deadlock_program(), fifo_sizing="lp", throughput=0)
    full = lower(deadlock_program(), fifo_sizing="lp")
    depth = {k: {e.name: e.depth for e in hw.edges}
             for k, hw in (("rule", rule), ("area", area), ("full", full))}
    bc = "Broadcast_LinearOffChipLoad_0_0"
    # 16 beats swallowed by the Accum branch, 2 of them in the Broadcast's own output buffer
    assert depth["area"][f"{bc}.out2"] == depth["area"][f"{bc}.out1"] == 14
    assert depth["rule"][f"{bc}.out2"] == 18
    assert area.fifo_sizing["bits"] < full.fifo_sizing["bits"] < rule.fifo_sizing["bits"]
    note = full.fifo_sizing["fifos"][f"{bc}.out2"]
    assert "swallows 16 beats (via Accum_0 -> Promote_0 -> Expand_0)" in note["why"]
    assert full.manifest()["fifo_sizing"]["method"] == "lp"
    for hw in (area, full):
        ref = run(hw.program, {"X": X}, keep_edges=True)
        assert predict(hw, ref).cycles > 0             # the model finds a schedule: no deadlock


def test_one_below_the_lp_minimum_is_a_static_deadlock_naming_edges_shapes_and_beats():
    p = deadlock_program()
    _, side = _zip_side(p)
    with pytest.warns(UserWarning, match="deadlock"):
        hw = lower(p, depths={side: 13})
    (found,) = hw.deadlocks
    assert found.startswith("deadlock: Broadcast_LinearOffChipLoad_0_0 forks "
                            "Broadcast_LinearOffChipLoad_0_0.out2 [1, 4, 8]")
    assert ("the path Broadcast_LinearOffChipLoad_0_0.out2 (depth 13) to Map_0 holds 13 beats and "
            "Broadcast_LinearOffChipLoad_0_0 2 more: 1 beats of "
            "Broadcast_LinearOffChipLoad_0_0.out2 [1, 4, 8] of Tile(int16, 1, 4) would be stuck"
            in found)
    assert hw.manifest()["static_deadlocks"] == [found]
    # the model agrees: at 13 the schedule does not settle, at 14 it does
    ref = run(hw.program, {"X": X}, keep_edges=True)
    with pytest.raises(Deadlock):
        predict(hw, ref)
    assert predict(hw, ref, depths={side.name: 14}).cycles > 0
    p = deadlock_program()
    _, side = _zip_side(p)
    assert lower(p, depths={side: 14}).deadlocks == []
    p = deadlock_program()
    _, side = _zip_side(p)
    with pytest.raises(LoweringError, match="would be stuck"):
        lower(p, depths={side: 13}, deadlock_check="raise")
    # the deadlock tests/test_e2e.py seeds for the watchdog (depth 1) is found before simulation
    p = deadlock_program()
    _, side = _zip_side(p)
    with pytest.raises(LoweringError, match="13 beats of Broadcast_LinearOffChipLoad_0_0.out2"):
        lower(p, depths={side: 1}, deadlock_check="raise")


@pytest.mark.parametrize("tiling", ["dynamic", "static"])
def test_lp_sizing_behind_data_dependent_routers(tiling):
    """MoE: Partition and Reassemble route by a selector; the LP holds each branch's bound."""
    import scipy.optimize  # noqa: F401  (its one-time import is not the sizing's time)
    pf = load(EXAMPLES / "moe.py")
    rule = lower(pf.build(T=6, E=2, tiling=tiling), fifo_sizing="rule")
    program = pf.build(T=6, E=2, tiling=tiling)
    hw = lower(program)                                  # the LP is the default
    assert hw.fifo_sizing["method"] == "lp"
    assert hw.deadlocks == [] and hw.fifo_sizing["bits"] < rule.fifo_sizing["bits"]
    assert hw.fifo_sizing["seconds"] < 1.0
    data = pf.data(program, seed=3)
    ref = run(hw.program, data["tensors"], data["inputs"], keep_edges=True)
    ok = predict(hw, ref).cycles
    rule_ref = run(rule.program, data["tensors"], data["inputs"], keep_edges=True)
    assert abs(ok - predict(rule, rule_ref).cycles) <= 0.02 * ok
    # the reassemble's selector branch holds what the expert branches swallow; one less is found
    sel = next(e for e in hw.edges if e.name == "Broadcast_sel_0.out1")
    pins = {e.stream: e.depth for e in hw.edges}
    need = next(n for n in _needs(hw) if sel.stream in n.path and len(n.path) == 1)
    pins[sel.stream] = need.beats - 1
    program2 = pf.build(T=6, E=2, tiling=tiling)
    lower(program2)                       # the same graph passes, so the same stream names
    by_name = {s.name: s for s in program2.streams}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        low = lower(program2, depths={by_name[s.name]: d for s, d in pins.items()})
    assert any("Broadcast_sel_0.out1" in f and "would be stuck" in f for f in low.deadlocks)


def _needs(hw):
    from stepforge.compiler.fifo_sizing import reconvergences, unit_timing
    by_node = {u.node: u for u in hw.units}
    return reconvergences(hw.program, lambda n: unit_timing(by_node[n].component, n))


@pytest.mark.parametrize("name,params", [("matmul", {}), ("gemv", {}), ("elementwise", {}),
                                         ("swiglu", {"B": 16, "H": 32, "I": 64})])
def test_lp_sizing_never_needs_more_bits_than_the_rule(name, params):
    pf = load(EXAMPLES / f"{name}.py")
    rule = lower(pf.build(**params), fifo_sizing="rule")
    lp = lower(pf.build(**params), fifo_sizing="lp")
    assert lp.fifo_sizing["bits"] <= rule.fifo_sizing["bits"]
    assert lp.deadlocks == rule.deadlocks == []


def test_lower_refuses_an_unknown_sizing():
    with pytest.raises(ValueError, match="fifo_sizing must be 'rule' or 'lp', not 'fast'"):
        lower(deadlock_program(), fifo_sizing="fast")


# SwiGLU B=64 H=64 I=64 on the ECP5 runs in 25,021 cycles in Verilator, bit-exact:
#   stepforge run examples/swiglu.py -p B=64 -p H=64 -p I=64 --config ecp5
# (188,676 cycles with --config ecp5-sdram). The model reported a deadlock here: its
# round-robin passes stopped after 6, swinging between orders of 22.2k and 24.4-25.5k cycles,
# and one pass took 242 rounds, over solve()'s cap of 144. The passes now go on until the order
# is its own schedule's round robin (34 passes: 25,013 cycles), each order pass capped by the
# memory's lines (docs/perf.md, "2026-11-28 (session 19)").
def test_swiglu_b64_h64_i64_on_the_ecp5_settles_within_5_percent_of_verilator():
    from stepforge.hdl.config import HardwareConfig
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hw = lower(load(EXAMPLES / "swiglu.py").build(B=64, H=64, I=64), HardwareConfig.ecp5_85f())
    cycles = predict(hw).cycles
    assert abs(cycles - 25_021) <= 0.05 * 25_021, cycles
