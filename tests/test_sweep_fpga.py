"""``stepforge sweep --level fpga``: each point's model cycles beside its FPGA build's figures.

The build itself (``stepforge.fpga.build_program``, the YoWASP flow) is tested by the place-and-
route tests of ``stepforge build``; here a stand-in build function checks what the sweep does
with its figures, and the command line wires the device's preset and the real build function.
"""

import functools

import pytest

from stepforge.fpga import device_config, fpga_point
from stepforge.hdl.config import HardwareConfig
from stepforge.loader import load
from stepforge.perf.sweep import evaluate, parse_grid, sweep

from .helpers import EXAMPLES

GEMV = EXAMPLES / "gemv.py"


def fake_build(program, point, *, fits=True):
    """A build's figures, named after the point (what ``fpga_point`` returns)."""
    if not fits:
        return {"fits": False, "fpga_error": f"{point} does not fit: LC 6,000 of 5,280"}
    return {"fmax_mhz": 50.0 + len(program.tensors["W"].shape) + program.tensors["W"].shape[1],
            "fits": True, "LC": 100, "point": point}


def test_an_fpga_point_is_the_model_cycles_and_the_build_figures():
    row = evaluate(str(GEMV), {"K": 16, "N": 16}, level="fpga", load=load, fpga=fake_build,
                   config=device_config("up5k"))
    model = evaluate(str(GEMV), {"K": 16, "N": 16}, level="perf", load=load,
                     config=device_config("up5k"))
    assert row["cycles"] == model["cycles"] and row["status"] == "done"
    assert (row["fmax_mhz"], row["LC"], row["point"]) == (68.0, 100, "K16-N16")


def test_a_point_that_does_not_fit_says_so():
    rows = sweep(GEMV, parse_grid(["N=16,32"], {"K": 16}), level="fpga", load=load,
                 fpga=functools.partial(fake_build, fits=False), workers=0,
                 config=device_config("up5k"), progress=lambda line: None)
    assert [(r["N"], r["status"], r["fits"]) for r in rows] == [(16, "does not fit", False),
                                                                 (32, "does not fit", False)]
    assert rows[1]["fpga_error"] == "K16-N32 does not fit: LC 6,000 of 5,280"


def test_fpga_level_needs_the_build_function_and_a_known_device(tmp_path):
    with pytest.raises(ValueError, match="level 'fpga' needs the fpga function"):
        sweep(GEMV, [{}], level="fpga", load=load, workers=0)
    with pytest.raises(ValueError, match="device must be one of ecp5-85f, up5k, not 'xc7'"):
        fpga_point(None, device="xc7", out_dir=tmp_path)
    assert device_config("ecp5-85f") == HardwareConfig.ecp5_85f()
