"""HardwareConfig: presets, derived sizes, validation."""

import dataclasses

import pytest

from stepforge.compiler.types import DTYPES, bf16, fp32, int8, int16, int32
from stepforge.hdl.config import HardwareConfig


def test_presets():
    assert HardwareConfig.sim() == HardwareConfig(
        tile_rows=4, tile_cols=4, dtype=int16, acc_dtype=int32, pcu_lanes=4, pcu_multipliers=16,
        fifo_depth=2, mem_channels=4, mem_bytes_per_channel=16, mem_latency=4,
        clock_hz=100_000_000)
    ice = HardwareConfig.ice40_up5k()
    # 2x2 tiles (a GEMM beat is 8 products for the 8 MAC16); four 2-byte lanes, four SPRAMs
    assert (ice.tile_rows, ice.tile_cols, ice.dtype, ice.pcu_multipliers, ice.mem_channels,
            ice.mem_bytes_per_channel, ice.mem_latency, ice.family) == (2, 2, int16, 8, 4, 2, 4,
                                                                         "ice40")
    assert HardwareConfig.ice40_up5k(int8).dtype == int8
    ecp5 = HardwareConfig.ecp5_85f()
    # latency 6: lanes of several DP16KD banks add two cycles to the memory's pipeline (their
    # input stage and their bank multiplexer)
    assert (ecp5.tile_rows, ecp5.tile_cols, ecp5.dtype, ecp5.pcu_multipliers,
            ecp5.mem_channels, ecp5.mem_latency, ecp5.family) == (4, 4, int16, 16, 2, 6, "ecp5")
    assert HardwareConfig.sim().family is None
    with pytest.raises(ValueError, match="supports int8 and int16 tiles, not bf16"):
        HardwareConfig.ice40_up5k(bf16)


def test_repr_mirrors_constructor():
    cfg = HardwareConfig.sim()
    assert repr(cfg) == (
        "HardwareConfig(tile_rows=4, tile_cols=4, dtype=int16, acc_dtype=int32, pcu_lanes=4, "
        "pcu_multipliers=16, fifo_depth=2, mem_channels=4, mem_bytes_per_channel=16, "
        "mem_latency=4, clock_hz=100000000, family=None)")
    assert eval(repr(cfg), {"HardwareConfig": HardwareConfig, **DTYPES}) == cfg
    ecp5 = HardwareConfig.ecp5_85f()
    assert eval(repr(ecp5), {"HardwareConfig": HardwareConfig, **DTYPES}) == ecp5
    # a field that is not its default is shown, and the repr still builds the same config
    ice = HardwareConfig.ice40_up5k(int8)
    assert repr(ice).endswith("family='ice40', fifo_block_ram_width=128, fifo_block_rams=12)")
    assert eval(repr(ice), {"HardwareConfig": HardwareConfig, **DTYPES}) == ice


def test_family_is_checked():
    with pytest.raises(ValueError, match="HardwareConfig.family must be one of None, 'ecp5', "
                                         "'ice40', not 'gowin'"):
        HardwareConfig.sim().replace(family="gowin")


def test_derived_and_defaults():
    cfg = HardwareConfig(2, 8, bf16)
    assert cfg.acc_dtype == fp32 and cfg.fifo_depth == 2
    assert (cfg.tile_elems, cfg.tile_bytes) == (16, 32)
    assert HardwareConfig.sim().mem_bytes_per_cycle == 64
    assert HardwareConfig.sim().replace(fifo_depth=5).fifo_depth == 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.tile_rows = 3


@pytest.mark.parametrize("changes, message", [
    ({"tile_rows": 0}, r"HardwareConfig.tile_rows must be >= 1, not 0"),
    ({"tile_cols": 2.0}, r"HardwareConfig.tile_cols must be an int, not 2.0"),
    ({"dtype": "int16"}, r"HardwareConfig.dtype must be a DType"),
    ({"acc_dtype": int8}, r"HardwareConfig.acc_dtype int8 is narrower than dtype int16"),
    ({"acc_dtype": fp32}, r"HardwareConfig.acc_dtype fp32 must be an integer type like dtype"),
    ({"pcu_multipliers": 3}, r"pcu_multipliers must be >= pcu_lanes \(4\), not 3"),
    ({"fifo_depth": 0}, r"HardwareConfig.fifo_depth must be >= 1, not 0"),
    ({"mem_channels": True}, r"HardwareConfig.mem_channels must be an int, not True"),
    ({"mem_latency": -1}, r"HardwareConfig.mem_latency must be >= 0, not -1"),
    ({"clock_hz": 0}, r"HardwareConfig.clock_hz must be >= 1, not 0"),
    ({"fifo_block_ram_width": 0}, r"HardwareConfig.fifo_block_ram_width must be >= 1, not 0"),
    ({"fifo_block_ram_width": 128.0},
     r"HardwareConfig.fifo_block_ram_width must be an int, not 128.0"),
    ({"fifo_block_rams": -1}, r"HardwareConfig.fifo_block_rams must be >= 0, not -1"),
])
def test_validation(changes, message):
    with pytest.raises(ValueError, match=message):
        HardwareConfig.sim().replace(**changes)
