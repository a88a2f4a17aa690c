# amaranth: UnusedElaboratable=no
"""The PCU over tiles with a dynamic row count (the paper's dynamic tiling) against the reference
token semantics and arithmetic, bit for bit on whole beats (the rows beyond the count included),
under random valid/ready; the cycle cost follows the actual rows."""

import numpy as np
import pytest
import sympy
from hypothesis import given, settings, strategies as st

from stepforge.compiler import functions as F
from stepforge.compiler.types import Tile, int8, int16, int32
from stepforge.contract import arith
from stepforge.contract.beat import beat_layout, pack_beat
from stepforge.contract.tokens import Beat, from_nested, to_beats
from stepforge.hdl.pcu import PCU
from stepforge.hdl.unit import ErrorCode
from stepforge.sim.ref.ops_compute import accum, map_tokens, scan

from .test_hdl_pcu import LIGHT, SEEDS, assert_accounted, assert_tokens, evaluator, folder, run_unit

EXAMPLES = 20
R = sympy.Symbol("R", integer=True, nonnegative=True)


def dyn_tiles(dtype, cols, bound, lo=-60, hi=60):
    """Tiles of ``0..bound`` rows (``lo..hi`` keeps exp/silu inside their interesting range)."""
    return st.integers(0, bound).flatmap(lambda n: st.lists(
        st.integers(lo, hi), min_size=n * cols, max_size=n * cols).map(
            lambda v: np.array(v, dtype.np).reshape(n, cols)))


def static_tile(rng, dtype, rows, cols):
    return rng.integers(-60, 60, (rows, cols)).astype(dtype.np)


def assert_whole_beats(run, dut, want, bound):
    """The output beats carrying data are the interpreter's canonical beats bit for bit: the
    row count, the valid rows and zero padding up to the bound."""
    layout = beat_layout(dut.out_type, dut.out_rank, row_bound=bound)
    got = [(b, p) for b, p in zip(run.beats["out"], run.payloads["out"]) if b.has_data]
    ref = [b for b in to_beats(want) if b.has_data]
    assert len(got) == len(ref)
    for (b, payload), r in zip(got, ref):
        assert payload == pack_beat(layout, Beat(r.data, 1, b.stop, b.last)), (b, r)


UNARY = {
    "exp": F.exp,
    "silu": F.silu,
    "add": F.function(lambda x: x + 5),
    "div": F.function(lambda x: x / 3),
    "cast32": F.cast(int32),
    "row_sum": F.row_sum,
    "softmax_num": F.function(lambda x: (x - x.row_max()).exp()),
    "pair": F.function(lambda x: (x.row_sum(), x * x)),
}


@settings(deadline=None, max_examples=EXAMPLES)
@given(st.sampled_from(sorted(UNARY)), st.sampled_from([int8, int16]), st.integers(1, 3),
       st.integers(1, 4), st.integers(1, 2), st.integers(1, 4), st.data(), LIGHT, LIGHT, SEEDS)
def test_map_unary_dynamic_rows(name, dtype, cols, bound, rank, lanes, data, valid_p, ready_p, seed):
    fn = UNARY[name]
    lo, hi = (-60, 60) if dtype is int8 else (-2000, 2000)
    elems = dyn_tiles(dtype, cols, bound, lo, hi)
    tensor = elems
    for _ in range(rank):
        tensor = st.lists(tensor, max_size=3)
    tokens = from_nested(data.draw(st.lists(tensor, max_size=3)), rank)
    dut = PCU(fn, Tile(dtype, R, cols), rank, lanes=lanes, row_bound=bound)
    run = run_unit(dut, [tokens], valid_p=valid_p, ready_p=ready_p, seed=seed, row_bound=bound)
    want = map_tokens(tokens, evaluator(fn))
    assert_tokens(run.outputs["out"], want)
    assert_whole_beats(run, dut, want, bound)
    assert_accounted(run, [tokens])


BINARY = {
    "matmul": (F.matmul, "static"),
    "matmul_t": (F.matmul(transpose_b=True), "static_t"),
    "matmul8": (F.matmul(out=int8), "static"),
    "add": (F.add, "dynamic"),
    "gate": (F.function(lambda a, b: F.silu(a) * b), "dynamic"),
    "bias": (F.function(lambda a, b: (a - b).row_max()), "row"),
    "mac_mix": (F.function(lambda a, w: (a @ w) + (a @ w).row_sum()), "static"),
}


