# amaranth: UnusedElaboratable=no
"""ZipUnit against the reference interpreter's ``zip_streams``: pairing, framings, stop faults."""

import pytest
from hypothesis import given, settings, strategies as st

from stepforge.compiler.errors import StepRuntimeError
from stepforge.compiler.types import Index, Tuple
from stepforge.contract.beat import beat_layout
from stepforge.contract.tokens import Beat, from_nested, is_stop, stop, to_beats
from stepforge.hdl.unit import ErrorCode
from stepforge.hdl.zip import ZipUnit
from stepforge.sim.ref.ops_shape import zip_streams
from stepforge.sim.rtl.testbench import check_ready_to_valid, simulate

from .test_hdl_expand import run_past_error
from .test_hdl_promote import ELEM, FRAMING, TILES, bare_done, reframe, tile, tokens_equal
from .test_tokens import ragged

TYPES = (ELEM, Index(), ELEM)


def relabel(tokens, k):
    """``tokens`` with other element values (same stops): what another Zip input carries."""
    return [t if is_stop(t) else ((t ^ k) if k % 2 == 0 else int(t.astype(int).sum()) + 300)
            for t in tokens]


def layouts(n, rank):
    return {f"in{k}": beat_layout(TYPES[k], rank) for k in range(n)}


def run_zip(rank, feeds, **kw):
    n = len(feeds)
    lay = layouts(n, rank)
    return simulate(ZipUnit(TYPES[:n], rank), {p: (lay[p], f) for p, f in zip(lay, feeds)},
                    {"out": beat_layout(Tuple(*TYPES[:n]), rank)}, **kw)


@settings(deadline=None, max_examples=30)
@given(st.integers(0, 3).flatmap(lambda r: st.tuples(st.just(r), ragged(r, elems=TILES, max_size=3))),
       st.integers(2, 3), st.lists(FRAMING, min_size=3, max_size=3),
       st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.integers(0, 2**16))
def test_matches_interpreter(case, n, framings, valid_p, ready_p, seed):
    # every input framed its own way: the pairing is on tokens, not beats
    rank, tensors = case
    tokens = from_nested(tensors, rank)
    streams = [relabel(tokens, k) for k in range(n)]
    feeds = [reframe(s, f) for s, f in zip(streams, framings)]
    run = run_zip(rank, feeds, valid_p=valid_p, ready_p=ready_p, seed=seed)
    assert tokens_equal(run.outputs["out"], zip_streams(streams))
    assert run.accepted == {f"in{k}": len(feeds[k]) for k in range(n)}
    assert all(bt.has_data or bt.stop or bt.last for bt in run.beats["out"])
    assert run.error == 0


@st.composite
def zip_fault_case(draw):
    """Two rank-``rank`` streams: unrelated, or the second a copy of the first with one token
    changed (a stop for an element or another stop level, an element for a stop), dropped or
    doubled."""
    rank = draw(st.integers(0, 3))
    a = from_nested(draw(ragged(rank, elems=TILES, max_size=3)), rank)
    if draw(st.booleans()) or not a:
        b = from_nested(draw(ragged(rank, elems=TILES, max_size=3)), rank)
    else:
        b = list(a)
        k = draw(st.integers(0, len(b) - 1))
        how = draw(st.sampled_from(["change", "drop", "double"] if rank else ["drop", "double"]))
        if how == "change":
            b[k] = a[0] if is_stop(b[k]) and not is_stop(a[0]) else stop(draw(st.integers(1, rank)))
        elif how == "drop":
            del b[k]
        else:
            b.insert(k, b[k])
    return rank, a, b


