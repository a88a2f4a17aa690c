# amaranth: UnusedElaboratable=no
"""Every kind of hardware unit through Verilog, Verilator and cocotb, against the interpreter.

The Amaranth-simulator tests (``test_hdl_*.py``) prove each unit's behaviour; these prove that
the Verilog Amaranth emits for it behaves the same once Verilated. One representative
configuration of every unit kind runs one long seeded random stream (a few hundred beats,
ragged with empty fibres, legal re-framings where the unit accepts them) under random
valid/ready, and the decoded output tokens must equal the interpreter's token function on the
same input exactly (``values_equal``; EagerMerge through ``check_eager_merge``, since its order
is timing's). Every fed beat must be accepted once and no unit may raise ``status.error``.

Builds are few: the units of a group sit side by side in one :class:`Bundle` (ports renamed
``<tag>_<port>``), converted with :func:`stepforge.sim.rtl.verilator.convert` and built once (cached
by the Verilog's hash); one run of the generic testbench ``cocotb_tests/unit_tb.py`` drives every
port of the group at once. The PMU's ``refs`` go back into its ``buffers`` through the
testbench (the job's ``loops``).
"""

import json
import random
import time

import numpy as np
import pytest
import sympy
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from stepforge.compiler import functions as F
from stepforge.compiler.types import Bool, Index, Select, Tile, Tuple, int8, int16, int32
from stepforge.contract import arith
from stepforge.contract.beat import beat_layout, pack_beat, unpack_beat
from stepforge.contract.tokens import (Beat, canonical, format_tokens, from_beats, from_nested, is_stop,
                                  to_beats)
from stepforge.contract.values import pad_value, values_equal
from stepforge.hdl.addrgen import AddrGenUnit
from stepforge.hdl.broadcast import BroadcastUnit
from stepforge.hdl.eager_merge import EagerMergeUnit
from stepforge.hdl.expand import ExpandUnit
from stepforge.hdl.filter import FilterUnit
from stepforge.hdl.flatten import FlattenUnit
from stepforge.hdl.parallelize import ParallelizeUnit
from stepforge.hdl.partition import PartitionUnit
from stepforge.hdl.pcu import PCU
from stepforge.hdl.pmu import PMU, Replay
from stepforge.hdl.promote import PromoteUnit
from stepforge.hdl.reassemble import ReassembleUnit
from stepforge.hdl.repeat import RepeatStaticUnit
from stepforge.hdl.reshape import ReshapeUnit
from stepforge.hdl.retile import RetileStreamifyUnit
from stepforge.hdl.unit import ErrorCode
from stepforge.hdl.zip import ZipUnit
from stepforge.sim.rtl import verilator as vl
from stepforge.sim.ref.eager import check_eager_merge
from stepforge.sim.ref.ops_compute import accum, expander, flat_map, map_tokens
from stepforge.sim.ref.ops_memory import bufferize, streamify
from stepforge.sim.ref.ops_routing import parallelize, partition, reassemble
from stepforge.sim.ref.ops_shape import expand, flatten, promote, repeat_static, reshape, zip_streams

pytestmark = pytest.mark.slow

TB = "stepforge.cocotb_tests.unit_tb"
SEED = 20240611
ELEM = Tile(int8, 1, 2)
R_SYM = sympy.Symbol("R", positive=True, integer=True)


# -- the wrapper ----------------------------------------------------------------------------------

class Bundle(wiring.Component):
    """Several units side by side in one module; port ``p`` of unit ``tag`` is ``<tag>_<p>``.

    Parameters
    ----------
    units : dict of str to Component
        The units by tag. Every member keeps its flow, so a stream port ``in0`` of unit ``zip``
        becomes the Verilog ports ``zip_in0__payload``, ``zip_in0__valid``, ``zip_in0__ready``
        and the status port ``zip_status__error`` etc.
    """

    def __init__(self, units):
        self.units = dict(units)
        members = {}
        for tag, unit in self.units.items():
            for name, member in unit.signature.members.items():
                members[f"{tag}_{name}"] = member
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        for tag, unit in self.units.items():
            m.submodules[tag] = unit
            for name, member in unit.signature.members.items():
                outer, inner = getattr(self, f"{tag}_{name}"), getattr(unit, name)
                if member.is_signature:
                    wiring.connect(m, wiring.flipped(outer), inner)
                elif member.flow == Out:
                    m.d.comb += outer.eq(inner)
                else:
                    m.d.comb += inner.eq(outer)
        return m


