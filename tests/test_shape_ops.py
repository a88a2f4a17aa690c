"""Shape operators: the stop algebra of spec section 4 on hand-worked examples and properties."""

import pytest
from hypothesis import given, settings, strategies as st

from stepforge.compiler.errors import StepRuntimeError
from stepforge.compiler.ops.shape import Expand, Flatten, Promote, Reshape, Zip
from stepforge.contract.tokens import canonical, format_tokens, from_nested, stop, to_nested
from stepforge.sim.ref.ops_shape import expand, flatten, promote, repeat_static, reshape

from .helpers import run_op
from .test_tokens import ragged

EX = [[[1, 2], [3]], [[4], [5, 6, 7]]]  # the rank-2 example of section 2


def tok(s):
    """Tokens from the spec's notation: '1 2 S1 3 S2' (Done implicit)."""
    return [stop(int(w[1:])) if w.startswith("S") else int(w) for w in s.split()]


def fmt(tokens):
    return format_tokens(tokens)[:-len(" Done")] if tokens else ""


class TestFlatten:
    def test_inner_two_levels(self):
        assert fmt(flatten(tok("1 2 S1 3 S2 4 S1 5 6 7 S2"), 0, 1)) == "1 2 3 S1 4 5 6 7 S1"

    def test_outer_levels(self):
        # rank 3, merge levels 1..2: s <= 1 stays, s = 2 becomes 1, s = 3 becomes 2
        assert fmt(flatten(tok("1 S1 2 S2 3 S3"), 1, 2)) == "1 S1 2 S1 3 S2"

    def test_drops_beats_that_carry_nothing(self):
        # [[a], []] flattened: the empty row's stop-only beat disappears
        assert fmt(flatten(tok("1 S1 S2"), 0, 1)) == "1 S1"

    def test_whole_stream_through_graph(self):
        assert run_op(lambda x: Flatten(x, 0, 1), (EX, 2)) == [[[1, 2, 3], [4, 5, 6, 7]]]


class TestReshape:
    def test_rank0_counts_elements_and_pads_at_done(self):
        data, flags = reshape(tok("1 2 3 4 5"), 2, 0, pad=0)
        assert fmt(data) == "1 2 S1 3 4 S1 5 0 S1"
        assert flags == [False, False, stop(1), False, False, stop(1), False, True, stop(1)]

    def test_stop_before_a_full_chunk_pads_and_raises(self):
        data, _ = reshape(tok("1 2 3 S1 4 S1"), 2, 0, pad=9)
        assert fmt(data) == "1 2 S1 3 9 S2 4 9 S2"

    def test_chunk_end_meets_input_stop(self):
        data, _ = reshape(tok("1 2 S1 3 4 S1"), 2, 0)
        assert fmt(data) == "1 2 S2 3 4 S2"

    def test_empty_fibre(self):
        data, _ = reshape(tok("S1 1 S1"), 2, 0, pad=0)
        assert fmt(data) == "S2 1 0 S2"

    def test_level_b_counts_stops(self):
        data, _ = reshape(tok("1 S1 2 S1 3 S1 4 S2"), 2, 1)
        assert fmt(data) == "1 S1 2 S2 3 S1 4 S3"

    def test_missing_pad_is_a_runtime_error(self):
        with pytest.raises(StepRuntimeError, match=r"R: a stop at beat 2 ends a partial chunk of 1/2"):
            reshape(tok("1 2 3 S1"), 2, 0, op="R")

    def test_padding_flag_stream(self):
        out = run_op(lambda x: Reshape(x, 3, 0, pad=0, flags=True), ([[1, 2, 3, 4]], 1))
        assert out == [[[[1, 2, 3], [4, 0, 0]]], [[[False, False, False], [False, True, True]]]]


class TestPromote:
    def test_new_outermost_dimension(self):
        assert fmt(promote(tok("1 2 S1 3 S2 4 S1 5 6 7 S2"), 3, 2)) == "1 2 S1 3 S2 4 S1 5 6 7 S3"

    def test_empty_stream_stays_empty(self):
        assert promote([], 1, 0) == []
        assert run_op(lambda x: Promote(x), ([], 0)) == [[]]

    def test_rank0_to_one_tensor(self):
        assert fmt(promote(tok("1 2 3"), 1, 0)) == "1 2 3 S1"

    def test_level0_every_element_closes(self):
        assert fmt(promote(tok("1 2 S1 3 S1"), 0, 1)) == "1 S1 2 S2 3 S2"

    def test_inner_level(self):
        assert fmt(promote(tok("1 2 S1 3 S2"), 2, 2)) == "1 2 S1 3 S3"


