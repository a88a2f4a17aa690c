"""Decode attention with dynamic parallelization in Verilator (issue 10 item 4): the cyclic
graph of ``examples/decode_attention.py`` (2 regions, 8 requests, KV lengths 1..8 with a request
of length 1 and one at the bound) runs bit-exact against the interpreter and NumPy, with and
without random stalls; with four requests in flight per region and the FIFOs of one path
around the cycle forced to depth 1, the static check names the cycle and the run deadlocks,
the watchdog's report naming the cycle's FIFOs.

One Verilator build per program (about 2-3 minutes on the shared machine); the stalled run
reuses it."""

from pathlib import Path

import numpy as np
import pytest

from stepforge.compiler.fifo_sizing import cycle_paths
from stepforge.compiler.lower import lower
from stepforge.loader import load
from stepforge.sim.ref.interpreter import run

ROOT = Path(__file__).resolve().parent.parent
ATTN = ROOT / "examples" / "decode_attention.py"
LENGTHS = [1, 8, 3, 1, 8, 2, 5, 1]


def _case(**params):
    pf = load(ATTN)
    program = pf.build(B=8, P=2, Lmax=8, **params)
    data = pf.data(program, seed=4, trace={"kv_lengths": LENGTHS})
    return pf, program, data["tensors"], data["inputs"]


@pytest.mark.slow
@pytest.mark.parametrize("stall", [False, True], ids=["calm", "stalls"])
def test_dynamic_dispatch_bit_exact_in_verilator(stall):
    from stepforge.sim.rtl import deadlock_report, error_report, run_rtl
    pf, program, tensors, inputs = _case()
    res = run_rtl(program, tensors, inputs, stall=stall)
    if res.status == "deadlock":
        pytest.fail(deadlock_report(res))
    assert res.status == "done", error_report(res)
    want = pf.reference(program, tensors, inputs)["O"]
    assert np.array_equal(run(program, tensors=tensors, inputs=inputs).tensors["O"], want)
    assert np.array_equal(res.tensors["O"], want)
    assert res.tensor_bytes_written == 8 * 4 * 4


@pytest.mark.slow
def test_a_shallow_cycle_deadlocks_and_both_checks_name_it():
    from stepforge.sim.rtl import deadlock_report, run_rtl
    pf, program, tensors, inputs = _case(inflight=4)
    # lowering rewrites the program in place (Broadcasts, tie-offs; idempotent): the streams
    # of the cycle's paths are then the ones the run lowers again
    lower(program, deadlock_check="off")
    path = cycle_paths(program.node("dispatch"), program.consumers())[0]
    names = {s.name for s in path}
    with pytest.warns(UserWarning, match=r"deadlock: the cycle dispatch -> .* carries up to 8 "
                      r"elements of dispatch \(seeded by init\)"):
        res = run_rtl(program, tensors, inputs, depths={s: 1 for s in path})
    assert res.status == "deadlock"
    report = deadlock_report(res)
    assert "full FIFOs" in report and any(n in report for n in names)
