"""The generic cocotb testbench of a compiled program (a :class:`~stepforge.hdl.system.System`).

Driven entirely by a job file (JSON, path in ``STEPFORGE_JOB``) written by
:mod:`stepforge.sim.rtl`::

    {"preload": [[word address, [word, ...]], ...],   # memory contents before the run
     "readback": {name: [word address, word count]},  # regions to read after the run
     "csrs": {name: address},                          # CSRs to read after the run
     "watchdog": int, "stall": bool, "max_cycles": int,
     "result": "path.json"}                            # where the results go

The testbench resets the design, fills the memory through the debug back door (one word per
cycle, before the run, so Python is not in the loop of the run itself), starts the run, waits
for ``done``, ``error`` or ``deadlock`` without visiting every cycle, and writes
``{"status", "run_seconds", "readback": {name: [words]}, "csrs": {name: value}}`` (``run_seconds``:
wall time from start to the end of the run, without preload and read-back).
"""

import json
import os
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, First, ReadOnly, RisingEdge, Timer

JOB_ENV = "STEPFORGE_JOB"


async def _write_words(dut, preload):
    dut.debug__we.value = 1
    for base, words in preload:
        for i, w in enumerate(words):
            dut.debug__addr.value = base + i
            dut.debug__wdata.value = w
            await RisingEdge(dut.clk)
    dut.debug__we.value = 0


async def _read_words(dut, base, count):
    """``count`` words from ``base``: the debug port answers each read in the next cycle."""
    out = []
    dut.debug__re.value = 1
    for i in range(count):
        dut.debug__addr.value = base + i
        await RisingEdge(dut.clk)
        await ReadOnly()
        assert int(dut.debug__rvalid.value), f"no read data for word {base + i}"
        out.append(int(dut.debug__rdata.value))
        await Timer(1, unit="ps")
    dut.debug__re.value = 0
    return out


async def _read_csr(dut, addr):
    dut.csr_addr.value = addr
    await RisingEdge(dut.clk)
    await ReadOnly()
    value = int(dut.csr_rdata.value)
    await Timer(1, unit="ps")
    return value


@cocotb.test()
async def run_program(dut):
    """Preload, run to completion (or error, or deadlock), read back results and counters."""
    with open(os.environ[JOB_ENV]) as f:
        job = json.load(f)
    Clock(dut.clk, 10, unit="ns").start()
    dut.start.value = 0
    dut.stall_enable.value = int(bool(job.get("stall")))
    dut.watchdog.value = job.get("watchdog", 0)
    dut.debug__we.value = 0
    dut.debug__re.value = 0
    dut.csr_addr.value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    await _write_words(dut, job["preload"])

    dut.start.value = 1
    t0 = time.perf_counter()
    await RisingEdge(dut.clk)
    dut.start.value = 0
    ended = First(RisingEdge(dut.done), RisingEdge(dut.error), RisingEdge(dut.deadlock))
    # a single timer, not ClockCycles: counting edges would wake Python every cycle
    timeout = Timer(10 * job.get("max_cycles", 50_000_000), unit="ns")
    await First(ended, timeout)
    run_seconds = time.perf_counter() - t0
    await RisingEdge(dut.clk)
    status = "done" if dut.done.value else "error" if dut.error.value else \
        "deadlock" if dut.deadlock.value else "timeout"

    result = {"status": status, "readback": {}, "csrs": {}, "run_seconds": run_seconds}
    for name, addr in job["csrs"].items():
        result["csrs"][name] = await _read_csr(dut, addr)
    for name, (base, count) in job["readback"].items():
        result["readback"][name] = await _read_words(dut, base, count)
    with open(job["result"], "w") as f:
        json.dump(result, f)
