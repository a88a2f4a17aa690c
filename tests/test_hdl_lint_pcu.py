# amaranth: UnusedElaboratable=no
"""The PCU's Verilog: deterministic conversion, and Verilator lint without errors or the warnings
that mean real trouble (combinational loops, latches, multiple drivers)."""

import pytest

from stepforge.compiler import functions as F
from stepforge.compiler.types import Tile, int8, int16, int32
from stepforge.hdl.pcu import PCU
from stepforge.sim.rtl import verilator as vl

T = Tile(int16, 2, 2)
UNITS = {
    "nonlinear": lambda: PCU(F.function(lambda x: F.silu(x).exp() + F.rsqrt(x)), T, 1, lanes=2),
    "int8_nonlinear": lambda: PCU(F.function(lambda x: (x - x.row_max()).exp()), Tile(int8, 2, 2), 2),
    "mac": lambda: PCU(F.function(lambda acc, a, w: acc + F.matmul(a, w)), [T, T], 2, mode="accum",
                       init=F.zeros(Tile(int32, 2, 2)), b=1, multipliers=3),
    "div_max": lambda: PCU(F.function(lambda a, b: (a / b).maximum(b)), [T, T], 1),
    "scan": lambda: PCU(F.add, T, 2, mode="scan", init=F.zeros(T), b=2, lanes=1),
    "retile": lambda: PCU(F.retile_row, Tile(int8, 1, 2), 1, mode="accum", b=1, row_bound=4),
}
TROUBLE = ("UNOPTFLAT", "LATCH", "MULTIDRIVEN", "COMBDLY", "ALWCOMBORDER", "IMPLICIT")


@pytest.mark.parametrize("name", sorted(UNITS))
def test_converts_and_lints(name):
    verilog = vl.convert(UNITS[name](), name="pcu")
    assert verilog == vl.convert(UNITS[name](), name="pcu")  # deterministic
    assert "module pcu(" in verilog and "in0__payload" in verilog and "status__error" in verilog
    warnings = vl.lint(verilog, top="pcu")
    bad = [w for w in warnings if any(f"-{kind}:" in w.splitlines()[0] for kind in TROUBLE)]
    assert not bad, "\n".join(bad)
