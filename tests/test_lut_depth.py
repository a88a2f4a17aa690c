"""benchmarks/lut_depth.py: LUT levels between registers, on a netlist small enough to count."""

import importlib.util
from pathlib import Path

SPEC = importlib.util.spec_from_file_location(
    "lut_depth", Path(__file__).parent.parent / "benchmarks" / "lut_depth.py")
lut_depth = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(lut_depth)


def cell(kind, inputs, outputs):
    ports = {**{p: "input" for p in inputs}, **{p: "output" for p in outputs}}
    return {"type": kind, "port_directions": ports, "connections": {**inputs, **outputs}}


def test_levels_count_luts_not_carries_and_cut_loops():
    # q0 -> LUT a -> CARRY c -> LUT b -> D of q1; q1 -> LUT d -> E of q0; LUTs e <-> f loop
    module = {"cells": {
        "q0": cell("SB_DFFE", {"D": [9], "E": [5]}, {"Q": [1]}),
        "a": cell("SB_LUT4", {"I0": [1]}, {"O": [2]}),
        "c": cell("SB_CARRY", {"CI": [2]}, {"CO": [3]}),
        "b": cell("SB_LUT4", {"I0": [3], "I1": [1]}, {"O": [4]}),
        "q1": cell("SB_DFF", {"D": [4]}, {"Q": [6]}),
        "d": cell("SB_LUT4", {"I0": [6]}, {"O": [5]}),
        "e": cell("SB_LUT4", {"I0": [8]}, {"O": [7]}),
        "f": cell("SB_LUT4", {"I0": [7]}, {"O": [8]}),
        "q2": cell("SB_DFF", {"D": [8]}, {"Q": [9]}),
    }}
    endpoints, levels = lut_depth.depths(module)
    found = {(c, p): d for d, c, p, _ in endpoints}
    assert found == {("q1", "D"): 2, ("q0", "E"): 1, ("q2", "D"): 2}
    assert endpoints[0][0] == 2 and levels["b"] == (2, "c") and levels["c"] == (1, "a")
