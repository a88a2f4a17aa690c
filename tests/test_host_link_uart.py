# amaranth: UnusedElaboratable=no
"""UART receiver and transmitter in Amaranth's simulator against a bit-level model of the line."""

import random

import pytest
from amaranth.hdl import Module
from amaranth.sim import Simulator

from stepforge.hdl.host_link import MIN_DIVISOR, UartRx, UartTx, baud_divisor


def line_bits(byte, stop=1):
    """A UART character: start bit, 8 data bits LSB first, stop bit."""
    return [0] + [byte >> i & 1 for i in range(8)] + [stop]


def run_rx(divisor, chars, *, gap=0, skew=0, ready=True):
    """Drive ``chars`` (``(byte, stop bit)``) into a UartRx, ``divisor + skew`` cycles per bit;
    return the bytes received (taken, or offered when ``ready`` is False: the first cycle of each
    offer), the framing errors and the overruns, in order, with their cycles."""
    dut = UartRx(divisor)
    events = []
    bit = divisor + skew

    async def drive(ctx):
        ctx.set(dut.o.ready, ready)
        ctx.set(dut.rx, 1)
        await ctx.tick().repeat(3)
        for byte, stop in chars:
            for b in line_bits(byte, stop):
                ctx.set(dut.rx, b)
                await ctx.tick().repeat(bit)
            if not stop:
                ctx.set(dut.rx, 1)              # end the break
                await ctx.tick().repeat(bit)
            if gap:
                await ctx.tick().repeat(gap)
        ctx.set(dut.rx, 1)
        await ctx.tick().repeat(3 * bit)

    async def watch(ctx):
        cycle = 0
        offered = False
        async for _, _, valid, data, ferr, over in ctx.tick().sample(
                dut.o.valid, dut.o.payload, dut.framing_error, dut.overrun):
            cycle += 1
            if valid and not offered:
                events.append(("byte", data, cycle))
            offered = valid and not ready
            if ferr:
                events.append(("framing", None, cycle))
            if over:
                events.append(("overrun", None, cycle))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(drive)
    sim.add_process(watch)
    sim.run_until(1e-6 * (10 * bit * len(chars) * 2 + 100 + gap * len(chars)))
    return events


@pytest.mark.parametrize("divisor,skew", [(4, 0), (5, 0), (16, 0), (32, 1), (32, -1)])
def test_rx_random_bytes_back_to_back(divisor, skew):
    rng = random.Random(divisor * 10 + skew)
    data = [rng.randrange(256) for _ in range(12)] + [0x00, 0xFF, 0xA5]
    events = run_rx(divisor, [(b, 1) for b in data], skew=skew)
    assert [e[0] for e in events] == ["byte"] * len(data)
    assert [e[1] for e in events] == data
    # back to back: one byte every 10 bit times
    cycles = [e[2] for e in events]
    assert {b - a for a, b in zip(cycles, cycles[1:])} == {10 * (divisor + skew)}


def test_rx_framing_error_drops_the_byte_and_recovers():
    events = run_rx(8, [(0x12, 1), (0x34, 0), (0x56, 1)], gap=5)
    assert [(e[0], e[1]) for e in events] == [("byte", 0x12), ("framing", None), ("byte", 0x56)]


def test_rx_holds_a_byte_until_taken_and_flags_an_overrun():
    """Never ready: the first byte stays offered until the next one's first data bit is sampled
    (overrun), then the next byte is offered."""
    events = run_rx(8, [(0x12, 1), (0x34, 1)], ready=False)
    assert [(e[0], e[1]) for e in events] == [("byte", 0x12), ("overrun", None),
                                              ("byte", 0x34)]
    # the offer ends two bit times after it began (the rest of the stop bit, the next start
    # bit, half its first data bit); the second byte comes 10 bit times after the first
    assert events[1][2] - events[0][2] == 2 * 8
    assert events[2][2] - events[0][2] == 8 * 10


