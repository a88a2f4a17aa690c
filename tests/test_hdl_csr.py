# amaranth: UnusedElaboratable=no
"""CSRBank in Amaranth's simulator: every address reads its register one cycle later, 0 past it."""

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from stepforge.hdl.csr import CSRBank


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_reads_every_register_and_zero_past_the_last(n):
    bank = CSRBank(1 << 16)
    regs = [Signal(32, name=f"r{i}", init=0x1000_0001 * (i + 1) & 0xFFFF_FFFF) for i in range(n)]
    for i, r in enumerate(regs):
        assert bank.add(f"r{i}", r) == i
    m = Module()
    m.submodules.bank = bank
    addresses = list(range(n)) + [n, n + 1, 7, 8, 0x100, 0x8000 + (n - 1), 0xFFFF]
    seen = []

    async def testbench(ctx):
        for a in addresses:
            ctx.set(bank.addr, a)
            await ctx.tick()
            seen.append(ctx.get(bank.rdata))     # the value of the address set before the edge

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()
    expect = [(0x1000_0001 * (a + 1)) & 0xFFFF_FFFF if a < n else 0 for a in addresses]
    assert seen == expect
