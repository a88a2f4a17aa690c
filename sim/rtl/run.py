"""Running a compiled program cycle-accurately: Verilog through Verilator, driven by cocotb.

:func:`run_rtl` lowers a program (:func:`~stepforge.compiler.lower.lower`), builds its
:class:`~stepforge.hdl.system.System`, converts it to Verilog, builds it in its simulation shell
(:mod:`stepforge.sim.rtl.shell`: a Verilog clock, registered inputs, only the ports public) with
Verilator (cached by a hash of the Verilog; see :mod:`stepforge.sim.rtl.verilator`), runs the generic
testbench :mod:`stepforge.cocotb_tests.system_tb` on a job file (memory preload, read-back
regions, CSRs) and decodes what comes back: output tensors, output streams (as tokens), the run's
status and every counter. :class:`RTLResult` holds them; :func:`deadlock_report` and
:func:`error_report` turn a stuck or failed run into words.
"""

import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


from ...compiler.lower import lower
from ...compiler.ops.io import Input, Output
from ...contract.beat import pack_beat, unpack_beat
from ...contract.tokens import from_beats, from_nested, to_beats
from ...contract.values import to_value
from ...hdl.memory import (MemoryModel, array_from_bytes, array_to_bytes, lane_ram_verilog,
                           word_addresses)
from ...hdl.platform import FamilyPlatform
from ...hdl.sdram import SDRAM_STORAGE_VERILOG, SDRAMViolation
from ...hdl.system import MEMORY_UNIT, System
from ...hdl.unit import ErrorCode
from . import verilator
from .separate import UnitLibrary, gc_paused
from .shell import shell

__all__ = ["RTLResult", "compile_program", "run_rtl", "job_regions", "decode_readback",
           "tensor_regions", "tensor_span", "tensor_words",
           "deadlock_report", "error_report"]


@dataclass
class RTLResult:
    """What a Verilated run produced.

    Attributes
    ----------
    status : str
        ``"done"``, ``"error"``, ``"deadlock"`` or ``"timeout"``.
    tensors : dict of str to numpy.ndarray
        Every output (and inout) tensor read back from memory.
    outputs : dict of str to list
        Every output stream's tokens.
    csrs : dict of str to int
        Every counter and status register.
    hw : HardwareGraph
    timings : dict of str to float
        Seconds spent converting (``compile``), building (``build``), in the simulator process
        (``simulate``: preload, run, read-back) and in the run itself (``run``).
    """
    status: str
    tensors: dict
    outputs: dict
    csrs: dict
    hw: object
    timings: dict = field(default_factory=dict)

    @property
    def cycles(self):
        return self.csrs["cycles"]

    @property
    def tensor_bytes_read(self):
        """Off-chip bytes read by the program's tensor operators (host streams excluded)."""
        return self.csrs["bytes_read"] - self.csrs["host_bytes_read"]

    @property
    def tensor_bytes_written(self):
        return self.csrs["bytes_written"] - self.csrs["host_bytes_written"]


def compile_program(program, config=None, *, depths=None, separate=True, unit_cache=None,
                    jobs=None, target="sim", wide_beats=None):
    """Lower ``program`` and return ``(hw, system, verilog text)``.

    With ``separate`` (the default) every distinct unit, FIFO and the memory is a Verilog module
    of its own, converted once and then taken from the unit cache (``unit_cache``, default
    ``<cache root>/units``; :mod:`stepforge.sim.rtl.separate`), and only the top is converted per
    call; the modules missing from the cache are generated ``jobs`` at once (default: the CPU
    count). ``separate=False`` converts the whole system as one design. ``target`` is the
    :class:`~stepforge.hdl.system.System`'s: ``"sim"`` (Verilator) or ``"board"`` (an FPGA build
    without test-only logic; its memory lanes start uninitialized). ``wide_beats``: whether a
    tile larger than the hardware tile may move as one wide beat (default: only for
    ``"sim"``; :func:`~stepforge.compiler.lower.lower`).
    """
    if wide_beats is None:
        wide_beats = target != "board"
    hw = lower(program, config, depths=depths, wide_beats=wide_beats)
    # a board build elaborates for its device family (the PCU then instantiates MULT18X18D with
    # their registers inside); the simulation target stays generic
    platform = (FamilyPlatform(hw.config.family)
                if target == "board" and hw.config.family is not None else None)
    if separate:
        library = UnitLibrary(unit_cache, jobs=jobs, platform=platform)
        system = System(hw, storage="verilog", library=library, target=target)
        text = library.convert(system, "top")
    else:
        system = System(hw, storage="verilog", target=target)
        with gc_paused():
            text = verilator.convert(system, "top", platform=platform)
    if hw.config.memory == "sdram" and target == "sim":   # the chip model's storage
        text += SDRAM_STORAGE_VERILOG
    return hw, system, text + lane_ram_verilog(
        zero_init=target == "sim", family=hw.config.family,
        primitives=target == "board" and hw.config.family == "ecp5")