def test_rx_ignores_a_glitch():
    dut = UartRx(8)
    events = []

    async def drive(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.rx, 1)
        await ctx.tick().repeat(4)
        ctx.set(dut.rx, 0)                    # two cycles low: not a start bit
        await ctx.tick().repeat(2)
        ctx.set(dut.rx, 1)
        await ctx.tick().repeat(20)
        for b in line_bits(0x5A):
            ctx.set(dut.rx, b)
            await ctx.tick().repeat(8)
        ctx.set(dut.rx, 1)

    async def watch(ctx):
        async for _, _, valid, data, ferr in ctx.tick().sample(dut.o.valid, dut.o.payload,
                                                                dut.framing_error):
            if valid or ferr:
                events.append((bool(valid), data, bool(ferr)))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(drive)
    sim.add_process(watch)
    sim.run_until(200e-6)
    assert events == [(True, 0x5A, False)]


@pytest.mark.parametrize("divisor", [4, 7])
def test_tx_random_bytes_at_the_line_rate(divisor):
    rng = random.Random(divisor)
    data = [rng.randrange(256) for _ in range(10)]
    dut = UartTx(divisor)
    line = []

    async def bench(ctx):
        assert ctx.get(dut.tx) == 1
        k = 0
        for _ in range(10 * divisor * len(data) + 20):
            if k < len(data):
                ctx.set(dut.i.valid, 1)
                ctx.set(dut.i.payload, data[k])
            else:
                ctx.set(dut.i.valid, 0)
            take = k < len(data) and ctx.get(dut.i.ready)
            await ctx.tick()
            line.append(ctx.get(dut.tx))
            k += take

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    # decode: every character starts where the previous one ended (no idle time)
    start = line.index(0)
    got = []
    for n in range(len(data)):
        bits = line[start + 10 * divisor * n:start + 10 * divisor * (n + 1)]
        chunks = [bits[i * divisor:(i + 1) * divisor] for i in range(10)]
        assert all(len(set(c)) == 1 for c in chunks), f"character {n} is not {divisor} cycles a bit"
        values = [c[0] for c in chunks]
        assert values[0] == 0 and values[9] == 1
        got.append(sum(v << i for i, v in enumerate(values[1:9])))
    assert got == data
    assert set(line[start + 10 * divisor * len(data):]) == {1}


def test_tx_into_rx_loopback():
    """The transmitter's line into the receiver: every byte arrives once, in order."""
    from amaranth.hdl import Module  # only this test builds a two-unit design
    data = list(range(0, 256, 17))
    m = Module()
    m.submodules.tx = tx = UartTx(5)
    m.submodules.rx = rx = UartRx(5)
    m.d.comb += rx.rx.eq(tx.tx)
    got = []

    async def bench(ctx):
        ctx.set(rx.o.ready, 1)
        k = 0
        for _ in range(60 * len(data) + 50):
            ctx.set(tx.i.valid, k < len(data))
            ctx.set(tx.i.payload, data[k] if k < len(data) else 0)
            take = k < len(data) and ctx.get(tx.i.ready)
            await ctx.tick()
            k += take
            if ctx.get(rx.o.valid):
                got.append(ctx.get(rx.o.payload))

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert got == data


def test_divisor_from_clock_and_baud():
    assert baud_divisor(12_000_000, 3_000_000) == 4
    assert baud_divisor(50_000_000, 3_000_000) == 17
    assert baud_divisor(25_000_000, 115_200) == 217
    with pytest.raises(ValueError, match="UART baud must be at most clock_hz / 4 "
                                         r"\(3000000\), not 4000000"):
        baud_divisor(12_000_000, 4_000_000)
    with pytest.raises(ValueError, match=r"UART baud 2500000 at 12000000 Hz is 4.0% off with "
                                         "divisor 5; it must be within 2%"):
        baud_divisor(12_000_000, 2_500_000)
    with pytest.raises(ValueError, match=f"UartRx divisor must be an int >= {MIN_DIVISOR}, not 3"):
        UartRx(3)
    assert repr(UartTx(9)) == "UartTx(9)"
