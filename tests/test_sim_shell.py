"""The simulation shell (``stepforge.sim.rtl.shell``): its ports, its Verilog, and a shelled System run
(waves, no input-combinational logic left in the Verilated model)."""

import re

import numpy as np
import pytest

from stepforge.sim.rtl import verilator as vl
from stepforge.sim.rtl import compile_program, run_rtl
from stepforge.sim.rtl.shell import INPUT_LATENCY, NAME, Port, ports, shell

from .helpers import buffered_rows_program

DESIGN = """module top(a, clk, rst, y, z);
  input [7:0] a;
  wire [7:0] a;
  input clk;
  wire clk;
  input rst;
  wire rst;
  output [7:0] y;
  reg [7:0] y = 8'h00;
  output z;
  wire z;
  always @(posedge clk) y <= rst ? 8'h00 : y + a;
  assign z = ^(y ^ a);
endmodule
module other(b);
  input b;
endmodule
"""


def test_ports_are_read_from_the_declarations():
    assert ports(DESIGN, "top") == [Port("input", "a", 8), Port("input", "clk", 1),
                                    Port("input", "rst", 1), Port("output", "y", 8),
                                    Port("output", "z", 1)]
    assert ports(DESIGN, "other") == [Port("input", "b", 1)]


def test_shell_registers_inputs_and_makes_only_ports_public():
    s = shell(DESIGN)
    assert s.name == NAME and s.input_latency == INPUT_LATENCY == 1
    assert f"module {NAME}(a, rst, y, z);" in s.verilog
    assert "always #5 clk = ~clk;" in s.verilog
    assert "shell_a <= a;" in s.verilog and "shell_rst <= rst;" in s.verilog
    assert "top dut (.clk(clk), .a(shell_a), .rst(shell_rst), .y(y), .z(z));" in s.verilog
    public = re.findall(r'^(public_flat_r[dw]) -module "(\w+)" -var "(\w+)"$', s.control, re.M)
    assert public == [("public_flat_rd", NAME, "clk"), ("public_flat_rw", NAME, "a"),
                      ("public_flat_rw", NAME, "rst"), ("public_flat_rd", NAME, "y"),
                      ("public_flat_rd", NAME, "z")]
    assert s.build_args[0] == "--no-public-flat-rw" and "--timing" in s.build_args


def test_shelled_design_lints():
    s = shell(DESIGN)
    assert vl.lint(DESIGN + s.verilog, top=NAME, args=("--timing",)) == []


@pytest.mark.parametrize("text,message", [
    (DESIGN, "no module 'nowhere' in the Verilog"),
    (DESIGN.replace("input clk;", "input [1:0] clk;"), "module 'top' has no 1-bit input 'clk'"),
    (DESIGN.replace("input rst;", "inout rst;"), "port 'rst' of 'top' is an inout"),
])
def test_shell_refuses_what_it_cannot_wrap(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        shell(text, "nowhere" if "nowhere" in message else "top")


ROWS = [[np.full((1, 4), i, np.int16) for i in range(3)]]


def test_waves_are_written_and_change_nothing(tmp_path):
    calm = run_rtl(buffered_rows_program("shelled"), inputs={"x": ROWS}, workdir=tmp_path / "calm")
    waved = run_rtl(buffered_rows_program("shelled"), inputs={"x": ROWS}, waves=True, workdir=tmp_path / "waves")
    assert calm.status == waved.status == "done"
    assert waved.csrs == calm.csrs
    for got in (calm.outputs["y"], waved.outputs["y"]):      # the rows, then the closing stop
        assert [np.array_equal(a, b) for a, b in zip(got, ROWS[0])] == [True] * 3 and len(got) == 4
    header = (tmp_path / "waves" / "dump.vcd").read_text().split("$enddefinitions")[0]
    assert f"$scope module {NAME} $end" in header
    assert re.search(r"\$var \w+ +1 \S+ clk ", header) and " cycles " in header


def _region_lines(build_dir, region):
    """Lines of C++ in the Verilated model's ``<region>_sequent`` functions, in every module class
    (cocotb's runner names the model ``Vtop``)."""
    total = 0
    for path in build_dir.glob("Vtop*.cpp"):
        functions = re.findall(rf"^void Vtop\w*___{region}_sequent__\w+\(.*?^}}", path.read_text(),
                               re.MULTILINE | re.DOTALL)
        total += sum(f.count("\n") for f in functions)
    return total


def test_shelled_model_has_almost_no_input_combinational_logic():
    # Verilator re-evaluates all logic fed by a model input or a public_flat_rw signal on every
    # eval (its "ico" region); behind the shell's registers that is a few copies. Without the
    # shell (cocotb's runner alone: --public-flat-rw, the design's own inputs) it is a large part
    # of the model, which cost a third of the speed on SwiGLU.
    _, _, text = compile_program(buffered_rows_program("shelled"))
    s = shell(text)
    shelled = vl.build(text + s.verilog, s.name, build_args=s.build_args, control=s.control)
    bare = vl.build(text, "top")
    assert _region_lines(shelled, "nba") > 20 * _region_lines(shelled, "ico")
    assert _region_lines(bare, "nba") < 20 * _region_lines(bare, "ico")