@settings(deadline=None, max_examples=EXAMPLES)
@given(st.sampled_from(sorted(BINARY)), st.sampled_from([int8, int16]), st.integers(1, 3),
       st.integers(1, 3), st.integers(1, 4), st.integers(1, 2), st.sampled_from([1, 3, 8]),
       st.data(), LIGHT, LIGHT, SEEDS)
def test_map_binary_dynamic_rows(name, dtype, k, n, bound, rank, units, data, valid_p, ready_p, seed):
    """``a`` has dynamic rows; ``b`` has the same dynamic rows, or is a static weight (``a @ w``,
    ``a @ w.T``) or a broadcast ``[1, k]`` row. Both streams have one structure."""
    fn, other = BINARY[name]
    rng = np.random.default_rng(seed)
    if other == "static":
        bt = Tile(dtype, k, n)
    elif other == "static_t":
        bt = Tile(dtype, n, k)
    elif other == "row":
        bt = Tile(dtype, 1, k)
    else:
        bt = Tile(dtype, R, k)
    rows = data.draw(st.lists(st.lists(st.integers(0, bound), max_size=3), max_size=3))
    if rank == 2:
        rows = [rows]
    a_tensors = _map_nested(rows, lambda r: static_tile(rng, dtype, r, k))
    b_tensors = _map_nested(rows, lambda r: static_tile(rng, dtype, r if other == "dynamic" else bt.rows, bt.cols))
    a, b = from_nested(a_tensors, rank), from_nested(b_tensors, rank)
    dut = PCU(fn, [Tile(dtype, R, k), bt], rank, lanes=2, multipliers=units, row_bound=bound)
    run = run_unit(dut, [a, b], valid_p=valid_p, ready_p=ready_p, seed=seed, row_bound=bound)
    want = map_tokens(from_nested(_zip_nested(a_tensors, b_tensors, rank), rank), evaluator(fn, True))
    assert_tokens(run.outputs["out"], want)
    assert_whole_beats(run, dut, want, bound)
    assert_accounted(run, [a, b])


def _map_nested(x, f):
    return [_map_nested(c, f) for c in x] if isinstance(x, list) else f(x)


def _zip_nested(x, y, rank):
    if rank < 0:
        return (x, y)
    return [_zip_nested(a, b, rank - 1) for a, b in zip(x, y)]


@settings(deadline=None, max_examples=EXAMPLES)
@given(st.sampled_from([int8, int16]), st.integers(1, 2), st.integers(1, 4), st.integers(1, 3),
       st.data(), LIGHT, LIGHT, SEEDS)
def test_retile_col_dynamic_rows(dtype, width, bound, pieces, data, valid_p, ready_p, seed):
    """``[D_e, n]`` column tiles of one fibre joined into a ``[D_e, pieces * n]`` tile (the MoE's
    Accum(retile_col)); every fibre has its own row count."""
    rng = np.random.default_rng(seed)
    rows = data.draw(st.lists(st.lists(st.integers(0, bound), min_size=1, max_size=2), max_size=3))
    tensors = [[[static_tile(rng, dtype, r, width) for _ in range(pieces)] for r in fibres]
               for fibres in rows]
    tokens = from_nested(tensors, 2)
    out_t = Tile(dtype, R, pieces * width)
    dut = PCU(F.retile_col, Tile(dtype, R, width), 2, mode="accum", b=1, out_type=out_t,
              row_bound=bound)
    run = run_unit(dut, [tokens], valid_p=valid_p, ready_p=ready_p, seed=seed, row_bound=bound)
    init = arith.init_value(F.as_init(None, Tile(dtype, R, width), F.retile_col))
    want = accum(tokens, folder(F.retile_col), init, 1)
    assert_tokens(run.outputs["out"], want)
    assert_whole_beats(run, dut, want, bound)
    assert_accounted(run, [tokens])


@settings(deadline=None, max_examples=EXAMPLES)
@given(st.sampled_from(["accum", "scan"]), st.integers(1, 3), st.integers(2, 4),
       st.data(), LIGHT, LIGHT, SEEDS)
