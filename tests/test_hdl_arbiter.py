# amaranth: UnusedElaboratable=no
"""RoundRobin in Amaranth's simulator against a model of the rule, cycle by cycle; lut_queue's
argument check (its queue behaviour is the StreamFIFO tests' through a head of depth >= 3)."""

import random

import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator

from stepforge.hdl.fifo import lut_queue
from stepforge.hdl.memory.arbiter import RoundRobin


def model(n, cycles, seed):
    """``(requests, enable, expected)`` per cycle: the first requester after the last granted
    one, in circular order; ``choice`` whatever ``enable``, the grant only with it."""
    rng = random.Random(seed)
    last, rows = n - 1, []
    for _ in range(cycles):
        requests = rng.getrandbits(n) if rng.random() < 0.8 else 0
        enable = rng.random() < 0.75
        order = [(last + k) % n for k in range(1, n + 1)]
        pick = next((c for c in order if requests >> c & 1), None)
        choice = 0 if pick is None else 1 << pick
        grant = enable and pick is not None
        rows.append((requests, enable, (int(grant), choice if grant else 0, choice, pick)))
        if grant:
            last = pick
    return rows


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_round_robin_follows_the_rule(n):
    dut = RoundRobin(n)
    rows = model(n, 300, seed=n)

    async def testbench(ctx):
        for cycle, (requests, enable, (grant, onehot, choice, pick)) in enumerate(rows):
            ctx.set(dut.requests, requests)
            ctx.set(dut.enable, enable)
            got = (ctx.get(dut.grant), ctx.get(dut.onehot), ctx.get(dut.choice))
            assert got == (grant, onehot, choice), (cycle, requests, enable, got)
            if pick is not None:
                assert ctx.get(dut.index) == pick, (cycle, requests)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


def test_round_robin_repr():
    assert repr(RoundRobin(3)) == "RoundRobin(3)"


def test_lut_queue_needs_two_entries():
    with pytest.raises(ValueError, match="lut_queue depth must be >= 2, not 1"):
        lut_queue(Module(), 8, 1)


def test_lut_queue_init_fits_its_depth():
    with pytest.raises(ValueError, match="lut_queue init holds 3 entries, more than its depth 2"):
        lut_queue(Module(), 8, 2, init=[1, 2, 3])
