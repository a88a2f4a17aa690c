# amaranth: UnusedElaboratable=no
"""StreamFIFO in Amaranth's simulator: order, no loss or duplication, level and high water."""

import numpy as np
import pytest
from amaranth.hdl import Value, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.sim import Simulator
from hypothesis import given
from hypothesis import strategies as st

from stepforge.compiler.types import Tile, int16
from stepforge.contract.beat import beat_layout, pack_beat, unpack_beat
from stepforge.contract.tokens import from_beats, from_nested, to_beats, to_nested
from stepforge.hdl.fifo import StreamFIFO


def run_fifo(dut, items, valid_pattern, ready_pattern, *, max_cycles=None):
    """Push ``items`` through ``dut`` under cyclic valid/ready patterns, checking every cycle.

    Returns ``(received, trace)`` where ``trace`` is a list of ``(push, pop)`` per cycle.
    Checks, every cycle: ``level`` equals accepted minus sent beats, ``high_water`` equals the
    maximum of ``level`` at earlier edges, and ``o`` obeys the stream rules (a valid beat stays
    valid and unchanged until it is taken). After draining, ``high_water`` must equal the
    maximum occupancy.
    """
    received, trace = [], []
    if max_cycles is None:
        max_cycles = (len(items) + dut.depth + 4) * len(valid_pattern) * len(ready_pattern) * 2 + 16
    i_payload, o_payload = Value.cast(dut.i.payload), Value.cast(dut.o.payload)

    async def testbench(ctx):
        sent = occupancy = high_water = max_occupancy = 0
        holding = False          # i.valid was high and not taken: it must stay high
        offered = None           # o's beat that was valid and not taken last cycle
        for cycle in range(max_cycles):
            if len(received) == len(items):
                break
            valid = sent < len(items) and (holding or valid_pattern[cycle % len(valid_pattern)])
            ready = ready_pattern[cycle % len(ready_pattern)]
            ctx.set(dut.i.valid, valid)
            ctx.set(i_payload, items[sent] if valid else 0)
            ctx.set(dut.o.ready, ready)

            assert ctx.get(dut.level) == occupancy, f"cycle {cycle}"
            assert ctx.get(dut.high_water) == high_water, f"cycle {cycle}"
            o_valid, payload = ctx.get(dut.o.valid), ctx.get(o_payload)
            if offered is not None:
                assert o_valid and payload == offered, f"cycle {cycle}: o changed before transfer"
            push = valid and ctx.get(dut.i.ready)
            pop = o_valid and ready

            await ctx.tick()
            trace.append((bool(push), bool(pop)))
            high_water = max(high_water, occupancy)
            if push:
                sent += 1
            if pop:
                received.append(payload)
            occupancy += bool(push) - bool(pop)
            max_occupancy = max(max_occupancy, occupancy)
            holding = valid and not push
            offered = payload if (o_valid and not pop) else None
        else:
            raise AssertionError(f"only {len(received)} of {len(items)} beats after {max_cycles} "
                                 f"cycles")
        await ctx.tick()
        assert ctx.get(dut.level) == 0
        assert ctx.get(dut.high_water) == max_occupancy

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()
    return received, trace


def test_members():
    dut = StreamFIFO(unsigned(12), 5)
    assert dut.signature.members["i"] == wiring.In(stream.Signature(unsigned(12)))
    assert dut.signature.members["o"] == wiring.Out(stream.Signature(unsigned(12)))
    assert dut.signature.members["level"] == wiring.Out(range(6))
    assert dut.signature.members["high_water"] == wiring.Out(range(6))
    assert (dut.shape, dut.depth, dut.buffered) == (unsigned(12), 5, False)


def test_repr():
    assert repr(StreamFIFO(unsigned(8), 4)) == "StreamFIFO(unsigned(8), depth=4)"
    assert repr(StreamFIFO(8, 2, buffered=True)) == "StreamFIFO(8, depth=2, buffered=True)"
    assert (repr(StreamFIFO(8, 3, buffered=True, block_ram=True))
            == "StreamFIFO(8, depth=3, buffered=True, block_ram=True)")


