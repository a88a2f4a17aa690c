"""Issue 10 item 3, configuration time-multiplexing (``examples/moe.py -p regions=R``): experts
share matmul regions through EagerMerge, whose selector drives the RandomOffChipLoad of the
arriving tile's expert weights. A CI-size MoE (4 experts on 2 regions, top-2, expert 1 with no
token) runs bit-exact in Verilator against the interpreter and NumPy, with and without random
stalls, and reads exactly the symbolic off-chip bytes, in static and in dynamic tiles (the
EagerMerge gives the experts' dynamic tiles a ragged row count of their own); the interpreter
gives every region count and every tiling the result of the program without regions.

One Verilator build per tiling (35-75 s on the shared machine, by its load); the stalled run
reuses it."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from stepforge.compiler.metrics import bind, metrics
from stepforge.loader import ProgramError, load
from stepforge.sim.ref.interpreter import run

from .helpers import rtl_against_reference

ROOT = Path(__file__).resolve().parent.parent
MOE = ROOT / "examples" / "moe.py"


def _paper_traces():
    # benchmarks/ is not a package: load the script by path (as test_paper_moe does)
    spec = importlib.util.spec_from_file_location("paper_traces",
                                                  ROOT / "benchmarks" / "paper_traces.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


paper_traces = _paper_traces()
TRACE = paper_traces.make("paper_mixtral_t8_e4_top2",
                          paper_traces.RECIPES["paper_mixtral_t8_e4_top2"])
PARAMS = dict(TRACE["params"], D=4, N=4, n=4, tiling="static", rows=4)


def _build(pf, **extra):
    program = pf.build(**{**PARAMS, **extra})
    data = pf.data(program, seed=5, trace=TRACE)
    return program, data["tensors"], data["inputs"]


@pytest.mark.parametrize("tiling", ["static", "dynamic", "bounded"])
def test_every_region_count_computes_what_the_program_without_regions_computes(tiling):
    pf = load(MOE)
    program, tensors, inputs = _build(pf, tiling=tiling)
    want = run(program, tensors=tensors, inputs=inputs).tensors["Y"]
    assert np.array_equal(want, pf.reference(program, tensors, inputs)["Y"])
    for regions in (4, 2, 1):
        program, tensors, inputs = _build(pf, tiling=tiling, regions=regions)
        assert np.array_equal(run(program, tensors=tensors, inputs=inputs).tensors["Y"], want)


def test_regions_must_divide_the_experts():
    pf = load(MOE)
    with pytest.raises(ProgramError, match=r"regions must be a positive int dividing E=4, not 3"):
        pf.build(**PARAMS, regions=3)


def test_dynamic_tiles_merge_into_a_ragged_row_count():
    # each expert's dynamic tile has a row count symbol of its own (N_sel_e, bounded by T): the
    # region's EagerMerge gives its tiles a fresh ragged one bounded by T
    program = load(MOE).build(**dict(PARAMS, tiling="dynamic"), regions=2)
    merges = [node for node in program.nodes if node.op == "EagerMerge"]
    assert len(merges) == 2
    for node in merges:
        rows = node.outputs[0].dtype.rows
        assert str(rows).startswith("EM_") and program.symbols.info(rows).kind == "ragged"
        assert program.symbols.bound(rows) == PARAMS["T"]


@pytest.mark.slow
@pytest.mark.parametrize("stall", [False, True], ids=["calm", "stalls"])
def test_two_regions_bit_exact_in_verilator(stall):
    assert TRACE["statistics"]["tokens_per_expert"] == [4, 0, 4, 8]   # expert 1 gets no token
    pf = load(MOE)
    program, tensors, inputs = _build(pf, regions=2)
    res, ref = rtl_against_reference(pf, program, tensors, inputs, stall=stall)
    m = metrics(program).subs(bind(program, ref.trace))
    D, N = PARAMS["D"], PARAMS["N"]
    # X once; each expert's [D, N] weight once per padded tile of 4 tokens: 1 + 0 + 1 + 2
    assert res.tensor_bytes_read == m.offchip_read == 8 * D * 2 + 4 * D * N * 2
    assert res.tensor_bytes_written == m.offchip_write == 8 * N * 4
    # both regions multiplied (region 0 only expert 0's tile: expert 1 is idle)
    maps = [u.name for u in res.hw.units if u.node.op == "Map"]
    assert len(maps) == 2 and all(res.csrs[f"unit.{name}.busy"] > 0 for name in maps)


@pytest.mark.slow
@pytest.mark.parametrize("stall", [False, True], ids=["calm", "stalls"])
def test_two_regions_of_dynamic_tiles_bit_exact_in_verilator(stall):
    pf = load(MOE)
    program, tensors, inputs = _build(pf, tiling="dynamic", regions=2)
    res, ref = rtl_against_reference(pf, program, tensors, inputs, stall=stall)
    m = metrics(program).subs(bind(program, ref.trace))
    D, N = PARAMS["D"], PARAMS["N"]
    # X once; each used expert's [D, N] weight once (one packed tile each): 1 + 0 + 1 + 1
    assert res.tensor_bytes_read == m.offchip_read == 8 * D * 2 + 3 * D * N * 2
    assert res.tensor_bytes_written == m.offchip_write == 8 * N * 4
