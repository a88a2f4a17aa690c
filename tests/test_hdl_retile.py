# amaranth: UnusedElaboratable=no
"""RetileStreamifyUnit against the interpreter's ``flat_map`` with ``retile_rows``/``retile_cols``.

Also holds the helpers the other FlatMap unit tests share: legal re-framings of a beat sequence
(a stop moved into a beat of its own, ``Done`` into a bare beat) and token comparison.
"""

import numpy as np
import pytest
import sympy
from amaranth.hdl import Value
from amaranth.sim import Simulator
from hypothesis import given, settings, strategies as st

from stepforge.compiler import functions as F
from stepforge.compiler.errors import StepRuntimeError
from stepforge.compiler.types import Index, Tile, Tuple, int8
from stepforge.contract.beat import beat_layout
from stepforge.contract.tokens import Beat, from_nested, is_stop, stop, to_beats
from stepforge.contract.values import values_equal
from stepforge.hdl.retile import RetileStreamifyUnit
from stepforge.hdl.unit import ErrorCode
from stepforge.sim.ref.ops_compute import expander, flat_map
from stepforge.sim.rtl.testbench import check_ready_to_valid, simulate

from .test_tokens import ragged

R_SYM = sympy.Symbol("R", positive=True, integer=True)


# -- shared helpers ------------------------------------------------------------------------------

def reframe(beats, rnd, p=0.5):
    """A legal re-framing of ``beats`` that decodes to the same tokens: with probability ``p``
    an element's stop moves into a stop-only beat of its own, and ``Done`` into a bare beat."""
    out = []
    for b in beats:
        tail = []
        if b.last and (b.has_data or b.stop) and rnd.random() < p:
            b = b._replace(last=0)
            tail = [Beat(None, 0, 0, 1)]
        if b.has_data and b.stop and rnd.random() < p:
            out += [Beat(b.data, 1, 0, 0), Beat(None, 0, b.stop, b.last)]
        else:
            out.append(b)
        out += tail
    return out


def tokens_equal(got, want):
    """Bit-exact equality of two token lists."""
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if is_stop(g) or is_stop(w):
            if g != w:
                return False
        elif not values_equal(g, w):
            return False
    return True


def beats_equal(got, want):
    """Bit-exact equality of two beat lists (``data`` compared only where ``has_data``)."""
    return len(got) == len(want) and all(
        (g.has_data, g.stop, g.last) == (w.has_data, w.stop, w.last)
        and (not g.has_data or values_equal(g.data, w.data)) for g, w in zip(got, want))


def project(tokens, i):
    """Field ``i`` of every element of a token list of tuples (stops kept)."""
    return [t if is_stop(t) else t[i] for t in tokens]


def check_run(run, want, fed, *, canonical):
    """The output tokens equal ``want``; every fed beat was taken once; no error; on canonical
    input beats, the output beats are canonical too."""
    assert run.error == 0, ErrorCode(run.code)
    assert tokens_equal(run.outputs["out"], want), (run.outputs["out"], want)
    assert run.accepted == {port: len(beats) for port, beats in fed.items()}
    assert all(b.has_data or b.stop or b.last for b in run.beats["out"])  # no empty beat
    if canonical:
        assert beats_equal(run.beats["out"], to_beats(want)), (run.beats["out"], to_beats(want))


def tiles(rows, cols, dynamic=False):
    """int8 tiles of ``rows x cols`` (``0..rows`` rows when ``dynamic``)."""
    def make(n):
        return st.lists(st.integers(-128, 127), min_size=n * cols, max_size=n * cols).map(
            lambda v: np.array(v, np.int8).reshape(n, cols))
    if dynamic:
        return st.integers(0, rows).flatmap(make)
    return make(rows)


# -- property tests ------------------------------------------------------------------------------

@st.composite
def retile_case(draw, with_valid):
    rank = draw(st.integers(0, 2))
    rows, cols = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dynamic = draw(st.booleans())
    split = draw(st.sampled_from(["row", "col"]))
    b = draw(st.integers(0, 1))
    elem = tiles(rows, cols, dynamic)
    if with_valid:
        def with_count(x):
            limit = x.shape[0] if split == "row" else x.shape[1]
            return st.tuples(st.just(x), st.integers(0, limit))
        elem = elem.flatmap(with_count)
    tensors = draw(ragged(rank, elems=elem, max_size=3))
    return rank, rows, cols, dynamic, split, b, tensors


