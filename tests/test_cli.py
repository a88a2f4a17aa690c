"""The command line: check, graph, run."""

import re
import subprocess
import sys
from pathlib import Path

from stepforge.cli import main

ROOT = Path(__file__).resolve().parent.parent


def test_check_prints_every_edge_and_traffic(capsys):
    assert main(["check", str(ROOT / "examples" / "moe.py"), "-p", "tiling=dynamic", "-p", "dtype=fp32",
                 "-p", "D=64", "-p", "N=256", "-p", "n=64"]) == 0
    out = capsys.readouterr().out
    assert "program moe: 20 nodes, 20 streams" in out
    assert "Partition_0.out0     [N_sel_0]" in out
    assert re.search(r"Accum_0 +\[nonzero\(N_sel_0\)\] +Tile\(fp32, N_sel_0, 64\)", out)
    assert "off-chip bytes read          65536*nonzero(N_sel_0) + 65536*nonzero(N_sel_1) + 2560" in out
    assert "N_sel_0  dynamic  10" in out


def test_graph_writes_dot(tmp_path, capsys):
    out = tmp_path / "moe.dot"
    assert main(["graph", str(ROOT / "examples" / "moe.py"), "-p", "tiling=dynamic", "-p", "dtype=fp32",
                 "-p", "D=64", "-o", str(out)]) == 0
    text = out.read_text()
    assert text.startswith('digraph "moe" {')
    assert '"Partition_0" -> "Promote_0" [label="out0: [N_sel_0] Tile(fp32, 1, 64)", headlabel="in0"];' in text
    assert '"tensor:W0" -> "LinearOffChipLoad_1" [style=dashed];' in text


def test_run_passes_and_params(capsys):
    assert main(["run", str(ROOT / "examples" / "matmul.py"), "--level", "ref", "-p", "M=32", "-p", "t=8"]) == 0
    out = capsys.readouterr().out
    assert "Y       ok     bit-exact" in out
    assert out.rstrip().endswith("PASS")


def test_shape_error_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("from stepforge import *\n"
                   "def program():\n"
                   "    p = Program('bad')\n"
                   "    x = p.input('x', [4, 4], Index())\n"
                   "    Flatten(x, 0, 5)\n"
                   "    return p\n")
    assert main(["check", str(bad)]) == 2
    assert "error: StepShapeError: Flatten_0: port 'in0' needs hi in 1..1, got 5" in capsys.readouterr().err


def test_console_script_is_installed():
    exe = Path(sys.executable).parent / "stepforge"
    r = subprocess.run([str(exe), "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "check" in r.stdout and "graph" in r.stdout and "run" in r.stdout
