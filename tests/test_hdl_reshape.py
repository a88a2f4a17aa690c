# amaranth: UnusedElaboratable=no
"""ReshapeUnit against the reference interpreter's ``reshape``: chunks, padding, flags, faults."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stepforge.compiler.errors import StepRuntimeError
from stepforge.compiler.types import Bool
from stepforge.contract.beat import beat_layout
from stepforge.contract.tokens import Beat, from_nested, stop, to_beats
from stepforge.contract.values import pad_value
from stepforge.hdl.reshape import ReshapeUnit
from stepforge.hdl.unit import ErrorCode
from stepforge.sim.ref.ops_shape import reshape
from stepforge.sim.rtl.testbench import check_ready_to_valid, simulate

from .test_hdl_expand import run_past_error
from .test_hdl_promote import ELEM, FRAMING, TILES, bare_done, reframe, tile, tokens_equal
from .test_tokens import ragged

PAD = -3


def run_reshape(rank, chunk, b, beats_or_tokens, *, pad=PAD, flags=True, **kw):
    outputs = {"out": beat_layout(ELEM, rank + 1)}
    if flags:
        outputs["flags"] = beat_layout(Bool(), rank + 1)
    return simulate(ReshapeUnit(ELEM, rank, chunk, b, pad=pad, flags=flags),
                    {"in0": (beat_layout(ELEM, rank), beats_or_tokens)}, outputs, **kw)


def interpret(tokens, chunk, b, pad=PAD):
    return reshape(tokens, chunk, b, None if pad is None else pad_value(ELEM, pad))


@settings(deadline=None, max_examples=30)
@given(st.integers(0, 3).flatmap(lambda r: st.tuples(st.just(r), ragged(r, elems=TILES, max_size=4))),
       st.integers(1, 3), FRAMING, st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.integers(0, 2**16))
def test_elements_match_interpreter(case, chunk, framing, valid_p, ready_p, seed):
    rank, tensors = case
    tokens = from_nested(tensors, rank)
    beats = reframe(tokens, framing)
    run = run_reshape(rank, chunk, 0, beats, valid_p=valid_p, ready_p=ready_p, seed=seed)
    data, flags = interpret(tokens, chunk, 0)
    assert tokens_equal(run.outputs["out"], data)
    assert run.outputs["flags"] == flags  # True == 1: padded elements
    assert run.accepted["in0"] == len(beats)
    assert all(bt.has_data or bt.stop or bt.last for bt in run.beats["out"])
    assert run.error == 0


@st.composite
def grouped(draw):
    """A rank-``rank`` stream whose level-``b`` dimension is a multiple of ``chunk``."""
    rank = draw(st.integers(1, 3))
    b = draw(st.integers(1, rank))
    chunk = draw(st.integers(1, 3))
    item = ragged(b - 1, elems=TILES, max_size=2)  # one entry of dimension b: b levels deep
    level = st.integers(1, 2).flatmap(lambda k: st.lists(item, min_size=k * chunk, max_size=k * chunk))
    for k in range(rank - b):  # the dimensions above b; the outermost (the stream) may be empty
        level = st.lists(level, min_size=0 if k == rank - b - 1 else 1, max_size=2)
    return rank, b, chunk, from_nested(draw(level), rank)


@settings(deadline=None, max_examples=30)
@given(grouped(), FRAMING, st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.integers(0, 2**16))
def test_stops_match_interpreter(case, framing, valid_p, ready_p, seed):
    rank, b, chunk, tokens = case
    try:
        data, flags = interpret(tokens, chunk, b)
    except StepRuntimeError:  # an empty group fibre can still break the count
        return
    beats = reframe(tokens, framing)
    run = run_reshape(rank, chunk, b, beats, valid_p=valid_p, ready_p=ready_p, seed=seed)
    assert tokens_equal(run.outputs["out"], data)
    assert run.outputs["flags"] == flags
    assert run.accepted["in0"] == len(beats)
    assert run.error == 0


def test_padding_by_hand():
    # rank 1, chunk 3: [a b c d] -> [[a b c] [d pad pad]], the last pad carrying S2
    tokens = from_nested([[tile(1), tile(2), tile(3), tile(4)]], 1)
    run = run_reshape(1, 3, 0, bare_done(tokens))
    pad = pad_value(ELEM, PAD)
    assert tokens_equal(run.outputs["out"], [tile(1), tile(2), tile(3), stop(1), tile(4), pad, pad, stop(2)])
    assert run.outputs["flags"] == [0, 0, 0, stop(1), 0, 1, 1, stop(2)]


def test_done_inside_a_partial_chunk():
    # rank 0, chunk 2, three elements, Done as a bare beat: the last chunk is padded and closed
    tokens = [tile(1), tile(2), tile(3)]
    beats = bare_done(tokens)
    assert beats[-1] == Beat(None, 0, 0, 1)
    run = run_reshape(0, 2, 0, beats)
    data, flags = interpret(tokens, 2, 0)
    assert tokens_equal(run.outputs["out"], data) and run.outputs["flags"] == flags
    assert data[-1] == stop(1) and flags[-2] is True


def test_chunk_end_takes_the_stop_of_the_next_beat():
    # [a b] in chunks of 2 with S1 in its own beat: b closes the chunk with S2, not S1 then S2
    tokens = from_nested([[tile(1), tile(2)], [tile(3), tile(4)]], 1)
    run = run_reshape(1, 2, 0, bare_done(tokens), flags=False)
    assert tokens_equal(run.outputs["out"], interpret(tokens, 2, 0)[0])
    assert [bt.stop for bt in run.beats["out"]] == [0, 2, 0, 2, 0]


def test_whole_chunks_need_no_pad():
    tokens = from_nested([[tile(1), tile(2)], [], [tile(3), tile(4), tile(5), tile(6)]], 1)
    run = run_reshape(1, 2, 0, bare_done(tokens), pad=None)
    assert run.error == 0
    assert tokens_equal(run.outputs["out"], interpret(tokens, 2, 0, pad=None)[0])
    assert run.outputs["flags"] == interpret(tokens, 2, 0, pad=None)[1]


def test_partial_chunk_without_pad_is_bad_stop():
    tokens = from_nested([[tile(1), tile(2), tile(3)]], 1)  # 3 is not a multiple of 2
    with pytest.raises(StepRuntimeError):
        interpret(tokens, 2, 0, pad=None)
    code, accepted, moved_after = run_past_error(
        ReshapeUnit(ELEM, 1, 2, pad=None), {"in0": (beat_layout(ELEM, 1), tokens)},
        {"out": beat_layout(ELEM, 2)})
    assert code == ErrorCode.BAD_STOP and moved_after == 0
    assert accepted == {"in0": 3}  # (c, S1, last) is in the holding register: nothing sent of it


def test_done_in_partial_chunk_without_pad_is_early_end():
    tokens = [tile(1), tile(2), tile(3)]
    with pytest.raises(StepRuntimeError):
        interpret(tokens, 2, 0, pad=None)
    code, accepted, moved_after = run_past_error(
        ReshapeUnit(ELEM, 0, 2, pad=None), {"in0": (beat_layout(ELEM, 0), bare_done(tokens))},
        {"out": beat_layout(ELEM, 1)})
    assert code == ErrorCode.EARLY_END and moved_after == 0
    assert accepted == {"in0": 4}  # the bare Done is in the holding register: no pads sent


def test_high_stop_inside_a_group_is_bad_stop():
    # b = 1, chunk 2: a tensor with three rows ends its group after one row of the second chunk
    tokens = from_nested([[[tile(1)], [tile(2)], [tile(3)]]], 2)
    with pytest.raises(StepRuntimeError):
        interpret(tokens, 2, 1)
    code, accepted, moved_after = run_past_error(
        ReshapeUnit(ELEM, 2, 2, 1, flags=True), {"in0": (beat_layout(ELEM, 2), tokens)},
        {"out": beat_layout(ELEM, 3), "flags": beat_layout(Bool(), 3)})
    assert code == ErrorCode.BAD_STOP and moved_after == 0
    assert accepted == {"in0": 2}


@pytest.mark.parametrize("rank, chunk, out_beats, cycles", [
    (0, 4, 16, 17),   # one beat waits for the next (its stop may be there): one cycle of latency
    (0, 3, 18, 19),   # 16 elements + 2 pads
    (1, 4, 16, 16),   # every chunk ends with its row's stop: combinational
    (1, 3, 24, 25),   # rows of 4 -> 3 + (1 + 2 pads)
])
def test_one_output_beat_per_cycle(rank, chunk, out_beats, cycles):
    tensors = [tile(i) for i in range(16)] if rank == 0 else [[tile(i) for i in range(4)]] * 4
    run = run_reshape(rank, chunk, 0, from_nested(tensors, rank))
    assert len(run.beats["out"]) == len(run.beats["flags"]) == out_beats
    assert run.cycles == cycles


def test_stop_counting_is_combinational():
    tokens = from_nested([[[tile(i), tile(i)] for i in range(4)]] * 4, 2)
    run = run_reshape(2, 2, 1, tokens)
    assert len(run.beats["out"]) == len(to_beats(tokens)) == run.cycles == 32


@pytest.mark.parametrize("b", [0, 1])
def test_no_ready_to_valid_path(b):
    tokens = from_nested([[[tile(1), tile(2), tile(3)], [tile(4)]]], 2)
    layout = {"out": beat_layout(ELEM, 3), "flags": beat_layout(Bool(), 3)}
    check_ready_to_valid(ReshapeUnit(ELEM, 2, 2, b, pad=PAD, flags=True),
                         {"in0": (beat_layout(ELEM, 2), bare_done(tokens))}, layout)


def test_parameters():
    assert repr(ReshapeUnit(ELEM, 1, 4, pad=0, flags=True)) == \
        "ReshapeUnit(Tile(int8, 1, 2), 1, 4, b=0, pad=0, flags=True)"
    assert not hasattr(ReshapeUnit(ELEM, 1, 4), "flags")
    for rank, chunk, b in ((1, 0, 0), (1, 2, 2), (-1, 2, 0), (1, 2, -1)):
        with pytest.raises(ValueError):
            ReshapeUnit(ELEM, rank, chunk, b)
    with pytest.raises(ValueError):
        ReshapeUnit(ELEM, 1, 2, pad=1000)  # does not fit int8
    assert np.array_equal(pad_value(ELEM, PAD), np.full((1, 2), PAD, np.int8))
