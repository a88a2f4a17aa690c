"""Hierarchical tiling: STeP tiles larger than the hardware tile, rewritten over hardware tiles.

The rewritten program must compute exactly what the STeP program computes (integers bit for bit,
float sums within rounding) with exactly its off-chip traffic, and run bit-exact in Verilator.
"""

import numpy as np
import pytest

from stepforge import (Accum, Bool, Filter, LinearOffChipLoad, LinearOffChipStore, Map, Program,
                       Reshape, Tile, int8, int16, int32, matmul, retile_col)
from stepforge.compiler.errors import LoweringError
from stepforge.compiler.lower import lower
from stepforge.compiler.metrics import metrics
from stepforge.compiler.ops.memory import Bufferize, Streamify
from stepforge.compiler.tiling import TilingError, needs_tiling, subtile, tile_for_hardware
from stepforge.hdl.config import HardwareConfig
from stepforge.loader import load
from stepforge.sim.ref.interpreter import run
from stepforge.sim.rtl import run_rtl

from .helpers import EXAMPLES

SIM = HardwareConfig.sim()      # 4 x 4 hardware tiles

CASES = [
    ("matmul", {"M": 16, "K": 32, "N": 16, "t": 8}),
    ("matmul", {"M": 32, "K": 32, "N": 32, "t": 16}),
    ("gemv", {"K": 64, "N": 32, "t": 16}),
    ("elementwise", {"M": 16, "N": 32, "t": 8}),
    ("swiglu", {"B": 16, "H": 32, "I": 32, "t": 8}),
    ("swiglu", {"B": 16, "H": 32, "I": 64, "t": 16}),
]


def _same_meaning(program, tiled, tensors):
    want = run(program, tensors)
    got = run(tiled, tensors)
    for name, t in program.tensors.items():
        if t.role == "output":
            if t.dtype.is_float:
                np.testing.assert_allclose(got.tensors[name], want.tensors[name], rtol=1e-5, atol=1e-5)
            else:
                assert got.tensors[name].dtype == want.tensors[name].dtype
                assert np.array_equal(got.tensors[name], want.tensors[name]), name
    m0, m1 = metrics(program), metrics(tiled)
    assert (m1.offchip_read, m1.offchip_write) == (m0.offchip_read, m0.offchip_write)
    return got


@pytest.mark.parametrize("name,params", CASES, ids=[f"{n}-t{p['t']}" for n, p in CASES])
def test_examples_keep_their_meaning_and_traffic(name, params):
    pf = load(EXAMPLES / f"{name}.py")
    program = pf.build(**params)
    tensors = pf.data(program, seed=3)["tensors"]
    tiled = tile_for_hardware(pf.build(**params), SIM)
    assert tiled is not program
    for s in tiled.streams:
        if isinstance(s.dtype, Tile):
            assert s.dtype.rows <= 4 and s.dtype.cols <= 4, s
    _same_meaning(program, tiled, tensors)


def test_float_swiglu_within_rounding():
    pf = load(EXAMPLES / "swiglu.py")
    params = {"B": 8, "H": 16, "I": 16, "t": 8, "dtype": "fp32"}
    program = pf.build(**params)
    _same_meaning(program, tile_for_hardware(pf.build(**params), SIM), pf.data(program)["tensors"])


def test_a_program_that_fits_is_left_alone():
    pf = load(EXAMPLES / "matmul.py")
    program = pf.build(M=8, K=8, N=8, t=4)
    assert not needs_tiling(program, SIM)
    assert tile_for_hardware(program, SIM) is program


def test_matmul_map_becomes_an_accum_and_elementwise_accum_reduces_inside_the_subtiles():
    def build():
        p = Program("maps")
        X = p.tensor("X", (16, 8), int8)
        W = p.tensor("W", (8, 8), int8)
        Y = p.tensor("Y", (8, 8), int32, role="output")
        x = LinearOffChipLoad(X, (8, 8), out_shape=(2,), stride=(1,))
        w = LinearOffChipLoad(W, (8, 8), out_shape=(2,), stride=(0,))
        prod = Map(matmul, x, w)                                   # [1, 2] of 8x8 int32
        LinearOffChipStore(Accum(lambda acc, v: acc + v, Tile(int32, 8, 8), prod, b=1), Y)
        return p
    rng = np.random.default_rng(0)
    tensors = {"X": rng.integers(-128, 128, (16, 8), dtype=np.int8),
               "W": rng.integers(-128, 128, (8, 8), dtype=np.int8)}
    program = build()
    tiled = tile_for_hardware(build(), SIM)
    kinds = [type(n).__name__ for n in tiled.nodes]
    assert "Map" not in kinds and kinds.count("Accum") == 2
    got = _same_meaning(program, tiled, tensors)
    x = tensors["X"].astype(np.int64).reshape(2, 8, 8)
    assert np.array_equal(got.tensors["Y"], (x[0] @ tensors["W"] + x[1] @ tensors["W"]).astype(np.int32))