def run_retile(case, valid_p, ready_p, seed, rnd, with_valid):
    rank, rows, cols, dynamic, split, b, tensors = case
    t = Tile(int8, R_SYM if dynamic else rows, cols)
    bound = rows if dynamic else None
    tokens = from_nested(tensors, rank)
    fn = (F.retile_rows if split == "row" else F.retile_cols)(valid=with_valid, b=b)
    want = flat_map(tokens, expander(fn, Tuple(t, Index()) if with_valid else t), b)
    canonical = rnd.random() < 0.3
    p = 0 if canonical else 0.5
    fed = {"in0": reframe(to_beats(project(tokens, 0) if with_valid else tokens), rnd, p)}
    inputs = {"in0": (beat_layout(t, rank, row_bound=bound), fed["in0"])}
    if with_valid:
        fed["valid"] = reframe(to_beats(project(tokens, 1)), rnd, p)
        inputs["valid"] = (beat_layout(Index(), rank), fed["valid"])
    dut = RetileStreamifyUnit(t, rank, split, valid=with_valid, b=b, row_bound=bound)
    run = simulate(dut, inputs, {"out": beat_layout(dut.out_type, rank + b, row_bound=bound)},
                   valid_p=valid_p, ready_p=ready_p, seed=seed)
    check_run(run, want, fed, canonical=canonical)


@settings(deadline=None, max_examples=25)
@given(retile_case(False), st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.integers(0, 2**16),
       st.randoms(use_true_random=False))
def test_matches_interpreter(case, valid_p, ready_p, seed, rnd):
    run_retile(case, valid_p, ready_p, seed, rnd, with_valid=False)


@settings(deadline=None, max_examples=25)
@given(retile_case(True), st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.integers(0, 2**16),
       st.randoms(use_true_random=False))
def test_valid_counts_match_interpreter(case, valid_p, ready_p, seed, rnd):
    run_retile(case, valid_p, ready_p, seed, rnd, with_valid=True)


# -- hand-worked cases ---------------------------------------------------------------------------

T32 = Tile(int8, 3, 2)
ROW = Tile(int8, 1, 2)


def tile(base, rows=3, cols=2):
    return (np.arange(rows * cols, dtype=np.int8).reshape(rows, cols) + base).astype(np.int8)


def test_b1_raises_the_closing_stop_of_the_last_tile():
    # b = 1, rank 1: [x, y] with x -> 3 rows S1 and y (0 valid rows) -> S1; the fibre's S1 is
    # raised onto y's (empty) sub-stream: r r r S1 S2, a stop-only beat S2 at the end.
    dut = RetileStreamifyUnit(T32, 1, valid=True, b=1)
    tokens = [tile(0), tile(10), stop(1)]
    counts = [3, 0, stop(1)]
    run = simulate(dut, {"in0": (beat_layout(T32, 1), tokens),
                         "valid": (beat_layout(Index(), 1), counts)}, {"out": beat_layout(ROW, 2)})
    rows = [tile(0)[r:r + 1] for r in range(3)]
    assert beats_equal(run.beats["out"], [Beat(rows[0], 1, 0, 0), Beat(rows[1], 1, 0, 0),
                                          Beat(rows[2], 1, 1, 0), Beat(None, 0, 2, 1)])


def test_b0_stop_of_an_empty_tile_is_raised_onto_the_previous_row():
    # b = 0: the fibre [x, y] with y keeping no row: x's last row carries the fibre's S1, fused.
    dut = RetileStreamifyUnit(T32, 1, valid=True)
    run = simulate(dut, {"in0": (beat_layout(T32, 1), [tile(0), tile(10), stop(1)]),
                         "valid": (beat_layout(Index(), 1), [2, 0, stop(1)])},
                   {"out": beat_layout(ROW, 1)})
    assert beats_equal(run.beats["out"], [Beat(tile(0)[0:1], 1, 0, 0),
                                          Beat(tile(0)[1:2], 1, 1, 1)])