@pytest.mark.parametrize("buffered, depth", [(False, 3), (True, 1)])
def test_block_ram_needs_a_buffered_queue(buffered, depth):
    with pytest.raises(ValueError, match=r"StreamFIFO block_ram=True needs buffered=True and "
                                         rf"depth >= 2 .*, not buffered={buffered}, "
                                         rf"depth={depth}"):
        StreamFIFO(unsigned(8), depth, buffered=buffered, block_ram=True)


def test_block_ram_storage_is_marked():
    """The storage of a block-RAM FIFO carries ``ram_style = "block"`` (Yosys keeps a memory of
    two 132-bit entries in flip-flops otherwise) and ``no_rw_check``; a plain buffered FIFO's
    does not."""
    from amaranth.back import rtlil
    text = rtlil.convert(StreamFIFO(unsigned(132), 3, buffered=True, block_ram=True))
    assert 'attribute \\ram_style "block"' in text and "attribute \\no_rw_check" in text
    plain = rtlil.convert(StreamFIFO(unsigned(132), 3, buffered=True))
    assert "ram_style" not in plain and "no_rw_check" not in plain


@pytest.mark.parametrize("depth", [0, -1, 2.0, True, "4"])
def test_bad_depth(depth):
    with pytest.raises(ValueError, match="StreamFIFO depth must be an int >= 1"):
        StreamFIFO(unsigned(8), depth)


@pytest.mark.parametrize("buffered, depth, first_pop, pops", [
    # (cycle of the first beat on o, cycles with a transfer on o) for 8 beats, always valid/ready
    (False, 1, 1, [1, 3, 5, 7, 9, 11, 13, 15]),
    (False, 2, 1, [1, 2, 3, 4, 5, 6, 7, 8]),
    (True, 2, 2, [2, 4, 6, 8, 10, 12, 14, 16]),
    (True, 3, 2, [2, 3, 4, 5, 6, 7, 8, 9]),
])
def test_throughput_and_latency(buffered, depth, first_pop, pops):
    dut = StreamFIFO(unsigned(8), depth, buffered=buffered)
    items = list(range(10, 18))
    received, trace = run_fifo(dut, items, [True], [True])
    assert received == items
    assert [c for c, (_, pop) in enumerate(trace) if pop] == pops
    assert pops[0] == first_pop


@pytest.mark.parametrize("buffered", [False, True])
@pytest.mark.parametrize("depth", [1, 2, 3, 7])
def test_fills_to_depth(buffered, depth):
    """With the consumer stalled the FIFO takes exactly ``depth`` beats, then drains in order."""
    dut = StreamFIFO(unsigned(8), depth, buffered=buffered)
    items = list(range(1, depth + 4))
    stall = 3 * depth + 4
    received, trace = run_fifo(dut, items, [True], [False] * stall + [True] * 64)
    assert received == items
    assert sum(push for push, _ in trace[:stall]) == depth


@given(depth=st.integers(1, 5), buffered=st.booleans(),
       items=st.lists(st.integers(0, 255), max_size=40),
       valid_pattern=st.lists(st.booleans(), min_size=1, max_size=8).filter(any),
       ready_pattern=st.lists(st.booleans(), min_size=1, max_size=8).filter(any))
def test_random_streams(depth, buffered, items, valid_pattern, ready_pattern):
    dut = StreamFIFO(unsigned(8), depth, buffered=buffered)
    received, _ = run_fifo(dut, items, valid_pattern, ready_pattern)
    assert received == items


@given(depth=st.integers(2, 5), items=st.lists(st.integers(0, 255), max_size=40),
       valid_pattern=st.lists(st.booleans(), min_size=1, max_size=8).filter(any),
       ready_pattern=st.lists(st.booleans(), min_size=1, max_size=8).filter(any))
