# amaranth: UnusedElaboratable=no
"""The PCU against the reference token semantics (``sim/ops_compute``) and arithmetic
(``contract/arith``), bit for bit, under random ragged streams and random valid/ready."""

import numpy as np
import pytest
import sympy
from amaranth.hdl import Const, Module, Signal, signed
from amaranth.sim import Simulator
from hypothesis import example, given, settings, strategies as st

from stepforge.compiler import functions as F
from stepforge.compiler.graph import Program
from stepforge.compiler.lower_units import pcu_for_node
from stepforge.compiler.ops.compute import Accum, Map
from stepforge.compiler.ops.shape import Zip
from stepforge.compiler.types import Tile, Tuple, bf16, fp32, int8, int16, int32
from stepforge.contract import arith, fixedpoint
from stepforge.contract.beat import beat_layout
from stepforge.contract.tokens import Beat, from_nested, to_beats
from stepforge.contract.values import values_equal
from stepforge.hdl.config import HardwareConfig
from stepforge.hdl.pcu import PCU
from stepforge.hdl.tile_ops import Stager, fixed_point_alu, lane_depth, segment_rom
from stepforge.hdl.unit import ErrorCode
from stepforge.sim.ref.ops_compute import accum, map_tokens, scan
from stepforge.sim.ref.ops_shape import zip_streams
from stepforge.sim.rtl.testbench import check_ready_to_valid, simulate

from .test_tokens import ragged

EXAMPLES = 25


# -- helpers -------------------------------------------------------------------------------------

def tiles(t, lo=None, hi=None):
    """Random tiles of type ``t`` (values in ``[lo, hi]``, default the dtype's range)."""
    lo = t.dtype.min if lo is None else lo
    hi = t.dtype.max if hi is None else hi
    n = t.rows * t.cols
    return st.lists(st.integers(lo, hi), min_size=n, max_size=n).map(
        lambda v: np.array(v, t.dtype.np).reshape(t.rows, t.cols))


def nonlinear_tiles(t):
    """Tiles whose values are often inside the interesting range of exp/silu/rsqrt."""
    near = 6 << fixedpoint.FRAC_BITS[t.dtype] if t.dtype in fixedpoint.FRAC_BITS else 100
    return st.one_of(tiles(t), tiles(t, -near, near))


def run_unit(dut, streams, *, valid_p=1.0, ready_p=1.0, seed=0, row_bound=None, **kw):
    """Simulate ``dut`` on one token list per input port."""
    inputs = {f"in{k}": (beat_layout(t, dut.rank, row_bound=row_bound), toks)
              for k, (t, toks) in enumerate(zip(dut.in_types, streams))}
    out = {"out": beat_layout(dut.out_type, dut.out_rank, row_bound=row_bound)}
    return simulate(dut, inputs, out, valid_p=valid_p, ready_p=ready_p, seed=seed, **kw)


