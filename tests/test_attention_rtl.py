"""Decode attention with dynamic parallelization in Verilator (issue 10 item 4): the cyclic
graph of ``examples/decode_attention.py`` (2 regions, 8 requests, KV lengths 1..8 with requests
of length 1 and at the bound) runs bit-exact against the interpreter and NumPy, with and
without random stalls; with every FIFO around the cycle forced to depth 1 (16 requests, 4 in
flight per region), the static check names the cycle and the hardware still computes ``O``.

Kept small for CI: head dimension 2 and a one-channel memory of 8-byte lines (the simulation
preset's four 16-byte channels double the Verilog: 99,227 lines against 49,094 at ``d = 4``),
about 55 s of CPU per Verilator build; the stalled run reuses the calm run's build."""

from pathlib import Path

import numpy as np
import pytest

from stepforge.compiler.fifo_sizing import cycle_paths
from stepforge.compiler.lower import lower
from stepforge.hdl.config import HardwareConfig
from stepforge.loader import load
from stepforge.sim.ref.interpreter import run

ROOT = Path(__file__).resolve().parent.parent
ATTN = ROOT / "examples" / "decode_attention.py"
LENGTHS = [1, 8, 3, 1, 8, 2, 5, 1]
#: the simulation preset with a one-channel, 8-byte memory: half the Verilog, same units
SMALL = HardwareConfig.sim().replace(mem_channels=1, mem_bytes_per_channel=8)


def _case(B=8, lengths=LENGTHS, **params):
    pf = load(ATTN)
    program = pf.build(B=B, P=2, Lmax=8, d=2, **params)
    data = pf.data(program, seed=4, trace={"kv_lengths": lengths})
    return pf, program, data["tensors"], data["inputs"]


@pytest.mark.slow
@pytest.mark.parametrize("addressing,mode,stall", [
    ("host", "dynamic", False), ("host", "dynamic", True),
    # each region generates its requests' KV addresses (AddrGen with a count per request)
    ("region", "dynamic", False), ("region", "dynamic", True),
    # static dispatch with region addressing: each region reads its own requests
    ("region", "coarse", False)],
    ids=["calm", "stalls", "region-calm", "region-stalls", "region-coarse"])
def test_dynamic_dispatch_bit_exact_in_verilator(addressing, mode, stall):
    from stepforge.sim.rtl import deadlock_report, error_report, run_rtl
    pf, program, tensors, inputs = _case(addressing=addressing, mode=mode)
    res = run_rtl(program, tensors, inputs, config=SMALL, stall=stall)
    if res.status == "deadlock":
        pytest.fail(deadlock_report(res))
    assert res.status == "done", error_report(res)
    want = pf.reference(program, tensors, inputs)["O"]
    assert np.array_equal(run(program, tensors=tensors, inputs=inputs).tensors["O"], want)
    assert np.array_equal(res.tensors["O"], want)
    assert res.tensor_bytes_written == 8 * 2 * 4


@pytest.mark.slow
def test_a_shallow_cycle_is_named_by_the_static_check_and_still_runs():
    # Both paths around the cycle at depth 1 hold fewer than the 8 requests in flight, so the
    # static check names the cycle. The hardware still finishes: the seeds come from a host
    # stream and wait in its reader, outside the cycle, until the seeded EagerMerge has room
    # (with the pipelined reader as with the unpipelined one), and the merge drains the
    # regions' completions as they come, so the cycle never holds all 8 at once; the check is
    # a sufficient condition (docs/routing.md, "Cycles"). A deadlock here would fail the test.
    from stepforge.sim.rtl import deadlock_report, error_report, run_rtl
    pf, program, tensors, inputs = _case(B=16, lengths=LENGTHS + [8] * 8, inflight=4)
    # lowering rewrites the program in place (Broadcasts, tie-offs; idempotent): the streams
    # of the cycle's paths are then the ones the run lowers again
    lower(program, SMALL, deadlock_check="off")
    paths = cycle_paths(program.node("dispatch"), program.consumers())
    assert len(paths) == 2
    shallow = {s: 1 for path in paths for s in path}
    with pytest.warns(UserWarning, match=r"deadlock: the cycle dispatch -> .* carries up to 8 "
                      r"elements of dispatch \(seeded by init\)"):
        res = run_rtl(program, tensors, inputs, config=SMALL, depths=shallow)
    if res.status == "deadlock":
        pytest.fail(deadlock_report(res))
    assert res.status == "done", error_report(res)
    assert np.array_equal(res.tensors["O"], pf.reference(program, tensors, inputs)["O"])
