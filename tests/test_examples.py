"""The example programs against plain NumPy, and their symbolic metrics against measurement."""

from pathlib import Path

import numpy as np
import pytest

from stepforge.compiler.metrics import bind, metrics
from stepforge.loader import load
from stepforge.runner import compare
from stepforge.sim.ref.interpreter import run

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

CASES = [
    ("gemv", {}),
    ("elementwise", {}),
    ("matmul", {}),
    ("matmul", {"M": 32, "K": 48, "N": 16, "t": 16}),
    ("swiglu", {"B": 16, "H": 32, "I": 64}),
    ("swiglu", {"B": 32, "H": 64, "I": 128, "t": 16, "dtype": "fp32"}),
    ("moe", {}),
    ("moe", {"tiling": "dynamic"}),
    ("moe", {"dtype": "fp32", "D": 64, "N": 256, "n": 64, "tiling": "dynamic"}),
    ("moe", {"dtype": "fp32", "D": 64, "N": 256, "n": 64, "tiling": "static"}),
    ("moe", {"T": 12, "E": 4, "k": 2, "D": 32, "N": 128, "n": 32, "tiling": "dynamic"}),
]


def run_example(name, params, seed=0):
    pf = load(EXAMPLES / f"{name}.py")
    program = pf.build(**params)
    data = pf.data(program, seed=seed)
    result = run(program, tensors=data["tensors"], inputs=data.get("inputs", {}))
    return pf, program, data, result


@pytest.mark.parametrize("name,params", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_matches_numpy(name, params):
    pf, program, data, result = run_example(name, params)
    expected = pf.reference(program, data["tensors"], data.get("inputs", {}))
    assert expected
    for key, want in expected.items():
        ok, detail = compare(key, result.tensors[key], want)
        assert ok, f"{name} {key}: {detail}"


@pytest.mark.parametrize("name,params", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_measured_traffic_equals_symbolic(name, params):
    _, program, _, result = run_example(name, params)
    m = metrics(program).subs(bind(program, result.trace))
    assert m.offchip_read == sum(result.offchip_read.values())
    assert m.offchip_write == sum(result.offchip_written.values())


def test_matmul_is_bit_exact_and_wraps_nothing():
    pf, program, data, result = run_example("matmul", {})
    x, w = data["tensors"]["X"].astype(np.int64), data["tensors"]["W"].astype(np.int64)
    assert np.array_equal(result.tensors["Y"].astype(np.int64), x @ w)
    assert result.tensors["Y"].dtype == np.int32


def test_moe_dynamic_tiling_loads_each_used_expert_once():
    """Off-chip reads: tokens once, then one full weight per expert that received a token."""
    pf, program, data, result = run_example("moe", {"T": 12, "E": 4, "k": 1, "D": 32, "N": 128, "n": 32,
                                                    "tiling": "dynamic"})
    sel = data["inputs"]["sel"][0]
    used = {e for mask in sel for e in range(4) if mask >> e & 1}
    assert sum(result.offchip_read.values()) == 12 * 32 * 2 + len(used) * 32 * 128 * 2


def test_moe_static_tiling_reads_weights_per_padded_tile():
    pf, program, data, result = run_example("moe", {"tiling": "static", "rows": 2})
    sel = data["inputs"]["sel"][0]
    tiles = sum(-(-sum(1 for m in sel if m >> e & 1) // 2) for e in range(2))
    assert sum(result.offchip_read.values()) == 10 * 8 * 2 + tiles * 8 * 16 * 2
