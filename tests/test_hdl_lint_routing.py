# amaranth: UnusedElaboratable=no
"""The router units convert to Verilog deterministically and pass Verilator's linter."""

import re

import pytest

from stepforge.compiler.types import Index, Tile, Tuple, int16
from stepforge.hdl.eager_merge import EagerMergeUnit
from stepforge.hdl.parallelize import ParallelizeUnit
from stepforge.hdl.partition import PartitionUnit
from stepforge.hdl.reassemble import ReassembleUnit
from stepforge.sim.rtl import verilator as vl

TILE = Tile(int16, 2, 2)

UNITS = [
    lambda: PartitionUnit(TILE, 2, 3, 1),
    lambda: PartitionUnit(Index(), 0, 1, 0),
    lambda: PartitionUnit(Tuple(Index(), TILE), 3, 4, 3),
    lambda: ReassembleUnit(TILE, 3, 1, 1, count=2),
    lambda: ReassembleUnit(Index(), 1, 0, 0),
    lambda: EagerMergeUnit(TILE, 3, 1),
    lambda: EagerMergeUnit(Index(), 1, 0),
    lambda: ParallelizeUnit(TILE, 2, 3, 1),
    lambda: ParallelizeUnit(Index(), 0, 1, 0),
]

#: Warnings that Amaranth's own Verilog produces on correct designs (toolchain notes section 1):
#: width adjustments of constants and logical operators, and ``always @*`` blocks that drive a
#: constant output bit. Anything else (a latch, a constant comparison, a multi-driven signal,
#: an empty vector) points at the unit.
HARMLESS = {"WIDTHEXPAND", "WIDTHTRUNC", "ALWNEVER"}


@pytest.mark.parametrize("make", UNITS, ids=lambda f: repr(f()))
def test_converts_and_lints(make):
    unit = make()
    verilog = vl.convert(unit, name="router")
    assert verilog == vl.convert(make(), name="router")  # deterministic text
    assert "$signal" not in verilog  # every signal is named
    warnings = vl.lint(verilog, top="router")  # raises VerilatorLintError on an error
    kinds = {re.match(r"%Warning-(\w+)", w).group(1) for w in warnings}
    assert kinds <= HARMLESS, [w.splitlines()[0] for w in warnings]
