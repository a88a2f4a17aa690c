"""The paper's dynamic-tiling MoE (``examples/moe.py``, ``tiling="dynamic"``) through Verilator:
each expert packs its tokens into one tile of data-dependent rows and multiplies it in the PCU.
Bit-exact with the interpreter and with NumPy, off-chip traffic equal to the symbolic model,
identical under random stalls; routings where an expert receives no token or every token.

Two Verilator builds (E=2 and E=4); the routing is run-time data, so every run of one program
reuses its build."""

from pathlib import Path

from stepforge.compiler.metrics import bind, metrics
from stepforge.loader import load

from .helpers import rtl_against_reference

MOE = Path(__file__).resolve().parent.parent / "examples" / "moe.py"


def check(params, routing, *, stall=False, seed=3):
    pf = load(MOE)
    program = pf.build(tiling="dynamic", **params)
    data = pf.data(program, seed=seed, trace={"routing": routing})
    tensors, inputs = data["tensors"], data["inputs"]
    res, ref = rtl_against_reference(pf, program, tensors, inputs, stall=stall)
    m = metrics(program).subs(bind(program, ref.trace))
    assert res.tensor_bytes_read == m.offchip_read
    assert res.tensor_bytes_written == m.offchip_write
    return res, m


E2 = {"T": 6, "E": 2}
E2_SPLIT = [[0], [1, 0], [1], [0, 1], [0], [1]]


def test_e2_every_token_to_expert_0_and_none_to_expert_1():
    res, m = check(E2, [[0]] * 6)
    D, N = 8, 16
    # X once, W0 once (one packed tile, N/n column tiles), W1 never: the empty expert loads nothing
    assert res.tensor_bytes_read == 6 * D * 2 + D * N * 2
    assert res.tensor_bytes_written == 6 * N * 4


def test_e2_top2_mixed_routing_and_under_stalls():
    calm, _ = check(E2, E2_SPLIT)
    stalled, _ = check(E2, E2_SPLIT, stall=True)
    assert stalled.cycles > calm.cycles       # the stalls really happened


def test_e4_top2_expert_0_gets_all_tokens_expert_3_none():
    routing = [[0, 1], [2, 0], [0, 1], [0, 2], [1, 0], [0, 2], [0, 1], [2, 0]]
    res, _ = check({"T": 8, "E": 4}, routing)
    D, N = 8, 16
    assert res.tensor_bytes_read == 8 * D * 2 + 3 * D * N * 2     # experts 0, 1, 2; not 3