# -- random streams -------------------------------------------------------------------------------

def tensors(rng, rank, elem, count, max_size=4, p_empty=0.15):
    """``count`` random rank-``rank`` tensors (nested lists; ``rank`` 0: elements), each level's
    fibre empty with probability ``p_empty``, else 1..``max_size`` long."""
    def tensor(k):
        if k == 0:
            return elem()
        n = 0 if rng.random() < p_empty else rng.randint(1, max_size)
        return [tensor(k - 1) for _ in range(n)]
    return [tensor(rank) for _ in range(count)]


def tile_of(rng, t, lo=None, hi=None):
    """A random tile of the static type ``t`` (values in the dtype's range by default)."""
    info = np.iinfo(t.dtype.np)
    lo, hi = info.min if lo is None else lo, info.max if hi is None else hi
    return lambda: np.array([[rng.randint(lo, hi) for _ in range(t.cols)] for _ in range(t.rows)],
                            t.dtype.np)


def reframe(beats, rng, *, split=0.0, bare=0.0):
    """A legal framing of ``beats``: an element's stop moved into a beat of its own with
    probability ``split``, ``Done`` into a bare beat with probability ``bare``."""
    out = []
    for b in beats:
        if b.has_data and b.stop and rng.random() < split:
            out += [Beat(b.data, 1, 0, 0), Beat(None, 0, b.stop, b.last)]
        else:
            out.append(b)
    if (out[-1].has_data or out[-1].stop) and rng.random() < bare:
        out[-1:] = [out[-1]._replace(last=0), Beat(None, 0, 0, 1)]
    return out


def feed(layout, tokens, rng=None, *, split=0.0, bare=0.0):
    """An input of a :class:`Case`: the layout and the beats of ``tokens`` (re-framed with
    ``rng``, see :func:`reframe`)."""
    beats = to_beats(tokens)
    return layout, (reframe(beats, rng, split=split, bare=bare) if rng else beats)


def project(tokens, i):
    return [t if is_stop(t) else t[i] for t in tokens]


# -- the cases ------------------------------------------------------------------------------------

class Case:
    """One unit under test: its inputs (beats), outputs (layouts) and the expected result.

    ``check(outputs)`` gets the decoded token list of every output port and asserts.
    """

    def __init__(self, unit, inputs, outputs, check, *, loops=None):
        self.unit, self.inputs, self.outputs, self.check = unit, inputs, outputs, check
        self.loops = loops or {}


def expect(want):
    """A check: every output's tokens equal ``want[port]`` exactly."""
    def check(got):
        for port, tokens in want.items():
            assert_tokens(got[port], tokens, port)
    return check


def assert_tokens(got, want, what):
    same = len(got) == len(want) and all(values_equal(g, w) for g, w in zip(got, want))
    if not same:
        k = next((i for i, (g, w) in enumerate(zip(got, want)) if not values_equal(g, w)),
                 min(len(got), len(want)))
        raise AssertionError(f"{what}: {len(got)} tokens, want {len(want)}; first difference at "
                             f"token {k}: got {format_tokens(got[k:k + 4])}, "
                             f"want {format_tokens(want[k:k + 4])}")


def case_flatten(rng):
    toks = from_nested(tensors(rng, 3, tile_of(rng, ELEM), 24, max_size=3), 3)
    unit = FlattenUnit(ELEM, 3, 0, 2)
    return Case(unit, {"in0": feed(beat_layout(ELEM, 3), toks)},
                {"out": beat_layout(ELEM, 1)}, expect({"out": flatten(toks, 0, 2)}))


def case_reshape(rng):
    toks = from_nested(tensors(rng, 2, tile_of(rng, ELEM), 40), 2)
    unit = ReshapeUnit(ELEM, 2, 3, 0, pad=-3, flags=True)
    data, flags = reshape(toks, 3, 0, pad_value(ELEM, -3))
    return Case(unit, {"in0": feed(beat_layout(ELEM, 2), toks, rng, split=0.4, bare=1)},
                {"out": beat_layout(ELEM, 3), "flags": beat_layout(Bool(), 3)},
                expect({"out": data, "flags": flags}))


