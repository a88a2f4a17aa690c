# amaranth: UnusedElaboratable=no
"""ReassembleUnit against the reference interpreter's ``reassemble``."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stepforge.compiler.types import Index, Select
from stepforge.contract.beat import beat_layout
from stepforge.contract.tokens import Beat, from_beats, from_nested, to_beats
from stepforge.hdl.reassemble import ReassembleUnit
from stepforge.hdl.unit import ErrorCode
from stepforge.sim.ref.ops_routing import partition, reassemble
from stepforge.sim.rtl.testbench import check_ready_to_valid, simulate

from .test_hdl_partition import (ELEM, TILES, accepted_all, assert_tokens, framed,
                                  frozen_after_fault, tok)
from .test_tokens import ragged


def tensor(b, elems=TILES, max_size=3):
    """One rank-``b`` tensor (a ``b``-deep ragged nested list; an element when ``b = 0``)."""
    t = elems
    for _ in range(b):
        t = st.lists(t, max_size=max_size)
    return t


def leaves(nested, depth):
    """The items ``depth`` levels below the top of a nested list of tensors."""
    if depth == 0:
        return list(nested)
    return [x for t in nested for x in leaves(t, depth - 1)]


def run_reassemble(streams, sel, n, b, r, *, count=None, bare=None, elem=ELEM, **kw):
    dut = ReassembleUnit(elem, n, b, r, count=count)
    bare = bare or [False] * (n + 1)
    ins = {f"in{j}": (beat_layout(elem, b), framed(streams[j], bare[j])) for j in range(n)}
    ins["select"] = (beat_layout(Select(n), r), framed(sel, bare[n]))
    return simulate(dut, ins, {"out": beat_layout(elem, r + b + 1)}, **kw), ins


@st.composite
def cases(draw):
    n = draw(st.integers(1, 3))
    b = draw(st.integers(0, 2))
    r = draw(st.integers(0, 2))
    count = draw(st.sampled_from([None, None, 1, n]))
    masks = [m for m in range(1 << n) if count is None or bin(m).count("1") == count]
    sel_tensors = draw(ragged(r, elems=st.sampled_from(masks), max_size=3))
    sel = from_nested(sel_tensors, r)
    used = [0] * n
    for mask in (t for t in leaves(sel_tensors, r) if isinstance(t, int)):
        for j in range(n):
            used[j] += mask >> j & 1
    streams = [from_nested(draw(st.lists(tensor(b), min_size=u, max_size=u)), b) for u in used]
    bare = draw(st.lists(st.booleans(), min_size=n + 1, max_size=n + 1))
    return n, b, r, count, sel, streams, bare


@settings(deadline=None, max_examples=30)
@given(cases(), st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.integers(0, 2**16))
def test_matches_interpreter(case, valid_p, ready_p, seed):
    n, b, r, count, sel, streams, bare = case
    run, ins = run_reassemble(streams, sel, n, b, r, count=count, bare=bare, valid_p=valid_p,
                              ready_p=ready_p, seed=seed)
    want = reassemble(streams, sel, b, count=count, select_rank=r)
    assert run.error == 0, ErrorCode(run.code)
    assert_tokens(run.outputs["out"], want, "out")
    assert accepted_all(run, ins)


# -- hand-worked cases --------------------------------------------------------------------------

def test_partition_reassemble_round_trip():
    data, sel = tok("1 2 S1 3 S2 4 S1 5 6 7 S2"), tok("1 3 S1 2 1 S1")
    parts = partition(data, sel, 2, 1, rank=2)
    run, _ = run_reassemble(parts, sel, 2, 1, 1, elem=Index(), ready_p=0.5, seed=5)
    assert run.outputs["out"] == reassemble(parts, sel, 1, select_rank=1) \
        == tok("1 2 S2 3 S1 3 S3 4 S2 5 6 7 S3")


def test_empty_groups_and_empty_chunks():
    # zero mask, stop-only selector, an empty chunk from in1, b = 1
    streams = [tok("1 S1"), tok("S1 2 S1")]
    sel = from_nested([[3, 0], [], [2]], 1)
    run, _ = run_reassemble(streams, sel, 2, 1, 1, elem=Index())
    want = reassemble(streams, sel, 1, select_rank=1)
    assert run.outputs["out"] == want == tok("1 S1 S2 S3 S3 2 S3")


def test_b0_elements_get_the_group_stop():
    streams = [tok("1 2"), tok("3"), tok("4")]
    run, _ = run_reassemble(streams, [1, 3, 0, 4], 3, 0, 0, elem=Index())
    assert run.outputs["out"] == reassemble(streams, [1, 3, 0, 4], 0) == tok("1 S1 2 3 S1 S1 4 S1")


@pytest.mark.parametrize("bare", [[True, False, False], [False, True, True], [True, True, True]])
def test_bare_done_on_inputs(bare):
    streams, sel = [tok("1 S1 2 S1"), tok("3 S1")], tok("1 3")
    run, ins = run_reassemble(streams, sel, 2, 1, 0, bare=bare, elem=Index(), ready_p=0.7, seed=1)
    assert run.outputs["out"] == tok("1 S2 2 S1 3 S2")
    assert accepted_all(run, ins)
    assert run.beats["out"][-1] == Beat(None, 0, 0, 1)


# -- run-time faults ----------------------------------------------------------------------------

def _fault(streams, sel, n, b, r, count=None, bare=None):
    run, _ = run_reassemble(streams, sel, n, b, r, count=count, bare=bare, elem=Index())
    assert run.error == 1
    return ErrorCode(run.code), from_beats(run.beats["out"] + [Beat(None, 0, 0, 1)])


@pytest.mark.parametrize("bare", [False, True])
def test_input_ends_early(bare):
    code, partial = _fault([tok("1 S1"), tok("2 S1")], [3, 1], 2, 1, 0, bare=[bare, bare, False])
    assert code == ErrorCode.EARLY_END and partial == tok("1 S1 2 S2")
    code, _ = _fault([tok("1 S1 2")], [1, 1], 1, 1, 0)  # Done inside a chunk
    assert code == ErrorCode.EARLY_END


def test_input_left_over():
    code, partial = _fault([tok("1 2"), tok("3")], [1, 2], 2, 0, 0)
    assert code == ErrorCode.LEFTOVER and partial == tok("1 S1 3 S1")


def test_count_mismatch():
    code, partial = _fault([tok("1"), tok("2 3")], [2, 3], 2, 0, 0, count=1)
    assert code == ErrorCode.NOT_ONE_HOT and partial == tok("2 S1")


def test_nothing_moves_after_a_fault():
    frozen_after_fault(ReassembleUnit(Index(), 2, 1, 0),
                       {"in0": (beat_layout(Index(), 1), tok("1 S1")),
                        "in1": (beat_layout(Index(), 1), tok("2 S1")),
                        "select": (beat_layout(Select(2), 0), [3, 1, 2])},
                       {"out": beat_layout(Index(), 2)})


# -- timing -------------------------------------------------------------------------------------

@pytest.mark.parametrize("b,masks", [(1, [1, 2, 4, 5]), (1, [7, 3, 6]), (0, [1, 3, 7])])
def test_one_beat_per_cycle(b, masks):
    n = 3
    sel = [masks[i % len(masks)] for i in range(12)]
    used = [sum(m >> j & 1 for m in sel) for j in range(n)]
    if b == 0:
        streams = [[np.full((1, 2), 10 * j + i, np.int8) for i in range(u)] for j, u in enumerate(used)]
    else:
        streams = [from_nested([[np.full((1, 2), i, np.int8)] * (1 + (i + j) % 3) for i in range(u)], 1)
                   for j, u in enumerate(used)]
    run, _ = run_reassemble(streams, sel, n, b, 0)
    want = reassemble(streams, sel, b, select_rank=0)
    assert_tokens(run.outputs["out"], want, "out")
    # one cycle to load the first selector element, then one output beat per cycle with no gap
    # between chunks or groups, then one cycle for the bare Done
    assert run.cycles == len(to_beats(want)) + 2
    assert run.status_counts == {"busy": run.cycles, "stall_in": 0, "stall_out": 0}


def test_no_ready_to_valid_path():
    streams, sel = [tok("1 S1 2 S1"), tok("3 S1")], tok("1 3 0")
    check_ready_to_valid(ReassembleUnit(Index(), 2, 1, 0),
                         {"in0": (beat_layout(Index(), 1), streams[0]),
                          "in1": (beat_layout(Index(), 1), streams[1]),
                          "select": (beat_layout(Select(2), 0), sel)},
                         {"out": beat_layout(Index(), 2)})


def test_bad_parameters():
    for args, kw in [((Index(), 0, 1, 0), {}), ((Index(), 2, -1, 0), {}), ((Index(), 2, 1, -1), {}),
                     ((Index(), 2, 1, 0), {"count": 3}), ((Index(), 2, 1, 0), {"count": 0})]:
        with pytest.raises(ValueError):
            ReassembleUnit(*args, **kw)
    assert repr(ReassembleUnit(Index(), 3, 1, 0, count=2)) == "ReassembleUnit(Index(), 3, 1, 0, count=2)"
