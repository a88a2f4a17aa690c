"""The generic cocotb testbench of a compiled program (a :class:`~stepforge.hdl.system.System`).

The toplevel is the System in its simulation shell (:mod:`stepforge.sim.rtl.shell`): the shell makes
the clock, and every input the testbench writes reaches the System ``input_latency`` rising edges
late. Driven entirely by a job file (JSON, path in ``STEPFORGE_JOB``) written by
:mod:`stepforge.sim.rtl`::

    {"preload": [[word address, [word, ...]], ...],   # memory contents before the run
     "readback": {name: [word address, word count]},  # regions to read after the run
     "csrs": {name: address},                          # CSRs to read after the run
     "watchdog": int, "stall": bool, "max_cycles": int,
     "input_latency": int, "period_ns": int,           # the shell's (1 cycle, 10 ns)
     "word_latency": int,                              # cycles from a word port read to its data
     "word_ready": bool,                               # the word port has debug_ready (SDRAM)
     "result": "path.json"}                            # where the results go

The testbench resets the design, fills the memory through the debug back door (one word per
cycle, or with an SDRAM memory one word whenever ``debug_ready`` allows; before the run, so Python is not in the loop of the run itself), starts the run, waits
for ``done``, ``error`` or ``deadlock`` without visiting every cycle, reads the CSRs and the
read-back regions (one address per cycle, pipelined) and writes
``{"status", "run_seconds", "readback": {name: [words]}, "csrs": {name: value}}`` (``run_seconds``:
wall time from start to the end of the run, without preload and read-back).
"""

import json
import os
import time

import cocotb
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


async def _word_access(dut, op, addr, value=0):
    """One access through a word port with ``debug_ready`` (an SDRAM memory): wait for it, offer
    the access for one cycle, and for a read wait for ``rvalid`` and return ``rdata``.

    The shell registers the inputs, so the design sees the access one edge after it is written
    and lowers ``debug_ready`` an edge later: the port is sampled again only after that."""
    await ReadOnly()
    while not int(dut.debug_ready.value):
        await RisingEdge(dut.clk)
        await ReadOnly()
    await Timer(1, unit="ps")
    dut.debug__addr.value = addr
    dut.debug__wdata.value = value
    (dut.debug__we if op == "w" else dut.debug__re).value = 1
    await RisingEdge(dut.clk)
    (dut.debug__we if op == "w" else dut.debug__re).value = 0
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    if op == "r":
        await ReadOnly()
        while not int(dut.debug__rvalid.value):
            await RisingEdge(dut.clk)
            await ReadOnly()
        data = int(dut.debug__rdata.value)
        await RisingEdge(dut.clk)
        return data
    return None


async def _read_pipelined(dut, addr, data, addresses, latency, valid=None):
    """Read ``addresses`` through a port that answers ``latency`` rising edges after an address is
    written, one address per cycle; ``valid`` (a signal), when given, must be high with the data."""
    out = []
    for i in range(len(addresses) + latency - 1 if addresses else 0):
        addr.value = addresses[min(i, len(addresses) - 1)]
        await RisingEdge(dut.clk)
        await ReadOnly()
        if i >= latency - 1:
            k = i - latency + 1
            assert valid is None or int(valid.value), f"no read data for address {addresses[k]}"
            out.append(int(data.value))
        await Timer(1, unit="ps")
    return out


@cocotb.test()
async def run_program(dut):
    """Preload, run to completion (or error, or deadlock), read back results and counters."""
    with open(os.environ[JOB_ENV]) as f:
        job = json.load(f)
    latency = 1 + job["input_latency"]  # the CSRs answer one edge later
    word_latency = job["word_latency"] + job["input_latency"]
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
    handshake = job.get("word_ready", False)     # an SDRAM memory's word port
    if handshake:
        for base, words in job["preload"]:
            for i, w in enumerate(words):
                await _word_access(dut, "w", base + i, w)
    else:
        await _write_words(dut, job["preload"])

    dut.start.value = 1
    t0 = time.perf_counter()
    await RisingEdge(dut.clk)
    dut.start.value = 0
    ended = First(RisingEdge(dut.done), RisingEdge(dut.error), RisingEdge(dut.deadlock))
    # a single timer, not ClockCycles: counting edges would wake Python every cycle
    cycles = job.get("max_cycles", 50_000_000) + job["input_latency"]
    timeout = Timer(job["period_ns"] * cycles, unit="ns")
    await First(ended, timeout)
    run_seconds = time.perf_counter() - t0
    await RisingEdge(dut.clk)
    status = "done" if dut.done.value else "error" if dut.error.value else \
        "deadlock" if dut.deadlock.value else "timeout"

    result = {"status": status, "readback": {}, "csrs": {}, "run_seconds": run_seconds}
    names = list(job["csrs"])
    values = await _read_pipelined(dut, dut.csr_addr, dut.csr_rdata,
                                   [job["csrs"][n] for n in names], latency)
    result["csrs"] = dict(zip(names, values))
    if handshake:
        for name, (base, count) in job["readback"].items():
            result["readback"][name] = [await _word_access(dut, "r", base + i)
                                        for i in range(count)]
    else:
        dut.debug__re.value = 1
        for name, (base, count) in job["readback"].items():
            result["readback"][name] = await _read_pipelined(
                dut, dut.debug__addr, dut.debug__rdata, list(range(base, base + count)),
                word_latency, valid=dut.debug__rvalid)
        dut.debug__re.value = 0
    with open(job["result"], "w") as f:
        json.dump(result, f)