def case_promote(rng):
    toks = from_nested(tensors(rng, 2, tile_of(rng, ELEM), 40), 2)
    unit = PromoteUnit(ELEM, 2, 1)
    return Case(unit, {"in0": feed(beat_layout(ELEM, 2), toks, rng, split=0.4, bare=1)},
                {"out": beat_layout(ELEM, 3)}, expect({"out": promote(toks, 1, 2)}))


def case_expand(rng):
    # a reference stream, and a data stream with one element per level-b fibre of it
    rank, b = 2, 1
    ref_nested = canonical(tensors(rng, rank, lambda: rng.randint(0, 9), 40), rank)
    ref = from_nested(ref_nested, rank)
    counter = iter(range(10**6))

    def collapse(t, level):
        if level == b:
            v = np.array([[next(counter) % 256 - 128, rng.randint(-128, 127)]], np.int8)
            for _ in range(b):
                v = [v]
            return v
        return [collapse(c, level - 1) for c in t]

    data = from_nested([collapse(t, rank) for t in ref_nested], rank)
    unit = ExpandUnit(ELEM, Index(), rank, b)
    return Case(unit, {"in0": feed(beat_layout(ELEM, rank), data, rng, split=0.4, bare=1),
                       "ref": feed(beat_layout(Index(), rank), ref, rng, split=0.4, bare=1)},
                {"out": beat_layout(ELEM, rank)}, expect({"out": expand(data, ref, b)}))


def case_repeat(rng):
    toks = from_nested(tensors(rng, 1, tile_of(rng, ELEM), 60), 1)
    unit = RepeatStaticUnit(ELEM, 1, 3)
    return Case(unit, {"in0": feed(beat_layout(ELEM, 1), toks, rng, split=0.4, bare=1)},
                {"out": beat_layout(ELEM, 2)}, expect({"out": repeat_static(toks, 3)}))


def case_zip(rng):
    types = (ELEM, Index(), ELEM)
    toks = from_nested(tensors(rng, 2, tile_of(rng, ELEM), 40), 2)
    streams = [toks,
               [t if is_stop(t) else rng.randrange(1 << 32) for t in toks],
               [t if is_stop(t) else (t ^ 0x5A).astype(np.int8) for t in toks]]
    unit = ZipUnit(types, 2)
    inputs = {f"in{k}": feed(beat_layout(types[k], 2), s, rng, split=0.4, bare=0.5)
              for k, s in enumerate(streams)}
    return Case(unit, inputs, {"out": beat_layout(Tuple(*types), 2)},
                expect({"out": zip_streams(streams)}))


def case_broadcast(rng):
    toks = from_nested(tensors(rng, 2, tile_of(rng, ELEM), 40), 2)
    unit = BroadcastUnit(ELEM, 2, 3, depth=2)
    return Case(unit, {"in0": feed(beat_layout(ELEM, 2), toks, rng, split=0.4, bare=1)},
                {f"out{k}": beat_layout(ELEM, 2) for k in range(3)},
                expect({f"out{k}": toks for k in range(3)}))


def masks_like(nested, depth, n, rng):
    """``nested`` with each sub-tensor ``depth`` levels down replaced by a random ``n``-bit mask."""
    def walk(x, k):
        return rng.randrange(1 << n) if k == 0 else [walk(c, k - 1) for c in x]
    return [walk(t, depth) for t in nested]


def case_partition(rng):
    rank, n, b = 2, 3, 1
    nested = tensors(rng, rank, tile_of(rng, ELEM), 40)
    data = from_nested(nested, rank)
    sel = from_nested(masks_like(nested, rank - b, n, rng), rank - b)
    want = partition(data, sel, n, b, rank=rank)
    unit = PartitionUnit(ELEM, rank, n, b)
    return Case(unit, {"in0": feed(beat_layout(ELEM, rank), data, rng, bare=1),
                       "select": feed(beat_layout(Select(n), rank - b), sel)},
                {f"out{i}": beat_layout(ELEM, b) for i in range(n)},
                expect({f"out{i}": want[i] for i in range(n)}))


