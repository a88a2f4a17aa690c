"""The MoE's stream tiling (``examples/moe.py``, ``tiling="stream"``): each expert's tokens in
row tiles of at most ``rows`` (bounded packing), its weight read once per expert (none for an
idle expert) into a PMU and replayed for every row tile.

The interpreter tests check the result against NumPy and the off-chip bytes against the dynamic
tiling's on several routings and with several weight column tiles. The Verilator tests (marked
slow, one build of the CI-size layer at the paper's hidden sizes, reused by the second) run
``paper.measure`` on the CI traces, with and without random stalls: bit-exact, the bytes read
equal to the dynamic tiling's (each active expert's weight once), and each active expert's PMU
holding exactly one block (its weight) at its high-water mark, an idle expert's none.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from stepforge.compiler.metrics import bind, metrics
from stepforge.loader import load, load_trace
from stepforge.sim.ref.interpreter import run
from stepforge.sim.rtl import deadlock_report, error_report, run_rtl

ROOT = Path(__file__).resolve().parent.parent
MOE = ROOT / "examples" / "moe.py"


def _module(name):
    # benchmarks/ is not a package: load the script by path (as test_paper_moe does)
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _interpret(tiling, params, routing, seed=0):
    pf = load(MOE)
    program = pf.build(tiling=tiling, **params)
    data = pf.data(program, seed=seed, trace={"routing": routing})
    ref = run(program, tensors=data["tensors"], inputs=data["inputs"])
    want = pf.reference(program, data["tensors"], data["inputs"])["Y"]
    assert np.array_equal(ref.tensors["Y"], want)
    return metrics(program).subs(bind(program, ref.trace))


# expert 0: 5 tokens (two tiles of at most 4), expert 1: none, expert 2: 3, expert 3: 4
ROUTING = [[0, 2], [0], [2, 3], [0, 3], [3], [0, 2], [3], [0]]


@pytest.mark.parametrize("shape", [{"D": 8, "N": 16, "n": 4}, {"D": 4, "N": 4, "n": 4}])
def test_interpreter_reads_each_active_experts_weight_once(shape):
    params = dict(T=8, E=4, rows=4, **shape)
    stream = _interpret("stream", params, ROUTING)
    dynamic = _interpret("dynamic", params, ROUTING)
    bounded = _interpret("bounded", params, ROUTING)
    D, N = shape["D"], shape["N"]
    # X once; the weights of experts 0, 2 and 3 once each (expert 0's two tiles share one read)
    assert stream.offchip_read == dynamic.offchip_read == 8 * D * 2 + 3 * D * N * 2
    assert bounded.offchip_read == 8 * D * 2 + 4 * D * N * 2
    assert stream.offchip_write == 8 * N * 4


def test_interpreter_every_token_to_one_expert():
    m = _interpret("stream", dict(T=9, E=2, rows=2), [[1]] * 9)
    assert m.offchip_read == 9 * 8 * 2 + 8 * 16 * 2       # W1 once for its five tiles, W0 never


def test_stream_with_regions_is_refused_by_name():
    pf = load(MOE)
    with pytest.raises(ValueError, match="tiling='stream' does not take regions=2"):
        pf.module.program(tiling="stream", E=4, regions=2)
    with pytest.raises(ValueError, match="tiling must be 'dynamic', 'bounded', 'static' or "
                                         "'stream', not 'ragged'"):
        pf.module.program(tiling="ragged")


def _rtl(name, stall):
    """Run the CI trace ``name`` with stream tiles of 4 rows on ``paper.MACHINE`` in Verilator;
    ``(paper module, trace, rtl result, program)``, bit-exact against the interpreter and NumPy."""
    paper = _module("paper")
    trace = load_trace(ROOT / "traces" / f"{name}.json")
    pf = load(MOE)
    program = pf.build(**dict(trace["params"], **paper.SHAPE, tiling="stream", rows=4))
    data = pf.data(program, trace=trace)
    res = run_rtl(program, data["tensors"], data["inputs"], config=paper.MACHINE, stall=stall)
    if res.status == "deadlock":
        pytest.fail(deadlock_report(res))
    assert res.status == "done", error_report(res)
    ref = run(res.hw.program, tensors=data["tensors"], inputs=data["inputs"])
    want = pf.reference(program, data["tensors"], data["inputs"])["Y"]
    assert np.array_equal(ref.tensors["Y"], want)
    assert np.array_equal(res.tensors["Y"], want)
    return paper, trace, res, program


@pytest.mark.slow
@pytest.mark.parametrize("name,stall,idle", [("paper_qwen3_t8_e4_top1", False, {1, 3}),
                                             ("paper_mixtral_t8_e4_top2", True, {1})])
def test_rtl_bit_exact_weight_read_once_per_active_expert(name, stall, idle):
    paper, trace, res, program = _rtl(name, stall)
    D, N = paper.SHAPE["D"], paper.SHAPE["N"]
    assert {e for e in range(4) if not any(e in r for r in trace["routing"])} == idle
    # X once, each active expert's [D, N] weight once: what the dynamic tiling reads
    assert res.tensor_bytes_read == 8 * D * 2 + (4 - len(idle)) * D * N * 2
    assert res.tensor_bytes_written == 8 * N * 4
    dynamic = _interpret("dynamic", dict(trace["params"], **paper.SHAPE), trace["routing"])
    assert res.tensor_bytes_read == dynamic.offchip_read
    # one PMU per expert (its Bufferize), in expert order; an active expert's holds its weight
    # (one block of N/n = 1 column tile) at its high-water mark, an idle expert's nothing
    pmus = [u for u in res.hw.units if u.node.op == "Bufferize"]
    assert [res.csrs[f"pmu.{u.name}.blocks_high_water"] for u in pmus] == \
        [0 if e in idle else 1 for e in range(4)]
