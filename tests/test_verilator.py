"""The Verilator harness end to end: StreamFIFO -> Verilog -> lint -> cached build -> cocotb."""

import json
import os
import subprocess
import sys
import time

import ml_dtypes
import numpy as np
import pytest
import sympy

from stepforge.compiler.types import Tile, bf16
from stepforge.contract.beat import beat_layout, pack_beat, unpack_beat
from stepforge.contract.tokens import from_beats, from_nested, to_beats
from stepforge.hdl.fifo import StreamFIFO
from stepforge.sim.rtl import verilator as vl

pytestmark = pytest.mark.slow

TOP = "stream_fifo"
DEPTH = 4
TB = "stepforge.cocotb_tests.stream_fifo_tb"
B = sympy.Symbol("B", positive=True, integer=True)
ELEM = Tile(bf16, B, 2)    # dynamic rows, bound 3: a 102-bit beat, wider than 64 bits
LAYOUT = beat_layout(ELEM, 2, row_bound=3)


def random_beats(seed, ntensors=40):
    """Beats of a rank-2 stream of bf16 tiles with 0..3 rows, random bits, empty fibres."""
    rng = np.random.default_rng(seed)

    def tile():
        rows = int(rng.integers(0, 4))
        bits = rng.integers(0, 1 << 16, size=(rows, 2), dtype=np.uint16)
        return bits.view(ml_dtypes.bfloat16)

    tensors = [[[tile() for _ in range(rng.integers(0, 4))] for _ in range(rng.integers(1, 4))]
               for _ in range(ntensors)]
    return to_beats(from_nested(tensors, 2))


@pytest.fixture(scope="module")
def verilog():
    return vl.convert(StreamFIFO(LAYOUT, DEPTH), name=TOP)


@pytest.fixture(scope="module")
def build_dir(verilog):
    return vl.build(verilog, TOP)


def write_stimulus(path, beats, **overrides):
    stim = {"payloads": [pack_beat(LAYOUT, b) for b in beats], "depth": DEPTH, "seed": 7,
            "valid_prob": 0.6, "ready_prob": 0.5, "received": str(path.parent / "received.json")}
    stim.update(overrides)
    path.write_text(json.dumps(stim))
    return stim


def test_environment():
    env = vl.configure_environment()
    root = vl.verilator_root()
    assert env["VERILATOR_ROOT"] == os.environ["VERILATOR_ROOT"] == str(root)
    assert os.environ["PATH"].split(os.pathsep)[0] == str(root / "bin")
    assert os.environ["MAKEFLAGS"] == "CFG_CXXFLAGS_PCH_I=-include"
    assert os.path.basename(os.environ["OBJCACHE"]) == "ccache"
    assert os.path.isabs(os.environ["OBJCACHE"])


def test_convert_is_deterministic(verilog):
    assert vl.convert(StreamFIFO(LAYOUT, DEPTH), name=TOP) == verilog
    assert f"module {TOP}(" in verilog
    assert "src =" not in verilog
    assert f"input [{LAYOUT.size - 1}:0] i__payload;" in verilog
    assert f"output [{LAYOUT.size - 1}:0] o__payload;" in verilog


def test_lint(verilog):
    assert not any(w.startswith("%Error") for w in vl.lint(verilog, top=TOP))
    warnings = vl.lint("module w(input [3:0] a, output [1:0] y);\n  assign y = a;\nendmodule\n")
    assert len(warnings) == 1 and warnings[0].startswith("%Warning-WIDTHTRUNC: design.v:2:")
    with pytest.raises(vl.VerilatorLintError) as info:
        vl.lint("module broken(input a);\n  assign = a;\nendmodule\n", top="broken")
    assert info.value.messages[0].startswith("%Error: broken.v:2:")


def test_build_dir_key(verilog):
    d = vl.build_dir_for(verilog, TOP)
    assert d.parent == vl.cache_root() / "verilator"
    assert d.name.startswith(f"{TOP}-") and len(d.name) == len(TOP) + 17
    assert vl.build_dir_for(verilog, TOP) == d
    others = {vl.build_dir_for(verilog + "\n", TOP), vl.build_dir_for(verilog, TOP, waves=True),
              vl.build_dir_for(verilog, TOP, build_args=["-O3"]), vl.build_dir_for(verilog, "x")}
    assert d not in others and len(others) == 4


def test_stream_fifo_in_verilator(build_dir, verilog, tmp_path):
    assert (build_dir / vl._STAMP).is_file() and (build_dir / TOP).is_file()
    start = time.perf_counter()
    assert vl.build(verilog, TOP) == build_dir  # the stamp makes the second build a lookup
    assert time.perf_counter() - start < 0.5

    beats = random_beats(seed=2024)
    stim_path = tmp_path / "stimulus.json"
    stim = write_stimulus(stim_path, beats)
    ntests, nfailed = vl.run(build_dir, TOP, TB, test_dir=tmp_path,
                             extra_env={"STEPFORGE_STIMULUS": stim_path}, seed=1)
    assert (ntests, nfailed) == (2, 0)

    received = json.loads((tmp_path / "received.json").read_text())
    assert received["payloads"] == stim["payloads"]
    assert 1 <= received["high_water"] <= DEPTH
    out = [unpack_beat(LAYOUT, bits) for bits in received["payloads"]]
    assert [(b.has_data, b.stop, b.last) for b in out] == \
           [(b.has_data, b.stop, b.last) for b in beats]
    for got, want in zip(from_beats(out), from_beats(beats)):
        if isinstance(want, np.ndarray):
            assert got.dtype == ml_dtypes.bfloat16
            assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
        else:
            assert got == want


def test_run_reports_failures_under_pytest(build_dir, tmp_path):
    stim_path = tmp_path / "stimulus.json"
    write_stimulus(stim_path, random_beats(seed=5), depth=DEPTH + 1)  # a wrong expectation
    assert vl.run(build_dir, TOP, TB, test_dir=tmp_path, testcase="fill_then_drain",
                  extra_env={"STEPFORGE_STIMULUS": stim_path}) == (1, 1)


def test_run_outside_pytest(build_dir, verilog, tmp_path):
    stim_path = tmp_path / "stimulus.json"
    write_stimulus(stim_path, random_beats(seed=9))
    script = (
        "import sys\n"
        "from stepforge.sim.rtl import verilator as vl\n"
        f"d = vl.build(sys.stdin.read(), {TOP!r})\n"
        f"print(vl.run(d, {TOP!r}, {TB!r}, test_dir={str(tmp_path / 'out')!r},\n"
        f"             extra_env={{'STEPFORGE_STIMULUS': {str(stim_path)!r}}}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    proc = subprocess.run([sys.executable, "-c", script], input=verilog, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "(2, 0)"
