"""The system top before ``start``: units held in reset must not reach the memory.

Regression: the Verilator testbench (``cocotb_tests/system_tb.py``) fills the memory through the
debug back door, one word per cycle, while every unit is held in reset, then pulses ``start``.
A BeatReader in reset still offers its first burst (its FSM's first state drives ``req.valid``);
the memory, which is not held in reset, took that burst and served it as soon as the back door
went idle, and the reader asked again after reset. The first beat arrived twice and the input
stream shifted by one beat (a Partition program routed the wrong elements). Amaranth's simulator
run (:func:`~stepforge.sim.rtl.system_sim.simulate_system`) fills the memory in zero time, which hid
it. This test replays the testbench's sequence in Amaranth's simulator.
"""

import pytest
from amaranth.sim import Simulator

from stepforge import Index, Partition, Program, Select
from stepforge.compiler.lower import lower
from stepforge.compiler.ops.io import Input
from stepforge.contract.tokens import from_beats, from_nested
from stepforge.contract.values import to_value
from stepforge.hdl.memory import backdoor_read
from stepforge.hdl.system import System
from stepforge.sim.ref.interpreter import run
from stepforge.sim.rtl.run import _pack_stream, _unpack_stream

INPUTS = {"x": [[10, 11, 12, 13, 14, 15]], "s": [[1, 6, 2, 5, 0, 7]]}


def route_program():
    p = Program("route2")
    x = p.input("x", [1, 6], Index())
    s = p.input("s", [1, 6], Select(3))
    parts = Partition(x, s, 3, 0)
    for i in range(3):
        p.output(parts[i], f"o{i}")
    return p


def run_like_system_tb(program, inputs, *, idle_before_start=0, max_cycles=2000):
    """Preload through the debug port (one word a cycle), start, run to the end, read back."""
    hw = lower(program)
    top = System(hw)
    g = hw.geometry
    layouts = {e.stream: e.layout for e in hw.edges}
    preload = []
    for node in program.nodes:
        if isinstance(node, Input):
            s = node.outputs[0]
            toks = [t if type(t).__name__ == "Stop" else to_value(t, s.dtype, node.name)
                    for t in from_nested(inputs[node.name], s.rank)]
            info = hw.streams_in[node.name]
            words = _pack_stream(layouts[s], toks, info["words_per_beat"], g.word_bits)
            preload += [(info["base"] + k, w) for k, w in enumerate(words)]
    result = {}

    async def bench(ctx):
        await ctx.tick()
        await ctx.tick()
        ctx.set(top.debug.we, 1)
        for addr, word in preload:
            ctx.set(top.debug.addr, addr)
            ctx.set(top.debug.wdata, word)
            await ctx.tick()
        ctx.set(top.debug.we, 0)
        for _ in range(idle_before_start):
            await ctx.tick()
        ctx.set(top.start, 1)
        await ctx.tick()
        ctx.set(top.start, 0)
        for _ in range(max_cycles):
            await ctx.tick()
            if ctx.get(top.done) or ctx.get(top.error) or ctx.get(top.deadlock):
                break
        result["status"] = "done" if ctx.get(top.done) else "not done"
        outs = {}
        for node in program.outputs:
            info = hw.streams_out[node.name]
            n = ctx.get(top._beats_written[node.name])
            buf = backdoor_read(ctx, top._memory, info["base"], n * info["words_per_beat"])
            words = [int.from_bytes(buf[k * g.word_bytes:(k + 1) * g.word_bytes], "little")
                     for k in range(n * info["words_per_beat"])]
            outs[node.name] = from_beats(_unpack_stream(layouts[node.inputs[0]], words,
                                                        info["words_per_beat"], g.word_bits, n))
        result["outputs"] = outs

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return result


def test_debug_preload_then_start_matches_interpreter():
    want = run(route_program(), inputs=INPUTS).outputs
    assert want == {"o0": [10, 13, 15], "o1": [11, 12, 15], "o2": [11, 13, 15]}
    for idle in (0, 1, 3, 10):
        got = run_like_system_tb(route_program(), INPUTS, idle_before_start=idle)
        assert got["status"] == "done"
        assert got["outputs"] == want, f"{idle} idle cycles before start"


def test_memory_sees_no_request_before_start():
    """While the units are held in reset, no burst reaches the memory's request ports."""
    p = route_program()
    hw = lower(p)
    top = System(hw)
    seen = []

    async def bench(ctx):
        for _ in range(8):
            mem = top._memory
            seen.append(any(ctx.get(port.req.valid) and ctx.get(port.req.ready)
                            for port in mem.read))
            await ctx.tick()

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert not any(seen)


@pytest.mark.slow
def test_route_program_in_verilator(tmp_path):
    """The program of the original report, end to end through Verilator."""
    from stepforge.sim.rtl import run_rtl
    want = run(route_program(), inputs=INPUTS).outputs
    res = run_rtl(route_program(), inputs=INPUTS, workdir=tmp_path)
    assert res.status == "done"
    assert res.outputs == want
