# amaranth: UnusedElaboratable=no
"""FilterUnit against the interpreter's ``flat_map`` with ``keep_if``."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stepforge.compiler import functions as F
from stepforge.compiler.types import Bool, Index, Tile, Tuple, int8
from stepforge.contract.beat import beat_layout
from stepforge.contract.tokens import Beat, from_nested, stop, to_beats
from stepforge.hdl.filter import FilterUnit
from stepforge.hdl.unit import ErrorCode
from stepforge.sim.ref.ops_compute import expander, flat_map
from stepforge.sim.ref.ops_shape import zip_streams
from stepforge.sim.rtl.testbench import check_ready_to_valid, simulate

from .test_hdl_retile import beats_equal, check_run, project, reframe, tokens_equal
from .test_tokens import ragged

ELEM = Tile(int8, 1, 2)
PAIRS = st.tuples(st.lists(st.integers(-128, 127), min_size=2, max_size=2).map(
    lambda r: np.array([r], np.int8)), st.booleans())


def run_filter(rank, tensors, keep, tokens_flags=None, *, rnd=None, p=0.0, **kw):
    tokens = from_nested(tensors, rank)
    data, flags = project(tokens, 0), project(tokens, 1)
    fed = {"in0": to_beats(data), "flags": to_beats(flags)}
    if rnd is not None:
        fed = {k: reframe(v, rnd, p) for k, v in fed.items()}
    dut = FilterUnit(ELEM, rank, keep=keep)
    run = simulate(dut, {"in0": (beat_layout(ELEM, rank), fed["in0"]),
                         "flags": (beat_layout(Bool(), rank), fed["flags"])},
                   {"out": beat_layout(ELEM, rank)}, **kw)
    want = flat_map(zip_streams([data, flags]), expander(F.keep_if(keep), Tuple(ELEM, Bool())), 0)
    return run, want, fed


@settings(deadline=None, max_examples=25)
@given(st.integers(0, 3).flatmap(lambda r: st.tuples(st.just(r), ragged(r, elems=PAIRS, max_size=3))),
       st.booleans(), st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.integers(0, 2**16),
       st.randoms(use_true_random=False))
def test_matches_interpreter(case, keep, valid_p, ready_p, seed, rnd):
    rank, tensors = case
    canonical = rnd.random() < 0.3
    run, want, fed = run_filter(rank, tensors, keep, rnd=rnd, p=0 if canonical else 0.5,
                                valid_p=valid_p, ready_p=ready_p, seed=seed)
    check_run(run, want, fed, canonical=canonical)


def row(v):
    return np.array([[v, v]], np.int8)


def test_stop_of_a_dropped_element_is_raised_onto_the_last_kept():
    # a (kept) b (dropped) S1 | c (dropped) S2: "a S1 S2", canonical beats (a, S1), (-, S2, last)
    run, want, _ = run_filter(2, [[[(row(1), True), (row(2), False)], [(row(3), False)]]], True)
    assert beats_equal(run.beats["out"], [Beat(row(1), 1, 1, 0), Beat(None, 0, 2, 1)])
    assert tokens_equal(run.outputs["out"], want)


def test_keep_false_drops_the_flagged():
    run, want, _ = run_filter(0, [(row(1), True), (row(2), False), (row(3), True)], False)
    assert beats_equal(run.beats["out"], [Beat(row(2), 1, 0, 1)])


def test_nothing_kept_and_empty_stream():
    run, _, _ = run_filter(0, [(row(1), False), (row(2), False)], True)
    assert run.beats["out"] == [Beat(None, 0, 0, 1)]
    run, _, _ = run_filter(2, [], True)
    assert run.beats["out"] == [Beat(None, 0, 0, 1)] and run.accepted == {"in0": 1, "flags": 1}


def test_done_framed_differently_on_the_two_ports():
    dut = FilterUnit(ELEM, 1)
    data = [Beat(row(1), 1, 0, 0), Beat(row(2), 1, 1, 0), Beat(None, 0, 0, 1)]
    flags = [Beat(1, 1, 0, 0), Beat(0, 1, 0, 0), Beat(None, 0, 1, 1)]
    run = simulate(dut, {"in0": (beat_layout(ELEM, 1), data), "flags": (beat_layout(Bool(), 1), flags)},
                   {"out": beat_layout(ELEM, 1)})
    assert run.error == 0 and run.accepted == {"in0": 3, "flags": 3}
    assert tokens_equal(run.outputs["out"], [row(1), stop(1)])


def test_one_beat_per_cycle():
    # n beats in n cycles after one cycle of latency (the hold register)
    n = 24
    tensors = [[(row(i), True) for i in range(6)]] * 4
    run, want, _ = run_filter(1, tensors, True)
    assert len(run.beats["out"]) == n and run.cycles == n + 1
    # with drops: one input beat per cycle, the output keeps up
    tensors = [[(row(i), i % 3 != 0) for i in range(6)]] * 4
    run, want, _ = run_filter(1, tensors, True)
    assert tokens_equal(run.outputs["out"], want)
    assert run.cycles == n + 1


@pytest.mark.parametrize("flags", [
    [1, 0, stop(1)],            # S1 against S2
    [1, stop(2)],               # a stop against an element
    [1, 0, 1, stop(2)],         # an element against a stop
    [1],                        # Done against an element (the flags end early)
])
def test_flags_out_of_lock_step_is_stop_mismatch(flags):
    dut = FilterUnit(ELEM, 2)
    run = simulate(dut, {"in0": (beat_layout(ELEM, 2), [row(1), row(2), stop(2)]),
                         "flags": (beat_layout(Bool(), 2), flags)}, {"out": beat_layout(ELEM, 2)})
    assert (run.error, run.code) == (1, ErrorCode.STOP_MISMATCH)


def test_stop_above_the_rank_is_bad_stop():
    dut = FilterUnit(Index(), 2)
    run = simulate(dut, {"in0": (beat_layout(Index(), 2), [Beat(5, 1, 3, 1)]),
                         "flags": (beat_layout(Bool(), 2), [Beat(1, 1, 3, 1)])},
                   {"out": beat_layout(Index(), 2)})
    assert (run.error, run.code) == (1, ErrorCode.BAD_STOP)


def test_no_ready_to_valid_path():
    tokens = from_nested([[[(row(1), True), (row(2), False)], []], [[(row(3), False)]]], 2)
    for keep in (True, False):
        check_ready_to_valid(FilterUnit(ELEM, 2, keep=keep),
                             {"in0": (beat_layout(ELEM, 2), project(tokens, 0)),
                              "flags": (beat_layout(Bool(), 2), project(tokens, 1))},
                             {"out": beat_layout(ELEM, 2)})


def test_ports_and_repr():
    dut = FilterUnit(ELEM, 1, keep=False)
    assert repr(dut) == "FilterUnit(Tile(int8, 1, 2), 1, keep=False)"
    assert repr(FilterUnit(Index(), 0)) == "FilterUnit(Index(), 0)"
    assert set(dict(dut.signature.members)) == {"in0", "flags", "out", "status"}
    with pytest.raises(ValueError):
        FilterUnit(ELEM, -1)