def assert_tokens(got, want):
    assert len(got) == len(want), (got, want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert values_equal(g, w), (i, g, w)


def assert_accounted(run, streams):
    """Every input beat was taken exactly once, and no error."""
    for k, toks in enumerate(streams):
        assert run.accepted[f"in{k}"] == len(to_beats(toks))
    assert run.error == 0 and run.code == 0


def evaluator(fn, spread=False):
    """``fn`` applied by the reference: ``f(x)``, or over a zipped tuple when ``spread``."""
    if spread:
        return lambda x: arith.evaluate(fn, *x)
    return lambda x: arith.evaluate(fn, x)


def folder(fn, spread=False):
    if spread:
        return lambda acc, x: arith.evaluate(fn, acc, *x)
    return lambda acc, x: arith.evaluate(fn, acc, x)


def split_pairs(tensors, rank):
    """A nested list of pairs as two nested lists of one structure."""
    def part(x, k, i):
        return x[i] if k == 0 else [part(c, k - 1, i) for c in x]
    return [part(t, rank, 0) for t in tensors], [part(t, rank, 1) for t in tensors]


LIGHT = st.floats(0.3, 1.0)
SEEDS = st.integers(0, 2**16)
SHAPES = st.sampled_from([(1, 2), (2, 2), (2, 3)])
DTYPES = st.sampled_from([int8, int16])


# -- Map, unary ------------------------------------------------------------------------------------

UNARY = {
    "add": F.function(lambda x: x + 5),
    "add_self": F.function(lambda x: x + x),
    "sub": F.function(lambda x: 7 - x),
    "mul": F.function(lambda x: x * x),
    "max": F.function(lambda x: x.maximum(-3)),
    "scale": F.scale(-3),
    "div": F.function(lambda x: x / 3),
    "cast8": F.cast(int8),
    "cast8_sat": F.cast(int8, saturate=True),
    "cast32": F.cast(int32),
    "exp": F.exp,
    "silu": F.silu,
    "rsqrt": F.rsqrt,
    "row_sum": F.row_sum,
    "row_max": F.row_max,
    "softmax_num": F.function(lambda x: (x - x.row_max()).exp()),
    "gate": F.function(lambda x: F.silu(x) * x),
    "pair": F.function(lambda x: (x.row_sum(), x.exp())),
}


@settings(deadline=None, max_examples=EXAMPLES)
@given(st.sampled_from(sorted(UNARY)), DTYPES, SHAPES, st.integers(1, 2), st.integers(1, 4),
       st.data(), LIGHT, LIGHT, SEEDS)
def test_map_unary(name, dtype, shape, rank, lanes, data, valid_p, ready_p, seed):
    fn = UNARY[name]
    t = Tile(dtype, *shape)
    tensors = data.draw(ragged(rank, elems=nonlinear_tiles(t), max_size=3))
    tokens = from_nested(tensors, rank)
    dut = PCU(fn, t, rank, lanes=lanes)
    run = run_unit(dut, [tokens], valid_p=valid_p, ready_p=ready_p, seed=seed)
    assert_tokens(run.outputs["out"], map_tokens(tokens, evaluator(fn)))
    assert_accounted(run, [tokens])


# -- Map, zipped -----------------------------------------------------------------------------------

BINARY = {
    "add": F.add, "sub": F.sub, "mul": F.mul, "div": F.div, "maximum": F.maximum,
    "matmul": F.matmul, "matmul_t": F.matmul(transpose_b=True), "matmul8": F.matmul(out=int8),
    "gate": F.function(lambda a, b: F.silu(a) * b),
    "bcast": F.function(lambda a, b: a - b.row_max()),
}


@settings(deadline=None, max_examples=EXAMPLES)
@given(st.sampled_from(sorted(BINARY)), DTYPES, st.sampled_from([(2, 2), (1, 1), (3, 3)]),
       st.integers(0, 2), st.integers(1, 4), st.integers(1, 12), st.booleans(), st.data(),
       LIGHT, LIGHT, SEEDS)
def test_map_zipped(name, dtype, shape, rank, lanes, mults, tuple_port, data, valid_p, ready_p, seed):
    fn = BINARY[name]
    t = Tile(dtype, *shape)
    elems = st.tuples(nonlinear_tiles(t), tiles(t))
    tensors = data.draw(ragged(rank, elems=elems, max_size=3))
    a, b = split_pairs(tensors, rank) if rank else ([x for x, _ in tensors], [y for _, y in tensors])
    ta, tb = from_nested(a, rank), from_nested(b, rank)
    zipped = zip_streams([ta, tb])
    want = map_tokens(zipped, evaluator(fn, spread=True))
    if tuple_port:  # one port of (a, b) pairs, unpacked over fn's parameters
        dut = PCU(fn, Tuple(t, t), rank, lanes=lanes, multipliers=mults)
        run = run_unit(dut, [zipped], valid_p=valid_p, ready_p=ready_p, seed=seed)
        assert dut.unpack
        assert_accounted(run, [zipped])
    else:
        dut = PCU(fn, [t, t], rank, lanes=lanes, multipliers=mults)
        run = run_unit(dut, [ta, tb], valid_p=valid_p, ready_p=ready_p, seed=seed)
        assert_accounted(run, [ta, tb])
    assert_tokens(run.outputs["out"], want)


# -- Accum -----------------------------------------------------------------------------------------

MAC_FNS = {
    "traced": F.function(lambda acc, a, w: acc + F.matmul(a, w)),
    "traced_rev": F.function(lambda acc, a, w: F.matmul(a, w) + acc),
    "mac": F.mac,
    "mac_t": F.mac(transpose_b=True),
}


@settings(deadline=None, max_examples=EXAMPLES)
@given(st.sampled_from(sorted(MAC_FNS)), DTYPES, st.sampled_from([(2, 2, 2), (1, 3, 2), (2, 1, 3)]),
       st.integers(1, 3).flatmap(lambda r: st.tuples(st.just(r), st.integers(1, min(r, 2)))),
       st.integers(1, 12), st.data(), LIGHT, LIGHT, SEEDS)
def test_accum_matmul(name, dtype, mkn, rank_b, mults, data, valid_p, ready_p, seed):
    fn = MAC_FNS[name]
    rank, b = rank_b
    m_, k, n = mkn
    at = Tile(dtype, m_, k)
    wt = Tile(dtype, n, k) if name == "mac_t" else Tile(dtype, k, n)
    acc = F.zeros(Tile(int32, m_, n))
    tensors = data.draw(ragged(rank, elems=st.tuples(tiles(at), tiles(wt)), max_size=3))
    a, w = split_pairs(tensors, rank)
    ta, tw = from_nested(a, rank), from_nested(w, rank)
    dut = PCU(fn, [at, wt], rank, mode="accum", init=acc, b=b, multipliers=mults)
    assert dut.ii == -(-m_ * k * n // min(mults, m_ * k * n))
    run = run_unit(dut, [ta, tw], valid_p=valid_p, ready_p=ready_p, seed=seed)
    want = accum(zip_streams([ta, tw]), folder(fn, spread=True), arith.init_value(acc), b)
    assert_tokens(run.outputs["out"], want)
    assert_accounted(run, [ta, tw])


ACC_FNS = {
    "add": (F.add, 0),
    "max": (F.maximum, None),
    "sum_rows": (F.function(lambda acc, x: acc + x.row_sum()), 0),
    "decay": (F.function(lambda acc, x: acc * 3 - x), 1),
}


@settings(deadline=None, max_examples=EXAMPLES)
@given(st.sampled_from(sorted(ACC_FNS)), DTYPES, SHAPES,
       st.integers(1, 3).flatmap(lambda r: st.tuples(st.just(r), st.integers(1, r))),
       st.integers(1, 4), st.data(), LIGHT, LIGHT, SEEDS)
def test_accum_elementwise(name, dtype, shape, rank_b, lanes, data, valid_p, ready_p, seed):
    fn, fill = ACC_FNS[name]
    rank, b = rank_b
    t = Tile(dtype, *shape)
    acc_t = Tile(dtype, shape[0], 1) if name == "sum_rows" else t
    init = F.full(acc_t, dtype.min if fill is None else fill)
    tensors = data.draw(ragged(rank, elems=tiles(t), max_size=3))
    tokens = from_nested(tensors, rank)
    dut = PCU(fn, t, rank, mode="accum", init=init, b=b, lanes=lanes)
    run = run_unit(dut, [tokens], valid_p=valid_p, ready_p=ready_p, seed=seed)
    assert_tokens(run.outputs["out"], accum(tokens, folder(fn), arith.init_value(init), b))
    assert_accounted(run, [tokens])


def test_accum_stop_rules_by_hand():
    """b = 2 on a rank-3 stream: s < b accumulates, s = b emits with no stop, s > b emits
    ``S_(s-b)``; an empty level-2 fibre (a stop-only beat) emits init; a bare Done ends."""
    t = Tile(int8, 1, 1)
    x = {v: np.array([[v]], np.int8) for v in range(1, 6)}
    # 1 2 S1 3 S2 4 S3 | S2 5 S1 S3
    tensors = [[[[x[1], x[2]], [x[3]]], [[x[4]]]], [[[]], [[x[5]], []]]]
    tokens = from_nested(tensors, 3)
    init = F.full(t, 100)
    dut = PCU(F.add, t, 3, mode="accum", init=init, b=2)
    run = run_unit(dut, [tokens], valid_p=0.5, ready_p=0.5, seed=1)
    want = accum(tokens, folder(F.add), arith.init_value(init), 2)
    assert [int(v[0, 0]) if isinstance(v, np.ndarray) else repr(v) for v in want] == \
        [106, 104, "S1", 100, 105, "S1"]
    assert_tokens(run.outputs["out"], want)
    assert_accounted(run, [tokens])
    # a stream of zero tensors is a bare Done, and so is the result
    run = run_unit(PCU(F.add, t, 3, mode="accum", init=init, b=2), [[]])
    assert run.beats["out"] == [Beat(None, 0, 0, 1)]


def test_accum_tuple_accumulator():
    """A tuple accumulator (running sum and running max of one stream), with a Tuple output."""
    t = Tile(int16, 2, 2)
    fn = F.function(lambda acc, x: (acc[0] + x, acc[1].maximum(x)))
    init = (F.zeros(t), F.full(t, int16.min))
    x = [np.array([[i, -i], [3 * i, 1000 * i]], np.int16) for i in range(-4, 6)]
    tokens = from_nested([[x[:3], [], x[3:4]], [x[4:]]], 2)
    dut = PCU(fn, t, 2, mode="accum", init=init, b=1, lanes=3)
    assert dut.out_type == Tuple(t, t) and dut.ii == 2 + 2
    run = run_unit(dut, [tokens], valid_p=0.7, ready_p=0.5, seed=5)
    want = accum(tokens, folder(fn), arith.init_value(F.as_init(init)), 1)
    assert_tokens(run.outputs["out"], want)
    assert_accounted(run, [tokens])


# -- Scan ------------------------------------------------------------------------------------------

@settings(deadline=None, max_examples=EXAMPLES)
@given(st.sampled_from(["add", "max", "decay"]), DTYPES, SHAPES,
       st.integers(1, 3).flatmap(lambda r: st.tuples(st.just(r), st.integers(1, r + 1))),
       st.integers(1, 4), st.data(), LIGHT, LIGHT, SEEDS)
def test_scan(name, dtype, shape, rank_b, lanes, data, valid_p, ready_p, seed):
    fn, fill = ACC_FNS[name]
    rank, b = rank_b
    t = Tile(dtype, *shape)
    init = F.full(t, dtype.min if fill is None else fill)
    tensors = data.draw(ragged(rank, elems=tiles(t), max_size=3))
    tokens = from_nested(tensors, rank)
    dut = PCU(fn, t, rank, mode="scan", init=init, b=b, lanes=lanes)
    run = run_unit(dut, [tokens], valid_p=valid_p, ready_p=ready_p, seed=seed)
    assert_tokens(run.outputs["out"], scan(tokens, folder(fn), arith.init_value(init), b))
    assert_accounted(run, [tokens])


# -- retiling accumulators -------------------------------------------------------------------------

R = sympy.Symbol("R", integer=True, nonnegative=True)


@settings(deadline=None, max_examples=EXAMPLES)
@given(DTYPES, st.integers(1, 3), st.integers(1, 2), st.integers(3, 5), st.sampled_from(["accum", "scan"]),
       st.integers(1, 2).flatmap(lambda r: st.tuples(st.just(r), st.integers(1, r))),
       st.data(), LIGHT, LIGHT, SEEDS)
def test_retile_row_dynamic(dtype, cols, piece_rows, bound, mode, rank_b, data, valid_p, ready_p, seed):
    """Rows (or 2-row pieces) stacked into a tile of dynamic rows, bounded; empty fibres give
    an empty tile."""
    rank, b = rank_b
    piece = Tile(dtype, piece_rows, cols)
    per = bound // piece_rows  # elements that fit one accumulator
    # every level-b fibre folds at most `per` elements (the accumulator resets after it)
    if b == 1:
        tensor = st.lists(tiles(piece), max_size=per)
    else:
        tensor = st.lists(st.lists(tiles(piece), max_size=1), max_size=per)
    for _ in range(rank - b):
        tensor = st.lists(tensor, max_size=2)
    tensors = data.draw(st.lists(tensor, max_size=3))
    tokens = from_nested(tensors, rank)
    out_t = Tile(dtype, R, cols)
    dut = PCU(F.retile_row, piece, rank, mode=mode, b=b, out_type=out_t, row_bound=bound)
    assert dut.ii == 1
    run = run_unit(dut, [tokens], valid_p=valid_p, ready_p=ready_p, seed=seed, row_bound=bound)
    init = arith.init_value(F.empty_rows(dtype, cols))
    ref = accum if mode == "accum" else scan
    assert_tokens(run.outputs["out"], ref(tokens, folder(F.retile_row), init, b))
    assert_accounted(run, [tokens])


def test_retile_col_static():
    """[R, 1] columns joined into a static [R, 3] tile (the count is static)."""
    piece = Tile(int16, 2, 1)
    cols = [np.array([[i], [-i]], np.int16) for i in range(1, 10)]
    tokens = from_nested([[cols[0:3], cols[3:6]], [cols[6:9]]], 2)
    dut = PCU(F.retile_col, piece, 2, mode="accum", b=1, out_type=Tile(int16, 2, 3))
    run = run_unit(dut, [tokens], valid_p=0.6, ready_p=0.6, seed=3)
    init = arith.init_value(F.empty_cols(int16, 2))
    assert_tokens(run.outputs["out"], accum(tokens, folder(F.retile_col), init, 1))
    assert_accounted(run, [tokens])


def test_retile_over_bound():
    piece = Tile(int8, 1, 2)
    x = [np.full((1, 2), i, np.int8) for i in range(8)]
    tokens = from_nested([x[0:2], x[2:7]], 1)  # the second fibre has 5 rows, the bound is 3
    dut = PCU(F.retile_row, piece, 1, mode="accum", b=1, out_type=Tile(int8, R, 2), row_bound=3)
    run = run_unit(dut, [tokens], row_bound=3)
    assert run.error == 1 and run.code == ErrorCode.OVER_BOUND
    assert run.accepted["in0"] == 5  # 2 + 3 rows taken; the fourth row of the fibre is refused
    assert len(run.beats["out"]) <= 1


# -- errors ----------------------------------------------------------------------------------------

def _int_tiles(tokens, sign):
    return [v if hasattr(v, "level") else np.array([[sign * (i % 100)]], np.int8)
            for i, v in enumerate(tokens)]


@settings(deadline=None, max_examples=EXAMPLES)
@given(st.integers(1, 2).flatmap(lambda r: st.tuples(st.just(r), ragged(r, max_size=3),
                                                     ragged(r, max_size=3))),
       st.sampled_from(["map", "accum"]), LIGHT, LIGHT, SEEDS)
# the soak's counterexample (docs/benchmarks.md, "Soak run"): the output back-pressured in the
# cycle the disagreeing beats are first offered, so the error stops the unit before it takes them
@example(case=(1, [[0, 0, 0], [0, 0, 0]], [[0, 0, 0], [0, 0, 0], []]), mode="map",
         valid_p=0.875, ready_p=0.75, seed=0)
def test_stop_mismatch(case, mode, valid_p, ready_p, seed):
    """Lock-step inputs whose framing differs: STOP_MISMATCH at the first differing beat, which
    is taken without a result when it is checked in its last step with the pipeline moving, and
    the unit stops (the beats before it are processed normally, none after it is taken)."""
    rank, sa, sb = case
    t = Tile(int8, 1, 1)
    ta, tb = _int_tiles(from_nested(sa, rank), 1), _int_tiles(from_nested(sb, rank), -1)
    ba, bb = to_beats(ta), to_beats(tb)
    first = next((i for i, (x, y) in enumerate(zip(ba, bb))
                  if (x.has_data, x.stop, x.last) != (y.has_data, y.stop, y.last)), None)
    if mode == "map":
        dut = PCU(F.add, [t, t], rank)
    else:
        dut = PCU(F.function(lambda acc, a, b: acc + a * b), [t, t], rank, mode="accum",
                  init=F.zeros(t), b=1)
    run = run_unit(dut, [ta, tb], valid_p=valid_p, ready_p=ready_p, seed=seed)
    if first is None:  # identical framing: a normal run
        assert run.error == 0 and run.accepted == {"in0": len(ba), "in1": len(bb)}
        return
    assert run.error == 1 and run.code == ErrorCode.STOP_MISMATCH
    # a bad beat is taken at its last step, as any beat: in the cycle it is checked when that
    # is its last step (one step, or no data on in0: nothing to compute) and the output is not
    # back-pressured then, else the error of that check stops the unit first (the soak's
    # counterexample: valid_p 0.875, ready_p 0.75 leaves it in its FIFO)
    most = first + (dut.ii == 1 or not ba[first].has_data)
    taken = run.accepted["in0"]
    assert run.accepted["in1"] == taken and first <= taken <= most
    if ready_p == 1.0:
        assert taken == most    # nothing back-pressures the output: it is taken
    if mode == "map":
        want = [Beat(None if not x.has_data else x.data + y.data, x.has_data, x.stop, x.last)
                for x, y in zip(ba[:first], bb[:first])]
        got = run.beats["out"]
        assert len(got) in (first, first - 1)
        for g, w in zip(got, want):
            assert g[1:] == w[1:] and (not w.has_data or values_equal(g.data, w.data))


# -- initiation interval ---------------------------------------------------------------------------

T44 = Tile(int16, 4, 4)
#: (name, fn, input types, kw, mode, ii, latency)
II_CASES = [
    ("add", F.add, [T44, T44], dict(lanes=4), "map", 4, 0),              # 16 elements / 4 lanes
    ("exp", F.exp, [T44], dict(lanes=3), "map", 6, 5),                    # ceil(16 / 3); 5 cuts
    ("add1", F.add, [T44, T44], dict(lanes=16), "map", 1, 0),
    ("mul", F.mul, [T44, T44], dict(lanes=4), "map", 4, 2),              # operands, products
    ("div", F.div, [T44, T44], dict(lanes=4), "map", 4, 1 + 8),          # magnitudes, 2 bits/cut
    ("row_sum", F.row_sum, [T44], dict(lanes=2), "map", 8, 0),            # ceil(4 / 2) rows x 4 cols
    ("matmul16", F.matmul, [T44, T44], dict(multipliers=16), "map", 4, 2),  # 64 products / 16
    ("matmul7", F.matmul, [T44, T44], dict(multipliers=7), "map", 10, 2),   # ceil(64 / 7)
    ("mac64", MAC_FNS["traced"], [T44, T44], dict(multipliers=64), "accum", 1, 4),  # 4-term trees
    ("mac5", MAC_FNS["traced"], [T44, T44], dict(multipliers=5), "accum", 13, 2),
    ("softmax", UNARY["softmax_num"], [T44], dict(lanes=4), "map", 4 + 4 + 4, 5),  # row_max, sub, exp
    ("scan", F.add, [T44], dict(lanes=8), "scan", 2, 0),
    ("gate", BINARY["gate"], [T44, T44], dict(lanes=4), "map", 4 + 4, 5 + 2),  # silu, mul
]


@pytest.mark.parametrize("case", II_CASES, ids=[c[0] for c in II_CASES])
def test_initiation_interval(case):
    """A fully fed PCU takes a new beat every ``ii`` cycles, and its pipeline adds ``latency``:
    N beats in ``(N - 1) * ii + 2 + latency``."""
    _, fn, types, kw, mode, ii, latency = case
    if mode == "map":
        mk = lambda: PCU(fn, types, 1, **kw)  # noqa: E731
    else:
        init = F.zeros(Tile(int32, 4, 4) if len(types) == 2 else types[0])
        mk = lambda: PCU(fn, types, 1, mode=mode, init=init, b=1, **kw)  # noqa: E731
    dut = mk()
    assert (dut.ii, dut.latency) == (ii, latency)
    for n in (6, 11):
        x = [np.full((4, 4), i - 3, np.int16) for i in range(n)]
        run = run_unit(mk(), [from_nested([x], 1)] * len(types))
        assert run.cycles == (n - 1) * ii + 2 + latency


def test_stop_only_beats_take_one_cycle():
    t = Tile(int8, 2, 2)
    tokens = from_nested([[[]] * 9], 2)  # nine empty fibres: nine stop-only beats
    dut = PCU(F.add, t, 2, mode="accum", init=F.zeros(t), b=1, lanes=1)
    assert dut.ii == 4
    run = run_unit(dut, [tokens])
    assert run.cycles == 9 + 1 and len(run.outputs["out"]) == 9 + 1


# -- ready/valid, fixed-point ALUs, construction -----------------------------------------------------

def test_no_ready_to_valid_path():
    t, row = Tile(int8, 2, 2), Tile(int8, 1, 2)
    x = [np.full((2, 2), i, np.int8) for i in range(5)]
    tiles_in = (beat_layout(t, 2), from_nested([[x[:2], [], x[2:]]], 2))
    rows_in = (beat_layout(row, 2), from_nested([[[np.zeros((1, 2), np.int8)] * 2, []]], 2))
    cases = [
        (PCU(F.exp, t, 2, lanes=1), {"in0": tiles_in}),
        (PCU(F.mac, [t, t], 2, mode="accum", init=F.zeros(Tile(int32, 2, 2)), b=1, multipliers=3),
         {"in0": tiles_in, "in1": tiles_in}),
        (PCU(F.retile_row, row, 2, mode="accum", b=1, row_bound=4), {"in0": rows_in}),
    ]
    for dut, inputs in cases:
        check_ready_to_valid(dut, inputs, {"out": beat_layout(dut.out_type, dut.out_rank, row_bound=4)})


def _alu_outputs(op, dtype, xs, lanes=16):
    m = Module()
    rom = segment_rom(op, dtype)
    m.submodules.rom = rom
    xin = [Signal(signed(dtype.bits), name=f"x{k}") for k in range(lanes)]
    ys = []
    for k in range(lanes):
        y = Signal(signed(dtype.bits), name=f"y{k}")
        m.d.comb += y.eq(fixed_point_alu(m, op, dtype, xin[k], rom.read_port(domain="comb"), name=f"a{k}"))
        ys.append(y)
    out = []

    async def bench(ctx):
        for c in range(0, len(xs), lanes):
            chunk = xs[c:c + lanes]
            for k, v in enumerate(chunk):
                ctx.set(xin[k], int(v))
            out.extend(ctx.get(ys[k]) for k in range(len(chunk)))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return np.array(out, np.int64)


def _pipelined_alu_outputs(op, dtype, xs, family=None):
    """The pipelined lane (a :class:`Stager` always enabled): one operand a cycle, each result
    read :func:`lane_depth` cycles after its operand."""
    m = Module()
    rom = segment_rom(op, dtype)
    m.submodules.rom = rom
    x = Signal(signed(dtype.bits), name="x")
    y = Signal(signed(dtype.bits), name="y")
    stage = Stager(m, Const(1), "lane", family=family)
    m.d.comb += y.eq(fixed_point_alu(m, op, dtype, x, rom.read_port(domain="comb"), name="a",
                                     stage=stage))
    depth = lane_depth(op, dtype.bits, family)
    assert stage.cut == depth + 1          # every cut of the lane's depth was made
    out = []

    async def bench(ctx):
        for t in range(len(xs) + depth):
            if t < len(xs):
                ctx.set(x, int(xs[t]))
            if t >= depth:
                out.append(ctx.get(y))
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return np.array(out, np.int64)


def _alu_inputs():
    """All int8 inputs, and int16 inputs around every breakpoint, saturation edge and random."""
    rng = np.random.default_rng(7)
    xs16 = np.unique(np.concatenate([
        np.arange(-40, 41), np.arange(-1700, 1300, 37), np.arange(4000, 4200, 7),
        1 << np.arange(15) - 1, rng.integers(-32768, 32768, 300), [-32768, 32767]]))
    return {int8: np.arange(-128, 128), int16: xs16[(xs16 >= -32768) & (xs16 <= 32767)]}


@pytest.mark.parametrize("op", fixedpoint.NAMES)
def test_fixed_point_alus_are_bit_exact(op):
    for dtype, xs in _alu_inputs().items():
        assert np.array_equal(_alu_outputs(op, dtype, xs), fixedpoint.evaluate_q(op, xs, dtype))


@pytest.mark.parametrize("family", [None, "ice40"])
@pytest.mark.parametrize("op", fixedpoint.NAMES)
def test_pipelined_fixed_point_alus_are_bit_exact(op, family):
    """The five cuts compute what the contract does on every int8 and every int16 input (the
    generic multiplier, which simulation uses, and the iCE40's; ECP5's ``MULT18X18D`` instance
    has no simulation model here: its registers are those of :func:`pipelined_product`). The
    lane has no clamp where the contract's value never needs one
    (``fixedpoint.unclamped_range``), so only an exhaustive run shows it exact."""
    for dtype in (int8, int16):
        s = fixedpoint.spec(op, dtype)
        xs = np.arange(s.min, s.max + 1)
        got = _pipelined_alu_outputs(op, dtype, xs, family)
        assert np.array_equal(got, fixedpoint.evaluate_q(op, xs, dtype)), (op, dtype.name)


def test_float_and_unsupported_types_are_refused():
    with pytest.raises(ValueError, match=r"dtype bf16; the hardware datapath supports int8, int16, int32"):
        PCU(F.add, [Tile(bf16, 2, 2)] * 2, 1)
    with pytest.raises(ValueError, match="dtype fp32"):
        PCU(F.cast(fp32), Tile(int16, 2, 2), 1)
    with pytest.raises(ValueError, match="needs static, non-empty columns"):
        PCU(F.exp, Tile(int16, 2, R), 1, row_bound=4)
    with pytest.raises(ValueError, match="mode must be one of"):
        PCU(F.add, Tile(int8, 1, 1), 1, mode="reduce")
    with pytest.raises(ValueError, match=r"b in 1\.\.1"):
        PCU(F.add, Tile(int8, 1, 1), 1, mode="accum", init=F.zeros(Tile(int8, 1, 1)), b=2)
    with pytest.raises(ValueError, match="returns"):
        PCU(F.function(lambda acc, x: x.row_sum()), Tile(int8, 2, 2), 1, mode="accum",
            init=F.zeros(Tile(int8, 2, 2)), b=1)


def test_for_node_and_repr():
    p = Program("pcu")
    d = p.symbol("D", ragged=True, bound=8)
    a = p.input("a", [1, d], Tile(int8, 2, 2))
    w = p.input("w", [1, d], Tile(int8, 2, 2))
    cfg = HardwareConfig.sim().replace(pcu_multipliers=4)
    acc = Accum(lambda acc, x, y: acc + F.matmul(x, y), F.zeros(Tile(int32, 2, 2)), Zip(a, w), b=1)
    unit = pcu_for_node(acc, cfg)
    assert unit.mode == "accum" and unit.unpack and unit.ii == 2 and unit.out_rank == 0
    assert repr(unit).startswith("PCU(fn(acc, x, y) = (acc + (x @ y)), [Tuple(")
    mp = Map(F.exp, a)
    assert pcu_for_node(mp, cfg).ii == 1 and repr(pcu_for_node(mp, cfg)) == \
        "PCU(exp, [Tile(int8, 2, 2)], 1, lanes=4, multipliers=4)"
