# amaranth: UnusedElaboratable=no
"""The board target: the same units and cycles as the simulation target, without test-only logic."""

import re

import numpy as np
import pytest

from stepforge.compiler.lower import lower
from stepforge.hdl.memory import lane_ram_verilog
from stepforge.hdl.system import System
from stepforge.sim.ref.interpreter import run
from stepforge.sim.rtl import compile_program
from stepforge.sim.rtl.system_sim import simulate_system

from stepforge.loader import load

from .helpers import EXAMPLES, SMALL_DENSE

#: Names that only the simulation target's test logic has (stall injection, watchdog, statistics).
TEST_ONLY = ("stall_enable", "lfsr", "watchdog", "idle_cycles", "bytes_prev", "_busy_cycles",
             "_stall_in_cycles", "_stall_out_cycles", "high_water")


def load_example(name):
    return load(EXAMPLES / f"{name}.py")


def gemv():
    pf = load_example("gemv")
    program = pf.build(K=16, N=16)
    return pf, program


def test_board_verilog_has_no_test_logic():
    _, program = gemv()
    _, sim_system, sim_text = compile_program(program, separate=False)
    _, board_system, board_text = compile_program(program, separate=False, target="board")
    for name in TEST_ONLY:
        assert name in sim_text, name            # the check would see it if it were there
        assert name not in board_text, name
    # the memory lanes of a board build have no initial contents (SPRAM cannot have any)
    assert sim_text.endswith(lane_ram_verilog(zero_init=True))
    assert board_text.endswith(lane_ram_verilog(zero_init=False))
    assert "initial" not in lane_ram_verilog(zero_init=False)
    # what a host needs stays: start, status, cycles, the error's unit and code, the word port
    for csr in ("status", "cycles", "error_unit", "error_code", "bytes_read", "bytes_written"):
        assert csr in board_system.csr_map
    assert not any(name.startswith(("unit.", "fifo.")) for name in board_system.csr_map)
    assert re.search(r"input\s+(\[\d+:0\]\s+)?debug__addr", board_text)
    assert re.search(r"input\s+start", board_text)


def test_unknown_target_is_refused():
    _, program = gemv()
    with pytest.raises(ValueError, match="System target must be one of 'sim', 'board', not 'fpga'"):
        System(lower(program), target="fpga")


@pytest.mark.parametrize("name", ["gemv", "elementwise"])
def test_board_target_runs_the_same_cycles(name):
    pf = load_example(name)
    program = pf.build(**dict(SMALL_DENSE)[name])
    data = pf.data(program, seed=1)
    tensors, inputs = data.get("tensors", {}), data.get("inputs", {})
    want = run(program, tensors=tensors, inputs=inputs)
    sim = simulate_system(program, tensors, inputs)
    board = simulate_system(program, tensors, inputs, target="board")
    assert sim.status == board.status == "done"
    assert sim.cycles == board.cycles
    for t, value in want.tensors.items():
        if program.tensors[t].role != "input":
            np.testing.assert_array_equal(board.tensors[t], value)


def test_ecp5_board_target_instantiates_mult18x18d():
    # a board build elaborates for its family: the PCU's 16 multipliers become MULT18X18D with
    # their registers inside; the simulation target (and Verilator) stays generic
    from stepforge.hdl.config import HardwareConfig
    from stepforge.hdl.platform import FamilyPlatform
    _, program = gemv()
    cfg = HardwareConfig.ecp5_85f()
    _, _, board = compile_program(program, cfg, target="board")
    _, _, sim = compile_program(program, cfg)
    assert board.count("MULT18X18D #(") == 16
    assert "MULT18X18D" not in sim
    with pytest.raises(ValueError, match="FamilyPlatform family must be one of 'ecp5', 'ice40', "
                                         "not None"):
        FamilyPlatform(None)


def test_ecp5_board_target_instantiates_the_pmu_data_memory():
    """The PMU's data memory on an ECP5 board build: ``DP16KD`` read on port B through the
    block's output register, one column of blocks; the simulation target infers it."""
    from stepforge.hdl.config import HardwareConfig
    _, program = gemv()
    cfg = HardwareConfig.ecp5_85f()
    from amaranth.hdl import Shape
    from stepforge.hdl.pmu import PMU
    from stepforge.hdl.pmu.data_ram import dp16kd_organization
    hw, _, board = compile_program(program, cfg, target="board")
    _, _, sim = compile_program(program, cfg)
    # one PMU (Bufferize_0; Streamify_0 is its read side)
    (pmu,) = [u.component for u in hw.units if isinstance(u.component, PMU) and not u.shared]
    width = Shape.cast(pmu.params.entry_layout()).width
    _, blocks = dp16kd_organization(width, max(pmu.blocks * pmu.block_size, 2))
    assert board.count('.REGMODE_B("OUTREG")') == blocks * len(pmu.readers) == 2
    assert '.REGMODE_B("OUTREG")' not in sim


