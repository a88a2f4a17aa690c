"""Map, Accum, Scan and FlatMap: the stop algebra of spec section 4 on hand-worked examples,
properties against folds of nested lists, whole graphs on tiles, errors and metrics."""

import operator

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stepforge.compiler import functions as F
from stepforge.compiler.errors import StepRuntimeError, StepShapeError, StepTypeError
from stepforge.compiler.graph import Program
from stepforge.compiler.ops.compute import Accum, AddrGen, Filter, FlatMap, Map, RetileStreamify, Scan
from stepforge.compiler.ops.shape import Reshape, Zip
from stepforge.compiler.types import Bool, Index, Select, Tile, bf16, fp32, int8, int32
from stepforge.contract import arith as A
from stepforge.contract.tokens import canonical, from_nested, to_nested
from stepforge.sim.ref.interpreter import run
from stepforge.sim.ref.ops_compute import accum, addr_gen, flat_map, map_tokens, scan

from .test_shape_ops import fmt, tok
from .test_tokens import ragged

I32 = Tile(int32, 1, 1)


def leaves(x, depth, f):
    """Apply ``f`` to the leaves of a ``depth``-deep nested list."""
    return f(x) if depth == 0 else [leaves(c, depth - 1, f) for c in x]


def as_tiles(data, rank, np_dtype=np.int32):
    return [leaves(t, rank, lambda v: np.array([[v]], np_dtype)) for t in data] if rank else \
        [np.array([[v]], np_dtype) for v in data]


def as_ints(data, rank):
    return [leaves(t, rank, lambda v: v.reshape(-1)[0].item()) for t in data] if rank else \
        [v.reshape(-1)[0].item() for v in data]


def program_with(*specs):
    """A program with one host input per ``(name, shape, dtype)``; returns it and the streams."""
    p = Program("t")
    return p, [p.input(name, shape, dtype) for name, shape, dtype in specs]


# -- Map -----------------------------------------------------------------------------------------

