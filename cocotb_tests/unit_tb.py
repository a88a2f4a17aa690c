"""Generic cocotb testbench of hardware units: packed beats in, packed beats out.

Driven entirely by a job file (JSON, path in ``STEPFORGE_UNIT_JOB``), written for example by
``tests/test_units_verilator.py``::

    {"inputs":  {"<port>": [int, ...]},       # packed beats (stepforge.contract.beat.pack_beat)
     "outputs": {"<port>": last_bit},         # the payload bit that holds ``last``
     "loops":   {"<out port>": "<in port>"},  # optional: every beat received on the output is
                                              # queued, unchanged, on the input (a unit's own
                                              # output fed back, e.g. a PMU's refs to buffers)
     "status":  ["<prefix>", ...],            # optional: read <prefix>__error/__code at the end
     "seed": int,                             # seeds every valid/ready pattern
     "valid_prob": float, "ready_prob": float,
     "max_cycles": int, "idle_limit": int,
     "result": "path.json"}                   # where the received beats go

``<port>`` is the Verilog prefix of a stream member (Amaranth joins a path with ``__``: the
member ``in0`` has ``in0__payload``, ``in0__valid``, ``in0__ready``); a wrapper that holds
several units names its ports ``<unit>_<port>`` and every port is driven at once. Clock ``clk``,
reset ``rst``.

Discipline (as :mod:`stepforge.cocotb_tests.streams`, but one coroutine for every port, which
is much cheaper than one task per port): the testbench drives just after a rising edge and
samples at the falling edge. A producer offers its next beat with probability ``valid_prob``
and, once it offers, holds ``valid`` and the payload until the beat is taken (stream rule 2); a
consumer is ready with probability ``ready_prob`` each cycle. Every cycle each output is checked
against the same rule: once valid, neither ``valid`` nor the payload may change until taken.
The run ends when every output has sent a beat with ``last``, then the outputs are stopped
(``ready`` low) for a few cycles to check that nothing more is offered.

The result file holds ``{"outputs": {port: [int, ...]}, "accepted": {port: int},
"cycles": int, "status": {prefix: [error, code]}}``; the test fails when nothing moves for
``idle_limit`` cycles (naming the ports that wait) or after ``max_cycles``.
"""

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge

JOB_ENV = "STEPFORGE_UNIT_JOB"


def _ports(dut, prefix):
    return tuple(getattr(dut, f"{prefix}__{name}") for name in ("payload", "valid", "ready"))


@cocotb.test()
async def run_unit(dut):
    """Feed every input port its beats, collect every output port's beats up to ``last``."""
    with open(os.environ[JOB_ENV]) as f:
        job = json.load(f)
    rng = random.Random(job.get("seed", 0))
    valid_p = float(job.get("valid_prob", 1.0))
    ready_p = float(job.get("ready_prob", 1.0))
    max_cycles = int(job.get("max_cycles", 200_000))
    idle_limit = int(job.get("idle_limit", 1000))

    feeds = {p: [int(b) for b in beats] for p, beats in job["inputs"].items()}
    last_bit = {p: int(bit) for p, bit in job["outputs"].items()}
    loops = dict(job.get("loops", {}))
    for out, inp in loops.items():
        assert out in last_bit and inp in feeds, f"loop {out} -> {inp} names no output/input port"
    ins = {p: _ports(dut, p) for p in feeds}
    outs = {p: _ports(dut, p) for p in last_bit}

    clock = Clock(dut.clk, 10, unit="ns")
    clock.start()
    for payload, valid, _ in ins.values():
        valid.value = 0
        payload.value = 0
    for _, _, ready in outs.values():
        ready.value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0

    sent = {p: 0 for p in ins}
    offering = {p: False for p in ins}
    got = {p: [] for p in outs}
    done = {p: False for p in outs}
    held = {p: None for p in outs}        # payload offered and not taken at the last edge
    idle = cycles = 0
    while not all(done.values()):
        await RisingEdge(dut.clk)
        # drive this cycle's valid/payload and ready
        for p, (payload, valid, _) in ins.items():
            if not offering[p] and sent[p] < len(feeds[p]) and rng.random() < valid_p:
                payload.value = feeds[p][sent[p]]
                offering[p] = True
            valid.value = int(offering[p])
        readies = {}
        for p, (_, _, ready) in outs.items():
            readies[p] = not done[p] and rng.random() < ready_p
            ready.value = int(readies[p])
        await FallingEdge(dut.clk)
        # sample: what moves at the next rising edge
        moved = False
        for p, (_, _, ready) in ins.items():
            if offering[p] and int(ready.value):
                offering[p] = False
                sent[p] += 1
                moved = True
        for p, (payload, valid, _) in outs.items():
            v = int(valid.value)
            value = payload.value.to_unsigned() if v else None
            if held[p] is not None:
                assert v, f"{p}__valid dropped before the transfer of {held[p]:#x} (cycle {cycles})"
                assert value == held[p], (f"{p}__payload changed from {held[p]:#x} to {value:#x} "
                                          f"before the transfer (cycle {cycles})")
            if v and readies[p]:
                got[p].append(value)
                if p in loops:
                    feeds[loops[p]].append(value)
                held[p] = None
                moved = True
                if value >> last_bit[p] & 1:
                    done[p] = True
            else:
                held[p] = value
        cycles += 1
        idle = 0 if moved else idle + 1
        if idle >= idle_limit:
            waiting_in = [p for p in ins if sent[p] < len(feeds[p])]
            waiting_out = [p for p in outs if not done[p]]
            raise AssertionError(f"nothing moved for {idle_limit} cycles; inputs with beats left: "
                                 f"{waiting_in}, outputs without last: {waiting_out}, sent {sent}, "
                                 f"received { {p: len(g) for p, g in got.items()} }")
        assert cycles < max_cycles, f"no end after {max_cycles} cycles"

    # nothing more may be offered once an output has sent ``last``
    await RisingEdge(dut.clk)
    for _, _, ready in outs.values():
        ready.value = 0
    for _ in range(4):
        await FallingEdge(dut.clk)
        for p, (_, valid, _) in outs.items():
            assert held[p] is None and not int(valid.value), f"{p} offers a beat after its last"
    status = {}
    for prefix in job.get("status", []):
        status[prefix] = [int(getattr(dut, f"{prefix}__error").value),
                          int(getattr(dut, f"{prefix}__code").value)]
    with open(job["result"], "w") as f:
        json.dump({"outputs": got, "accepted": sent, "cycles": cycles, "status": status}, f)
    clock.stop()
