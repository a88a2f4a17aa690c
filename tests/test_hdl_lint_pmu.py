"""The PMU's Verilog: deterministic conversion and a clean ``verilator --lint-only``.

Warnings that Amaranth's generated Verilog always shows (width adjustments of constants and
slices, ``casez`` without a default, constant comparisons) are allowed; anything else (a
combinational loop ``UNOPTFLAT``, a latch, several drivers, ...) fails the test.
"""

import re

import pytest

from stepforge.compiler.types import Bool, Tile, bf16, int8
from stepforge.hdl.pmu import PMU, Replay
from stepforge.sim.rtl import verilator as vl

pytestmark = pytest.mark.slow

ALLOWED = {"WIDTHEXPAND", "WIDTHTRUNC", "CASEINCOMPLETE", "CMPCONST"}

CONFIGS = {
    "static_transpose_repeat": lambda: PMU(Tile(int8, 2, 2), 2, 2, (2, 3),
                                           readers=[Replay(2, order=((3, 2), (1, 3)))]),
    "dynamic_reference": lambda: PMU(Tile(bf16, 1, 4), 3, 1, (8,), mode="dynamic", block_size=4,
                                     blocks=6, readers=[Replay(expand_rank=1, ref_type=Bool())]),
    "dynamic_two_consumers": lambda: PMU(Tile(int8, 1, 2), 2, 1, (4,), mode="dynamic",
                                         block_size=3, blocks=5, readers=[Replay(), Replay(3)]),
    "one_slot_one_entry": lambda: PMU(Tile(int8, 1, 1), 1, 1, (1,), slots=1),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_lint_clean(name):
    verilog = vl.convert(CONFIGS[name](), name="pmu")
    assert verilog == vl.convert(CONFIGS[name](), name="pmu")  # deterministic (cache keys)
    warnings = vl.lint(verilog, top="pmu")
    kinds = {re.match(r"%Warning-([A-Z]+)", w).group(1) for w in warnings}
    assert kinds <= ALLOWED, [w for w in warnings if not any(k in w for k in ALLOWED)]
    for port in ("in0__payload", "refs__valid", "free_blocks", "status__code"):
        assert port in verilog
