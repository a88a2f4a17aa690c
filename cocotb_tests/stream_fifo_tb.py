"""cocotb testbench of a Verilated :class:`~stepforge.hdl.fifo.StreamFIFO`.

The stimulus is a JSON file named by the environment variable ``STEPFORGE_STIMULUS``::

    {"payloads": [int, ...],      # packed beats (stepforge.contract.beat.pack_beat), in order
     "depth": int,                # the FIFO's depth
     "seed": int,                 # seed of the valid/ready patterns
     "valid_prob": float, "ready_prob": float,
     "received": "path.json"}     # where random_handshakes writes the payloads it received

Both tests reset the DUT first (the simulator keeps its state from one test to the next).
"""

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge

from .streams import StreamSink, StreamSource, reset

STIMULUS_ENV = "STEPFORGE_STIMULUS"


def _stimulus():
    with open(os.environ[STIMULUS_ENV]) as f:
        return json.load(f)


@cocotb.test()
async def random_handshakes(dut):
    """Every beat leaves once, in order; ``level`` and ``high_water`` track occupancy exactly."""
    stim = _stimulus()
    payloads = stim["payloads"]
    clock = Clock(dut.clk, 10, unit="ns")
    clock.start()
    try:
        await reset(dut, dut.clk)
        rng = random.Random(stim["seed"])
        source = StreamSource(dut, "i", dut.clk, valid_prob=stim["valid_prob"], rng=rng)
        sink = StreamSink(dut, "o", dut.clk, ready_prob=stim["ready_prob"], rng=rng)
        source.send(payloads)
        source.start()
        sink.start()

        max_occupancy = 0
        limit = 50 * (len(payloads) + stim["depth"]) + 100
        for cycle in range(limit):
            await FallingEdge(dut.clk)
            occupancy = source.sent - len(sink.items)
            assert int(dut.level.value) == occupancy, f"level at cycle {cycle}"
            max_occupancy = max(max_occupancy, occupancy)
            if len(sink.items) == len(payloads):
                break
        assert len(sink.items) == len(payloads), \
            f"received {len(sink.items)} of {len(payloads)} beats in {limit} cycles"
        assert sink.items == payloads

        await ClockCycles(dut.clk, 2)
        assert int(dut.high_water.value) == max_occupancy
        assert 1 <= max_occupancy <= stim["depth"]
        with open(stim["received"], "w") as f:
            json.dump({"payloads": sink.items, "high_water": int(dut.high_water.value)}, f)
    finally:
        clock.stop()


@cocotb.test()
async def fill_then_drain(dut):
    """A stalled consumer lets exactly ``depth`` beats in; ``high_water`` then reads ``depth``."""
    stim = _stimulus()
    depth = stim["depth"]
    payloads = stim["payloads"][:depth + 2]
    clock = Clock(dut.clk, 10, unit="ns")
    clock.start()
    try:
        await reset(dut, dut.clk)
        assert int(dut.high_water.value) == 0
        source = StreamSource(dut, "i", dut.clk)
        sink = StreamSink(dut, "o", dut.clk, ready_prob=0.0)
        source.send(payloads)
        source.start()
        sink.start()

        await ClockCycles(dut.clk, 3 * depth + 5)
        await FallingEdge(dut.clk)
        assert source.sent == min(depth, len(payloads))
        assert int(dut.level.value) == source.sent
        assert int(dut.i__ready.value) == (0 if len(payloads) >= depth else 1)
        assert int(dut.high_water.value) == source.sent
        filled = source.sent

        sink.ready_prob = 1.0
        await sink.wait_for(len(payloads), timeout_cycles=4 * len(payloads) + 10)
        assert sink.items == payloads
        await FallingEdge(dut.clk)
        assert int(dut.level.value) == 0
        assert int(dut.high_water.value) == filled
    finally:
        clock.stop()