@settings(deadline=None, max_examples=30)
@given(zip_fault_case(), st.lists(FRAMING, min_size=2, max_size=2), st.integers(0, 2**16))
def test_faults_match_interpreter(case, framings, seed):
    rank, a, b = case
    streams = [a, relabel(b, 1)]
    feeds = [reframe(s, f) for s, f in zip(streams, framings)]
    try:
        want = zip_streams(streams)
    except StepRuntimeError:
        lay = layouts(2, rank)
        code, accepted, moved_after = run_past_error(
            ZipUnit(TYPES[:2], rank), {p: (lay[p], f) for p, f in zip(lay, feeds)},
            {"out": beat_layout(Tuple(*TYPES[:2]), rank)})
        assert code == ErrorCode.STOP_MISMATCH and moved_after == 0
    else:
        run = run_zip(rank, feeds, seed=seed)
        assert run.error == 0 and tokens_equal(run.outputs["out"], want)


def fault(rank, *streams):
    lay = layouts(len(streams), rank)
    return run_past_error(ZipUnit(TYPES[:len(streams)], rank),
                          {p: (lay[p], s) for p, s in zip(lay, streams)},
                          {"out": beat_layout(Tuple(*TYPES[:len(streams)]), rank)})


def test_stop_level_mismatch():
    a = from_nested([[[tile(1)], [tile(2)]]], 2)  # a S1 b S2
    b = from_nested([[[7, 8]]], 2)                # 7 8 S2
    code, accepted, moved_after = fault(2, a, b)
    assert code == ErrorCode.STOP_MISMATCH and moved_after == 0
    # (a, 7) goes out and in1's beat (7) is used up; then in0's S1 meets in1's element 8
    assert accepted == {"in0": 0, "in1": 1}


def test_has_data_mismatch():
    a = from_nested([[[tile(1)], []]], 2)         # a S1 S2
    b = from_nested([[[7], [8]]], 2)              # 7 S1 8 S2
    code, accepted, moved_after = fault(2, a, b)
    assert code == ErrorCode.STOP_MISMATCH and moved_after == 0
    assert accepted == {"in0": 1, "in1": 1}


def test_last_mismatch():
    a = from_nested([[tile(1)]], 1)               # a S1 Done
    b = from_nested([[7], [8]], 1)                # 7 S1 8 S1 Done
    code, accepted, moved_after = fault(1, a, b)
    assert code == ErrorCode.STOP_MISMATCH and moved_after == 0
    assert accepted == {"in0": 0, "in1": 1}  # in0 keeps its beat: its Done was not matched


def test_different_framings_pair_up():
    # in0 canonical, in1 with every stop in its own beat and a bare Done
    tokens = from_nested([[tile(1), tile(2)], [], [tile(3)]], 1)
    streams = [tokens, relabel(tokens, 1)]
    feeds = [tokens, bare_done(streams[1])]
    assert feeds[1][-1] == Beat(None, 0, 0, 1)
    run = run_zip(1, feeds)
    assert tokens_equal(run.outputs["out"], zip_streams(streams))
    assert run.outputs["out"][-1] == stop(1)


def test_one_beat_per_cycle():
    tokens = from_nested([[[tile(i) for i in range(4)], [tile(5)]]] * 4, 2)
    streams = [relabel(tokens, k) for k in range(3)]
    run = run_zip(2, streams)
    assert len(run.beats["out"]) == len(to_beats(tokens)) == run.cycles == 20


def test_no_ready_to_valid_path():
    tokens = from_nested([[tile(1), tile(2)], [], [tile(3)]], 1)
    lay = layouts(2, 1)
    check_ready_to_valid(ZipUnit(TYPES[:2], 1),
                         {"in0": (lay["in0"], tokens), "in1": (lay["in1"], bare_done(relabel(tokens, 1)))},
                         {"out": beat_layout(Tuple(*TYPES[:2]), 1)})


def test_parameters():
    assert repr(ZipUnit([ELEM, Index()], 1)) == "ZipUnit([Tile(int8, 1, 2), Index()], 1)"
    for types, rank in (([ELEM], 1), ([ELEM, ELEM], -1)):
        with pytest.raises(ValueError):
            ZipUnit(types, rank)
