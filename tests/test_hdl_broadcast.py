# amaranth: UnusedElaboratable=no
"""BroadcastUnit: every output gets the input's beats unchanged; a slow consumer stalls the
producer only once its own FIFO is full."""

import pytest
from amaranth.hdl import Module, Signal, Value
from amaranth.sim import Simulator
from hypothesis import given, settings, strategies as st

from stepforge.contract.beat import beat_layout, pack_beat, unpack_beat
from stepforge.contract.tokens import from_beats, from_nested, to_beats
from stepforge.hdl.broadcast import BroadcastUnit
from stepforge.sim.rtl.testbench import check_ready_to_valid, simulate

from .test_hdl_promote import ELEM, FRAMING, TILES, reframe, tile, tokens_equal
from .test_tokens import ragged


def run_broadcast(rank, n, beats_or_tokens, depth=2, **kw):
    return simulate(BroadcastUnit(ELEM, rank, n, depth=depth),
                    {"in0": (beat_layout(ELEM, rank), beats_or_tokens)},
                    {f"out{k}": beat_layout(ELEM, rank) for k in range(n)}, **kw)


@settings(deadline=None, max_examples=30)
@given(st.integers(0, 3).flatmap(lambda r: st.tuples(st.just(r), ragged(r, elems=TILES, max_size=3))),
       st.integers(1, 3), st.integers(1, 3), FRAMING,
       st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.integers(0, 2**16))
def test_every_output_gets_the_stream(case, n, depth, framing, valid_p, ready_p, seed):
    rank, tensors = case
    tokens = from_nested(tensors, rank)
    beats = reframe(tokens, framing)
    run = run_broadcast(rank, n, beats, depth, valid_p=valid_p, ready_p=ready_p, seed=seed)
    for k in range(n):
        assert tokens_equal(run.outputs[f"out{k}"], tokens)
        got = run.beats[f"out{k}"]  # the very beats, framing included
        assert [(b.has_data, b.stop, b.last) for b in got] == [(b.has_data, b.stop, b.last) for b in beats]
    assert run.accepted["in0"] == len(beats)


def test_slow_consumer_stalls_only_when_its_fifo_is_full():
    depth, nbeats = 3, 12
    tokens = [tile(i) for i in range(nbeats - 1)] + [tile(99)]
    layout = beat_layout(ELEM, 0)
    feed = [pack_beat(layout, b) for b in to_beats(tokens)]
    dut = BroadcastUnit(ELEM, 0, 2, depth=depth)
    log = {"accepted": [], "out0": [], "out1": []}

    async def bench(ctx):
        sent, got = 0, {"out0": [], "out1": []}
        for cycle in range(60):
            more = sent < len(feed)
            ctx.set(dut.in0.valid, more)
            ctx.set(Value.cast(dut.in0.payload), feed[sent] if more else 0)
            ctx.set(dut.out0.ready, 1)
            ctx.set(dut.out1.ready, cycle >= 30)  # out1's consumer sleeps for 30 cycles
            push = more and ctx.get(dut.in0.ready)
            pops = {p: ctx.get(getattr(dut, p).valid) and ctx.get(getattr(dut, p).ready)
                    for p in got}
            payloads = {p: ctx.get(Value.cast(getattr(dut, p).payload)) for p in got}
            await ctx.tick()
            sent += bool(push)
            for p in got:
                if pops[p]:
                    got[p].append(unpack_beat(layout, payloads[p]))
            log["accepted"].append(sent)
            log["out0"].append(len(got["out0"]))
            log["out1"].append(len(got["out1"]))
        log["final"] = got

    top = Module()
    top.submodules.dut = dut
    heartbeat = Signal(name="heartbeat")
    top.d.sync += heartbeat.eq(~heartbeat)
    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    # While out1 sleeps the producer runs ahead by exactly out1's FIFO depth, and out0 gets all of it.
    assert log["accepted"][29] == depth and log["out0"][29] == depth and log["out1"][29] == 0
    # After it wakes, both drain the whole stream.
    assert log["accepted"][-1] == nbeats
    for p in ("out0", "out1"):
        assert tokens_equal(from_beats(log["final"][p]), tokens)


@pytest.mark.parametrize("n", [1, 3])
def test_one_beat_per_cycle(n):
    tokens = from_nested([[[tile(i) for i in range(4)], [tile(5)]]] * 4, 2)
    run = run_broadcast(2, n, tokens)
    for k in range(n):
        assert len(run.beats[f"out{k}"]) == 20
    assert run.cycles == 21  # a beat taken in cycle t is offered in cycle t + 1


def test_no_ready_to_valid_path():
    tokens = from_nested([[tile(1), tile(2)], [], [tile(3)]], 1)
    check_ready_to_valid(BroadcastUnit(ELEM, 1, 2), {"in0": (beat_layout(ELEM, 1), tokens)},
                         {"out0": beat_layout(ELEM, 1), "out1": beat_layout(ELEM, 1)})


def test_parameters():
    assert repr(BroadcastUnit(ELEM, 1, 3)) == "BroadcastUnit(Tile(int8, 1, 2), 1, 3, depth=2)"
    for rank, n, depth in ((1, 0, 2), (-1, 2, 2), (1, 2, 0), (1, True, 2)):
        with pytest.raises(ValueError):
            BroadcastUnit(ELEM, rank, n, depth=depth)
