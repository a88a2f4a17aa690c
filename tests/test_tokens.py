"""Tokens, nested lists and beats: the encodings of spec section 2."""

import pytest
from hypothesis import given, settings, strategies as st

from stepforge.contract.tokens import (Beat, beat_index, canonical, format_tokens, from_beats,
                                  from_nested, stop, to_beats, to_nested)


def test_rank2_example_of_section_2():
    tensors = [[[1, 2], [3]], [[4], [5, 6, 7]]]
    tokens = from_nested(tensors, 2)
    assert format_tokens(tokens) == "1 2 S1 3 S2 4 S1 5 6 7 S2 Done"
    assert to_nested(tokens, 2) == tensors
    assert to_beats(tokens) == [
        Beat(1, 1, 0, 0), Beat(2, 1, 1, 0), Beat(3, 1, 2, 0), Beat(4, 1, 1, 0),
        Beat(5, 1, 0, 0), Beat(6, 1, 0, 0), Beat(7, 1, 2, 1)]


def test_empty_innermost_fibre():
    tokens = from_nested([[["a"], []]], 2)
    assert format_tokens(tokens) == "'a' S1 S2 Done"
    assert to_beats(tokens) == [Beat("a", 1, 1, 0), Beat(None, 0, 2, 1)]


def test_stream_of_zero_tensors_is_a_bare_done():
    assert from_nested([], 3) == []
    assert to_beats([]) == [Beat(None, 0, 0, 1)]
    assert from_beats([Beat(None, 0, 0, 1)]) == []


def test_bare_done_and_fused_done_decode_alike():
    fused = [Beat(1, 1, 1, 1)]
    bare = [Beat(1, 1, 1, 0), Beat(None, 0, 0, 1)]
    assert from_beats(fused) == from_beats(bare) == [1, stop(1)]


def test_zero_rows_and_one_empty_row_encode_identically():
    assert from_nested([[]], 2) == from_nested([[[]]], 2) == [stop(2)]
    assert to_nested([stop(2)], 2) == [[[]]]
    assert canonical([[]], 2) == [[[]]]


def test_malformed_beats_are_refused():
    with pytest.raises(ValueError, match="carries nothing"):
        from_beats([Beat(None, 0, 0, 0), Beat(None, 0, 0, 1)])
    with pytest.raises(ValueError, match="no Done"):
        from_beats([Beat(1, 1, 0, 0)])
    with pytest.raises(ValueError, match="2 beats follow"):
        from_beats([Beat(1, 1, 0, 1), Beat(1, 1, 0, 0), Beat(1, 1, 0, 1)])


def test_unterminated_stream_is_refused():
    with pytest.raises(ValueError, match="ends inside a tensor"):
        to_nested([1, 2, stop(1)], 2)
    with pytest.raises(ValueError, match="outside 1..2"):
        to_nested([1, stop(3)], 2)


def test_beat_index():
    tokens = [1, stop(1), stop(1), 2, stop(2), 3]
    assert [beat_index(tokens, i) for i in range(len(tokens))] == [0, 0, 1, 2, 2, 3]


def ragged(rank, elems=st.integers(-5, 5), max_size=4):
    """Random rank-``rank`` streams as nested lists, empty dimensions included."""
    tensor = elems
    for _ in range(rank):
        tensor = st.lists(tensor, max_size=max_size)
    return st.lists(tensor, max_size=max_size)


@settings(deadline=None, max_examples=200)
@given(st.integers(0, 4).flatmap(lambda r: st.tuples(st.just(r), ragged(r))))
def test_nested_to_beats_to_nested_is_identity(case):
    rank, tensors = case
    beats = to_beats(from_nested(tensors, rank))
    assert beats[-1].last == 1 and all(b.last == 0 for b in beats[:-1])
    assert all(b.has_data or b.stop or b.last for b in beats)
    assert to_nested(from_beats(beats), rank) == canonical(tensors, rank)