def test_fpga_lowering_refuses_tiles_moved_as_wide_beats():
    """A dynamic tile (MoE's per-expert batch, rows up to T) has no hardware tiling: the
    simulation moves it whole as one wide beat, an FPGA build refuses it and names the
    widest streams; a program over hardware tiles passes either way."""
    from stepforge.compiler.errors import LoweringError
    from stepforge.compiler.lower import wide_tiles
    from stepforge.hdl.config import HardwareConfig
    config = HardwareConfig.ecp5_85f()
    moe = load_example("moe").build(T=4)
    hw = lower(moe, config)                          # the simulation's default: allowed
    wide = wide_tiles(hw.program, config)
    assert wide and all(max(r, c) > 4 for _, _, r, c in wide)
    with pytest.raises(LoweringError) as info:
        lower(load_example("moe").build(T=4), config, wide_beats=False)
    text = str(info.value)
    assert text.startswith(f"{len(wide)} stream(s) move tiles larger than the hardware tile "
                           "(4x4) as single wide beats")
    assert "Accum_0: stream Accum_0 [nonzero(N_sel_0)] of Tile(int16, N_sel_0, 8) (up to 4 x 8" in text
    assert "stepforge build --wide-beats" in text
    _, program = gemv()
    assert wide_tiles(lower(program, config, wide_beats=False).program, config) == []



def test_ice40_keeps_wide_fifos_in_block_ram():
    """On the UP5K preset an edge FIFO of 128-bit beats or wider and 2 entries or more keeps its
    beats in block RAM (``HardwareConfig.fifo_block_ram_width``): a 4x4 int8 weight tile's
    stream gets a buffered queue of 3 entries, marked for block RAM in the board's Verilog. The
    program computes the same values on either target in the same cycles; here the queue's extra
    cycle is hidden behind the memory's (GEMV 256x256: 8,428 cycles against 8,427 with
    registers)."""
    from stepforge.compiler.types import int8
    from stepforge.hdl.config import HardwareConfig
    pf, program = gemv()
    cfg = HardwareConfig.ice40_up5k(int8).with_tile((4, 4))
    hw = lower(program, cfg)
    storage = {e.name: (e.layout.size, e.depth, e.block_ram) for e in hw.edges}
    assert storage["LinearOffChipLoad_1"] == (132, 3, True)           # W's 4x4 int8 tiles
    assert [n for n, (_, _, b) in storage.items() if b] == ["LinearOffChipLoad_1"]
    assert all(d <= 2 for n, (_, d, _) in storage.items() if n != "LinearOffChipLoad_1")
    assert hw.fifo_sizing["block_ram"] == {"LinearOffChipLoad_1": {"depth": 3, "block_rams": 9}}
    assert hw.manifest()["fifos"][3]["storage"] == "block RAM"
    regs = cfg.replace(fifo_block_ram_width=None)
    assert not any(e.block_ram for e in lower(program, regs).edges)
    _, _, text = compile_program(program, cfg, separate=False, target="board")
    assert text.count('(* ram_style = "block" *)') == 1
    assert re.search(r'\(\* ram_style = "block" \*\)\s*reg \[131:0\] storage \[1:0\];', text)

    data = pf.data(program, seed=1)
    want = run(program, tensors=data["tensors"]).tensors["Y"]
    runs = [simulate_system(program, data["tensors"], config=c, target=t)
            for c, t in ((cfg, "board"), (cfg, "sim"), (regs, "sim"))]
    for r in runs:
        assert r.status == "done"
        np.testing.assert_array_equal(r.tensors["Y"], want)
    assert runs[0].cycles == runs[1].cycles == runs[2].cycles


def test_fifo_storage_takes_the_widest_within_the_budget():
    """``fifo_storage``: FIFOs of 2 entries or more and beats of ``fifo_block_ram_width`` bits
    or more go to block RAM with at least 3 entries, the widest first while the block RAMs they
    take (one ``SB_RAM40_4K`` holds 16 bits of up to 256 entries) stay within
    ``fifo_block_rams``; a FIFO that does not fit is skipped and a narrower one may still go."""
    from stepforge.compiler.lower import block_rams, fifo_storage
    from stepforge.hdl.config import HardwareConfig
    cfg = HardwareConfig.sim().replace(family="ice40", fifo_block_ram_width=128,
                                       fifo_block_rams=12)
    assert (block_rams(132, 2, "ice40"), block_rams(33, 2048, "ice40"),
            block_rams(1287, 2, "ice40"), block_rams(132, 2, "ecp5")) == (9, 17, 81, 8)
    fifos = [(132, 2), (127, 2), (1287, 3), (131, 1), (200, 2), (140, 8), (130, 300)]
    # 1287 bits (81 blocks) and 200 bits (13) do not fit; 140 bits of 7 stored entries (9)
    # do, then 132 (9 more) would not; 130 bits of 299 entries would take 17
    assert fifo_storage(fifos, cfg) == [(2, 0), (2, 0), (3, 0), (1, 0), (2, 0), (8, 9), (300, 0)]
    assert fifo_storage(fifos, cfg.replace(fifo_block_rams=None)) == [
        (3, 9), (2, 0), (3, 81), (1, 0), (3, 13), (8, 9), (300, 17)]
    assert fifo_storage(fifos, cfg.replace(fifo_block_ram_width=None)) == [
        (d, 0) for _, d in fifos]