def test_retile_row_of_dynamic_rows(mode, piece_bound, factor, data, valid_p, ready_p, seed):
    """Tiles of dynamic rows stacked into a taller dynamic tile (each fibre fits the bound)."""
    rng = np.random.default_rng(seed)
    bound = piece_bound * factor
    fibres = data.draw(st.lists(st.lists(st.integers(0, piece_bound), max_size=factor), max_size=3))
    tokens = from_nested([[static_tile(rng, int16, r, 2) for r in f] for f in fibres], 1)
    S = sympy.Symbol("S", integer=True, nonnegative=True)
    dut = PCU(F.retile_row, Tile(int16, R, 2), 1, mode=mode, b=1, out_type=Tile(int16, S, 2),
              row_bound={R: piece_bound, S: bound})
    run = run_unit(dut, [tokens], valid_p=valid_p, ready_p=ready_p, seed=seed,
                   row_bound={R: piece_bound, S: bound})
    init = arith.init_value(F.empty_rows(int16, 2))
    want = (accum if mode == "accum" else scan)(tokens, folder(F.retile_row), init, 1)
    assert_tokens(run.outputs["out"], want)
    assert_whole_beats(run, dut, want, {R: piece_bound, S: bound})
    assert_accounted(run, [tokens])


def test_cycles_follow_the_actual_rows():
    """A fully fed ``a @ w`` takes ``ceil(rows * K * N / multipliers)`` cycles per beat, not the
    bound's; a two-node function skips the idle steps of both nodes."""
    rng = np.random.default_rng(0)
    bound, K, N = 8, 4, 4
    w = static_tile(rng, int16, K, N)
    # a row's 16 products per step: 4 per output, a 2-level adder tree (latency 2 + 2); the
    # product by 3 pipelines too (latency 2) after the matmul's
    for fn, per, latency in ((F.matmul, lambda r: max(1, -(-r * K * N // 16)), 4),
                             (F.function(lambda a, b: (a @ b) * 3),
                              lambda r: max(1, -(-r * K * N // 16)) + max(1, -(-r * N // 4)), 6)):
        dut = PCU(fn, [Tile(int16, R, K), Tile(int16, K, N)], 1, row_bound=bound)
        assert dut.ii == per(bound) and all(dut.cycles(r) == per(r) for r in range(bound + 1))
        assert dut.latency == latency
        for r in (0, 1, 3, 8):
            beats = 6
            a = from_nested([[static_tile(rng, int16, r, K) for _ in range(beats)]], 1)
            b = from_nested([[w] * beats], 1)
            run = run_unit(dut, [a, b], row_bound=bound)
            want = map_tokens([(x, w) if isinstance(x, np.ndarray) else x for x in a],
                              evaluator(fn, True))
            assert_tokens(run.outputs["out"], want)
            # the first beat is taken in its last step; the last result leaves the pipeline
            # (latency) and then the output register a cycle later
            assert run.cycles == (beats - 1) * per(r) + 2 + latency, (fn, r, run.cycles)


def test_row_counts_that_differ_are_flagged():
    x = [np.ones((2, 2), np.int16), np.ones((3, 2), np.int16)]
    y = [np.ones((2, 2), np.int16), np.ones((1, 2), np.int16)]
    dut = PCU(F.add, [Tile(int16, R, 2)] * 2, 1, row_bound=4)
    run = run_unit(dut, [from_nested([x], 1), from_nested([y], 1)], row_bound=4)
    assert run.error == 1 and run.code == ErrorCode.ROW_MISMATCH
    assert run.accepted == {"in0": 1, "in1": 1}
    cols = [np.ones((2, 1), np.int16), np.ones((3, 1), np.int16)]
    dut = PCU(F.retile_col, Tile(int16, R, 1), 1, mode="accum", b=1, out_type=Tile(int16, R, 2),
              row_bound=4)
    run = run_unit(dut, [from_nested([cols], 1)], row_bound=4)
    assert run.error == 1 and run.code == ErrorCode.ROW_MISMATCH
    assert run.accepted["in0"] == 1 and run.beats["out"] == []


def test_functions_that_are_not_row_independent_are_refused():
    S = sympy.Symbol("S", integer=True, nonnegative=True)
    with pytest.raises(ValueError, match=r"right operand Tile\(int16, R, 3\) with a dynamic row "
                                         r"count; only the left operand's rows may be dynamic"):
        PCU(F.matmul(transpose_b=True), [Tile(int16, 2, 3), Tile(int16, R, 3)], 1, row_bound=4)
    with pytest.raises(ValueError, match=r"inputs with different dynamic row counts \(in0 "
                                         r"Tile\(int16, R, 3\), in1 Tile\(int16, S, 3\)\)"):
        PCU(F.add, [Tile(int16, R, 3), Tile(int16, S, 3)], 1, row_bound=4)
    with pytest.raises(ValueError, match=r"input in0 Tile\(int16, 2, R\) needs static, non-empty "
                                         r"columns"):
        PCU(F.exp, Tile(int16, 2, R), 1, row_bound=4)
