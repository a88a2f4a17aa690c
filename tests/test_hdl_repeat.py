# amaranth: UnusedElaboratable=no
"""RepeatStaticUnit against the reference interpreter's ``repeat_static``."""

import pytest
from hypothesis import given, settings, strategies as st

from stepforge.contract.beat import beat_layout
from stepforge.contract.tokens import Beat, from_nested, stop
from stepforge.hdl.repeat import RepeatStaticUnit
from stepforge.sim.ref.ops_shape import repeat_static
from stepforge.sim.rtl.testbench import check_ready_to_valid, simulate

from .test_hdl_promote import ELEM, FRAMING, TILES, bare_done, reframe, tile, tokens_equal
from .test_tokens import ragged


def run_repeat(rank, n, beats_or_tokens, **kw):
    return simulate(RepeatStaticUnit(ELEM, rank, n), {"in0": (beat_layout(ELEM, rank), beats_or_tokens)},
                    {"out": beat_layout(ELEM, rank + 1)}, **kw)


@settings(deadline=None, max_examples=30)
@given(st.integers(0, 3).flatmap(lambda r: st.tuples(st.just(r), ragged(r, elems=TILES, max_size=3))),
       st.integers(1, 3), FRAMING, st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.integers(0, 2**16))
def test_matches_interpreter(case, n, framing, valid_p, ready_p, seed):
    rank, tensors = case
    tokens = from_nested(tensors, rank)
    beats = reframe(tokens, framing)
    run = run_repeat(rank, n, beats, valid_p=valid_p, ready_p=ready_p, seed=seed)
    assert tokens_equal(run.outputs["out"], repeat_static(tokens, n))
    assert run.accepted["in0"] == len(beats)
    assert all(bt.has_data or bt.stop or bt.last for bt in run.beats["out"])
    assert run.error == 0


@pytest.mark.parametrize("n", [1, 2, 3])
def test_bare_done_and_split_stops(n):
    # rank 1, ``a S1 S1 b c S1`` with every stop in its own beat and a bare Done: the last copy
    # of ``a`` takes S2 from the next beat, the empty fibre's S1 becomes S2, the bare Done stays
    # bare (it is not a stop to increment).
    tokens = from_nested([[tile(1)], [], [tile(2), tile(3)]], 1)
    beats = bare_done(tokens)
    assert [(bt.has_data, bt.stop, bt.last) for bt in beats] == [
        (1, 0, 0), (0, 1, 0), (0, 1, 0), (1, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)]
    run = run_repeat(1, n, beats)
    want = repeat_static(tokens, n)
    assert tokens_equal(run.outputs["out"], want)
    assert want[n] == stop(2) and want[n + 1] == stop(2)


def test_empty_stream_stays_empty():
    run = run_repeat(2, 3, [])
    assert run.outputs["out"] == [] and run.beats["out"] == [Beat(None, 0, 0, 1)]


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_one_output_beat_per_cycle(rank, n):
    tensors = [tile(i) for i in range(16)] if rank == 0 else [[tile(i) for i in range(4)]] * 4
    tokens = from_nested(tensors, rank)
    run = run_repeat(rank, n, tokens)
    assert len(run.beats["out"]) == 16 * n
    # n = 1 holds every element one cycle (its stop may be in the next beat); n > 1 hides that
    # cycle behind the copies.
    assert run.cycles == 16 * n + (1 if n == 1 else 0)


@pytest.mark.parametrize("n", [1, 3])
def test_no_ready_to_valid_path(n):
    tokens = from_nested([[tile(1), tile(2)], [], [tile(3)]], 1)
    check_ready_to_valid(RepeatStaticUnit(ELEM, 1, n), {"in0": (beat_layout(ELEM, 1), bare_done(tokens))},
                         {"out": beat_layout(ELEM, 2)})


def test_parameters():
    assert repr(RepeatStaticUnit(ELEM, 1, 4)) == "RepeatStaticUnit(Tile(int8, 1, 2), 1, 4)"
    for rank, n in ((1, 0), (-1, 2), (1, True), (1.5, 2)):
        with pytest.raises(ValueError):
            RepeatStaticUnit(ELEM, rank, n)
