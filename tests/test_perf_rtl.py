"""The performance model against Verilator on small programs of every unit kind (slow).

The programs are the end-to-end tests' (``tests/test_e2e.py``, ``tests/test_moe_dynamic.py``) at
the same sizes, so their Verilator builds are shared: loads and stores, PCUs (map, accum, mac,
dynamic rows, retiling), Broadcast, the PMU, Partition and Reassemble, Promote, Reshape,
RepeatStatic, RetileStreamify, Filter, Flatten, Expand, host streams in and out, Discard. Each
prediction is within 10 % of the measured cycles and the mean error within 5 % (issue 11's
bounds); an LP-sized design runs in Verilator without deadlock, bit-exact.
"""

import warnings

import numpy as np
import pytest

from stepforge.compiler.lower import lower
from stepforge.loader import load
from stepforge.perf import predict
from stepforge.sim.ref.interpreter import run
from stepforge.sim.rtl import run_rtl

from .helpers import EXAMPLES, SMALL_DENSE, buffered_rows_program
from .test_perf import X, deadlock_program

pytestmark = pytest.mark.slow

MOE_E2_SPLIT = [[0], [1, 0], [1], [0, 1], [0], [1]]
CASES = SMALL_DENSE + [("moe", {"T": 6, "tiling": "static"}), ("moe", {"T": 6, "E": 2})]


def _example(name, params):
    pf = load(EXAMPLES / f"{name}.py")
    program = pf.build(**params)
    trace = {"routing": MOE_E2_SPLIT} if params.get("E") == 2 else None
    data = pf.data(program, seed=3 if trace else 1, trace=trace)
    return program, data.get("tensors", {}), data.get("inputs", {})


def _programs():
    for name, params in CASES:
        yield f"{name} {params}", lambda n=name, p=params: _example(n, p)
    yield "reconverge", lambda: (deadlock_program(), {"X": X}, {})
    rows = [np.full((1, 4), i, np.int16) for i in range(3)]
    yield "host streams", lambda: (buffered_rows_program("rows"), {}, {"x": [rows]})


def _measure(make):
    program, tensors, inputs = make()
    res = run_rtl(program, tensors, inputs)
    assert res.status == "done"
    program, tensors, inputs = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hw = lower(program)
    ref = run(hw.program, tensors=tensors, inputs=inputs, keep_edges=True)
    return res.cycles, predict(hw, ref).cycles


def test_model_within_the_error_bounds_of_verilator():
    errors = {}
    for label, make in _programs():
        measured, predicted = _measure(make)
        errors[label] = (predicted - measured) / measured
    worst = max(errors, key=lambda k: abs(errors[k]))
    assert abs(errors[worst]) <= 0.10, errors
    assert sum(abs(e) for e in errors.values()) / len(errors) <= 0.05, errors


def test_lp_sized_reconvergent_fork_runs_without_deadlock_bit_exact():
    p = deadlock_program()
    hw = lower(p, fifo_sizing="lp", throughput=0)          # the least bits that cannot deadlock
    assert hw.deadlocks == []
    pins = {e.stream: e.depth for e in hw.edges}
    res = run_rtl(p, {"X": X}, depths=pins, watchdog=500)
    assert res.status == "done"
    assert np.array_equal(res.tensors["Y"], run(p, {"X": X}).tensors["Y"])
    assert res.hw.fifo_sizing["bits"] == hw.fifo_sizing["bits"]
