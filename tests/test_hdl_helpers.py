"""The small helpers the units share: the constructor check, the stop bound, the AND-OR mux."""

import gc

import pytest
from amaranth.hdl import Const, Module, Signal
from amaranth.sim import Simulator

from stepforge.contract.beat import stop_above
from stepforge.hdl.mux import one_hot_mux
from stepforge.hdl.unit import check_choice, check_int, check_ints


def test_check_int_returns_the_value_and_names_unit_and_parameter():
    assert check_int("ZipUnit", "rank", 3, 0) == 3
    assert check_int("PartitionUnit", "b", 2, 0, 2) == 2
    assert check_int("AddrGenUnit", "offset", -7) == -7
    with pytest.raises(ValueError, match=r"^ZipUnit rank must be an int >= 0, not -1$"):
        check_int("ZipUnit", "rank", -1, 0)
    with pytest.raises(ValueError, match=r"^PartitionUnit b must be an int in 0\.\.2, not 3$"):
        check_int("PartitionUnit", "b", 3, 0, 2)
    with pytest.raises(ValueError, match=r"^BroadcastUnit n must be an int >= 1, not True$"):
        check_int("BroadcastUnit", "n", True, 1)
    with pytest.raises(ValueError, match=r"^BroadcastUnit n must be an int >= 1, not 2\.0$"):
        check_int("BroadcastUnit", "n", 2.0, 1)
    with pytest.raises(ValueError, match=r"^AddrGenUnit scale must be an int, not '3'$"):
        check_int("AddrGenUnit", "scale", "3")


def test_check_ints_and_check_choice_word_their_messages_alike():
    assert check_ints("PMU", "shape", [2, 3], 1, length=2) == (2, 3)
    with pytest.raises(ValueError, match=r"^PMU shape must be 2 ints >= 1, not \(3,\)$"):
        check_ints("PMU", "shape", (3,), 1, length=2)
    with pytest.raises(ValueError, match=r"^PMU shape must be 1 int >= 1, not 4$"):
        check_ints("PMU", "shape", 4, 1, length=1)
    with pytest.raises(ValueError, match=r"^AddrGenUnit shape must be 1 or more ints >= 1, "
                                         r"not \[\]$"):
        check_ints("AddrGenUnit", "shape", [], 1, min_length=1)
    assert check_choice("PMU", "mode", "dynamic", ("static", "dynamic")) == "dynamic"
    with pytest.raises(ValueError, match=r"^PMU mode must be 'static' or 'dynamic', not 'x'$"):
        check_choice("PMU", "mode", "x", ("static", "dynamic"))
    with pytest.raises(ValueError, match=r"^U x must be 'a', 'b' or 'c', not 'd'$"):
        check_choice("U", "x", "d", "abc")


def test_stop_above_is_constant_zero_when_the_field_cannot_exceed_the_limit():
    assert isinstance(stop_above(Signal(2), 3), Const)          # a 2-bit stop holds at most 3
    assert stop_above(Signal(2), 3).value == 0
    assert not isinstance(stop_above(Signal(2), 2), Const)


def _eval(select_value, values):
    sel = Signal(len(values), name="sel")
    out = Signal(8, name="out")
    m = Module()
    m.d.comb += out.eq(one_hot_mux(sel, [Const(v, 8) for v in values]))
    got = []

    async def bench(ctx):
        ctx.set(sel, select_value)
        got.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return got[0]


@pytest.mark.parametrize("select, expected", [(0b001, 0x11), (0b010, 0x22), (0b100, 0xC4),
                                              (0b000, 0), (0b011, 0x33)])
def test_one_hot_mux_picks_the_selected_value(select, expected):
    assert _eval(select, [0x11, 0x22, 0xC4]) == expected


def test_one_hot_mux_rejects_mismatched_widths():
    with pytest.raises(TypeError, match=r"one select bit per value"):
        one_hot_mux(Signal(2), [Signal(8), Signal(8), Signal(8)])
    with pytest.raises(TypeError, match=r"values of one width"):
        one_hot_mux(Signal(2), [Signal(8), Signal(4)])


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")   # built for repr only
def test_reprs_mirror_a_dynamic_row_bound():
    from stepforge.compiler.types import Tile, int8
    from stepforge.hdl.promote import PromoteUnit
    from stepforge.hdl.repeat import RepeatStaticUnit
    from stepforge.hdl.reshape import ReshapeUnit
    elem = Tile(int8, "R", 2)
    units = [PromoteUnit(elem, 1, row_bound=4), RepeatStaticUnit(elem, 1, 3, row_bound=4),
             ReshapeUnit(elem, 1, 2, row_bound=4)]
    assert [repr(u) for u in units] == [
        "PromoteUnit(Tile(int8, R, 2), 1, b=2, row_bound=4)",
        "RepeatStaticUnit(Tile(int8, R, 2), 1, 3, row_bound=4)",
        "ReshapeUnit(Tile(int8, R, 2), 1, 2, b=0, row_bound=4)"]
    del units
    gc.collect()    # dropped (every Elaboratable is a reference cycle) under the filter above