class TestMap:
    def test_stops_pass_through(self):
        assert fmt(map_tokens(tok("1 2 S1 3 S2 4 S1 5 6 7 S2"), lambda v: 10 * v)) == \
            "10 20 S1 30 S2 40 S1 50 60 70 S2"
        assert fmt(map_tokens(tok("S1 1 S2"), lambda v: -v)) == "S1 -1 S2"

    def test_one_stream(self):
        p, (x,) = program_with(("x", [2, 3], I32))
        m = Map(F.scale(3), x)
        p.output(m, "y")
        data = [[1, 2, 3], [4, 5, 6]]
        assert as_ints(run(p, inputs={"x": as_tiles(data, 1)}).outputs["y"], 1) == \
            [[3, 6, 9], [12, 15, 18]]
        assert m.shape == (2, 3) and m.dtype == I32

    def test_several_streams_in_lock_step_and_zip_unpacking(self):
        p = Program("t")
        D = p.symbol("D", ragged=True)
        a, b = p.input("a", [2, D], I32), p.input("b", [2, D], I32)
        p.output(Map(F.sub, a, b), "direct")
        p.output(Map(F.sub, Zip(a, b)), "zipped")
        p.output(Map(lambda t: t[0] * t[1], Zip(a, b)), "tuple")
        ins = {"a": as_tiles([[5, 7], [9]], 1), "b": as_tiles([[1, 2], [3]], 1)}
        out = run(p, inputs=ins).outputs
        assert as_ints(out["direct"], 1) == as_ints(out["zipped"], 1) == [[4, 5], [6]]
        assert as_ints(out["tuple"], 1) == [[5, 14], [27]]

    def test_stop_mismatch_names_operator_and_beat(self):
        p = Program("t")
        D = p.symbol("D", ragged=True)
        a, b = p.input("a", [2, D], I32), p.input("b", [2, D], I32)
        p.output(Map(F.add, a, b, name="adder"), "y")
        ins = {"a": as_tiles([[1, 2], [3]], 1), "b": as_tiles([[1], [2, 3]], 1)}
        with pytest.raises(StepRuntimeError, match=r"adder: stop mismatch between in0 and in1 at "
                           r"beat 0: \(element, stop 0\) vs \(element, stop 1\)") as e:
            run(p, inputs=ins)
        assert e.value.beat == 0 and e.value.op == "adder"

    def test_shape_errors_name_port_and_both_shapes(self):
        p, (a, b) = program_with(("a", [2, 4], I32), ("b", [2, 5], I32))
        with pytest.raises(StepShapeError, match=r"Map_0: port 'in1' must have the shape of in0 "
                           r"\(inputs are consumed in lock step\): \[2, 4\] vs \[2, 5\]"):
            Map(F.add, a, b)
        p, (x, w) = program_with(("x", [3], Tile(bf16, 4, 8)), ("w", [3], Tile(bf16, 4, 8)))
        with pytest.raises(StepShapeError, match=r"Map_0: port 'in1' fn matmul: a @ b needs a's "
                           r"columns to equal b's rows: \[4, 8\] vs \[4, 8\]"):
            Map(F.matmul(), x, w)
        # (the failed Map_0 above used its name)
        with pytest.raises(StepTypeError, match=r"Map_1: port 'in0' applies add, which takes 2 "
                           r"arguments, to 1 stream"):
            Map(F.add, x)
        with pytest.raises(StepTypeError, match=r"Map_2: port 'in0' needs a tile function"):
            Map(F.retile_rows(), x)

    def test_dynamic_tile_over_its_bound(self):
        p = Program("t")
        R = p.symbol("R", bound=3)
        x = p.input("x", [2], Tile(fp32, R, 4))
        p.output(Map(F.exp, x), "y")
        run(p, inputs={"x": [np.zeros((3, 4)), np.zeros((1, 4))]})
        with pytest.raises(StepRuntimeError, match=r"Map_0: dimension R \(rows of a Tile\(fp32, R, 4\) "
                           r"element\) is 5, over its bound 3 at beat 1"):
            run(p, inputs={"x": [np.zeros((3, 4)), np.zeros((5, 4))]})

    def test_metrics(self):
        p = Program("t")
        B = p.symbol("B", bound=64)
        x = p.input("x", [B], Tile(bf16, 16, 64))
        w = p.input("w", [B], Tile(bf16, 32, 64))
        m = Map(lambda a, b: F.silu(a @ b.T), x, w)
        assert m.dtype == Tile(bf16, 16, 32)
        assert m.flops() == B * (2 * 16 * 64 * 32 + 8 * 16 * 32)
        # 16 x in_tile_cols + bytes(weight tile) + bytes(output tile)
        assert m.onchip_bytes() == 16 * 64 + 32 * 64 * 2 + 16 * 32 * 2
        assert Map(F.exp, x).onchip_bytes() == 0


# -- Accum ---------------------------------------------------------------------------------------

def fold(x, depth, b):
    if depth == b:
        return sum(leaves_list(x, depth))
    return [fold(c, depth - 1, b) for c in x]


def leaves_list(x, depth):
    if depth == 0:
        return [x]
    return [v for c in x for v in leaves_list(c, depth - 1)]