def test_a_load_broadcast_is_buffered_not_reread():
    """a @ w re-uses each sub-tile of a over w's sub-tile columns: a PMU replays it."""
    pf = load(EXAMPLES / "matmul.py")
    tiled = tile_for_hardware(pf.build(M=16, K=16, N=16, t=8), SIM)
    replays = [n for n in tiled.nodes if isinstance(n, Streamify)]
    assert len(replays) == 2 and all(0 in n.order[1] for n in replays)
    assert sum(isinstance(n, Bufferize) for n in tiled.nodes) == 2


def test_subtile():
    assert subtile(Tile(int8, 16, 8), SIM) == (Tile(int8, 4, 4), 4, 2)
    assert subtile(Tile(int8, 1, 16), SIM) == (Tile(int8, 1, 4), 1, 4)
    with pytest.raises(TilingError, match=r"tile \[6, 8\] has 6 rows, not a multiple of the hardware tile's 4"):
        subtile(Tile(int8, 6, 8), SIM, "x")


def test_errors_name_the_operator_and_the_tiles():
    p = Program("bad")
    X = p.tensor("X", (8, 8), int16)
    Y = p.tensor("Y", (8, 8), int16, role="output")
    x = LinearOffChipLoad(X, (8, 8), out_shape=(1,), stride=(1,))
    r = Reshape(x, 1, 1)
    LinearOffChipStore(Accum(lambda a, v: a + v, Tile(int16, 8, 8), r, b=1), Y)
    with pytest.raises(TilingError, match=r"Reshape_0 \(Reshape\) has no hierarchical tiling rule "
                                          r"\(tiles \[8, 8\] on a 4x4 hardware tile\)"):
        tile_for_hardware(p, SIM)


def test_a_walk_across_tensor_rows_cannot_be_split():
    p = Program("wrap")
    X = p.tensor("X", (16, 16), int16)
    Y = p.tensor("Y", (8, 32), int16, role="output")
    x = LinearOffChipLoad(X, (8, 8), out_shape=(4,), stride=(1,))      # tiles 0..3 in a row
    LinearOffChipStore(x, Y)
    with pytest.raises(TilingError, match=r"LinearOffChipLoad_0 .*walks \(4,\) with strides \(1,\) "
                                          r"across the rows of X's 2x2 tile grid"):
        tile_for_hardware(p, SIM)


def test_lowering_runs_the_tiled_program():
    pf = load(EXAMPLES / "matmul.py")
    hw = lower(pf.build(M=8, K=8, N=8, t=8))
    assert all(e.layout is not None for e in hw.edges)
    tiles = {(u.node.tile if hasattr(u.node, "tile") else None) for u in hw.units}
    assert (4, 4) in tiles and (8, 8) not in tiles


@pytest.mark.parametrize("name,params", [("swiglu", {"B": 8, "H": 16, "I": 16, "t": 8})],
                         ids=["swiglu-t8"])
def test_tiled_program_runs_bit_exact_in_verilator(name, params):
    pf = load(EXAMPLES / f"{name}.py")
    program = pf.build(**params)
    tensors = pf.data(program, seed=2)["tensors"]
    res = run_rtl(pf.build(**params), tensors)
    assert res.status == "done"
    want = run(program, tensors)                          # the STeP program, untiled
    ref = run(res.hw.program, tensors)                    # what the hardware runs
    for name_, t in program.tensors.items():
        if t.role == "output":
            assert np.array_equal(res.tensors[name_], want.tensors[name_])
            assert np.array_equal(res.tensors[name_], ref.tensors[name_])
    m = metrics(program)
    assert (res.tensor_bytes_read, res.tensor_bytes_written) == (m.offchip_read, m.offchip_write)


def test_lowering_falls_back_to_wide_beats_when_a_rule_is_missing():
    pf = load(EXAMPLES / "moe.py")             # [1, 16] tiles through routers: no rule
    hw = lower(pf.build())
    assert hw.tiling.startswith("not applied: ") and "Reassemble_0 (Reassemble)" in hw.tiling
    assert hw.manifest()["hierarchical_tiling"] == hw.tiling
    with pytest.raises(TilingError, match=r"has a dynamic stream shape"):
        lower(pf.build(), tiling="on")
    assert lower(load(EXAMPLES / "matmul.py").build(M=8, K=8, N=8, t=8), tiling="off").tiling == "off"
    assert lower(load(EXAMPLES / "matmul.py").build(M=8, K=8, N=8, t=8)).tiling == "applied"


def test_dynamic_columns_are_refused_by_the_lowering():
    """``retile_col`` over a ragged fibre grows a tile of dynamic columns, which has no wire
    encoding: a LoweringError naming the operator and the stream, not a ValueError (fuzz seed
    21027)."""
    p = Program("dyncols")
    t = p.tensor("T0", (12, 2), int32)
    s0 = LinearOffChipLoad(t, (4, 1), out_shape=(3,), stride=(1,), offset=3)
    f0 = p.input("f0", [1, 3], Bool())
    p.output(Accum(retile_col, None, Filter(s0, f0, keep=False), b=1), "o")
    with pytest.raises(LoweringError, match=r"Accum_0: stream Accum_0 \[1\] cannot be built in "
                                            r"hardware: Tile\(int32, 4, FM_0\): a dynamic column "
                                            r"count \(FM_0\) has no wire encoding"):
        lower(p, HardwareConfig.sim())
