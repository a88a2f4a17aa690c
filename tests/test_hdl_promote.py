# amaranth: UnusedElaboratable=no
"""PromoteUnit against the reference interpreter's ``promote``, under every legal beat framing."""

import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stepforge.compiler.types import Tile, int8
from stepforge.contract.beat import beat_layout
from stepforge.contract.tokens import Beat, from_beats, from_nested, stop, to_beats
from stepforge.contract.values import values_equal
from stepforge.hdl.promote import PromoteUnit
from stepforge.sim.ref.ops_shape import promote
from stepforge.sim.rtl.testbench import check_ready_to_valid, simulate

from .test_tokens import ragged

ELEM = Tile(int8, 1, 2)
TILES = st.lists(st.integers(-128, 127), min_size=2, max_size=2).map(lambda r: np.array([r], np.int8))
#: ``None`` feeds the canonical beats; an int seeds a random legal re-framing (:func:`reframe`).
FRAMING = st.one_of(st.none(), st.integers(0, 2**16))


def tile(v):
    return np.full((1, 2), v, np.int8)


def reframe(tokens, seed=None, p=0.5):
    """The beats to feed for ``tokens``: canonical when ``seed`` is None, else a random framing.

    With probability ``p`` each element beat's stop moves into a stop-only beat of its own, and
    the final ``Done`` into a bare ``Done`` beat: ``(a, stop 1, last)`` may become
    ``(a)``, ``(-, stop 1)``, ``(-, last)``. Every framing decodes to ``tokens`` (checked).
    """
    beats = to_beats(tokens)
    if seed is None:
        return beats
    rng = random.Random(seed)
    out = []
    for bt in beats:
        if bt.has_data and bt.stop and rng.random() < p:
            out += [Beat(bt.data, 1, 0, 0), Beat(None, 0, bt.stop, bt.last)]
        else:
            out.append(bt)
    if (out[-1].has_data or out[-1].stop) and rng.random() < p:
        out[-1:] = [out[-1]._replace(last=0), Beat(None, 0, 0, 1)]
    assert from_beats(out) == tokens
    return out


def bare_done(tokens):
    """Every stop in a beat of its own and ``Done`` as a bare beat (the fully split framing)."""
    return reframe(tokens, seed=0, p=1.0)


def tokens_equal(got, want):
    return len(got) == len(want) and all(values_equal(g, w) for g, w in zip(got, want))


def run_promote(rank, b, beats_or_tokens, **kw):
    return simulate(PromoteUnit(ELEM, rank, b), {"in0": (beat_layout(ELEM, rank), beats_or_tokens)},
                    {"out": beat_layout(ELEM, rank + 1)}, **kw)


@settings(deadline=None, max_examples=30)
@given(st.integers(0, 3).flatmap(lambda r: st.tuples(
        st.just(r), ragged(r, elems=TILES, max_size=3), st.integers(0, r + 1))),
       FRAMING, st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.integers(0, 2**16))
def test_matches_interpreter(case, framing, valid_p, ready_p, seed):
    rank, tensors, b = case
    tokens = from_nested(tensors, rank)
    beats = reframe(tokens, framing)
    run = run_promote(rank, b, beats, valid_p=valid_p, ready_p=ready_p, seed=seed)
    assert tokens_equal(run.outputs["out"], promote(tokens, b, rank))
    assert run.accepted["in0"] == len(beats)  # every beat taken, none twice
    assert all(bt.has_data or bt.stop or bt.last for bt in run.beats["out"])
    assert run.error == 0


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_outer_promote_with_a_bare_done(rank):
    # The final tensor's closing stop S_N arrives without Done; the bare Done beat that follows
    # must turn it into S_(N+1), not leave S_N and add nothing (or add a stray stop).
    tensors = {0: [tile(1), tile(2)], 1: [[tile(1)], [tile(2), tile(3)]],
               2: [[[tile(1)], []], [[tile(2)]]]}[rank]
    tokens = from_nested(tensors, rank)
    beats = bare_done(tokens)
    assert beats[-1] == Beat(None, 0, 0, 1) and beats[-2].last == 0
    run = run_promote(rank, rank + 1, beats)
    want = promote(tokens, rank + 1, rank)
    assert want[-1] == stop(rank + 1)
    assert tokens_equal(run.outputs["out"], want)
    assert run.beats["out"][-1].stop == rank + 1 and run.beats["out"][-1].last == 1


@pytest.mark.parametrize("rank, b", [(r, b) for r in range(3) for b in range(r + 2)])
def test_empty_stream_stays_empty(rank, b):
    run = run_promote(rank, b, [])
    assert run.outputs["out"] == promote([], b, rank) == []
    assert run.beats["out"] == [Beat(None, 0, 0, 1)]


def test_level_zero_takes_a_stop_from_the_next_beat():
    # ``a`` then a stop-only S1 beat: a's new stop is S2 (not S1 then S2, an extra empty fibre).
    tokens = from_nested([[tile(1)], [tile(2), tile(3)]], 1)
    run = run_promote(1, 0, bare_done(tokens))
    assert tokens_equal(run.outputs["out"], promote(tokens, 0, 1))
    assert [bt.stop for bt in run.beats["out"]] == [2, 1, 2, 0]


@pytest.mark.parametrize("b, cycles", [(0, 17), (1, 16), (2, 17)])
def test_one_beat_per_cycle(b, cycles):
    # b = 1 is combinational; b = 0 and b = rank + 1 hold one beat: one cycle of latency.
    tokens = from_nested([[tile(i) for i in range(4)]] * 4, 1)
    run = run_promote(1, b, tokens)
    assert len(run.beats["out"]) == len(to_beats(tokens)) == 16
    assert run.cycles == cycles


@pytest.mark.parametrize("rank, b", [(1, 0), (1, 1), (1, 2), (0, 1)])
def test_no_ready_to_valid_path(rank, b):
    tokens = from_nested([[tile(1), tile(2)], [], [tile(3)]] if rank else [tile(1), tile(2)], rank)
    check_ready_to_valid(PromoteUnit(ELEM, rank, b), {"in0": (beat_layout(ELEM, rank), bare_done(tokens))},
                         {"out": beat_layout(ELEM, rank + 1)})


def test_parameters():
    assert repr(PromoteUnit(ELEM, 2)) == "PromoteUnit(Tile(int8, 1, 2), 2, b=3)"
    assert PromoteUnit(ELEM, 2, 0).b == 0
    for rank, b in ((2, 4), (2, -1), (-1, None), (1, 1.0)):
        with pytest.raises(ValueError):
            PromoteUnit(ELEM, rank, b)