class TestAccum:
    EX = "1 2 S1 3 S2 4 S1 5 6 7 S2"  # [[1, 2], [3]], [[4], [5, 6, 7]]

    def test_spec_rules(self):
        assert fmt(accum(tok(self.EX), operator.add, 0, 1)) == "3 3 S1 4 18 S1"
        assert fmt(accum(tok(self.EX), operator.add, 0, 2)) == "6 22"

    def test_empty_fibres_emit_init(self):
        assert fmt(accum(tok("1 S1 S2"), operator.add, 100, 1)) == "101 100 S1"
        assert fmt(accum(tok("S1 S1"), operator.add, 100, 1)) == "100 100"
        assert fmt(accum(tok("1 S1 S2"), operator.add, 100, 2)) == "101"
        assert accum([], operator.add, 0, 1) == []

    @settings(deadline=None, max_examples=200)
    @given(st.integers(1, 3).flatmap(lambda r: st.tuples(st.just(r), st.integers(1, r), ragged(r))))
    def test_is_a_fold_of_the_inner_levels(self, case):
        rank, b, data = case
        out = accum(from_nested(data, rank), operator.add, 0, b)
        want = [fold(t, rank, b) for t in canonical(data, rank)]
        assert to_nested(out, rank - b) == canonical(want, rank - b)

    def test_graph_on_tiles(self):
        p = Program("t")
        D = p.symbol("D", ragged=True)
        x = p.input("x", [2, 2, D], I32)
        a1, a2 = Accum(F.add, 0, x, 1), Accum(F.add, 0, x, 2)
        assert a1.shape == (2, 2) and a2.shape == (2,)
        p.output(a1, "a1")
        p.output(a2, "a2")
        out = run(p, inputs={"x": as_tiles([[[1, 2], [3]], [[4], [5, 6, 7]]], 2)}).outputs
        assert as_ints(out["a1"], 1) == [[3, 3], [4, 18]]
        assert as_ints(out["a2"], 0) == [6, 22]

    def test_fp32_sum_is_one_running_sum(self):
        p, (x,) = program_with(("x", [1, 3], Tile(fp32, 1, 1)))
        p.output(Accum(F.add, 0.0, x, 1), "y")
        out = run(p, inputs={"x": [[1e8, 1.0, -1e8]]}).outputs["y"]
        assert out[0].tolist() == [[0.0]]

    def test_k_tiled_mac_equals_one_matmul(self):
        # Zip -> Accum(mac): one running sum over all of K, bit for bit a single matmul
        p, (a, b) = program_with(("a", [1, 4], Tile(bf16, 2, 8)), ("b", [1, 4], Tile(bf16, 8, 3)))
        acc = Accum(F.mac(), F.zeros(Tile(fp32, 2, 3)), Zip(a, b), 1)
        p.output(acc, "y")
        rng = np.random.default_rng(7)
        A_ = rng.standard_normal((2, 32)).astype(ml_dtypes.bfloat16)
        B_ = rng.standard_normal((32, 3)).astype(ml_dtypes.bfloat16)
        ins = {"a": [[A_[:, 8 * k:8 * k + 8] for k in range(4)]],
               "b": [[B_[8 * k:8 * k + 8, :] for k in range(4)]]}
        got = run(p, inputs=ins).outputs["y"][0]
        assert got.tobytes() == A.matmul(A_, B_, out=fp32).tobytes()
        assert acc.flops() == 4 * 2 * 2 * 8 * 3
        assert acc.onchip_bytes() == 16 * 8 + 8 * 3 * 2 + 2 * 3 * 4

    def test_dynamic_tiling_round_trip(self):
        # [1, B] rows -> Accum(retile_row) -> one [B, 8] tile -> matmul -> rows again
        p = Program("t")
        B = p.symbol("B", bound=8)
        x = p.input("x", [1, B], Tile(bf16, 1, 8))
        w = p.input("w", [1], Tile(bf16, 8, 4))
        packed = Accum(F.retile_row, F.empty_rows(bf16, 8), x, 1)
        assert packed.dtype == Tile(bf16, B, 8) and packed.shape == (1,)
        y = Map(F.matmul(), packed, w)
        rows = RetileStreamify(y)
        assert rows.shape == (B,) and rows.dtype == Tile(bf16, 1, 4)
        p.output(rows, "y")
        rng = np.random.default_rng(0)
        X = rng.standard_normal((5, 8)).astype(ml_dtypes.bfloat16)
        W = rng.standard_normal((8, 4)).astype(ml_dtypes.bfloat16)
        out = run(p, inputs={"x": [[X[i:i + 1] for i in range(5)]], "w": [W]}).outputs["y"]
        assert np.concatenate(out).tobytes() == A.matmul(X, W).tobytes()
        assert packed.onchip_bytes() == 16 * B

    def test_ragged_count_becomes_a_fresh_symbol(self):
        p = Program("t")
        D = p.symbol("D", ragged=True, bound=4)
        x = p.input("x", [3, 2, D], Tile(fp32, 1, 8))
        acc = Accum(F.retile_row, F.empty_rows(fp32, 8), x, 2)
        rows = acc.dtype.rows
        assert rows.is_Symbol and p.symbols.is_ragged(rows) and p.symbols.bound(rows) == 8
        assert Accum(F.retile_row, F.empty_rows(fp32, 8), x, 1).dtype == Tile(fp32, D, 8)

    def test_errors(self):
        p, (x,) = program_with(("x", [2, 4], Tile(fp32, 4, 4)))
        with pytest.raises(StepShapeError, match=r"Accum_0: port 'in0' needs b in 1..1, got 0 "
                           r"\(input shape \[2, 4\]\)"):
            Accum(F.add, 0.0, x, 0)
        with pytest.raises(StepTypeError, match=r"Accum_1: port 'in0' fn fn\(acc, x\) = row_sum\(x\) "
                           r"returns Tile\(fp32, 4, 1\) \[4, 1\] for an accumulator of Tile\(fp32, 4, 4\) "
                           r"\[4, 4\] \(init full\(Tile\(fp32, 4, 4\), 0\)\): the result must have "
                           r"the accumulator's type"):
            Accum(lambda acc, x: x.row_sum(), F.zeros(Tile(fp32, 4, 4)), x, 1)
        with pytest.raises(StepTypeError, match=r"Accum_2: port 'in0' fn add needs operands of one "
                           r"dtype"):
            Accum(F.add, F.zeros(Tile(bf16, 4, 4)), x, 1)
        p2, (s,) = program_with(("s", [2, 4], Index()))
        with pytest.raises(StepTypeError, match=r"Accum_0: port 'in0' init: a number as init needs "
                           r"a tile stream"):
            Accum(F.add, 0, s, 1)
        p3, (r0,) = program_with(("r", [4], I32))
        with pytest.raises(StepShapeError, match=r"Accum_0: port 'in0' needs a stream of rank >= 1 "
                           r"to fold, got \[4\]"):
            Accum(F.add, 0, r0, 1)