def test_increment_split_holds_the_exact_count_across_the_low_halfs_wraps():
    import random

    from stepforge.hdl.flags import increment_split
    m = Module()
    counter = Signal(7, name="counter")
    enable = Signal(name="enable")
    increment_split(m, counter, enable, low_bits=3)
    rng = random.Random(5)
    pattern = [rng.random() < 0.8 for _ in range(300)]
    seen = []

    async def bench(ctx):
        expected = 0
        for bit in pattern:
            ctx.set(enable, bit)
            await ctx.tick()
            expected = (expected + bit) % 128
            seen.append((ctx.get(counter), expected))

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert sum(pattern) > 200              # the low half wraps about 30 times, the whole once
    assert all(got == want for got, want in seen)


def test_accumulate_split_is_exact_a_cycle_after_each_addition():
    """Random amounts added to a 10-bit counter cut at 4 bits: after every edge the low bits
    are the running sum's and the high bits the running sum's of the edge before plus the
    carries seen by then (one cycle late), and the counter is exact once the additions stop;
    the low half wraps about every other addition, the whole counter too."""
    import random

    from stepforge.hdl.flags import accumulate_split
    m = Module()
    counter = Signal(10, name="counter")
    amount = Signal(3, name="amount")
    enable = Signal(name="enable")
    accumulate_split(m, counter, amount, enable, low_bits=4)
    rng = random.Random(9)
    steps = [(rng.random() < 0.7, rng.randrange(8)) for _ in range(600)]
    seen = []

    async def bench(ctx):
        low = high = carry = 0
        for on, value in steps + [(False, 0)] * 2:
            ctx.set(enable, on)
            ctx.set(amount, value)
            await ctx.tick()
            total = low + (value if on else 0)
            high = (high + carry) % 64
            carry = int(on and total >= 16)
            low = total % 16 if on else low
            seen.append((ctx.get(counter), low | high << 4))
        assert ctx.get(counter) == sum(v for on, v in steps if on) % 1024

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert sum(v for on, v in steps if on) > 1024
    assert all(got == want for got, want in seen)


def test_count_step_and_below_after_follow_the_count_exactly():
    """A count stepped by ``count_step`` from random increments and decrements holds
    ``count + inc - dec`` after every edge, and flags registered from ``below_after`` hold
    "the count is below the limit" for limits 1 (no comparison with 0), 2 and 5."""
    import random

    from stepforge.hdl.flags import below_after, count_step
    m = Module()
    count = Signal(range(6), name="count")
    inc, dec = Signal(name="inc"), Signal(name="dec")
    limits = (1, 2, 5)
    flags = [Signal(name=f"below{k}", init=1) for k in limits]
    m.d.sync += count.eq(count_step(count, inc, dec))
    m.d.sync += [f.eq(below_after(count, k, inc, dec)) for f, k in zip(flags, limits)]
    rng = random.Random(7)
    seen = []

    async def bench(ctx):
        expected = 0
        for _ in range(400):
            up = expected < 5 and rng.random() < 0.5
            down = expected > 0 and rng.random() < 0.5
            ctx.set(inc, up)
            ctx.set(dec, down)
            await ctx.tick()
            expected += up - down
            seen.append((ctx.get(count), [ctx.get(f) for f in flags],
                         expected, [int(expected < k) for k in limits]))

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert {want for _, _, want, _ in seen} == set(range(6))      # every count was reached
    assert all(got == want and gflags == wflags for got, gflags, want, wflags in seen)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_trailing_count_counts_the_innermost_set_flags(n):
    """Every pattern of ``n`` flags: the count of the trailing run of ones (a walk's stop)."""
    from stepforge.hdl.flags import trailing_count
    flags = [Signal(name=f"flag{k}") for k in range(n)]
    out = Signal(range(n + 1), name="count")
    m = Module()
    m.d.comb += out.eq(trailing_count(flags))
    got = {}

    async def bench(ctx):
        for value in range(1 << n):
            for k, f in enumerate(flags):
                ctx.set(f, (value >> k) & 1)
            got[value] = ctx.get(out)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    for value, count in got.items():
        bits = [(value >> k) & 1 for k in range(n)]
        want = 0
        while want < n and bits[n - 1 - want]:
            want += 1
        assert count == want, (bits, count)