def test_block_ram_keeps_timing(depth, items, valid_pattern, ready_pattern):
    """A block-RAM FIFO moves the same beats in the same cycles as the buffered queue."""
    got, trace = run_fifo(StreamFIFO(unsigned(8), depth, buffered=True, block_ram=True), items,
                          valid_pattern, ready_pattern)
    want, want_trace = run_fifo(StreamFIFO(unsigned(8), depth, buffered=True), items,
                                valid_pattern, ready_pattern)
    assert got == want == items
    assert trace == want_trace


@given(tensors=st.lists(st.lists(st.lists(st.integers(-2**15, 2**15 - 1), max_size=3),
                                 max_size=3), max_size=4),
       ready_pattern=st.lists(st.booleans(), min_size=1, max_size=6).filter(any))
def test_beats_through_fifo(tensors, ready_pattern):
    """Beats of a rank-2 stream of 1x2 int16 tiles cross the FIFO bit-exactly."""
    elem = Tile(int16, 1, 2)
    layout = beat_layout(elem, 2)
    tiles = [[[np.array([[x, -x - 1]], dtype=np.int16) for x in row] for row in t]
             for t in tensors]
    beats = to_beats(from_nested(tiles, 2))
    dut = StreamFIFO(layout, 2)
    received, _ = run_fifo(dut, [pack_beat(layout, b) for b in beats], [True], ready_pattern)
    out = [unpack_beat(layout, bits) for bits in received]
    assert [(b.has_data, b.stop, b.last) for b in out] == [(b.has_data, b.stop, b.last)
                                                          for b in beats]
    for got, want in zip(out, beats):
        if want.has_data:
            assert got.data.dtype == np.int16 and np.array_equal(got.data, want.data)
    decoded = to_nested(from_beats(out), 2)
    assert [[[t.tolist() for t in row] for row in x] for x in decoded] == \
           [[[t.tolist() for t in row] for row in x] for x in to_nested(from_beats(beats), 2)]


@given(items=st.lists(st.integers(0, 2**19 - 1), max_size=30),
       valid_pattern=st.lists(st.booleans(), min_size=1, max_size=8).filter(any),
       ready_pattern=st.lists(st.booleans(), min_size=1, max_size=8).filter(any))
def test_split_data_keeps_timing(items, valid_pattern, ready_pattern):
    """A two-entry FIFO of a beat keeps ``data`` in two registers apart from the other fields
    (the class doc): it moves the same beats in the same cycles as the plain queue."""
    layout = data.StructLayout({"data": unsigned(16), "has_data": 1, "stop": 2})
    split = StreamFIFO(layout, 2)
    assert split._split_data() and not StreamFIFO(unsigned(19), 2)._split_data()
    got, trace = run_fifo(split, items, valid_pattern, ready_pattern)
    want, want_trace = run_fifo(StreamFIFO(unsigned(19), 2), items, valid_pattern, ready_pattern)
    assert got == want == items
    assert trace == want_trace


@given(items=st.lists(st.integers(0, 255), max_size=30),
       valid_pattern=st.lists(st.booleans(), min_size=1, max_size=8).filter(any),
       ready_pattern=st.lists(st.booleans(), min_size=1, max_size=8).filter(any))
def test_split_payload_keeps_timing(items, valid_pattern, ready_pattern):
    """``split=True`` keeps a payload that is all data in two registers, with flags of its own:
    the same beats in the same cycles as the plain queue."""
    split = StreamFIFO(unsigned(8), 2, split=True)
    assert repr(split) == "StreamFIFO(unsigned(8), depth=2, split=True)" and split._split_data()
    got, trace = run_fifo(split, items, valid_pattern, ready_pattern)
    want, want_trace = run_fifo(StreamFIFO(unsigned(8), 2), items, valid_pattern, ready_pattern)
    assert got == want == items
    assert trace == want_trace