# -- Scan ----------------------------------------------------------------------------------------

def running(x, depth, b, state):
    """Prefix sums over the leaves, restarting at every depth-``b`` sub-list."""
    if depth == b:
        state[0] = 0
    if depth == 0:
        state[0] += x
        return state[0]
    return [running(c, depth - 1, b, state) for c in x]


class TestScan:
    def test_spec_rules(self):
        assert fmt(scan(tok("1 2 S1 3 S2 4 S1 5 S2"), operator.add, 0, 1)) == "1 3 S1 3 S2 4 S1 5 S2"
        assert fmt(scan(tok("1 2 S1 3 S2 4 S1 5 S2"), operator.add, 0, 2)) == "1 3 S1 6 S2 4 S1 9 S2"
        assert fmt(scan(tok("1 2 S1 3 S2 4 S1 5 S2"), operator.add, 0, 3)) == "1 3 S1 6 S2 10 S1 15 S2"
        assert fmt(scan(tok("S1 1 S1"), operator.add, 0, 1)) == "S1 1 S1"

    @settings(deadline=None, max_examples=200)
    @given(st.integers(0, 3).flatmap(lambda r: st.tuples(st.just(r), st.integers(1, r + 1), ragged(r))))
    def test_is_a_running_fold(self, case):
        rank, b, data = case
        out = scan(from_nested(data, rank), operator.add, 0, b)
        state = [0]
        if b == rank + 1:
            want = [running(t, rank, -1, state) for t in canonical(data, rank)]
        else:
            want = [running(t, rank, b, state) for t in canonical(data, rank)]
        assert to_nested(out, rank) == want

    def test_graph_and_shapes(self):
        p, (x,) = program_with(("x", [2, 3], Tile(fp32, 1, 1)))
        sc = Scan(F.maximum, float("-inf"), x, 1)
        assert sc.shape == (2, 3) and sc.onchip_bytes() == 4
        p.output(sc, "y")
        out = run(p, inputs={"x": [[1.0, -2.0, 5.0], [0.0, 3.0, 1.0]]}).outputs["y"]
        assert [[v.item() for v in row] for row in out] == [[1, 1, 5], [0, 3, 3]]
        with pytest.raises(StepShapeError, match=r"Scan_1: port 'in0' needs b in 1..2, got 3"):
            Scan(F.add, 0.0, x, 3)

    def test_retiling_scan_grows_a_ragged_dimension(self):
        p, (x,) = program_with(("x", [2, 4], Tile(fp32, 1, 8)))
        sc = Scan(F.retile_row, F.empty_rows(fp32, 8), x, 1)
        rows = sc.dtype.rows
        assert rows.is_Symbol and p.symbols.is_ragged(rows) and p.symbols.bound(rows) == 4
        p.output(sc, "y")
        out = run(p, inputs={"x": [[np.full((1, 8), i) for i in range(4)]] * 2}).outputs["y"]
        assert [t.shape[0] for t in out[0]] == [1, 2, 3, 4]