def _words(buf, word_bytes):
    n = -(-len(buf) // word_bytes)
    buf = bytes(buf) + bytes(n * word_bytes - len(buf))
    return [int.from_bytes(buf[i * word_bytes:(i + 1) * word_bytes], "little") for i in range(n)]


def _bytes(words, word_bytes):
    return b"".join(int(w).to_bytes(word_bytes, "little") for w in words)


def tensor_regions(info, words):
    """``[[address, words], ...]``: a tensor's ``words`` (row-major, unpadded) at their
    addresses in its layout (:func:`~stepforge.hdl.memory.word_addresses`), one region per run
    of consecutive addresses (a row at its pitch, a tile-major tensor's whole span)."""
    addr = word_addresses(info)
    cuts = [0] + [int(k) + 1 for k in np.flatnonzero(np.diff(addr) != 1)] + [len(addr)]
    return [[int(addr[a]), list(words[a:b])] for a, b in zip(cuts, cuts[1:])]


def tensor_span(info):
    """``(address, words)``: the memory a tensor spans, its padding included."""
    addr = word_addresses(info)
    return int(addr.min()), int(addr.max()) + 1 - int(addr.min())


def tensor_words(info, span_words):
    """A tensor's words in row-major order, picked from the words of :func:`tensor_span`."""
    addr = word_addresses(info)
    return [span_words[int(a)] for a in addr - addr.min()]


def _pack_stream(layout, tokens, wpb, word_bits):
    words = []
    for beat in to_beats(tokens):
        v = pack_beat(layout, beat)
        words += [(v >> (k * word_bits)) & ((1 << word_bits) - 1) for k in range(wpb)]
    return words


def _unpack_stream(layout, words, wpb, word_bits, nbeats):
    beats = []
    for k in range(nbeats):
        v = 0
        for j, w in enumerate(words[k * wpb:(k + 1) * wpb]):
            v |= int(w) << (j * word_bits)
        beats.append(unpack_beat(layout, v & ((1 << layout.size) - 1)))
    return beats


def job_regions(program, hw, tensors, inputs):
    """``(preload, readback)`` of a run of ``program`` (lowered to ``hw``).

    ``preload``: ``[[word address, [word, ...]], ...]``, the input tensors at their placements
    (a run of consecutive addresses at a time) and the host input streams packed as beats;
    ``readback``: ``{"tensor:NAME" or "stream:NAME": [word address, word count]}``, the
    outputs to read after the run. Shared by :func:`run_rtl` and the board driver
    (``stepforge.boards.host``).
    """
    g = hw.geometry
    layouts = {e.stream: e.layout for e in hw.edges}
    preload, readback = [], {}
    for name, info in hw.tensors.items():
        t = program.tensors[name]
        if t.role in ("input", "inout"):
            words = _words(array_to_bytes(tensors[name], t.dtype), g.word_bytes)
            preload += tensor_regions(info, words)
        if t.role in ("output", "inout"):
            readback[f"tensor:{name}"] = list(tensor_span(info))
    for node in program.nodes:
        if isinstance(node, Input):
            s = node.outputs[0]
            info = hw.streams_in[node.name]
            toks = from_nested(inputs[node.name], s.rank)
            toks = [t if type(t).__name__ == "Stop" else to_value(t, s.dtype, node.name) for t in toks]
            preload.append([info["base"], _pack_stream(layouts[s], toks, info["words_per_beat"], g.word_bits)])
        elif isinstance(node, Output):
            info = hw.streams_out[node.name]
            readback[f"stream:{node.name}"] = [info["base"], info["max_beats"] * info["words_per_beat"]]
    return preload, readback


def decode_readback(program, hw, readback, csrs):
    """``(tensors, streams)``: the words read back (``{key: [word, ...]}``, keys as
    :func:`job_regions` gives them) decoded into output tensors and output streams' tokens
    (a stream's length is its ``output.NAME.beats`` CSR)."""
    g = hw.geometry
    layouts = {e.stream: e.layout for e in hw.edges}
    out_tensors, out_streams = {}, {}
    for key, words in readback.items():
        kind, name = key.split(":", 1)
        if kind == "tensor":
            t = program.tensors[name]
            info = hw.tensors[name]
            out_tensors[name] = array_from_bytes(_bytes(tensor_words(info, words), g.word_bytes),
                                                 t.shape, t.dtype)
        else:
            node = program.node(name)
            s = node.inputs[0]
            info = hw.streams_out[name]
            n = csrs[f"output.{name}.beats"]
            beats = _unpack_stream(layouts[s], words, info["words_per_beat"], g.word_bits, n)
            out_streams[name] = from_beats(beats) if beats and beats[-1].last else beats
    return out_tensors, out_streams


def run_rtl(program, tensors=None, inputs=None, *, config=None, depths=None, stall=False,
            watchdog=10_000, max_cycles=50_000_000, waves=False, workdir=None, progress=None,
            compiled=None):
    """Compile, build and run ``program`` in Verilator; return an :class:`RTLResult`.

    ``compiled`` is what :func:`compile_program` returned for this ``program`` object (with
    ``config`` and ``depths``), to run it again without converting it again (a run under
    stalls after one without: the same Verilog, the same Verilator build)."""
    say = progress or (lambda msg: None)
    tensors, inputs = dict(tensors or {}), dict(inputs or {})
    timings = {}
    t0 = time.perf_counter()
    if compiled is None:
        say("lowering and converting to Verilog")
        compiled = compile_program(program, config, depths=depths)
    hw, system, text = compiled
    timings["compile"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    say(f"building with Verilator ({len(text.splitlines())} lines of Verilog)")
    sim = shell(text)
    build_dir = verilator.build(text + sim.verilog, sim.name, build_args=sim.build_args,
                                control=sim.control, waves=waves)
    timings["build"] = time.perf_counter() - t0

    preload, readback = job_regions(program, hw, tensors, inputs)

    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="stepforge-run-"))
    work.mkdir(parents=True, exist_ok=True)
    job = {"preload": preload, "readback": readback, "csrs": system.csr_map,
           "watchdog": watchdog, "stall": bool(stall), "max_cycles": max_cycles,
           "input_latency": sim.input_latency, "period_ns": sim.period_ns,
           "word_latency": hw.geometry.latency + MemoryModel.word_stages,
           "word_ready": hw.config.memory == "sdram", "result": str(work / "result.json")}
    (work / "job.json").write_text(json.dumps(job))
    t0 = time.perf_counter()
    say("simulating")
    ntests, nfailed = verilator.run(build_dir, sim.name, "stepforge.cocotb_tests.system_tb",
                                    test_dir=work, extra_env={"STEPFORGE_JOB": str(work / "job.json"),
                                                              "COCOTB_LOG_LEVEL": "WARNING"},
                                    waves=waves)
    timings["simulate"] = time.perf_counter() - t0
    if ntests != 1 or nfailed:
        raise verilator.VerilatorError(f"the system testbench failed ({nfailed} of {ntests}); see {work}")
    res = json.loads((work / "result.json").read_text())
    timings["run"] = res.get("run_seconds", 0.0)

    out_tensors, out_streams = decode_readback(program, hw, res["readback"], res["csrs"])
    return RTLResult(res["status"], out_tensors, out_streams, res["csrs"], hw, timings)