def case_reassemble(rng):
    n, b, r = 3, 1, 1
    sel_nested = tensors(rng, r, lambda: rng.randrange(1 << n), 50)
    used = [0] * n
    for t in sel_nested:
        for mask in t:
            for j in range(n):
                used[j] += mask >> j & 1
    streams = [from_nested(tensors(rng, b, tile_of(rng, ELEM), u), b) for u in used]
    sel = from_nested(sel_nested, r)
    unit = ReassembleUnit(ELEM, n, b, r)
    inputs = {f"in{j}": feed(beat_layout(ELEM, b), streams[j], rng, bare=0.5)
              for j in range(n)}
    inputs["select"] = feed(beat_layout(Select(n), r), sel, rng, bare=1)
    return Case(unit, inputs, {"out": beat_layout(ELEM, r + b + 1)},
                expect({"out": reassemble(streams, sel, b, select_rank=r)}))


def case_eager_merge(rng):
    n, b = 3, 1
    streams = [from_nested(tensors(rng, b, tile_of(rng, ELEM), 30), b) for _ in range(n)]
    unit = EagerMergeUnit(ELEM, n, b)
    inputs = {f"in{j}": feed(beat_layout(ELEM, b), s, rng, bare=0.5)
              for j, s in enumerate(streams)}

    def check(got):
        check_eager_merge(streams, got["data"], got["select"], b)
    return Case(unit, inputs, {"data": beat_layout(ELEM, b), "select": beat_layout(Select(n), 0)},
                check)


def case_parallelize(rng):
    rank, n, b = 2, 3, 1
    toks = from_nested(tensors(rng, rank, tile_of(rng, ELEM), 40), rank)
    want = parallelize(toks, n, b, rank=rank)
    unit = ParallelizeUnit(ELEM, rank, n, b)
    return Case(unit, {"in0": feed(beat_layout(ELEM, rank), toks, rng, bare=1)},
                {f"out{i}": beat_layout(ELEM, b) for i in range(n)},
                expect({f"out{i}": want[i] for i in range(n)}))


def case_retile(rng):
    # dynamic-row tiles (0..3 rows of 3 int8), split into rows, b = 1
    rank, b, bound = 1, 1, 3
    t = Tile(int8, R_SYM, 3)

    def tile():
        rows = rng.randint(0, bound)
        return np.array([[rng.randint(-128, 127) for _ in range(3)] for _ in range(rows)],
                        np.int8).reshape(rows, 3)
    toks = from_nested(tensors(rng, rank, tile, 60), rank)
    want = flat_map(toks, expander(F.retile_rows(b=b), t), b)
    unit = RetileStreamifyUnit(t, rank, "row", b=b, row_bound=bound)
    return Case(unit, {"in0": feed(beat_layout(t, rank, row_bound=bound), toks, rng, split=0.4,
                                   bare=1)},
                {"out": beat_layout(unit.out_type, rank + b, row_bound=bound)},
                expect({"out": want}))


def case_filter(rng):
    rank = 2
    pairs = from_nested(tensors(rng, rank, lambda: (tile_of(rng, ELEM)(), rng.random() < 0.6), 40),
                        rank)
    data, flags = project(pairs, 0), project(pairs, 1)
    want = flat_map(zip_streams([data, flags]), expander(F.keep_if(True), Tuple(ELEM, Bool())), 0)
    unit = FilterUnit(ELEM, rank, keep=True)
    return Case(unit, {"in0": feed(beat_layout(ELEM, rank), data, rng, split=0.4, bare=1),
                       "flags": feed(beat_layout(Bool(), rank), flags, rng, split=0.4, bare=0)},
                {"out": beat_layout(ELEM, rank)}, expect({"out": want}))


def case_addrgen(rng):
    rank, shape, strides, scale, offset = 1, [2, 3], [-2, 5], 3, 1000
    toks = from_nested(tensors(rng, rank, lambda: rng.randint(0, 5000), 70), rank)
    fn = F.addr_gen(shape, strides, scale=scale, offset=offset)
    want = flat_map(toks, expander(fn, Index()), len(shape) - 1)
    unit = AddrGenUnit(Index(), rank, shape, strides, scale=scale, offset=offset)
    return Case(unit, {"in0": feed(beat_layout(Index(), rank), toks, rng, split=0.4, bare=1)},
                {"out": beat_layout(Index(), unit.out_rank)}, expect({"out": want}))


