"""FlattenUnit against the reference interpreter's ``flatten``."""

import numpy as np
from hypothesis import given, settings, strategies as st

from stepforge.compiler.types import Tile, int8
from stepforge.contract.beat import beat_layout
from stepforge.contract.tokens import from_nested, to_beats
from stepforge.contract.values import values_equal
from stepforge.hdl.flatten import FlattenUnit
from stepforge.sim.ref.ops_shape import flatten
from stepforge.sim.rtl.testbench import check_ready_to_valid, simulate

from .test_tokens import ragged

ELEM = Tile(int8, 1, 2)
TILES = st.lists(st.integers(-128, 127), min_size=2, max_size=2).map(lambda r: np.array([r], np.int8))


@settings(deadline=None, max_examples=40)
@given(st.integers(1, 3).flatmap(lambda r: st.tuples(
        st.just(r), ragged(r, elems=TILES, max_size=3),
        st.integers(0, r - 1).flatmap(lambda lo: st.tuples(st.just(lo), st.integers(lo + 1, r))))),
       st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.integers(0, 2**16))
def test_matches_interpreter(case, valid_p, ready_p, seed):
    rank, tensors, (lo, hi) = case
    tokens = from_nested(tensors, rank)
    run = simulate(FlattenUnit(ELEM, rank, lo, hi), {"in0": (beat_layout(ELEM, rank), tokens)},
                   {"out": beat_layout(ELEM, rank - (hi - lo))},
                   valid_p=valid_p, ready_p=ready_p, seed=seed)
    want = flatten(tokens, lo, hi)
    got = run.outputs["out"]
    assert len(got) == len(want) and all(values_equal(g, w) for g, w in zip(got, want))
    assert run.accepted["in0"] == len(to_beats(tokens))  # every beat taken, none twice
    assert run.error == 0


def test_one_beat_per_cycle():
    tokens = from_nested([[[np.full((1, 2), i, np.int8) for i in range(4)]] * 5], 2)
    run = simulate(FlattenUnit(ELEM, 2, 0, 1), {"in0": (beat_layout(ELEM, 2), tokens)},
                   {"out": beat_layout(ELEM, 1)})
    assert run.cycles == len(to_beats(tokens)) == 20


def test_no_ready_to_valid_path():
    tokens = from_nested([[[np.zeros((1, 2), np.int8)], []]], 2)
    check_ready_to_valid(FlattenUnit(ELEM, 2, 0, 1), {"in0": (beat_layout(ELEM, 2), tokens)},
                         {"out": beat_layout(ELEM, 1)})
