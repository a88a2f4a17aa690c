# amaranth: UnusedElaboratable=no
"""ParallelizeUnit against the reference interpreter's ``parallelize``."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stepforge.compiler.types import Index
from stepforge.contract.beat import beat_layout
from stepforge.contract.tokens import Beat, from_nested, to_beats
from stepforge.hdl.parallelize import ParallelizeUnit
from stepforge.hdl.unit import ErrorCode
from stepforge.sim.ref.ops_routing import parallelize
from stepforge.sim.rtl.testbench import check_ready_to_valid, simulate

from .test_hdl_partition import (ELEM, TILES, accepted_all, assert_tokens, beats_of, framed,
                                  frozen_after_fault, tok)
from .test_tokens import ragged


def run_par(tokens, rank, n, b, *, bare=False, elem=ELEM, **kw):
    dut = ParallelizeUnit(elem, rank, n, b)
    ins = {"in0": (beat_layout(elem, rank), framed(tokens, bare))}
    return simulate(dut, ins, {f"out{i}": beat_layout(elem, b) for i in range(n)}, **kw), ins


CASES = st.integers(0, 3).flatmap(lambda a: st.tuples(
    st.just(a), st.integers(0, a), st.integers(1, 3), ragged(a, elems=TILES, max_size=3)))


@settings(deadline=None, max_examples=30)
@given(CASES, st.booleans(), st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.integers(0, 2**16))
def test_matches_interpreter(case, bare, valid_p, ready_p, seed):
    rank, b, n, tensors = case
    tokens = from_nested(tensors, rank)
    run, ins = run_par(tokens, rank, n, b, bare=bare, valid_p=valid_p, ready_p=ready_p, seed=seed)
    want = parallelize(tokens, n, b, rank=rank)
    assert run.error == 0, ErrorCode(run.code)
    for i in range(n):
        assert_tokens(run.outputs[f"out{i}"], want[i], f"out{i}")
    assert accepted_all(run, ins)


def test_spec_example():
    run, _ = run_par(tok("0 1 2 3 4 5"), 0, 3, 0, elem=Index())
    assert run.outputs == {"out0": tok("0 3"), "out1": tok("1 4"), "out2": tok("2 5")}


def test_chunks_empty_chunks_and_dropped_stops():
    tokens = from_nested([[[1, 2], []], [[3]], []], 2)
    assert tokens == tok("1 2 S1 S2 3 S2 S2")
    run, _ = run_par(tokens, 2, 2, 1, elem=Index())
    assert run.outputs == {"out0": tok("1 2 S1 3 S1"), "out1": tok("S1 S1")} \
        == dict(zip(["out0", "out1"], parallelize(tokens, 2, 1, rank=2)))
    run, _ = run_par(tokens, 2, 2, 0, elem=Index())  # b = 0: the stop-only beats vanish
    assert run.outputs == {"out0": tok("1 3"), "out1": tok("2")}


def test_bare_done_on_input():
    run, ins = run_par(tok("1 2 S1 3 S1 4 S1"), 1, 2, 1, bare=True, elem=Index(), ready_p=0.5)
    assert beats_of(ins["in0"][1])[-1] == Beat(None, 0, 0, 1)
    assert run.outputs == {"out0": tok("1 2 S1 4 S1"), "out1": tok("3 S1")}
    assert accepted_all(run, ins)
    assert all(run.beats[f"out{i}"][-1] == Beat(None, 0, 0, 1) for i in range(2))


@pytest.mark.parametrize("bare", [False, True])
def test_input_ends_inside_a_chunk(bare):
    run, _ = run_par(tok("1 S1 2"), 1, 2, 1, bare=bare, elem=Index())
    assert run.error == 1 and ErrorCode(run.code) == ErrorCode.EARLY_END
    assert run.beats["out0"] == [Beat(1, 1, 1, 0)]  # the chunk before the fault went out


def test_nothing_moves_after_a_fault():
    frozen_after_fault(ParallelizeUnit(Index(), 1, 2, 1),
                       {"in0": (beat_layout(Index(), 1), tok("1 S1 2 3 S1 4"))},
                       {"out0": beat_layout(Index(), 1), "out1": beat_layout(Index(), 1)})


def test_stop_above_rank():
    run, _ = run_par(tok("1 S3"), 2, 2, 1, elem=Index())
    assert run.error == 1 and ErrorCode(run.code) == ErrorCode.BAD_STOP


@pytest.mark.parametrize("b", [0, 1, 2])
def test_one_beat_per_cycle(b):
    tensors = [[[np.full((1, 2), t, np.int8)] * (1 + (t + r) % 3) for r in range(3)] for t in range(5)]
    tokens = from_nested(tensors, 2)
    run, ins = run_par(tokens, 2, 3, b)
    want = parallelize(tokens, 3, b, rank=2)
    for i in range(3):
        assert_tokens(run.outputs[f"out{i}"], want[i], f"out{i}")
    # combinational: one beat per cycle, no gap between chunks, one cycle for the bare Done
    assert run.cycles == len(to_beats(tokens)) + 1
    assert run.status_counts == {"busy": run.cycles, "stall_in": 0, "stall_out": 0}


def test_no_ready_to_valid_path():
    check_ready_to_valid(ParallelizeUnit(Index(), 1, 2, 1),
                         {"in0": (beat_layout(Index(), 1), tok("1 2 S1 S1 3 S1"))},
                         {f"out{i}": beat_layout(Index(), 1) for i in range(2)})


def test_bad_parameters():
    for args in [(Index(), -1, 2, 0), (Index(), 1, 0, 0), (Index(), 1, 2, 2)]:
        with pytest.raises(ValueError):
            ParallelizeUnit(*args)
    assert repr(ParallelizeUnit(Index(), 2, 3, 1)) == "ParallelizeUnit(Index(), 2, 3, 1)"