def case_pmu(rng):
    # block allocator (2-entry blocks, 5 of them), buffers of one rank-1 fibre, each replayed twice
    rank, b, repeat = 2, 1, 2
    toks = from_nested(tensors(rng, rank, tile_of(rng, ELEM), 40), rank)
    unit = PMU(ELEM, rank, b, (4,), mode="dynamic", block_size=2, blocks=5,
               readers=[Replay(repeat)])
    want = streamify(bufferize(toks, b), b, repeat=repeat)
    buffers = beat_layout(unit.buffer_type, rank - b)
    return Case(unit, {"in0": feed(beat_layout(ELEM, rank), toks, rng, split=0.4, bare=1),
                       "buffers": (buffers, [])},
                {"refs": buffers, "out": beat_layout(ELEM, unit.readers[0].out_rank(rank, b))},
                expect({"out": want}), loops={"refs": "buffers"})


def case_pcu_map(rng):
    t = Tile(int16, 2, 2)
    fn = F.function(lambda x: F.silu(x) * x - x.row_max())
    near = tile_of(rng, t, -6 << 8, 6 << 8)
    toks = from_nested(tensors(rng, 1, lambda: near(), 60), 1)
    unit = PCU(fn, t, 1, lanes=2)
    want = map_tokens(toks, lambda x: arith.evaluate(fn, x))
    return Case(unit, {"in0": feed(beat_layout(t, 1), toks)},
                {"out": beat_layout(unit.out_type, unit.out_rank)}, expect({"out": want}))


def case_pcu_mac(rng):
    rank, b = 2, 1
    at, wt = Tile(int8, 2, 3), Tile(int8, 3, 2)
    init = F.zeros(Tile(int32, 2, 2))
    pairs = from_nested(tensors(rng, rank, lambda: (tile_of(rng, at)(), tile_of(rng, wt)()), 30),
                        rank)
    ta, tw = project(pairs, 0), project(pairs, 1)
    unit = PCU(F.mac, [at, wt], rank, mode="accum", init=init, b=b, multipliers=4)
    want = accum(zip_streams([ta, tw]), lambda acc, x: arith.evaluate(F.mac, acc, *x),
                 arith.init_value(init), b)
    return Case(unit, {"in0": feed(beat_layout(at, rank), ta),
                       "in1": feed(beat_layout(wt, rank), tw)},
                {"out": beat_layout(unit.out_type, unit.out_rank)}, expect({"out": want}))


#: group -> {tag: case factory}; one Verilator build per group.
GROUPS = {
    "shape_routing": {
        "flatten": case_flatten, "reshape": case_reshape, "promote": case_promote,
        "expand": case_expand, "repeat": case_repeat, "zip": case_zip, "broadcast": case_broadcast,
        "partition": case_partition, "reassemble": case_reassemble,
        "eager_merge": case_eager_merge, "parallelize": case_parallelize,
        "retile": case_retile, "filter": case_filter, "addrgen": case_addrgen,
    },
    "memory_compute": {"pmu": case_pmu, "pcu_map": case_pcu_map, "pcu_mac": case_pcu_mac},
}
TAGS = [(group, tag) for group, cases in GROUPS.items() for tag in cases]


# -- running a group ------------------------------------------------------------------------------

class GroupRun:
    """The outcome of one group: decoded outputs per tag, timings, statuses."""

    def __init__(self, cases, result, timings, lines, build_dir):
        self.cases, self.timings, self.lines, self.build_dir = cases, timings, lines, build_dir
        self.outputs = {tag: {} for tag in cases}
        self.received = {tag: {} for tag in cases}    # raw beat counts per output
        self.accepted = {tag: {} for tag in cases}
        self.status = {}
        for tag, case in cases.items():
            for port, layout in case.outputs.items():
                bits = result["outputs"][f"{tag}_{port}"]
                self.received[tag][port] = len(bits)
                self.outputs[tag][port] = from_beats([unpack_beat(layout, v) for v in bits])
            for port in case.inputs:
                self.accepted[tag][port] = result["accepted"][f"{tag}_{port}"]
            self.status[tag] = tuple(result["status"][f"{tag}_status"])
        self.cycles = result["cycles"]


