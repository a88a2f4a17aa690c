"""The FlatMap units convert to deterministic Verilog that Verilator lints without errors."""

import pytest
import sympy

from stepforge.compiler.types import Index, Select, Tile, bf16, int8
from stepforge.hdl.addrgen import AddrGenUnit
from stepforge.hdl.filter import FilterUnit
from stepforge.hdl.retile import RetileStreamifyUnit
from stepforge.sim.rtl import verilator as vl

R = sympy.Symbol("R", positive=True, integer=True)

UNITS = {
    "retile_row": lambda: RetileStreamifyUnit(Tile(int8, 4, 3), 1),
    "retile_one_row": lambda: RetileStreamifyUnit(Tile(int8, 1, 4), 0, b=1),
    "retile_col_b1_valid": lambda: RetileStreamifyUnit(Tile(bf16, 3, 2), 2, "col", valid=True, b=1),
    "retile_dyn_row_valid": lambda: RetileStreamifyUnit(Tile(int8, R, 2), 1, valid=True, row_bound=5),
    "retile_dyn_col_b1": lambda: RetileStreamifyUnit(Tile(int8, R, 2), 0, "col", b=1, row_bound=4),
    "filter_tile": lambda: FilterUnit(Tile(int8, 1, 4), 2, keep=False),
    "filter_index": lambda: FilterUnit(Index(), 0),
    "addrgen_index": lambda: AddrGenUnit(Index(), 1, [2, 3], [16, 1], scale=64, offset=7),
    "addrgen_select": lambda: AddrGenUnit(Select(4), 0, [3, 1, 2], [-2, 5, 1], scale=6, offset=40),
    "addrgen_tile": lambda: AddrGenUnit(Tile(int8, 1, 1), 2, [4], [-1], scale=-3, offset=100),
    "addrgen_counted": lambda: AddrGenUnit(Index(), 1, [2, 8], [100, 1], scale=8, counted=True),
    "addrgen_counted_b0": lambda: AddrGenUnit(Select(4), 1, [5], [-2], scale=16, offset=64,
                                              counted=True),
}


@pytest.mark.parametrize("name", sorted(UNITS))
def test_converts_and_lints(name):
    verilog = vl.convert(UNITS[name](), name=name)
    assert verilog == vl.convert(UNITS[name](), name=name)  # deterministic
    assert f"module {name}(" in verilog and "src =" not in verilog
    for port in ("in0__payload", "out__payload", "out__valid", "in0__ready", "status__error",
                 "status__code"):
        assert port in verilog
    warnings = vl.lint(verilog, top=name)  # raises VerilatorLintError on any %Error
    # Amaranth's arithmetic may leave width warnings; nothing else is tolerated.
    assert all(w.split(":")[0] in ("%Warning-WIDTHEXPAND", "%Warning-WIDTHTRUNC")
               for w in warnings), warnings