def deadlock_report(result):
    """Which FIFOs are full, which are empty, and what every unit waits on, in words."""
    hw, c = result.hw, result.csrs
    full, empty, lines = [], [], []
    for e in hw.edges:
        level = c[f"fifo.{e.name}.level"]
        if level >= e.depth:
            full.append(f"{e.name} ({e.src[0]}.{e.src[1]} -> {e.dst[0]}.{e.dst[1]}, depth {e.depth})")
        elif level == 0:
            empty.append(e.name)
    for u in hw.units:
        if u.shared:
            continue
        st = c[f"unit.{u.name}.state"]
        waits = [w for bit, w in ((1, "an input"), (2, "an output")) if st >> bit & 1]
        if waits:
            lines.append(f"  {u.name} ({u.kind}) waits on {' and '.join(waits)}")
    out = [f"deadlock: no beat moved for the watchdog's limit after {c['cycles']} cycles",
           f"full FIFOs: {', '.join(full) or 'none'}", f"empty FIFOs: {', '.join(empty) or 'none'}"]
    return "\n".join(out + lines)


def error_report(result):
    """The unit that raised the first error, its code, and what that code means."""
    hw, c = result.hw, result.csrs
    code = ErrorCode(c["error_code"])
    if c["error_unit"] == MEMORY_UNIT:
        rule = SDRAMViolation(c["sdram.violation"]).name
        return (f"error in the memory (the SDRAM chip's model): {code.name}, a command broke "
                f"the chip's rule {rule} after {c['cycles']} cycles")
    unit = hw.units[c["error_unit"]]
    text = (f"error in unit {unit.uid} {unit.name} ({unit.kind}, node {unit.node!r}): "
            f"{code.name} after {c['cycles']} cycles")
    if code == ErrorCode.OVER_BOUND:
        sym = hw.program.symbols
        bounded = []
        for s in list(unit.node.inputs) + list(unit.node.outputs):
            types = [s.dtype] + ([s.dtype.elem] if hasattr(s.dtype, "elem") else [])
            dims = list(s.shape) + [d for t in types for d in getattr(t, "shape", ())]
            for d in dims:
                if not isinstance(d, int):
                    for x in sorted(d.free_symbols, key=str):
                        b = sym.info(x).bound
                        entry = f"{x} <= {b}"
                        if b is not None and entry not in bounded:
                            bounded.append(entry)
        if bounded:
            text += f"\na size exceeded its declared bound: {', '.join(bounded)}"
    return text
