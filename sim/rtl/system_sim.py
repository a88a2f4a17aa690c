"""Running a whole compiled system in Amaranth's simulator, with every FIFO's beats recorded.

The Verilator path (:mod:`stepforge.sim.rtl`) is the one that proves the Verilog; this one needs
no compiler and records the beats that cross every FIFO, so a disagreement with the interpreter
can be located at the first stream where it appears (:func:`first_divergence`). It is meant for
small programs (tests, debugging): Amaranth's simulator runs some thousands of cycles a second.
"""

from dataclasses import dataclass

from amaranth.hdl import Value
from amaranth.sim import Simulator

from ...compiler.lower import lower
from ...compiler.ops.io import Input
from ...contract.beat import unpack_beat
from ...contract.tokens import from_beats, from_nested, is_stop
from ...contract.values import to_value, values_equal
from ...hdl.memory import array_from_bytes, array_to_bytes, backdoor_read, backdoor_write
from ...hdl.system import System
from .run import _pack_stream, _unpack_stream, tensor_regions, tensor_span, tensor_words

__all__ = ["SystemRun", "simulate_system", "first_divergence"]


@dataclass
class SystemRun:
    """What :func:`simulate_system` observed."""
    status: str
    cycles: int
    tensors: dict
    outputs: dict      # output stream name -> tokens read back from memory
    edges: dict        # stream -> tokens that crossed its FIFO
    hw: object


def simulate_system(program, tensors=None, inputs=None, *, config=None, depths=None, stall=False,
                    watchdog=2000, max_cycles=200_000, target="sim"):
    """Run ``program`` on its :class:`~stepforge.hdl.system.System` of ``target`` (``"sim"`` or
    ``"board"``: no stalls, no watchdog; ``stall`` and ``watchdog`` apply to ``"sim"`` only)."""
    tensors, inputs = dict(tensors or {}), dict(inputs or {})
    hw = lower(program, config, depths=depths)
    top = System(hw, target=target)
    g = hw.geometry
    layouts = {e.stream: e.layout for e in hw.edges}
    recorded = {e.stream: [] for e in hw.edges}
    result = {}

    async def bench(ctx):
        mem = _find_memory(top)
        for name, info in hw.tensors.items():
            t = program.tensors[name]
            if t.role in ("input", "inout"):
                buf = array_to_bytes(tensors[name], t.dtype)
                words = [int.from_bytes(buf[k:k + g.word_bytes], "little")
                         for k in range(0, len(buf), g.word_bytes)]
                for addr, row in tensor_regions(info, words):
                    backdoor_write(ctx, mem, addr, b"".join(w.to_bytes(g.word_bytes, "little")
                                                            for w in row))
        for node in program.nodes:
            if isinstance(node, Input):
                s = node.outputs[0]
                toks = [t if is_stop(t) else to_value(t, s.dtype, node.name)
                        for t in from_nested(inputs[node.name], s.rank)]
                words = _pack_stream(layouts[s], toks, hw.streams_in[node.name]["words_per_beat"], g.word_bits)
                backdoor_write(ctx, mem, hw.streams_in[node.name]["base"],
                               b"".join(w.to_bytes(g.word_bytes, "little") for w in words))
        if target == "sim":
            ctx.set(top.stall_enable, int(stall))
            ctx.set(top.watchdog, watchdog)
        ctx.set(top.start, 1)
        await ctx.tick()
        ctx.set(top.start, 0)
        fifo_ports = [(e, top._fifo_ports[e.eid]) for e in hw.edges]
        for cycle in range(max_cycles):
            for e, (i_port, _) in fifo_ports:
                if ctx.get(i_port.valid) and ctx.get(i_port.ready):
                    recorded[e.stream].append(unpack_beat(e.layout, ctx.get(Value.cast(i_port.payload))))
            await ctx.tick()
            if ctx.get(top.done) or ctx.get(top.error) or ctx.get(top.deadlock):
                break
        status = ("done" if ctx.get(top.done) else "error" if ctx.get(top.error)
                  else "deadlock" if ctx.get(top.deadlock) else "timeout")
        result["status"] = status
        result["cycles"] = cycle + 1
        out = {}
        for name, info in hw.tensors.items():
            t = program.tensors[name]
            if t.role in ("output", "inout"):
                base, n = tensor_span(info)
                span = backdoor_read(ctx, mem, base, n)
                words = [span[k * g.word_bytes:(k + 1) * g.word_bytes] for k in range(n)]
                out[name] = array_from_bytes(b"".join(tensor_words(info, words)), t.shape,
                                             t.dtype)
        result["tensors"] = out
        streams = {}
        for node in program.outputs:
            info = hw.streams_out[node.name]
            n = ctx.get(top._beats_written[node.name])
            buf = backdoor_read(ctx, mem, info["base"], n * info["words_per_beat"])
            words = [int.from_bytes(buf[k * g.word_bytes:(k + 1) * g.word_bytes], "little")
                     for k in range(n * info["words_per_beat"])]
            streams[node.name] = from_beats(_unpack_stream(layouts[node.inputs[0]], words,
                                                           info["words_per_beat"], g.word_bits, n))
        result["outputs"] = streams

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    edges = {}
    for s, beats in recorded.items():
        try:
            edges[s] = from_beats(beats)
        except ValueError:
            edges[s] = beats
    return SystemRun(result["status"], result["cycles"], result["tensors"], result["outputs"],
                     edges, hw)


def _find_memory(top):
    return top._memory


def first_divergence(program, hw_edges, ref_edges):
    """The first stream (in node order) whose hardware tokens differ from the interpreter's."""
    for node in program.nodes:
        for s in node.outputs:
            got, want = hw_edges.get(s), ref_edges.get(s)
            if got is None or want is None:
                continue
            same = len(got) == len(want) and all(
                (a == b) if (is_stop(a) or is_stop(b)) else values_equal(a, b) for a, b in zip(got, want))
            if not same:
                return s, got, want
    return None