def run_group(group, tmp_path, *, seed=SEED, valid_prob=0.7, ready_prob=0.6):
    rng = random.Random(f"{seed}-{group}")
    cases = {tag: make(rng) for tag, make in GROUPS[group].items()}
    timings = {}
    t0 = time.perf_counter()
    verilog = vl.convert(Bundle({tag: c.unit for tag, c in cases.items()}), name=group)
    timings["convert"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    build_dir = vl.build(verilog, group)
    timings["build"] = time.perf_counter() - t0
    job = {"inputs": {}, "outputs": {}, "loops": {}, "status": [],
           "seed": seed, "valid_prob": valid_prob, "ready_prob": ready_prob,
           "max_cycles": 100_000, "idle_limit": 2000, "result": str(tmp_path / "result.json")}
    for tag, case in cases.items():
        for port, (layout, beats) in case.inputs.items():
            job["inputs"][f"{tag}_{port}"] = [pack_beat(layout, bt) for bt in beats]
        for port, layout in case.outputs.items():
            job["outputs"][f"{tag}_{port}"] = layout.size - 1
        for out, inp in case.loops.items():
            job["loops"][f"{tag}_{out}"] = f"{tag}_{inp}"
        job["status"].append(f"{tag}_status")
    (tmp_path / "job.json").write_text(json.dumps(job))
    t0 = time.perf_counter()
    ntests, nfailed = vl.run(build_dir, group, TB, test_dir=tmp_path,
                             extra_env={"STEPFORGE_UNIT_JOB": tmp_path / "job.json"}, seed=seed)
    timings["simulate"] = time.perf_counter() - t0
    assert (ntests, nfailed) == (1, 0), f"the cocotb run of {group} failed; see the output above"
    result = json.loads((tmp_path / "result.json").read_text())
    return GroupRun(cases, result, timings, len(verilog.splitlines()), build_dir)


_RUNS = {}  # group -> GroupRun, or the exception its run raised (one run per group and process)


@pytest.fixture
def group_run(tmp_path_factory):
    def get(group):
        if group not in _RUNS:
            try:
                r = _RUNS[group] = run_group(group, tmp_path_factory.mktemp(group))
            except Exception as exc:
                _RUNS[group] = exc
                raise
            print(f"{group}: {r.lines} lines of Verilog, convert {r.timings['convert']:.1f} s, "
                  f"build {r.timings['build']:.1f} s, simulate {r.timings['simulate']:.1f} s, "
                  f"{r.cycles} cycles")
        if isinstance(_RUNS[group], Exception):
            pytest.fail(f"the run of group {group} failed: {_RUNS[group]!r}")
        return _RUNS[group]
    return get


@pytest.mark.parametrize("group,tag", TAGS, ids=[t for _, t in TAGS])
def test_unit_in_verilator_matches_interpreter(group_run, group, tag):
    run = group_run(group)
    case = run.cases[tag]
    error, code = run.status[tag]
    assert error == 0, f"{tag} raised {ErrorCode(code).name}"
    fed = {port: len(beats) for port, (_, beats) in case.inputs.items()}
    for out, inp in case.loops.items():  # fed back: every beat that came out went back in
        fed[inp] = run.received[tag][out]
    assert run.accepted[tag] == fed, "every beat fed is accepted once"
    assert sum(fed.values()) >= 100, "a long stream"
    case.check(run.outputs[tag])


#: Verilator warnings that mean the Verilated model may not behave as Amaranth's simulator does:
#: combinational loops, latches, several drivers, and (Yosys writes a constant driver of part of
#: an output ``reg`` as ``always @*`` with nothing to wait on) blocks that never run.
TROUBLE = ("UNOPTFLAT", "LATCH", "MULTIDRIVEN", "COMBDLY", "ALWCOMBORDER", "ALWNEVER")


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_build_log_has_no_trouble(group_run, group):
    run = group_run(group)
    log = (run.build_dir / "build.log").read_text(errors="replace")
    bad = [line for line in log.splitlines()
           if line.startswith("%Warning-") and line.split(":")[0][9:] in TROUBLE]
    assert not bad, "\n".join(bad)


def test_bundle_ports():
    """The wrapper renames ports ``<tag>_<port>`` and keeps their flows."""
    unit = FlattenUnit(ELEM, 2, 0, 1)
    bundle = Bundle({"f": unit})
    verilog = vl.convert(bundle, name="bundle")
    for port in ("input [19:0] f_in0__payload", "output f_in0__ready", "output f_out__valid",
                 "input f_out__ready", "output f_status__error"):
        assert f"{port};" in verilog or f"{port} " in verilog, port
