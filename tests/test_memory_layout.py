# amaranth: UnusedElaboratable=no
"""Tensor layouts in memory: row-major at a pitch, or tile-major (``TensorPlacement(...,
tile_pitch=)``), the lowering's choice between them (``compiler.lower.tensor_layouts``) and the
host's view of both (``hdl.memory.word_addresses``, ``sim.rtl.tensor_regions`` / ``tensor_span``
/ ``tensor_words``)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from amaranth.back import rtlil
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from stepforge.compiler.lower import lower
from stepforge.compiler.types import int8, int16
from stepforge.fpga import device_config
from stepforge.hdl.config import HardwareConfig
from stepforge.hdl.memory import MemoryGeometry, TensorPlacement, times_const, word_addresses
from stepforge.sim.rtl import tensor_regions, tensor_span, tensor_words

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _example(name, **params):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.program(**params)


def test_tile_major_placement():
    g = MemoryGeometry.from_config(HardwareConfig.sim(), 4096)      # 8 lanes of 8 bytes
    p = TensorPlacement(g, int16, (8, 16), (4, 4), base=8, tile_pitch=8)
    # tile k at base + 8k, its 4 rows (one word each) one after another: one contiguous line
    assert p.contiguous and p.burst(5) == (8 + 40, 4, 1, 0) and p.tile_lines == [4]
    assert (p.col_step, p.row_step, p.words, p.start_lane) == (8, 32, 64, 0)
    assert p.port("read").start_lane == 0
    assert repr(p).endswith("(8, 16), (4, 4), base=8, tile_pitch=8)")
    # a pitch that is not a multiple of the lanes starts tiles in two lanes
    assert TensorPlacement(g, int16, (8, 16), (4, 4), tile_pitch=4).start_lane is None
    # the row-major placement of the same tensor starts its tiles in every lane
    assert TensorPlacement(g, int16, (8, 16), (4, 4), base=8).start_lane is None
    for bad in ({"tile_pitch": 3}, {"tile_pitch": 4, "pitch": 5}, {"tile_pitch": True}):
        with pytest.raises(ValueError, match="tile-major layout"):
            TensorPlacement(g, int16, (8, 16), (4, 4), **bad)


def _address_of_each_tile(p):
    """What ``p.address_of`` gives in simulation for every linear tile index."""
    m = Module()
    k = Signal(range(p.ntiles), name="k")
    addr = Signal(p.geometry.addr_bits, name="addr")
    m.d.comb += addr.eq(p.address_of(k))
    got = []

    async def bench(ctx):
        for i in range(p.ntiles):
            ctx.set(k, i)
            got.append(ctx.get(addr))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return got


def test_tile_major_address_of_is_the_tile_address():
    g = MemoryGeometry.from_config(HardwareConfig.sim(), 4096)
    p = TensorPlacement(g, int16, (8, 16), (4, 4), base=8, tile_pitch=8)
    assert _address_of_each_tile(p) == [p.tile_addr(i) for i in range(8)] == \
        [8 + 8 * i for i in range(8)]


def _words_of(info):
    return list(range(100, 100 + info["shape"][0] * info["row_words"]))


def test_word_addresses_of_both_layouts():
    rows = {"base": 4, "shape": [3, 4], "row_words": 2, "pitch_words": 3}
    assert word_addresses(rows).tolist() == [4, 5, 7, 8, 10, 11]
    # 4x4 tensor of 2x2 tiles (one word per tile row), tiles padded to 4 words
    tiles = {"base": 0, "shape": [4, 4], "row_words": 2, "tile": [2, 2], "tile_row_words": 1,
             "tile_pitch_words": 4}
    # row 0: tile 0 row 0, tile 1 row 0; row 1: tile 0 row 1, tile 1 row 1; rows 2-3: tiles 2, 3
    assert word_addresses(tiles).tolist() == [0, 4, 1, 5, 8, 12, 9, 13]
    for info in (rows, tiles):
        words = _words_of(info)
        base, n = tensor_span(info)
        image = [0] * n
        for addr, run in tensor_regions(info, words):
            image[addr - base:addr - base + len(run)] = run
        assert tensor_words(info, image) == words
    assert tensor_regions(tiles, _words_of(tiles))[0] == [0, [100]]
    assert tensor_span(tiles) == (0, 14) and tensor_span(rows) == (4, 8)


def test_the_lowering_lays_out_by_tiles_where_it_helps():
    # ECP5 preset: 4 lanes of 4-byte words
    gemv = lower(_example("gemv"), device_config("ecp5-85f"))
    x, w, y = (gemv.tensors[n] for n in "XWY")
    # W: 4x4 int8 tiles, one word per tile row, would start in every lane: tile-major, no padding
    assert (w["tile"], w["tile_row_words"], w["tile_pitch_words"]) == ([4, 4], 1, 4)
    # x: 1x4 int8 tiles of one word, padded to a line (768 bytes of padding)
    assert (x["tile"], x["tile_pitch_words"]) == ([1, 4], 4)
    # Y: 1x4 int32 tiles of 4 words already start in lane 0: row-major
    assert "tile" not in y and y["pitch_words"] == 256
    # a large tensor of one-word tiles keeps its row-major layout (padding would be 3x it)
    big = lower(_example("gemv", K=1024, N=16), device_config("ecp5-85f"))
    assert "tile" not in big.tensors["X"] and big.tensors["X"]["pitch_words"] == 257
    # every tensor's words are distinct and inside the memory
    for hw in (gemv, big):
        addrs = np.concatenate([word_addresses(i) for i in hw.tensors.values()])
        assert len(set(addrs.tolist())) == len(addrs) and addrs.max() < hw.geometry.size_words


def test_the_ice40_pads_tiles_into_the_spram_it_holds_anyway():
    # iCE40 preset: four 16-bit lanes of SPRAM, 128 KB whatever the program needs
    config = HardwareConfig.ice40_up5k()
    assert config.fixed_memory_bytes == 131072 and HardwareConfig.sim().fixed_memory_bytes is None
    # elementwise on 1x2 int16 tiles: a tile is 2 of the 4 lanes, so row-major tiles start in
    # lanes 0 and 2. Padding every tile to a line doubles each 8 KB tensor: more than the rule's
    # quarter, but the SPRAM holds it, so every tensor is tile-major and the memory is 64 KB
    ew = lower(_example("elementwise"), config.replace(tile_rows=1, tile_cols=2))
    for name in "ABCY":
        t = ew.tensors[name]
        assert (t["tile"], t["tile_row_words"], t["tile_pitch_words"]) == ([1, 2], 2, 4)
    assert ew.memory_bytes == 65536
    # the same program on the ECP5 (block RAM sized to the program) keeps the quarter rule
    ecp5 = lower(_example("elementwise"),
                 device_config("ecp5-85f").replace(tile_rows=1, tile_cols=2, dtype=int16))
    assert all("tile" not in t for t in ecp5.tensors.values())
    # GEMV 256x256 on 2x2 tiles: padding W (64 KB of 2-byte tiles) would not fit beside the
    # rest, so W stays row-major while the small x is padded
    gemv = lower(_example("gemv"), config)
    assert "tile" not in gemv.tensors["W"] and gemv.tensors["X"]["tile"] == [1, 2]
    assert gemv.memory_bytes <= config.fixed_memory_bytes
    for hw in (ew, gemv):
        addrs = np.concatenate([word_addresses(i) for i in hw.tensors.values()])
        assert len(set(addrs.tolist())) == len(addrs) and addrs.max() < hw.geometry.size_words


def test_times_const_is_the_product_without_a_multiplier():
    m = Module()
    k = Signal(6, name="k")
    outs = {c: Signal(16, name=f"times{c}") for c in (0, 1, 4, 12, 65)}
    m.d.comb += [o.eq(times_const(k, c)) for c, o in outs.items()]

    async def bench(ctx):
        for v in (0, 1, 7, 63):
            ctx.set(k, v)
            for c, o in outs.items():
                assert ctx.get(o) == v * c

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert "$mul" not in rtlil.convert(m, ports=[k, *outs.values()])


def test_column_major_tile_order():
    g = MemoryGeometry.from_config(HardwareConfig.sim(), 4096)
    # 8x16 int16 in 4x4 tiles: a 2x4 tile grid, tile (i, j) at base + (j * 2 + i) * 8
    p = TensorPlacement(g, int16, (8, 16), (4, 4), base=8, tile_pitch=8, tile_order="col")
    assert (p.row_step, p.col_step, p.words, p.start_lane) == (8, 16, 64, 0)
    assert [p.tile_addr(k) for k in range(8)] == [8 + 8 * (k % 4 * 2 + k // 4) for k in range(8)]
    assert repr(p).endswith("tile_pitch=8, tile_order='col')")
    assert _address_of_each_tile(p) == [p.tile_addr(i) for i in range(8)]
    for bad in ({"tile_order": "col"}, {"tile_pitch": 8, "tile_order": "diagonal"}):
        with pytest.raises(ValueError, match="tile order"):
            TensorPlacement(g, int16, (8, 16), (4, 4), **bad)
    # the host's view: a 4x4 tensor of 2x2 tiles (one word a tile row), tiles column-major
    info = {"base": 0, "shape": [4, 4], "row_words": 2, "tile": [2, 2], "tile_row_words": 1,
            "tile_pitch_words": 2, "tile_order": "col"}
    # tiles 0 (0, 0), 1 (0, 1), 2 (1, 0), 3 (1, 1) at 0, 4, 2, 6
    assert word_addresses(info).tolist() == [0, 4, 1, 5, 2, 6, 3, 7]


def test_the_sdram_machine_places_tensors_in_banks_and_weights_by_columns():
    """On the SDRAM machine each tensor starts a bank of its own (in turn), and a tensor
    that every load walks down its tile columns is laid out column-major: SwiGLU's weights,
    not X (walked along its rows) nor Y (stored)."""
    from stepforge.hdl.sdram import MACHINE_SDRAM
    hw = lower(_example("swiglu", B=8, H=16, I=16), HardwareConfig.ulx3s_sdram())
    region = MACHINE_SDRAM.bank_words * 2 // hw.geometry.word_bytes
    names = ["X", "Wg", "Wu", "Wd", "Y"]
    assert [hw.tensors[n]["base"] for n in names[:4]] == [0, region, 2 * region, 3 * region]
    # Y follows X in bank 0, at the next line
    lanes = hw.geometry.lanes
    assert hw.tensors["Y"]["base"] == -(-_span(hw, "X") // lanes) * lanes
    assert [hw.tensors[n].get("tile_order", "row") for n in names] == ["row", "col", "col",
                                                                       "col", "row"]
    addrs = np.concatenate([word_addresses(i) for i in hw.tensors.values()])
    assert len(set(addrs.tolist())) == len(addrs) and addrs.max() < hw.geometry.size_words
    chip = hw.geometry.word_bytes // 2             # chip words a memory word
    banks = {n: {MACHINE_SDRAM.split(int(a) * chip)[0] for a in word_addresses(hw.tensors[n])}
             for n in names}
    assert banks == {"X": {0}, "Wg": {1}, "Wu": {2}, "Wd": {3}, "Y": {0}}
    # the block RAM machine keeps everything in one run from address 0, row-major tiles
    bram = lower(_example("swiglu", B=8, H=16, I=16), device_config("ecp5-85f"))
    assert max(t["base"] for t in bram.tensors.values()) < 4096
    assert all("tile_order" not in t for t in bram.tensors.values())


def _span(hw, name):
    base, n = tensor_span(hw.tensors[name])
    return base + n - hw.tensors[name]["base"]