def test_fibre_generating_nothing_is_a_stop_only_beat():
    dut = RetileStreamifyUnit(T32, 1, valid=True)
    run = simulate(dut, {"in0": (beat_layout(T32, 1), [tile(0), stop(1), tile(5), stop(1)]),
                         "valid": (beat_layout(Index(), 1), [1, stop(1), 0, stop(1)])},
                   {"out": beat_layout(ROW, 1)})
    assert beats_equal(run.beats["out"], [Beat(tile(0)[0:1], 1, 1, 0), Beat(None, 0, 1, 1)])


def test_bare_done_and_empty_stream():
    dut = RetileStreamifyUnit(T32, 1, b=1)
    fed = [Beat(tile(0), 1, 1, 0), Beat(None, 0, 0, 1)]
    run = simulate(dut, {"in0": (beat_layout(T32, 1), fed)}, {"out": beat_layout(ROW, 2)})
    assert run.outputs["out"][-1] == stop(2) and run.beats["out"][-1] == Beat(None, 0, 0, 1)
    run = simulate(RetileStreamifyUnit(T32, 1), {"in0": (beat_layout(T32, 1), [])},
                   {"out": beat_layout(ROW, 1)})
    assert run.beats["out"] == [Beat(None, 0, 0, 1)] and run.accepted == {"in0": 1}


# -- throughput ----------------------------------------------------------------------------------

@pytest.mark.parametrize("split,b", [("row", 0), ("row", 1), ("col", 0), ("col", 1)])
def test_one_piece_per_cycle(split, b):
    t = Tile(int8, 4, 3)
    tokens = from_nested([[tile(i, 4, 3) for i in range(5)], [tile(50, 4, 3)] * 3], 1)
    dut = RetileStreamifyUnit(t, 1, split, b=b)
    run = simulate(dut, {"in0": (beat_layout(t, 1), tokens)},
                   {"out": beat_layout(dut.out_type, 1 + b)})
    pieces = 8 * (4 if split == "row" else 3)
    assert len(run.beats["out"]) == pieces
    assert run.cycles == pieces  # a tile of R pieces takes R cycles, back to back


def test_one_piece_per_cycle_with_valid_counts():
    counts = [4, 1, 3, 2, 4, 1]
    dut = RetileStreamifyUnit(Tile(int8, 4, 3), 0, valid=True)
    run = simulate(dut, {"in0": (beat_layout(Tile(int8, 4, 3), 0), [tile(i, 4, 3) for i in range(6)]),
                         "valid": (beat_layout(Index(), 0), counts)},
                   {"out": beat_layout(dut.out_type, 0)})
    assert len(run.beats["out"]) == run.cycles == sum(counts)


# -- errors --------------------------------------------------------------------------------------

def test_valid_count_above_the_tile_is_over_bound():
    tokens, counts = [tile(0), tile(1), stop(1)], [2, 4, stop(1)]
    with pytest.raises(StepRuntimeError):
        flat_map(list(zip(tokens[:2], counts[:2])) + [stop(1)],
                 expander(F.retile_rows(valid=True), Tuple(T32, Index())), 0)
    dut = RetileStreamifyUnit(T32, 1, valid=True)
    run = simulate(dut, {"in0": (beat_layout(T32, 1), tokens),
                         "valid": (beat_layout(Index(), 1), counts)}, {"out": beat_layout(ROW, 1)})
    assert (run.error, run.code) == (1, ErrorCode.OVER_BOUND)
    assert run.accepted == {"in0": 1, "valid": 1}  # the faulty tile is not taken


def test_valid_count_above_a_dynamic_tile_is_over_bound():
    t = Tile(int8, R_SYM, 2)
    dut = RetileStreamifyUnit(t, 0, "row", valid=True, row_bound=3)
    run = simulate(dut, {"in0": (beat_layout(t, 0, row_bound=3), [tile(0, 1, 2), tile(0, 2, 2)]),
                         "valid": (beat_layout(Index(), 0), [1, 3])},
                   {"out": beat_layout(dut.out_type, 0)})
    assert (run.error, run.code) == (1, ErrorCode.OVER_BOUND)
    # the first row waits in the hold register for the next beat, which is the faulty one
    assert run.accepted == {"in0": 1, "valid": 1} and run.beats["out"] == []