# -- FlatMap -------------------------------------------------------------------------------------

def concat_fibres(x, depth, expand):
    if depth == 1:
        return [piece for e in x for piece in expand(e)]
    return [concat_fibres(c, depth - 1, expand) for c in x]


def pieces0(e):
    return [e] * (e % 3)


def pieces1(e):
    return [[e] * (j + 1) for j in range(e % 3)]


class TestFlatMap:
    def test_b0_stop_follows_the_last_piece(self):
        two = lambda v: [v, v]  # noqa: E731
        assert fmt(flat_map(tok("1 2 S1 3 S2"), two, 0)) == "1 1 2 2 S1 3 3 S2"

    def test_b1_raises_the_closing_stop(self):
        sub = lambda v: [v, 0, tok("S1")[0]]  # noqa: E731 (one tensor [v, 0])
        assert fmt(flat_map(tok("7 S1"), sub, 1)) == "7 0 S2"
        assert fmt(flat_map(tok("7 8 S1 9 S2"), sub, 1)) == "7 0 S1 8 0 S2 9 0 S3"

    def test_fibres_that_generate_nothing(self):
        drop_odd = lambda v: [] if v % 2 else [v]  # noqa: E731
        assert fmt(flat_map(tok("2 3 S1"), drop_odd, 0)) == "2 S1"
        assert fmt(flat_map(tok("3 S1 2 S1"), drop_odd, 0)) == "S1 2 S1"
        one = lambda v: [] if v % 2 else [v, tok("S1")[0]]  # noqa: E731
        assert fmt(flat_map(tok("2 S1 3 S1"), one, 1)) == "2 S2 S2"
        assert fmt(flat_map(tok("2 3 S1"), one, 1)) == "2 S2"

    def test_malformed_sub_stream_is_an_error(self):
        with pytest.raises(StepRuntimeError, match="fm: the sub-stream generated at beat 0 is not a "
                           "rank-1 stream") as e:
            flat_map(tok("1 2 S1"), lambda v: [v], 1, op="fm")
        assert e.value.beat == 0

    @settings(deadline=None, max_examples=200)
    @given(st.integers(0, 3).flatmap(lambda r: st.tuples(st.just(r), ragged(r, st.integers(0, 5)))))
    def test_b0_concatenates_each_innermost_fibre(self, case):
        rank, data = case
        out = flat_map(from_nested(data, rank), pieces0, 0)
        if rank == 0:
            want = [p for e in data for p in pieces0(e)]
        else:
            want = [concat_fibres(t, rank, pieces0) for t in canonical(data, rank)]
        assert to_nested(out, rank) == canonical(want, rank)

    @settings(deadline=None, max_examples=200)
    @given(st.integers(0, 3).flatmap(lambda r: st.tuples(st.just(r), ragged(r, st.integers(0, 5)))))
    def test_b1_nests_the_generated_tensors(self, case):
        rank, data = case
        out = flat_map(from_nested(data, rank), lambda e: from_nested(pieces1(e), 1), 1)
        if rank == 0:
            want = [p for e in data for p in pieces1(e)]
        else:
            want = [concat_fibres(t, rank, pieces1) for t in canonical(data, rank)]
        assert to_nested(out, rank + 1) == canonical(want, rank + 1)

    def test_retile_streamify_rows_cols_valid(self):
        p = Program("t")
        x = p.input("x", [2, 3], Tile(int32, 3, 2))
        n = p.input("n", [2, 3], Index())
        rows, cols = RetileStreamify(x), RetileStreamify(x, "col")
        valid = RetileStreamify(x, valid=n)
        assert rows.shape == (2, 9) and rows.dtype == Tile(int32, 1, 2)
        assert cols.shape == (2, 6) and cols.dtype == Tile(int32, 3, 1)
        d = valid.shape[1]
        assert valid.input_names == ("in0", "valid") and p.symbols.bound(d) == 9 and p.symbols.is_ragged(d)
        for s, name in ((rows, "rows"), (cols, "cols"), (valid, "valid")):
            p.output(s, name)
        t = [np.arange(6).reshape(3, 2) + 10 * k for k in range(6)]
        out = run(p, inputs={"x": [t[:3], t[3:]], "n": [[3, 0, 1], [2, 2, 0]]}).outputs
        assert [[r.tolist() for r in f] for f in out["rows"]][0][:4] == [[[0, 1]], [[2, 3]], [[4, 5]], [[10, 11]]]
        assert [c.tolist() for c in out["cols"][1][:2]] == [[[30], [32], [34]], [[31], [33], [35]]]
        assert [[r.tolist()[0] for r in f] for f in out["valid"]] == [
            [[0, 1], [2, 3], [4, 5], [20, 21]], [[30, 31], [32, 33], [40, 41], [42, 43]]]
        with pytest.raises(StepRuntimeError, match=r"RetileStreamify_2: 4 valid rows in a tile of 3 at beat 0"):
            run(p, inputs={"x": [t[:3], t[3:]], "n": [[4, 0, 1], [2, 2, 0]]})

    def test_filter_drops_reshape_padding(self):
        p = Program("t")
        D = p.symbol("D", bound=16)
        x = p.input("x", [D], I32)
        r = Reshape(x, 4, 0, pad=0, flags=True)
        kept = Filter(r[0], r[1], keep=False)
        assert kept.input_names == ("in0", "flags") and kept.shape[0] != kept.shape[1]
        p.output(kept, "y")
        data = [1, 2, 3, 4, 5, 6]
        out = run(p, inputs={"x": as_tiles(data, 0)}).outputs["y"]
        assert as_ints(out, 1) == [[1, 2, 3, 4], [5, 6]]
        with pytest.raises(StepTypeError, match=r"Filter_1: port 'flags' fn keep_if needs \(element, "
                           r"Bool\) pairs"):
            Filter(r[0], r[0])

    def test_addr_gen(self):
        p = Program("t")
        e = p.input("e", [3], Select(4))
        ag = AddrGen(e, [2, 3], [3, 1], scale=6, offset=100)
        assert ag.shape == (6, 3) and ag.dtype == Index()
        p.output(ag, "y")
        out = run(p, inputs={"e": [0b0001, 0b0100, 0b0010]}).outputs["y"]
        assert out == [[100, 101, 102], [103, 104, 105], [112, 113, 114], [115, 116, 117],
                       [106, 107, 108], [109, 110, 111]]
        with pytest.raises(StepRuntimeError, match=r"AddrGen_0: addr_gen needs a one-hot selector, "
                           r"got mask 0b101 at beat 1"):
            run(p, inputs={"e": [1, 5, 2]})
        assert fmt(addr_gen(2, [2, 2], [2, 1])) == "2 3 S1 4 5 S1"
        assert fmt(addr_gen(0, [3], [5])) == "0 5 10"
        assert fmt(addr_gen(0, [1, 2, 2], [0, 2, 1])) == "0 1 S1 2 3 S2"

    def test_addr_gen_counted(self):
        # a ragged range per element: each request's keys from its base address
        p = Program("t")
        base = p.input("base", [3], Index())
        n = p.input("n", [3], Index())
        ag = AddrGen(base, [1, 4], [0, 1], count=n)
        assert ag.dtype == Index() and len(ag.shape) == 2 and ag.shape[0] == 3
        assert ag.shape[1].name.startswith("FM") and p.symbols.bound(ag.shape[1]) == 4
        assert ag.input_names == ("in0", "count") and ag.params["counted"] is True
        p.output(ag, "y")
        out = run(p, inputs={"base": [10, 20, 30], "n": [2, 0, 4]}).outputs["y"]
        assert out == [[10, 11], [], [30, 31, 32, 33]]
        with pytest.raises(StepRuntimeError, match=r"AddrGen_0: addr_gen count 5 is outside 0..4 "
                           r"\(the bound of the walk's innermost dimension\) at beat 1"):
            run(p, inputs={"base": [10, 20, 30], "n": [2, 5, 4]})
        # b = 0: the ranges join the input's fibre, their total bounded by 3 x 4
        q = Program("t0")
        base, n = q.input("base", [3], Index()), q.input("n", [3], Index())
        flat = AddrGen(base, [4], [2], offset=1, count=n)
        assert len(flat.shape) == 1 and q.symbols.bound(flat.shape[0]) == 12
        q.output(flat, "y")
        assert run(q, inputs={"base": [0, 10, 20], "n": [1, 0, 3]}).outputs["y"] == [1, 21, 23, 25]
        assert fmt(addr_gen(0, [2, 3], [10, 1], count=2)) == "0 1 S1 10 11 S1"
        assert fmt(addr_gen(0, [2, 3], [10, 1], count=0)) == "S1 S1"
        with pytest.raises(StepTypeError, match=r"AddrGen_1: port 'count' fn addr_gen\(counted=True\) "
                           r"needs \(value, Index\) pairs, got Tuple\(Index\(\), Bool\(\)\)"):
            AddrGen(base, [4], [1], count=q.input("f", [3], Bool()))
        with pytest.raises(StepShapeError, match=r"AddrGen_2"):
            AddrGen(base, [4], [1], count=q.input("m", [4], Index()))

    def test_flat_map_errors(self):
        p, (x,) = program_with(("x", [4], Tile(fp32, 2, 2)))
        with pytest.raises(StepShapeError, match=r"FlatMap_0: port 'in0' b = 1, but retile_rows\(\) "
                           r"generates rank-0 sub-streams \(input shape \[4\]\)"):
            FlatMap(F.retile_rows(), x, 1)
        with pytest.raises(StepTypeError, match=r"FlatMap_1: port 'in0' needs a stream function"):
            FlatMap(F.add, x)
        with pytest.raises(StepTypeError, match=r"AddrGen_0: port 'in0' fn addr_gen needs Index, "
                           r"Select or integer \[1, 1\] tile elements, got Tile\(fp32, 2, 2\) "
                           r"\(input shape \[4\]\)"):
            AddrGen(x, [2], [1])
        assert FlatMap(F.retile_rows(), x).flops() == 0 and FlatMap(F.retile_rows(), x).onchip_bytes() == 0