class TestExpandAndRepeat:
    def test_repeat_static(self):
        assert fmt(repeat_static(tok("1 2 S1 S1"), 3)) == "1 1 1 S1 2 2 2 S2 S2"

    def test_expand_follows_reference(self):
        # data [2, 1], ref [2, D]: each element repeated along the reference's rows
        out = expand(tok("7 S1 8 S1"), tok("0 0 0 S1 0 S1"), 1)
        assert fmt(out) == "7 7 7 S1 8 S1"

    def test_expand_empty_reference_fibre(self):
        assert fmt(expand(tok("7 S1 8 S1"), tok("S1 0 0 S1"), 1)) == "S1 8 8 S1"

    def test_expand_stop_mismatch(self):
        with pytest.raises(StepRuntimeError, match=r"E: reference stop S2 at beat 1 does not match "
                                                   r"the data's stop S1 at beat 0"):
            expand(tok("7 S1 8 S2"), tok("0 0 S2"), 1, op="E")

    def test_expand_through_graph(self):
        def build(x, r):
            return Expand(x, r, 1)
        p_out = run_op(build, ([[[7]], [[8]]], 2), ([[[0, 0]], [[0]]], 2),
                       shapes=[[2, 1, 1], [2, 1, 4]])
        assert p_out == [[[[7, 7]], [[8]]]]


class TestZip:
    def test_pairs(self):
        out = run_op(lambda a, b: Zip(a, b), ([[1, 2], [3]], 1), ([[4, 5], [6]], 1),
                     shapes=[[2, 3], [2, 3]])
        assert out == [[[(1, 4), (2, 5)], [(3, 6)]]]

    def test_stop_mismatch_names_beat(self):
        with pytest.raises(StepRuntimeError, match=r"Zip_0: stop mismatch between in0 and in1 at beat 0: "
                                                   r"\(element, stop 0\) vs \(element, stop 1\)"):
            run_op(lambda a, b: Zip(a, b), ([[1, 2], [3]], 1), ([[4], [5, 6]], 1),
                   shapes=[[2, 3], [2, 3]])


@settings(deadline=None, max_examples=100)
@given(st.integers(1, 3), st.integers(1, 3).flatmap(
    lambda c: st.tuples(st.just(c), st.lists(st.lists(st.lists(st.integers(0, 9), min_size=c, max_size=c),
                                                         max_size=3), max_size=3))))
def test_flatten_then_reshape_restores_regular_rows(_, case):
    """Flatten(0, 1) then Reshape(c, 0) restores a stream whose rows all have c elements."""
    c, tensors = case
    tokens = from_nested(tensors, 2)
    data, _ = reshape(flatten(tokens, 0, 1), c, 0)
    assert to_nested(data, 2) == canonical(tensors, 2)


@settings(deadline=None, max_examples=100)
@given(st.integers(0, 3).flatmap(lambda r: st.tuples(st.just(r), ragged(r), st.integers(0, r))))
def test_promote_then_flatten_is_identity(case):
    """Promote at level b inserts a size-1 dimension that Flatten(b, b+1)... removes again."""
    rank, tensors, b = case
    tokens = from_nested(tensors, rank)
    promoted = promote(tokens, b, rank)
    if b == 0:
        back = flatten(promoted, 0, 1)
        # merging the new size-1 innermost level with D_0 restores the stream
    else:
        back = flatten(promoted, b - 1, b)
    assert to_nested(back, rank) == canonical(tensors, rank)


@settings(deadline=None, max_examples=100)
@given(st.integers(0, 3).flatmap(lambda r: st.tuples(st.just(r), ragged(r))), st.integers(1, 3))
def test_repeat_static_counts(case, n):
    rank, tensors = case
    out = to_nested(repeat_static(from_nested(tensors, rank), n), rank + 1)

    def expect(x, k):
        return [x] * n if k == 0 else [expect(c, k - 1) for c in x]
    assert out == canonical([expect(t, rank) for t in tensors], rank + 1)
