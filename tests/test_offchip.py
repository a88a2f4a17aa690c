"""Off-chip memory operators: affine loads, stores, gathers and scatters (spec section 4).

Hand-worked token sequences, the paper's tiled-matmul walk, measured traffic against the symbolic
metrics, and malformed programs.
"""

import numpy as np
import pytest

from stepforge.compiler.errors import StepRuntimeError, StepShapeError, StepTypeError
from stepforge.compiler.graph import Program
from stepforge.compiler.metrics import bind, metrics
from stepforge.compiler.ops.offchip import (LinearOffChipLoad, LinearOffChipStore, RandomOffChipLoad,
                                            RandomOffChipStore, affine_range)
from stepforge.compiler.types import Bool, Index, Tile, fp32, int8, int32
from stepforge.contract.tokens import is_stop, stop
from stepforge.contract.values import values_equal
from stepforge.sim.ref.interpreter import run
from stepforge.sim.ref.ops_offchip import (affine_walk, linear_load, random_load, random_store,
                                       read_tile, replay_per_ref)


def grid(rows, cols, tile, dtype=np.int32):
    """A tensor whose every element is ``100 * linear tile index + position inside the tile``."""
    tr, tc = tile
    a = np.zeros((rows, cols), dtype=dtype)
    per_row = cols // tc
    for i in range(rows):
        for j in range(cols):
            a[i, j] = 100 * ((i // tr) * per_row + j // tc) + (i % tr) * tc + j % tc
    return a


def tile_ids(tokens):
    """Tokens with each tile replaced by its linear tile index (the value of its corner // 100)."""
    return [t if is_stop(t) else int(t[0, 0]) // 100 for t in tokens]


def S(k):
    return stop(k)


def assert_tokens(got, expected):
    assert len(got) == len(expected), (got, expected)
    for g, e in zip(got, expected):
        if is_stop(e):
            assert is_stop(g) and g.level == e.level, (got, expected)
        else:
            assert not is_stop(g) and values_equal(g, e), (got, expected)


class TestLinearLoad:
    def test_row_major_walk(self):
        p = Program("t")
        X = p.tensor("X", (4, 6), int32)
        ld = LinearOffChipLoad(X, (2, 3), (2, 2), (2, 1))
        assert ld.shape == (1, 2, 2)
        assert ld.dtype == Tile(int32, 2, 3)
        assert ld.tile_indices() == [[0, 1], [2, 3]]
        p.output(ld, "y")
        x = grid(4, 6, (2, 3))
        r = run(p, {"X": x}, keep_edges=True)
        assert tile_ids(r.edges[ld.out]) == [0, 1, S(1), 2, 3, S(2)]
        (t,) = r.outputs["y"]
        assert values_equal(t[1][0], x[2:4, 0:3])
        assert values_equal(t[0][1], x[0:2, 3:6])

    def test_reference_raises_the_last_stop(self):
        # spec: one read [1, 4] per reference element; the reference's stop r on its element
        # raises the read's closing S2 to S(2 + r); an empty reference fibre becomes S(1 + 2)
        p = Program("t")
        X = p.tensor("X", (2, 8), int32)
        R = p.symbol("R", ragged=True)
        ref = p.input("ref", (3, R), Index())
        ld = LinearOffChipLoad(X, (2, 2), (1, 4), (4, 1), ref=ref)
        assert ld.shape == (3, R, 1, 4)
        p.output(ld, "y")
        x = grid(2, 8, (2, 2))
        r = run(p, {"X": x}, {"ref": [[7, 8], [], [9]]}, keep_edges=True)
        read = [0, 1, 2, 3]
        assert tile_ids(r.edges[ld.out]) == read + [S(2)] + read + [S(3), S(3)] + read + [S(3)]
        tiles = [read_tile(x, (2, 2), k) for k in read]
        assert_tokens(r.edges[ld.out], tiles + [S(2)] + tiles + [S(3), S(3)] + tiles + [S(3)])
        assert r.offchip_read == {ld.name: 12 * 16}
        assert str(ld.offchip_read_bytes()) == "64*n_ref"  # cardinality(ref) x 4 tiles x 16 bytes
        assert metrics(p).subs(bind(p, r.trace)).offchip_read == 12 * 16

    def test_reference_with_a_single_tile_read(self):
        # out_shape () reads one tile per reference element: the output takes the ref's stops
        x = grid(2, 4, (2, 2))
        toks = linear_load(x, (2, 2), (), (), offset=1, ref=[7, 8, S(1), 9, S(2)])
        assert tile_ids(toks) == [1, 1, S(1), 1, S(2)]

    def test_stride_zero_rereads(self):
        p = Program("t")
        X = p.tensor("X", (2, 4), int32)
        ld = LinearOffChipLoad(X, (2, 2), (3, 2), (0, 1))
        p.output(ld, "y")
        r = run(p, {"X": grid(2, 4, (2, 2))}, keep_edges=True)
        assert tile_ids(r.edges[ld.out]) == [0, 1, S(1), 0, 1, S(1), 0, 1, S(2)]
        assert r.offchip_read == {ld.name: 6 * 16}

    def test_size_one_dimension_counts_as_last(self):
        # out_shape (2, 1, 2): the size-1 middle dimension closes with every row
        x = grid(2, 8, (2, 2))
        assert tile_ids(linear_load(x, (2, 2), (2, 1, 2), (2, 0, 1))) == [0, 1, S(2), 2, 3, S(3)]

    def test_backwards_walk_with_offset(self):
        p = Program("t")
        X = p.tensor("X", (2, 8), int32)
        ld = LinearOffChipLoad(X, (2, 2), (4,), (-1,), offset=3)
        assert ld.tile_indices() == [3, 2, 1, 0]
        p.output(ld, "y")
        r = run(p, {"X": grid(2, 8, (2, 2))}, keep_edges=True)
        assert tile_ids(r.edges[ld.out]) == [3, 2, 1, 0, S(1)]

    def test_tiled_matmul_walk(self):
        # notes section 5.3: X[M, K] in m x k tiles walked (M/m, N/n, K/k) with stride (K/k, 0, 1),
        # W[K, N] in k x n tiles with stride (0, 1, N/n); summing the tile products over the inner
        # K axis gives X @ W
        M, K, N, m, k, n = 4, 6, 6, 2, 3, 2
        p = Program("mm")
        X = p.tensor("X", (M, K), int32)
        W = p.tensor("W", (K, N), int32)
        xs = LinearOffChipLoad(X, (m, k), (M // m, N // n, K // k), (K // k, 0, 1))
        ws = LinearOffChipLoad(W, (k, n), (M // m, N // n, K // k), (0, 1, N // n))
        assert xs.shape == ws.shape == (1, 2, 3, 2)
        assert xs.tile_indices() == [[[0, 1]] * 3, [[2, 3]] * 3]
        assert ws.tile_indices() == [[[0, 3], [1, 4], [2, 5]]] * 2
        p.output(xs, "x")
        p.output(ws, "w")
        rng = np.random.default_rng(1)
        x = rng.integers(-9, 10, (M, K)).astype(np.int32)
        w = rng.integers(-9, 10, (K, N)).astype(np.int32)
        r = run(p, {"X": x, "W": w}, keep_edges=True)
        expected_stops = ([None, None, S(1)] * 2 + [None, None, S(2)]) * 2
        expected_stops[-1] = S(3)
        got = r.edges[xs.out]
        assert [t if is_stop(t) else None for t in got] == expected_stops
        (xt,), (wt,) = r.outputs["x"], r.outputs["w"]
        y = np.zeros((M, N), dtype=np.int32)
        for i in range(M // m):
            for j in range(N // n):
                acc = sum(a @ b for a, b in zip(xt[i][j], wt[i][j]))
                y[i * m:(i + 1) * m, j * n:(j + 1) * n] = acc
        assert np.array_equal(y, x @ w)
        tb = m * k * 4
        assert r.offchip_read == {xs.name: 12 * tb, ws.name: 12 * k * n * 4}


class TestLinearStore:
    def test_load_store_round_trip(self):
        p = Program("t")
        X = p.tensor("X", (4, 6), int32)
        Y = p.tensor("Y", (4, 6), int32, role="output")
        st = LinearOffChipStore(LinearOffChipLoad(X, (2, 3), (2, 2), (2, 1)), Y)
        assert st.outputs == () and st.output_names == ()
        x = grid(4, 6, (2, 3))
        r = run(p, {"X": x})
        assert np.array_equal(r.tensors["Y"], x)
        assert r.offchip_written == {st.name: 4 * 24}

    def test_column_major_walk_stores_the_tile_grid_transposed(self):
        # load tiles column by column (0, 2, 1, 3) and store them to positions 0, 1, 2, 3
        p = Program("t")
        X = p.tensor("X", (4, 4), int32)
        Y = p.tensor("Y", (4, 4), int32, role="output")
        LinearOffChipStore(LinearOffChipLoad(X, (2, 2), (2, 2), (1, 2)), Y)
        x = grid(4, 4, (2, 2))
        y = run(p, {"X": x}).tensors["Y"]
        for pos, src in enumerate([0, 2, 1, 3]):
            assert values_equal(read_tile(y, (2, 2), pos), read_tile(x, (2, 2), src))

    def test_fewer_tiles_than_the_tensor_under_a_bound(self):
        p = Program("t")
        N = p.symbol("N", bound=4)
        Y = p.tensor("Y", (4, 2), int8, role="output")
        xs = p.input("xs", (1, N), Tile(int8, 1, 2))
        st = LinearOffChipStore(xs, Y)
        r = run(p, inputs={"xs": [[[[1, 2]], [[3, 4]], [[5, 6]]]]})
        assert r.tensors["Y"].tolist() == [[1, 2], [3, 4], [5, 6], [0, 0]]
        assert st.offchip_write_bytes() == 2 * N
        assert metrics(p).subs(bind(p, r.trace)).per_node[st.name]["offchip_write"] == 6
        assert r.offchip_written == {st.name: 6}

    def test_more_tiles_than_the_tensor_is_a_runtime_error(self):
        p = Program("t")
        N = p.symbol("N")  # unbounded: accepted when built, checked when run
        Y = p.tensor("Y", (2, 2), int8, role="output")
        st = LinearOffChipStore(p.input("xs", (1, N), Tile(int8, 1, 2)), Y)
        with pytest.raises(StepRuntimeError) as e:
            run(p, inputs={"xs": [[[[1, 2]], [[3, 4]], [[5, 6]]]]})
        assert e.value.op == st.name and e.value.beat == 2
        assert str(e.value) == f"{st.name}: tile 2 at beat 2 does not fit: the tensor holds 2 tiles"


class TestRandom:
    def test_scatter_rows_0_3_11_of_16(self):
        p = Program("t")
        Y = p.tensor("Y", (16, 4), fp32, role="output")
        addr = p.input("addr", (1, 3), Index())
        data = p.input("data", (1, 3), Tile(fp32, 1, 4))
        st = RandomOffChipStore(addr, data, Y)
        assert st.shape == (1, 3) and st.dtype == Bool()
        p.output(st, "ack")
        rows = np.arange(12, dtype=np.float32).reshape(3, 1, 4) + 0.5
        r = run(p, inputs={"addr": [[0, 3, 11]], "data": [list(rows)]})
        assert r.outputs["ack"] == [[True, True, True]]
        expected = np.zeros((16, 4), dtype=np.float32)
        expected[[0, 3, 11]] = rows[:, 0, :]
        assert np.array_equal(r.tensors["Y"], expected)
        assert r.offchip_written == {st.name: 3 * 16}

    def test_scatter_into_inout_keeps_other_tiles_and_last_write_wins(self):
        y0 = grid(2, 8, (2, 2))
        toks = [np.full((2, 2), v, dtype=np.int32) for v in (7, 8, 9)]
        y = y0.copy()
        ack = random_store([2, S(1), 2, 0, S(1)], toks, y, (2, 2))
        assert ack == [True, S(1), True, True, S(1)]
        assert values_equal(read_tile(y, (2, 2), 2), toks[1])
        assert values_equal(read_tile(y, (2, 2), 0), toks[2])
        assert values_equal(read_tile(y, (2, 2), 1), read_tile(y0, (2, 2), 1))
        assert values_equal(read_tile(y, (2, 2), 3), read_tile(y0, (2, 2), 3))

    def test_scatter_address_stops_rule(self):
        # addresses [[0, 1], [2]] paired with data [[a, b, c]]: the ack has the addresses' stops
        p = Program("t")
        Y = p.tensor("Y", (3, 1), int32, role="inout")
        A, D = p.symbol("A", ragged=True), p.symbol("D", ragged=True)
        addr = p.input("addr", (2, A), Index())
        data = p.input("data", (1, D), Tile(int32, 1, 1))
        st = RandomOffChipStore(addr, data, Y)
        p.output(st, "ack")
        r = run(p, {"Y": np.zeros((3, 1))}, {"addr": [[0, 1], [2]], "data": [[5, 6, 7]]})
        assert r.outputs["ack"] == [[True, True], [True]]
        assert r.tensors["Y"].tolist() == [[5], [6], [7]]
        sym = metrics(p).per_node[st.name]["offchip_write"]
        assert metrics(p).subs(bind(p, r.trace)).per_node[st.name]["offchip_write"] == 12, sym

    @pytest.mark.parametrize("addr,data,beat,message", [
        ([0, 1, S(1), 2, S(1)], [5, 6, S(1)], 2,
         "address at beat 2 has no data: the data stream holds 2 elements"),
        ([0, S(1)], [5, 6, S(1)], 1,
         "data element at beat 1 has no address: the address stream holds 1 elements, the data 2"),
    ])
    def test_element_counts_must_match(self, addr, data, beat, message):
        data = [t if is_stop(t) else np.full((1, 1), t, dtype=np.int32) for t in data]
        with pytest.raises(StepRuntimeError) as e:
            random_store(addr, data, np.zeros((3, 1), dtype=np.int32), (1, 1), op="St")
        assert str(e.value) == f"St: {message}" and e.value.beat == beat

    def test_gather(self):
        p = Program("t")
        X = p.tensor("X", (4, 4), int32)
        A = p.symbol("A", ragged=True)
        addr = p.input("addr", (2, A), Index())
        ld = RandomOffChipLoad(addr, X, (2, 2))
        assert ld.shape == (2, A) and ld.dtype == Tile(int32, 2, 2)
        p.output(ld, "y")
        x = grid(4, 4, (2, 2))
        r = run(p, {"X": x}, {"addr": [[3, 0, 3], [], [2]]}, keep_edges=True)
        assert tile_ids(r.edges[ld.out]) == [3, 0, 3, S(1), S(1), 2, S(1)]
        assert values_equal(r.outputs["y"][0][1], x[0:2, 0:2])
        assert r.offchip_read == {ld.name: 4 * 16}
        assert metrics(p).subs(bind(p, r.trace)).per_node[ld.name]["offchip_read"] == 64

    def test_gather_out_of_range_names_the_beat(self):
        p = Program("t")
        X = p.tensor("X", (4, 4), int32)
        A = p.symbol("A", ragged=True)
        ld = RandomOffChipLoad(p.input("addr", (2, A), Index()), X, (2, 2), name="gather")
        with pytest.raises(StepRuntimeError) as e:
            run(p, {"X": grid(4, 4, (2, 2))}, {"addr": [[1, 2], [4]]})
        assert str(e.value) == "gather: address 4 at beat 2 is outside the tensor's 4 tiles"
        assert e.value.beat == 2 and e.value.op == ld.name

    def test_scatter_out_of_range_names_the_beat(self):
        with pytest.raises(StepRuntimeError) as e:
            random_store([S(1), 0, 16, S(1)], [np.zeros((1, 4))] * 2, np.zeros((16, 4)), (1, 4), op="St")
        assert str(e.value) == "St: address 16 at beat 2 is outside the tensor's 16 tiles"
        assert e.value.beat == 2

    def test_pure_gather_keeps_stops(self):
        x = grid(2, 4, (2, 2))
        assert tile_ids(random_load([S(1), 1, S(2)], x, (2, 2))) == [S(1), 1, S(2)]


def test_affine_helpers():
    assert affine_walk((2, 3), (3, 1), 1) == [[1, 2, 3], [4, 5, 6]]
    assert affine_walk((), ()) == 0
    assert affine_range((2, 3), (-3, 1), 5) == (2, 7)
    assert replay_per_ref([S(1), 0, 0, S(2)], lambda: ["a", S(1)], 1) == [S(2), "a", S(1), "a", S(3)]


def test_measured_traffic_equals_symbolic_traffic():
    p = Program("traffic")
    D = p.symbol("D", bound=8)
    R = p.symbol("R", ragged=True, bound=8)
    X = p.tensor("X", (4, 4), int32)
    Y = p.tensor("Y", (8, 2), int8, role="inout")
    Z = p.tensor("Z", (4, 2), int32, role="output")
    n1 = LinearOffChipLoad(X, (2, 2), (2, 2), (0, 1))
    n2 = LinearOffChipLoad(X, (2, 2), (2,), (2,), ref=p.input("d", (1, D), Index()))
    n3 = LinearOffChipLoad(X, (1, 4), (3,), (1,), ref=p.input("r", (2, R), Index()))
    n4 = RandomOffChipLoad(p.input("a", (1, D), Index()), Y, (2, 2))
    n5 = RandomOffChipStore(p.input("w", (2, R), Index()), p.input("v", (1, D), Tile(int8, 2, 2)), Y)
    n6 = LinearOffChipStore(LinearOffChipLoad(X, (1, 2), (2, 2), (2, 1)), Z)
    for n in (n1, n2, n3, n4, n5):
        p.output(n, "out_" + n.name)
    x = grid(4, 4, (2, 2))
    r = run(p, {"X": x, "Y": np.ones((8, 2))},
            {"d": [[0, 0, 0]], "r": [[1, 1], [], [1, 1, 1]], "a": [[0, 3, 1]], "w": [[2], [0, 1]],
             "v": [[np.full((2, 2), 3)] * 3]})
    sub = metrics(p).subs(bind(p, r.trace))
    measured_r = {k: v for k, v in r.offchip_read.items()}
    measured_w = {k: v for k, v in r.offchip_written.items()}
    for n in p.nodes:
        terms = sub.per_node.get(n.name, {"offchip_read": 0, "offchip_write": 0})
        assert terms["offchip_read"] == measured_r.get(n.name, 0), n.name
        assert terms["offchip_write"] == measured_w.get(n.name, 0), n.name
    assert measured_r[n1.name] == 4 * 16 and measured_r[n2.name] == 6 * 16
    assert measured_r[n3.name] == 15 * 16 and measured_w[n5.name] == 3 * 4
    assert sub.offchip_read == sum(measured_r.values())
    assert sub.offchip_write == sum(measured_w.values())
    assert r.tensors["Y"][0:2].tolist() == [[3, 3], [3, 3]]
    for n in (n1, n2, n3):
        assert n.onchip_bytes() == 2 * n.dtype.nbytes()
    assert n5.onchip_bytes() == 2 * 4 and n6.onchip_bytes() == 2 * 8


# -- malformed programs -----------------------------------------------------------------------

def prog():
    p = Program("bad")
    B = p.symbol("B", bound=16)
    U = p.symbol("U")
    X = p.tensor("X", (4, 6), int32)
    Y = p.tensor("Y", (4, 6), int32, role="output")
    return p, X, Y, B, U


def _load_into(p, X, Y, B, U):
    return LinearOffChipLoad(X, (2, 3), (2, 2), (2, 1))


CASES = [
    ("tile does not divide", StepShapeError,
     "LinearOffChipLoad_0: port 'tensor' tile [3, 3] does not divide tensor X [4, 6]",
     lambda p, X, Y, B, U: LinearOffChipLoad(X, (3, 3), (1,), (1,))),
    ("walk past the end", StepShapeError,
     "LinearOffChipLoad_0: port 'tensor' reads tile 4, outside tensor X [4, 6] of 2x2 = 4 tiles [2, 3] "
     "(walk out_shape [2, 2], stride [2, 2], offset 0)",
     lambda p, X, Y, B, U: LinearOffChipLoad(X, (2, 3), (2, 2), (2, 2))),
    ("walk before the start", StepShapeError,
     "LinearOffChipLoad_0: port 'tensor' reads tile -1, outside tensor X [4, 6]",
     lambda p, X, Y, B, U: LinearOffChipLoad(X, (2, 3), (2,), (-1,))),
    ("stride length", StepShapeError,
     "LinearOffChipLoad_0: port 'out' needs one int stride per out_shape dimension (out_shape (2, 2), "
     "stride (1,), tensor X [4, 6])",
     lambda p, X, Y, B, U: LinearOffChipLoad(X, (2, 3), (2, 2), (1,))),
    ("zero out_shape", StepShapeError,
     "LinearOffChipLoad_0: port 'out' needs out_shape of static positive ints",
     lambda p, X, Y, B, U: LinearOffChipLoad(X, (2, 3), (0, 2), (1, 1))),
    ("symbolic out_shape", StepShapeError,
     "LinearOffChipLoad_0: port 'out' needs out_shape of static positive ints",
     lambda p, X, Y, B, U: LinearOffChipLoad(X, (2, 3), (B,), (1,))),
    ("not a tensor", StepTypeError,
     "LinearOffChipLoad: port 'tensor' expects an off-chip Tensor (Program.tensor), got str 'X'",
     lambda p, X, Y, B, U: LinearOffChipLoad("X", (2, 3), (1,), (1,))),
    ("load from an output tensor", StepTypeError,
     "LinearOffChipLoad_0: port 'tensor' reads tensor Y [4, 6] of role 'output' (needs 'input' or 'inout')",
     lambda p, X, Y, B, U: LinearOffChipLoad(Y, (2, 3), (1,), (1,))),
    ("store into an input tensor", StepTypeError,
     "LinearOffChipStore_0: port 'tensor' writes tensor X [4, 6] of role 'input'",
     lambda p, X, Y, B, U: LinearOffChipStore(_load_into(p, X, Y, B, U), X)),
    ("store dtype", StepTypeError,
     "LinearOffChipStore_0: port 'in0' writes Tile(int8, 2, 3) into tensor Y [4, 6] of int32",
     lambda p, X, Y, B, U: LinearOffChipStore(p.input("s", (1, 4), Tile(int8, 2, 3)), Y)),
    ("store non-tiles", StepTypeError,
     "LinearOffChipStore_0: port 'in0' expects a stream of Tile, got Index() [1, 4]",
     lambda p, X, Y, B, U: LinearOffChipStore(p.input("s", (1, 4), Index()), Y)),
    ("store dynamic tiles", StepShapeError,
     "LinearOffChipStore_0: port 'in0' needs static-shape tiles to write tensor Y [4, 6], got tile [B, 3]",
     lambda p, X, Y, B, U: LinearOffChipStore(p.input("s", (1, 4), Tile(int32, B, 3)), Y)),
    ("store count differs", StepShapeError,
     "LinearOffChipStore_0: port 'in0' stream [1, 5] holds 5 tiles [2, 3], tensor Y [4, 6] holds 4",
     lambda p, X, Y, B, U: LinearOffChipStore(p.input("s", (1, 5), Tile(int32, 2, 3)), Y)),
    ("store bound too large", StepShapeError,
     "LinearOffChipStore_0: port 'in0' stream [1, B] may hold up to 16 tiles [2, 3] (B), tensor Y [4, 6] holds 4",
     lambda p, X, Y, B, U: LinearOffChipStore(p.input("s", (1, B), Tile(int32, 2, 3)), Y)),
    ("store tile does not divide", StepShapeError,
     "LinearOffChipStore_0: port 'tensor' tile [4, 4] does not divide tensor Y [4, 6]",
     lambda p, X, Y, B, U: LinearOffChipStore(p.input("s", (1, U), Tile(int32, 4, 4)), Y)),
    ("gather address type", StepTypeError,
     "RandomOffChipLoad_0: port 'addr' expects a stream of Index, got Tile(int32, 1, 1) [1, 3] (tensor X [4, 6])",
     lambda p, X, Y, B, U: RandomOffChipLoad(p.input("a", (1, 3), Tile(int32, 1, 1)), X, (2, 3))),
    ("gather tile", StepShapeError,
     "RandomOffChipLoad_0: port 'tensor' needs a tile of two positive ints (rows, cols), got (2,) for tensor X [4, 6]",
     lambda p, X, Y, B, U: RandomOffChipLoad(p.input("a", (1, 3), Index()), X, (2,))),
    ("scatter counts differ", StepShapeError,
     "RandomOffChipStore_0: port 'data' pairs 2 data tiles with 3 addresses: addr [1, 3] vs data [2, 1]",
     lambda p, X, Y, B, U: RandomOffChipStore(p.input("a", (1, 3), Index()),
                                              p.input("d", (2, 1), Tile(int32, 2, 3)), Y)),
    ("scatter data dtype", StepTypeError,
     "RandomOffChipStore_0: port 'data' writes Tile(fp32, 2, 3) into tensor Y [4, 6] of int32",
     lambda p, X, Y, B, U: RandomOffChipStore(p.input("a", (1, 3), Index()),
                                              p.input("d", (1, 3), Tile(fp32, 2, 3)), Y)),
    ("scatter address type", StepTypeError,
     "RandomOffChipStore_0: port 'addr' expects a stream of Index, got Bool() [1, 3] (data [1, 3])",
     lambda p, X, Y, B, U: RandomOffChipStore(p.input("a", (1, 3), Bool()),
                                              p.input("d", (1, 3), Tile(int32, 2, 3)), Y)),
    ("tensor of another program", StepShapeError,
     "RandomOffChipLoad_0: port 'tensor' tensor X [4, 6] belongs to another program (bad, not other)",
     lambda p, X, Y, B, U: RandomOffChipLoad(Program("other").input("a", (1, 3), Index()), X, (2, 3))),
]


@pytest.mark.parametrize("what,error,message,build", CASES, ids=[c[0] for c in CASES])
def test_malformed(what, error, message, build):
    p, X, Y, B, U = prog()
    with pytest.raises(error) as info:
        build(p, X, Y, B, U)
    assert message in str(info.value)
    assert str(info.value).split(":")[0] == info.value.op
    assert info.value.op not in [node.name for node in p.nodes]  # the failed node is not added