# -- the call forms the examples use -------------------------------------------------------------

class TestCallForms:
    def test_matmul_is_a_function_and_a_builder(self):
        assert repr(F.matmul) == "matmul" and F.matmul() is F.matmul
        assert repr(F.matmul(transpose_b=True)) == "matmul(transpose_b=True)"
        f = F.function(lambda acc, a, b: acc + F.matmul(a, b, out=fp32))
        assert repr(f) == "fn(acc, a, b) = (acc + (a @ b).cast(fp32))"
        assert F.matmul.infer(Tile(int8, 2, 3), Tile(int8, 3, 4)) == Tile(int32, 2, 4)

    def test_map_of_matmul_and_accum_of_several_streams(self):
        p, (x, w) = program_with(("x", [2, 3], Tile(int8, 2, 4)), ("w", [2, 3], Tile(int8, 4, 2)))
        prod = Map(F.matmul, x, w)
        assert prod.dtype == Tile(int32, 2, 2)
        y = Accum(lambda acc, a, b: acc + F.matmul(a, b), Tile(int32, 2, 2), x, w, b=1)
        assert y.shape == (2,) and y.input_names == ("in0", "in1") and y.init.fill == 0
        p.output(y, "y")
        rng = np.random.default_rng(5)
        X = [[rng.integers(-128, 128, (2, 4), dtype=np.int8) for _ in range(3)] for _ in range(2)]
        W = [[rng.integers(-128, 128, (4, 2), dtype=np.int8) for _ in range(3)] for _ in range(2)]
        out = run(p, inputs={"x": X, "w": W}).outputs["y"]
        for got, xs, ws in zip(out, X, W):
            assert got.tolist() == sum(a.astype(np.int64) @ b.astype(np.int64) for a, b in zip(xs, ws)).tolist()

    def test_b_positional_or_keyword(self):
        p, (x,) = program_with(("x", [2, 3], I32))
        assert Accum(F.add, 0, x, 1).b == Accum(F.add, 0, x, b=1).b == 1
        assert Scan(F.add, 0, x).b == 1 and Scan(F.add, 0, x, 2).b == 2 and Scan(F.add, 0, x, b=2).b == 2
        with pytest.raises(StepShapeError, match=r"Accum_2: port 'in0' needs the rank b of the fold "
                           r"\(input shape \[2, 3\]\)"):
            Accum(F.add, 0, x)

    def test_none_init_grows_a_dynamic_height_tile(self):
        # an expert's column tiles [D_e, n] joined into one [D_e, N] tile (the MoE example)
        p = Program("t")
        De = p.symbol("De", bound=6)
        x = p.input("x", [2, 3], Tile(fp32, De, 2))
        wide = Accum(F.retile_col, None, x, b=1)
        assert wide.init.type == Tile(fp32, De, 0) and wide.dtype == Tile(fp32, De, 6)
        p.output(wide, "y")
        tiles = [[np.full((4, 2), 10 * i + j, np.float32) for j in range(3)] for i in range(2)]
        out = run(p, inputs={"x": tiles}).outputs["y"]
        assert [t.shape for t in out] == [(4, 6), (4, 6)]
        assert out[1][0].tolist() == [10, 10, 11, 11, 12, 12]
        with pytest.raises(StepTypeError, match=r"Accum_1: port 'in0' init: init=None is only for "
                           r"retile_row/retile_col"):
            Accum(F.add, None, x, b=1)

    def test_retile_streamify_with_its_own_level(self):
        p = Program("t")
        x = p.input("x", [2], Tile(int32, 3, 2))
        n = p.input("n", [2], Index())
        rows = RetileStreamify(x, b=1)
        valid = RetileStreamify(x, valid=n, b=1)
        assert rows.shape == (2, 3) and rows.params == {"split": "row", "b": 1}
        d = valid.shape[1]
        assert valid.shape[0] == 2 and p.symbols.is_ragged(d) and p.symbols.bound(d) == 3
        p.output(rows, "rows")
        p.output(valid, "valid")
        t = [np.arange(6).reshape(3, 2), np.arange(6, 12).reshape(3, 2)]
        out = run(p, inputs={"x": t, "n": [0, 2]}).outputs
        assert [[r.tolist()[0] for r in f] for f in out["rows"]] == [[[0, 1], [2, 3], [4, 5]],
                                                                    [[6, 7], [8, 9], [10, 11]]]
        assert [[r.tolist()[0] for r in f] for f in out["valid"]] == [[], [[6, 7], [8, 9]]]
        with pytest.raises(StepShapeError, match=r"RetileStreamify: retile_rows generates rank-0 or "
                           r"rank-1 sub-streams, not b = 2"):
            RetileStreamify(x, b=2)
