# amaranth: UnusedElaboratable=no
"""WalkIndex in Amaranth's simulator against the row-major walk, element by element: which
dimension counts, the last element, the stop, and the start over after the last element."""

import itertools
import random

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from stepforge.hdl.walk import WalkIndex


def expected(shape):
    """Per element of the row-major walk over ``shape``: (the dimension that counts at the
    next step or None at the last element, the number of inner dimensions at their last
    index, whether it is the last element)."""
    rows = []
    for index in itertools.product(*(range(n) for n in shape)):
        at_last = [i == n - 1 for i, n in zip(index, shape)]
        stop = 0
        while stop < len(shape) and at_last[len(shape) - 1 - stop]:
            stop += 1
        counting = next((d for d in reversed(range(len(shape))) if not at_last[d]), None)
        rows.append((counting, stop, all(at_last)))
    return rows


def walk_module(shape):
    """A module that steps a WalkIndex over ``shape`` while ``step`` is high."""
    m = Module()
    ix = WalkIndex(shape)
    step = Signal(name="step")
    with m.If(step):
        m.d.sync += ix.advance()
    ticks = Signal(8, name="ticks")          # (a walk of extents 1 has no register of its own)
    m.d.sync += ticks.eq(ticks + 1)
    return m, ix, step


def simulate(m, testbench):
    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


SHAPES = [(), (1,), (5,), (2,), (1, 1), (3, 1), (1, 4), (2, 3), (3, 2, 2), (1, 3, 1, 2),
          (2, 1, 2, 1, 3), (4, 4, 2)]


@pytest.mark.parametrize("shape", SHAPES)
def test_walk_index_follows_the_walk(shape):
    m, ix, step = walk_module(shape)
    stop = Signal(range(len(shape) + 1), name="stop")
    final = Signal(name="final")
    counts = [Signal(name=f"counts{d}") for d in range(len(shape))]
    m.d.comb += [stop.eq(ix.stop()), final.eq(ix.final)]
    m.d.comb += [c.eq(ix.counts(d)) for d, c in enumerate(counts)]
    rows = expected(shape)
    rng = random.Random(len(rows))
    # two walks and a part of a third, with idle cycles between the steps
    script = rows * 2 + rows[:len(rows) // 2 + 1]

    async def testbench(ctx):
        for k, (counting, want_stop, want_final) in enumerate(script):
            while rng.random() < 0.3:         # an idle cycle moves nothing
                ctx.set(step, 0)
                await ctx.tick()
            got = (ctx.get(stop), ctx.get(final), [ctx.get(c) for c in counts])
            want = (want_stop, int(want_final),
                    [int(d == counting) for d in range(len(shape))])
            assert got == want, (shape, k % len(rows), got, want)
            ctx.set(step, 1)
            await ctx.tick()

    simulate(m, testbench)


def test_walk_index_stop_of_the_inner_dimensions():
    """``stop(first=1)`` counts only the dimensions after the outermost (the PMU replay's)."""
    shape = (2, 2, 3)
    m, ix, step = walk_module(shape)
    inner = Signal(range(3), name="inner_stop")
    m.d.comb += inner.eq(ix.stop(first=1))
    rows = expected(shape)

    async def testbench(ctx):
        for counting, stop, final in rows:
            assert ctx.get(inner) == min(stop, len(shape) - 1)
            ctx.set(step, 1)
            await ctx.tick()

    simulate(m, testbench)


def test_walk_index_repr_and_check():
    assert repr(WalkIndex((2, 3))) == "WalkIndex((2, 3), prefix='walk')"
    with pytest.raises(ValueError, match=r"WalkIndex shape must have extents >= 1, not \(2, 0\)"):
        WalkIndex((2, 0))
