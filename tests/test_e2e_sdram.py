"""Programs on a machine whose tensors live in SDRAM (``HardwareConfig.ulx3s_sdram``): the
System holds an SDRAMMemory and, in its simulation target, the chip's cycle-accurate model,
which flags any broken timing rule. Bit-exact against the interpreter in Verilator, with the
off-chip bytes of the symbolic metrics, calm and under random stalls; a broken timing rule
reported as an error of the memory; and the board's own design (host link included) run
through the host driver."""

import numpy as np
import pytest

from stepforge.boards.host import SimBoard, run_on_board
from stepforge.hdl.config import HardwareConfig
from stepforge.loader import load
from stepforge.sim.ref.interpreter import run

from .helpers import EXAMPLES
from .test_e2e import check_example

pytestmark = pytest.mark.slow

SDRAM = HardwareConfig.ulx3s_sdram()

#: the programs run on the SDRAM machine (each design is one Verilator build; GEMV's is shared
#: with the bandwidth test below): a read client with a reused on-chip vector, three matmuls with
#: a fixed-point activation, and data-dependent routing
CASES = [("gemv", {"K": 64, "N": 32}), ("swiglu", {"B": 8, "H": 8, "I": 8}),
         ("moe", {"T": 6, "tiling": "static"})]


@pytest.mark.parametrize("name,params", CASES, ids=[c[0] for c in CASES])
def test_example_on_sdram_bit_exact_calm_and_stalled(name, params):
    calm = check_example(name, params, stall=False, config=SDRAM)
    stalled = check_example(name, params, stall=True, config=SDRAM)
    assert calm.cycles > 0 and stalled.cycles > 0


def test_sdram_machine_moves_two_bytes_a_cycle_at_best():
    """GEMV's cycles on the SDRAM machine are bounded below by its off-chip bytes at the chip's
    2 bytes per cycle, and come within 1.25x of that bound (1.125x measured: the first row
    opened, refreshes, the write turnarounds)."""
    res = check_example("gemv", {"K": 64, "N": 32}, stall=False, config=SDRAM)
    moved = res.tensor_bytes_read + res.tensor_bytes_written
    assert moved / 2 <= res.cycles <= 1.25 * moved / 2


def test_board_design_with_sdram_through_the_host_link():
    """The board's design (bridge, System, SDRAM controller) with the chip's model in place of
    the chip: tensors written and read back through the word port's ``debug_ready``."""
    pf = load(EXAMPLES / "elementwise.py")
    program = pf.build(M=8, N=8)
    tensors = pf.data(program)["tensors"]
    sim = SimBoard(program, SDRAM)
    link = sim.link()
    try:
        res = run_on_board(link, program, sim.hw, sim.csr_map, tensors, {})
        assert res.status == "done"
        assert res.csrs["bytes_written"] == 128
        np.testing.assert_array_equal(res.tensors["Y"], run(program, tensors=tensors).tensors["Y"])
        words = list(range(1000, 1000 + 64))
        link.write_words(0, words)
        assert link.read_words(0, 64) == words
    finally:
        sim.close()


def test_a_broken_timing_rule_is_an_error_of_the_memory(monkeypatch):
    """The chip's model checks the controller: given a chip slower than the controller's
    (tRCD 45 ns against 20), the run stops with an error of the memory naming the rule, not a
    silent pass."""
    from dataclasses import replace

    import stepforge.hdl.system as system
    from stepforge.hdl.sdram import ULX3S_SDRAM
    from stepforge.sim.rtl import error_report, run_rtl
    monkeypatch.setattr(system, "SDRAM_MODEL_TIMING", replace(ULX3S_SDRAM, t_rcd=45))
    pf = load(EXAMPLES / "gemv.py")
    program = pf.build(K=64, N=32)
    res = run_rtl(program, pf.data(program, seed=1)["tensors"], {}, config=SDRAM)
    assert res.status == "error"
    assert res.csrs["error_unit"] == system.MEMORY_UNIT
    assert error_report(res).startswith("error in the memory (the SDRAM chip's model): "
                                        "SDRAM_TIMING, a command broke the chip's rule T_RCD "
                                        "after ")