@pytest.mark.parametrize("counts", [[1, 2], [1, stop(1), 2, stop(2)], [1, 2, stop(1)]])
def test_valid_stream_out_of_lock_step_is_stop_mismatch(counts):
    # counts end early (Done against S2) / a stop against an element / S1 against S2
    dut = RetileStreamifyUnit(T32, 2, valid=True)
    run = simulate(dut, {"in0": (beat_layout(T32, 2), [tile(0), tile(1), stop(2)]),
                         "valid": (beat_layout(Index(), 2), counts)}, {"out": beat_layout(ROW, 2)})
    assert (run.error, run.code) == (1, ErrorCode.STOP_MISMATCH)


def test_lock_step_on_tokens_not_beats():
    # the same tokens framed differently on the two ports are not a mismatch
    dut = RetileStreamifyUnit(T32, 1, valid=True)
    data = [Beat(tile(0), 1, 1, 1)]
    counts = [Beat(2, 1, 0, 0), Beat(None, 0, 1, 0), Beat(None, 0, 0, 1)]
    run = simulate(dut, {"in0": (beat_layout(T32, 1), data),
                         "valid": (beat_layout(Index(), 1), counts)}, {"out": beat_layout(ROW, 1)})
    assert run.error == 0
    assert tokens_equal(run.outputs["out"], [tile(0)[0:1], tile(0)[1:2], stop(1)])


def test_dynamic_row_count_above_its_bound_is_over_bound():
    # rows = 5 fits the 3-bit rows field of a bound-4 tile but exceeds the bound; pack_beat
    # refuses such a value, so the beat is built from the layout directly.
    t = Tile(int8, R_SYM, 2)
    dut = RetileStreamifyUnit(t, 0, row_bound=4)
    bits = beat_layout(t, 0, row_bound=4).const(
        {"data": {"rows": 5}, "has_data": 1, "last": 1}).as_bits()
    seen = {}

    async def bench(ctx):
        ctx.set(dut.in0.valid, 1)
        ctx.set(Value.cast(dut.in0.payload), bits)
        ctx.set(dut.out.ready, 1)
        taken = 0
        for _ in range(4):
            taken += ctx.get(dut.in0.ready)
            await ctx.tick()
        seen.update(error=ctx.get(dut.status.error), code=ctx.get(dut.status.code),
                    taken=taken, out_valid=ctx.get(dut.out.valid))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen == {"error": 1, "code": ErrorCode.OVER_BOUND, "taken": 0, "out_valid": 0}


def test_stop_above_the_rank_is_bad_stop():
    dut = RetileStreamifyUnit(T32, 2)
    run = simulate(dut, {"in0": (beat_layout(T32, 2), [Beat(tile(0), 1, 3, 1)])},
                   {"out": beat_layout(ROW, 2)})
    assert (run.error, run.code) == (1, ErrorCode.BAD_STOP)


# -- structure -----------------------------------------------------------------------------------

def test_no_ready_to_valid_path():
    tokens = from_nested([[tile(0), tile(1)], [], [tile(2)]], 1)
    counts = from_nested([[2, 0], [], [1]], 1)
    for b in (0, 1):
        dut = RetileStreamifyUnit(T32, 1, valid=True, b=b)
        check_ready_to_valid(dut, {"in0": (beat_layout(T32, 1), tokens),
                                   "valid": (beat_layout(Index(), 1), counts)},
                             {"out": beat_layout(ROW, 1 + b)})


def test_ports_and_repr():
    dut = RetileStreamifyUnit(Tile(int8, R_SYM, 2), 1, "col", valid=True, b=1, row_bound=4)
    assert repr(dut) == "RetileStreamifyUnit(Tile(int8, R, 2), 1, split='col', valid=True, b=1)"
    assert set(dict(dut.signature.members)) == {"in0", "valid", "out", "status"}
    assert dut.out_type == Tile(int8, R_SYM, 1) and dut.out_rank == 2
    assert repr(RetileStreamifyUnit(T32, 0)) == "RetileStreamifyUnit(Tile(int8, 3, 2), 0, split='row')"
    assert "valid" not in dict(RetileStreamifyUnit(T32, 0).signature.members)
    for bad in ({"split": "diag"}, {"b": 2}):
        with pytest.raises(ValueError):
            RetileStreamifyUnit(T32, 1, **bad)
    with pytest.raises(ValueError):
        RetileStreamifyUnit(Index(), 1)
    with pytest.raises(ValueError):
        RetileStreamifyUnit(T32, -1)
