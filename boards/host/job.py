"""A program's job for a board: what to load into memory, what to read back, how to decode it.

The same job as :func:`~stepforge.sim.rtl.run.run_rtl` hands its cocotb testbench (tensors and
host input streams preloaded at their placements, output tensors and streams read back), built
with the harness's own packing helpers, so a board run and a Verilator run load and decode
bytes identically.
"""

from ...compiler.ops.io import Input, Output
from ...contract.tokens import from_beats, from_nested
from ...contract.values import to_value
from ...hdl.memory import array_from_bytes, array_to_bytes
from ...sim.rtl.run import _bytes, _pack_stream, _unpack_stream, _words, tensor_rows

__all__ = ["Job", "make_job", "coalesce", "decode", "MAX_GAP"]

#: Preload regions at most this many words apart are loaded as one (:func:`coalesce`).
MAX_GAP = 64


class Job:
    """``preload``: ``[[word address, [words]], ...]``; ``readback``: ``{key: (address,
    words)}`` with keys ``"tensor:NAME"`` and ``"stream:NAME"``."""

    def __init__(self, preload, readback):
        self.preload, self.readback = preload, readback

    @property
    def load_words(self):
        return sum(len(words) for _, words in self.preload)

    @property
    def read_words(self):
        return sum(n for _, n in self.readback.values())


def make_job(program, hw, tensors, inputs):
    """The :class:`Job` of ``program`` (lowered to ``hw``) on ``tensors`` and host ``inputs``."""
    g = hw.geometry
    layouts = {e.stream: e.layout for e in hw.edges}
    preload, readback = [], {}
    for name, info in hw.tensors.items():
        t = program.tensors[name]
        if t.role in ("input", "inout"):
            words = _words(array_to_bytes(tensors[name], t.dtype), g.word_bytes)
            preload += tensor_rows(info, words)
        if t.role in ("output", "inout"):
            readback[f"tensor:{name}"] = (info["base"], t.shape[0] * info["pitch_words"])
    for node in program.nodes:
        if isinstance(node, Input):
            s = node.outputs[0]
            info = hw.streams_in[node.name]
            toks = from_nested(inputs[node.name], s.rank)
            toks = [t if type(t).__name__ == "Stop" else to_value(t, s.dtype, node.name)
                    for t in toks]
            preload.append([info["base"], _pack_stream(layouts[s], toks, info["words_per_beat"],
                                                       g.word_bits)])
        elif isinstance(node, Output):
            info = hw.streams_out[node.name]
            readback[f"stream:{node.name}"] = (info["base"],
                                               info["max_beats"] * info["words_per_beat"])
    return Job(coalesce(preload), readback)


def coalesce(preload, max_gap=MAX_GAP):
    """``preload`` with regions at most ``max_gap`` words apart merged, the gap written with
    zeros: fewer, fuller frames (a tensor's rows at their pitch are many short regions), and the
    gaps hold what the simulation's zero-initialized memory holds there."""
    out = []
    for base, words in sorted(preload, key=lambda r: r[0]):
        if out and base - (out[-1][0] + len(out[-1][1])) in range(max_gap + 1):
            out[-1][1] += [0] * (base - out[-1][0] - len(out[-1][1])) + list(words)
        else:
            out.append([base, list(words)])
    return out


def decode(program, hw, words, csrs):
    """``(tensors, streams)`` from the read-back ``words`` (``{key: [word, ...]}``) and the
    CSRs (``output.NAME.beats``), as :func:`~stepforge.sim.rtl.run.run_rtl` decodes them."""
    g = hw.geometry
    layouts = {e.stream: e.layout for e in hw.edges}
    out_tensors, out_streams = {}, {}
    for key, ws in words.items():
        kind, name = key.split(":", 1)
        if kind == "tensor":
            t = program.tensors[name]
            info = hw.tensors[name]
            rows = [ws[r * info["pitch_words"]:r * info["pitch_words"] + info["row_words"]]
                    for r in range(t.shape[0])]
            out_tensors[name] = array_from_bytes(
                _bytes([w for row in rows for w in row], g.word_bytes), t.shape, t.dtype)
        else:
            s = program.node(name).inputs[0]
            info = hw.streams_out[name]
            n = csrs[f"output.{name}.beats"]
            beats = _unpack_stream(layouts[s], ws, info["words_per_beat"], g.word_bits, n)
            out_streams[name] = from_beats(beats) if beats and beats[-1].last else beats
    return out_tensors, out_streams
