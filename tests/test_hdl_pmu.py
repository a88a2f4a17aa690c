"""The PMU (Bufferize + Streamify over on-chip memory) against the reference interpreter.

Most tests run a :class:`Loop`: a PMU whose ``refs`` output feeds every read side's ``buffers``
through an edge FIFO, as a program places Bufferize and Streamify. Outputs are compared token for
token with ``sim.ref.ops_memory.bufferize``/``streamify``; every run also checks that every input beat
was taken and that every block is back in the free list at the end (``fin``).
"""

import gc
import math
import sys

import numpy as np
import pytest
from amaranth.hdl import Array, Fragment, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import Out
from amaranth.sim import Simulator
from hypothesis import assume, given, settings, strategies as st

from stepforge.compiler.errors import StepRuntimeError
from stepforge.compiler.types import Bool, Index, Tile, int8
from stepforge.contract.beat import beat_layout, beat_signature, pack_beat, unpack_beat
from stepforge.contract.tokens import Beat, from_beats, from_nested, is_stop, stop, to_beats
from stepforge.contract.values import values_equal
from stepforge.hdl.fifo import StreamFIFO
from stepforge.hdl.pmu import PMU, Replay
from stepforge.hdl.unit import ErrorCode, StatusSignature
from stepforge.sim.ref.ops_memory import bufferize, streamify
from stepforge.sim.rtl.testbench import check_ready_to_valid, simulate

from .test_tokens import ragged

ELEM = Tile(int8, 1, 2)
TILES = st.integers(-128, 127).map(lambda v: np.array([[v, v ^ 0x55]], np.int8))
FIN_LAYOUT = beat_layout(Index(), 0)
REF_TYPE = Bool()


def tile(v):
    return np.array([[v, -v]], np.int8)


# -- harness -----------------------------------------------------------------------------------

class Loop(wiring.Component):
    """A PMU whose ``refs`` feed every read side's ``buffers`` through one FIFO each.

    ``refs`` is broadcast in lock step into one :class:`StreamFIFO` per read side (the edge
    between Bufferize and Streamify). The PMU's ``in0``, ``ref*``, ``out*``, ``status`` and
    ``free_blocks`` are exposed under the same names. ``fin`` offers one beat (data = ``free_blocks``, ``last``)
    once every ``out`` has sent ``last`` and the PMU is idle, so a testbench that waits for
    every output also reads the final free-list level.

    Parameters
    ----------
    pmu : stepforge.hdl.pmu.PMU
    fifo_depth : int, default 2
        Depth of the edge FIFOs.
    route : {"broadcast", "alternate"}
        ``"alternate"`` sends buffer ``j`` to read side ``j % k`` only (a routing operator in
        front of several Streamify nodes; rank-0 buffer streams only) and ends every read side's
        stream with the last beat (a bare ``Done`` where the last buffer goes elsewhere).
    """

    def __init__(self, pmu, fifo_depth=2, route="broadcast"):
        self.pmu = pmu
        self.fifo_depth = fifo_depth
        self.route = route
        members = {"in0": pmu.signature.members["in0"]}
        for i, r in enumerate(pmu.readers):
            _, nr, no = pmu.port_names(i)
            if r.expand_rank is not None:
                members[nr] = pmu.signature.members[nr]
            members[no] = pmu.signature.members[no]
        members["status"] = Out(StatusSignature)
        members["free_blocks"] = Out(range(pmu.blocks + 1))
        members["fin"] = Out(beat_signature(Index(), 0))
        super().__init__(members)

    def __repr__(self):
        return f"Loop({self.pmu!r}, fifo_depth={self.fifo_depth}, route={self.route!r})"

    def elaborate(self, platform):
        m = Module()
        pmu = self.pmu
        m.submodules.pmu = pmu
        wiring.connect(m, wiring.flipped(self.in0), pmu.in0)
        wiring.connect(m, pmu.status, wiring.flipped(self.status))
        m.d.comb += self.free_blocks.eq(pmu.free_blocks)
        edges = []
        for i, r in enumerate(pmu.readers):
            nb, nr, no = pmu.port_names(i)
            m.submodules[f"edge{i}"] = q = StreamFIFO(beat_layout(pmu.buffer_type, pmu.rank - pmu.b),
                                                       self.fifo_depth)
            edges.append(q)
            wiring.connect(m, q.o, getattr(pmu, nb))
            if r.expand_rank is not None:
                wiring.connect(m, wiring.flipped(getattr(self, nr)), getattr(pmu, nr))
            wiring.connect(m, getattr(pmu, no), wiring.flipped(getattr(self, no)))
        all_ready = Signal(name="all_ready")
        m.d.comb += all_ready.eq(sum(q.i.ready for q in edges) == len(edges))
        if self.route == "broadcast":
            for q in edges:
                m.d.comb += [q.i.payload.eq(pmu.refs.payload),
                             q.i.valid.eq(pmu.refs.valid & all_ready)]
            m.d.comb += pmu.refs.ready.eq(all_ready)
        else:
            k = len(edges)
            turn = Signal(range(max(k, 2)), name="turn")
            last = pmu.refs.payload.last
            bare_done = Signal.like(pmu.refs.payload, name="bare_done")
            m.d.comb += bare_done.last.eq(1)
            for j, q in enumerate(edges):
                mine = turn == j
                m.d.comb += [q.i.payload.eq(Mux(mine, pmu.refs.payload, bare_done)),
                             q.i.valid.eq(pmu.refs.valid & Mux(last, all_ready, mine))]
            m.d.comb += pmu.refs.ready.eq(Mux(last, all_ready, Array(q.i.ready for q in edges)[turn]))
            with m.If(pmu.refs.valid & pmu.refs.ready):
                m.d.sync += turn.eq(Mux(turn == k - 1, 0, turn + 1))
        seen = []
        for i in range(len(pmu.readers)):
            o = getattr(self, pmu.port_names(i)[2])
            s = Signal(name=f"done{i}")
            with m.If(o.valid & o.ready & o.payload.last):
                m.d.sync += s.eq(1)
            seen.append(s)
        fin_v = Signal(name="fin_valid")
        with m.If(sum(seen) == len(seen)):
            m.d.sync += fin_v.eq(~pmu.status.busy)
        m.d.comb += [self.fin.valid.eq(fin_v & ~pmu.status.busy),
                     self.fin.payload.data.eq(pmu.free_blocks),
                     self.fin.payload.has_data.eq(1), self.fin.payload.last.eq(1)]
        return m


def run_beats(dut, feeds, outputs, cycles, *, ready=None, sample=(), start=None):
    """Feed raw beats, ``valid`` high whenever a beat is left; record every transfer's cycle.

    Parameters
    ----------
    dut : Component
    feeds : dict of str to (layout, list of Beat)
    outputs : dict of str to layout
    cycles : int
    ready : callable, optional
        ``ready(port, cycle) -> bool``; always ready by default.
    sample : sequence of str
        Names of ``dut`` attributes (signals) sampled every cycle into ``"samples"``.
    start : dict of str to int, optional
        The cycle from which an input port offers its beats (default 0).

    Returns
    -------
    dict
        ``"in"``: port -> accept cycles; ``"out"``: port -> list of (cycle, Beat);
        ``"error"``, ``"code"``, ``"free_blocks"`` (when the dut has it): final values.
    """
    ready = ready or (lambda port, cycle: True)
    res = {"in": {n: [] for n in feeds}, "out": {n: [] for n in outputs},
           "samples": {n: [] for n in sample}}
    packed = {n: [pack_beat(lay, bt) for bt in beats] for n, (lay, beats) in feeds.items()}

    async def bench(ctx):
        sent = {n: 0 for n in feeds}
        for cyc in range(cycles):
            for n in feeds:
                port = getattr(dut, n)
                more = sent[n] < len(packed[n]) and cyc >= (start or {}).get(n, 0)
                ctx.set(port.valid, more)
                ctx.set(Value.cast(port.payload), packed[n][sent[n]] if more else 0)
            for n in outputs:
                ctx.set(getattr(dut, n).ready, ready(n, cyc))
            takes = {n: bool(ctx.get(getattr(dut, n).valid)) and bool(ctx.get(getattr(dut, n).ready))
                     for n in feeds}
            for n, lay in outputs.items():
                port = getattr(dut, n)
                if ctx.get(port.valid) and ctx.get(port.ready):
                    res["out"][n].append((cyc, unpack_beat(lay, ctx.get(Value.cast(port.payload)))))
            for n in sample:
                res["samples"][n].append(ctx.get(getattr(dut, n)))
            await ctx.tick()
            for n, t in takes.items():
                if t:
                    res["in"][n].append(cyc)
                    sent[n] += 1
        res["error"] = ctx.get(dut.status.error)
        res["code"] = ctx.get(dut.status.code)
        if hasattr(dut, "free_blocks"):
            res["free_blocks"] = ctx.get(dut.free_blocks)

    top = Module()
    top.submodules.dut = dut
    hb = Signal(name="heartbeat")
    top.d.sync += hb.eq(~hb)
    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return res


def run_loop(pmu, tokens, *, refs=None, fifo_depth=2, route="broadcast", valid_p=1.0,
             ready_p=1.0, seed=0):
    """Simulate ``Loop(pmu)`` on input ``tokens`` (and reference streams ``refs[i]``)."""
    loop = Loop(pmu, fifo_depth, route)
    inputs = {"in0": (beat_layout(ELEM, pmu.rank), tokens)}
    outputs = {"fin": FIN_LAYOUT}
    for i, r in enumerate(pmu.readers):
        _, nr, no = pmu.port_names(i)
        if r.expand_rank is not None:
            inputs[nr] = (beat_layout(REF_TYPE, pmu.rank - pmu.b), refs[i])
        outputs[no] = beat_layout(ELEM, r.out_rank(pmu.rank, pmu.b))
    return simulate(loop, inputs, outputs, valid_p=valid_p, ready_p=ready_p, seed=seed,
                    max_cycles=5000, idle_limit=100)


def assert_tokens(got, want):
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want):
        assert is_stop(g) == is_stop(w) and values_equal(g, w), (got, want)


def assert_clean(run, pmu, tokens):
    assert run.error == 0, ErrorCode(run.code)
    assert run.accepted["in0"] == len(to_beats(tokens))
    assert run.outputs["fin"] == [pmu.blocks]  # every block back in the free list


modes = st.sampled_from(["static", "dynamic"])
handshakes = st.tuples(st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.integers(0, 2**16))


class Make:
    """A PMU to build in the test (hypothesis may discard a drawn case: nothing is elaborated)."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs

    def __call__(self):
        return PMU(*self.args, **self.kwargs)

    def __repr__(self):
        args = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"PMU({', '.join(args)})"


def make_pmu(draw, rank, b, shape, readers):
    """A PMU in a drawn mode: static N-buffering or a block allocator with few blocks."""
    if draw(modes) == "static":
        return Make(ELEM, rank, b, shape, slots=draw(st.integers(1, 3)), readers=readers)
    block_size = draw(st.integers(1, 4))
    need = -(-math.prod(shape) // block_size)
    return Make(ELEM, rank, b, shape, mode="dynamic", block_size=block_size,
                blocks=draw(st.integers(need, need + 3)), readers=readers)


# -- Bufferize -> Streamify ----------------------------------------------------------------------

@st.composite
def plain_cases(draw, repeat):
    rank = draw(st.integers(1, 3))
    b = draw(st.integers(1, rank))
    tensors = draw(ragged(rank, elems=TILES, max_size=3))
    n = draw(st.integers(1, 3)) if repeat else None
    pmu = make_pmu(draw, rank, b, (3,) * b, [Replay(n)])
    return pmu, from_nested(tensors, rank), draw(st.integers(1, 3))


@settings(deadline=None, max_examples=25)
@given(plain_cases(repeat=False), handshakes)
def test_round_trip_gives_back_the_input(case, hs):
    pmu, tokens, depth = case
    pmu = pmu()
    run = run_loop(pmu, tokens, fifo_depth=depth, valid_p=hs[0], ready_p=hs[1], seed=hs[2])
    assert_tokens(run.outputs["out"], tokens)
    assert_tokens(run.outputs["out"], streamify(bufferize(tokens, pmu.b), pmu.b))
    assert_clean(run, pmu, tokens)


@settings(deadline=None, max_examples=25)
@given(plain_cases(repeat=True), handshakes)
def test_static_repeat_matches_interpreter(case, hs):
    pmu, tokens, depth = case
    pmu = pmu()
    run = run_loop(pmu, tokens, fifo_depth=depth, valid_p=hs[0], ready_p=hs[1], seed=hs[2])
    want = streamify(bufferize(tokens, pmu.b), pmu.b, repeat=pmu.readers[0].repeat)
    assert_tokens(run.outputs["out"], want)
    assert_clean(run, pmu, tokens)


@st.composite
def ref_cases(draw):
    """Buffers with ``c`` trailing size-1 levels, and a reference with real ones there."""
    c = draw(st.integers(1, 2))
    outer = draw(st.integers(0, 1))
    b = draw(st.integers(1, 2))
    rank = outer + c + b

    def slot(leaf):
        for _ in range(c):
            leaf = [leaf]
        return leaf
    leaves = ragged(b - 1, elems=TILES, max_size=3).map(slot)
    data = from_nested(draw(ragged(outer, elems=leaves, max_size=3)), rank)
    buffers = bufferize(data, b)
    ref = []
    for i, t in enumerate(buffers):
        if is_stop(t):
            continue
        level = buffers[i + 1].level
        assert level >= c
        part = from_nested([draw(ragged(c - 1, elems=st.just(True), max_size=3))], c)
        ref += part[:-1] + [stop(level)]
    pmu = make_pmu(draw, rank, b, (3,) * b, [Replay(expand_rank=c, ref_type=REF_TYPE)])
    return pmu, data, buffers, ref


@settings(deadline=None, max_examples=25)
@given(ref_cases(), handshakes)
def test_reference_driven_replay_matches_interpreter(case, hs):
    pmu, data, buffers, ref = case
    pmu = pmu()
    run = run_loop(pmu, data, refs=[ref], valid_p=hs[0], ready_p=hs[1], seed=hs[2])
    want = streamify(buffers, pmu.b, ref=ref, expand_rank=pmu.readers[0].expand_rank)
    assert_tokens(run.outputs["out"], want)
    assert_clean(run, pmu, data)
    assert run.accepted["ref"] == len(to_beats(ref))


@st.composite
def order_cases(draw):
    rows, cols = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    size = rows * cols
    mat = st.lists(st.lists(TILES, min_size=cols, max_size=cols), min_size=rows, max_size=rows)
    rank = draw(st.integers(2, 3))
    if rank == 2:
        tensors = draw(st.lists(mat, max_size=3))
    else:
        tensors = draw(st.lists(st.lists(mat, min_size=1, max_size=2), max_size=2))
    if draw(st.booleans()):
        order = ((cols, rows), (1, cols), 0)  # the transpose
    else:
        nd = draw(st.integers(1, 3))
        out_shape = tuple(draw(st.lists(st.integers(1, 3), min_size=nd, max_size=nd)))
        stride = tuple(draw(st.lists(st.integers(-3, 3), min_size=nd, max_size=nd)))
        lo = sum(min(0, (n - 1) * s) for n, s in zip(out_shape, stride))
        hi = sum(max(0, (n - 1) * s) for n, s in zip(out_shape, stride))
        assume(hi - lo < size)
        order = (out_shape, stride, draw(st.integers(-lo, size - 1 - hi)))
    repeat = draw(st.sampled_from([None, 2]))
    pmu = Make(ELEM, rank, 2, (rows, cols), slots=draw(st.integers(1, 3)),
               readers=[Replay(repeat, order=order)])
    return pmu, from_nested(tensors, rank)


@settings(deadline=None, max_examples=20)
@given(order_cases(), handshakes)
def test_affine_order_matches_interpreter(case, hs):
    pmu, tokens = case
    pmu = pmu()
    r = pmu.readers[0]
    run = run_loop(pmu, tokens, valid_p=hs[0], ready_p=hs[1], seed=hs[2])
    want = streamify(bufferize(tokens, 2), 2, repeat=r.repeat, order=r.order, shape=pmu.shape)
    assert_tokens(run.outputs["out"], want)
    assert_clean(run, pmu, tokens)


def test_transpose_example():
    m = [[tile(1), tile(2), tile(3)], [tile(4), tile(5), tile(6)]]
    tokens = from_nested([m], 2)
    pmu = PMU(ELEM, 2, 2, (2, 3), readers=[Replay(order=((3, 2), (1, 3)))])
    run = run_loop(pmu, tokens)
    assert_tokens(run.outputs["out"], from_nested([[[m[0][j], m[1][j]] for j in range(3)]], 2))
    assert_clean(run, pmu, tokens)


@st.composite
def two_reader_cases(draw):
    rank = draw(st.integers(1, 3))
    b = draw(st.integers(1, rank))
    tensors = draw(ragged(rank, elems=TILES, max_size=3))
    readers = [Replay(draw(st.sampled_from([None, 1, 2]))) for _ in range(2)]
    return make_pmu(draw, rank, b, (3,) * b, readers), from_nested(tensors, rank)


@settings(deadline=None, max_examples=15)
@given(two_reader_cases(), handshakes, st.integers(1, 3))
def test_two_consumers_share_each_buffer(case, hs, depth):
    """Two read sides (a broadcast reference): a buffer is freed after both last replays."""
    pmu, tokens = case
    pmu = pmu()
    run = run_loop(pmu, tokens, fifo_depth=depth, valid_p=hs[0], ready_p=hs[1], seed=hs[2])
    refs = bufferize(tokens, pmu.b)
    for i, r in enumerate(pmu.readers):
        assert_tokens(run.outputs[f"out{i}"], streamify(refs, pmu.b, repeat=r.repeat))
    assert_clean(run, pmu, tokens)


@settings(deadline=None, max_examples=10)
@given(st.integers(1, 2).flatmap(lambda b: st.tuples(
        st.just(b), st.lists(ragged(b - 1, elems=TILES, max_size=3), max_size=6))),
       st.lists(st.sampled_from([None, 2]), min_size=2, max_size=3), modes, handshakes)
def test_consumers_that_miss_buffers_release_them_at_their_end(case, repeats, mode, hs):
    """Buffers routed to one of several read sides: the others release them when they end.

    A read side holds every buffer it might still receive until its stream ends, so the PMU
    needs room for all the buffers in flight (here: all of them).
    """
    b, tensors = case
    tokens = from_nested(tensors, b)
    n = len(tensors) + 1
    if mode == "dynamic":
        kw = dict(mode="dynamic", block_size=2, blocks=n * -(-3 ** b // 2))
    else:
        kw = dict(slots=n)
    pmu = PMU(ELEM, b, b, (3,) * b, readers=[Replay(r) for r in repeats], **kw)
    run = run_loop(pmu, tokens, route="alternate", valid_p=hs[0], ready_p=hs[1], seed=hs[2])
    refs = bufferize(tokens, b)
    for i, r in enumerate(pmu.readers):
        assert_tokens(run.outputs[f"out{i}"], streamify(refs[i::len(repeats)], b, repeat=r.repeat))
    assert_clean(run, pmu, tokens)


def test_split_stops_on_in0_are_merged():
    """``in0`` accepts any framing: a stop in its own beat joins the element it follows."""
    tokens = from_nested([[[tile(1), tile(2)], [tile(3)]], [[]], [[tile(4)]]], 2)
    split = []
    for bt in to_beats(tokens):
        if bt.has_data and bt.stop:
            split += [Beat(bt.data, 1, 0, 0), Beat(None, 0, bt.stop, bt.last)]
        else:
            split.append(bt)
    for b, shape in ((1, (2,)), (2, (2, 2))):
        pmu = PMU(ELEM, 2, b, shape, readers=[Replay(2)])
        res = run_beats(Loop(pmu), {"in0": (beat_layout(ELEM, 2), split)},
                        {"out": beat_layout(ELEM, 3 - b + b), "fin": FIN_LAYOUT}, 80)
        assert res["error"] == 0 and len(res["in"]["in0"]) == len(split)
        got = from_beats([bt for _, bt in res["out"]["out"]])
        assert_tokens(got, streamify(bufferize(tokens, b), b, repeat=2))
        assert res["out"]["fin"][0][1].data == 2


def test_empty_stream():
    pmu = PMU(ELEM, 2, 1, (2,), readers=[Replay(3)])
    run = run_loop(pmu, [])
    assert run.outputs["out"] == [] and run.beats["out"] == [Beat(None, 0, 0, 1)]
    assert_clean(run, pmu, [])


# -- errors ----------------------------------------------------------------------------------

OVER = [  # (rank, b, shape, mode, tokens)
    (1, 1, (2,), "static", [tile(1), tile(2), tile(3), stop(1)]),
    (2, 2, (2, 3), "static", from_nested([[[tile(1)], [tile(2)], [tile(3)]]], 2)),
    (2, 2, (2, 3), "dynamic", from_nested([[[tile(1)], [], []]], 2)),
    (3, 2, (2, 2), "dynamic", from_nested([[[[tile(1), tile(2)]], [[tile(1)] * 3]]], 3)),
    (2, 1, (4,), "dynamic", from_nested([[[tile(1)] * 4, [tile(2)] * 5]], 2)),
]


@pytest.mark.parametrize("rank, b, shape, mode, tokens", OVER)
def test_over_bound(rank, b, shape, mode, tokens):
    with pytest.raises(StepRuntimeError, match="over its"):
        bufferize(tokens, b, shape=shape)
    kw = dict(mode="dynamic", block_size=1, blocks=math.prod(shape) + 4) if mode == "dynamic" else {}
    run = run_loop(PMU(ELEM, rank, b, shape, **kw), tokens)
    assert run.error == 1 and run.code == ErrorCode.OVER_BOUND


@pytest.mark.parametrize("tokens", [
    [tile(1), stop(1), tile(2)],          # the stream ends inside a buffer
    [tile(1), stop(2), stop(1)],          # ... after an empty fibre
])
def test_unclosed_buffer(tokens):
    with pytest.raises(StepRuntimeError, match="unclosed"):
        bufferize(tokens, 2)
    run = run_loop(PMU(ELEM, 2, 2, (2, 2)), tokens)
    assert run.error == 1 and run.code == ErrorCode.UNCLOSED_BUFFER


def test_unclosed_buffer_before_a_bare_done():
    pmu = PMU(ELEM, 2, 2, (2, 2))
    beats = [Beat(tile(1), 1, 1, 0), Beat(None, 0, 0, 1)]
    res = run_beats(Loop(pmu), {"in0": (beat_layout(ELEM, 2), beats)}, {"out": beat_layout(ELEM, 2)}, 20)
    assert res["error"] == 1 and res["code"] == ErrorCode.UNCLOSED_BUFFER


REF_BAD = [  # (data, c, ref): rank-2 data, b = 1, buffers [D, 1]
    (from_nested([[[tile(1)]]], 2), 1, [True, stop(1), True, stop(1)]),    # a buffer too few
    (from_nested([[[tile(1)]], [[tile(2)]]], 2), 1, [True, stop(1)]),      # a buffer left over
    (from_nested([[[tile(1)]], [[tile(2)]]], 2), 1, []),                   # no reference at all
]


@pytest.mark.parametrize("data, c, ref", REF_BAD)
def test_ref_mismatch(data, c, ref):
    buffers = bufferize(data, 1)
    with pytest.raises(StepRuntimeError):
        streamify(buffers, 1, ref=ref, expand_rank=c)
    pmu = PMU(ELEM, 2, 1, (2,), readers=[Replay(expand_rank=c, ref_type=REF_TYPE)])
    res = run_beats(Loop(pmu), {"in0": (beat_layout(ELEM, 2), to_beats(data)),
                                "ref": (beat_layout(REF_TYPE, 1), to_beats(ref))},
                    {"out": beat_layout(ELEM, 2)}, 60)
    assert res["error"] == 1 and res["code"] == ErrorCode.REF_MISMATCH


def test_ref_stop_mismatch():
    """The reference ends a repetition with S2 where the buffer element carries S1."""
    data = from_nested([[[[tile(1)]], [[tile(2)]]]], 3)  # buffers [[B0], [B1]]: B0 S1, B1 S2
    buffers = bufferize(data, 1)
    ref = [True, stop(2), True, stop(2)]
    with pytest.raises(StepRuntimeError, match="ends a repetition"):
        streamify(buffers, 1, ref=ref, expand_rank=1)
    pmu = PMU(ELEM, 3, 1, (2,), readers=[Replay(expand_rank=1, ref_type=REF_TYPE)])
    run = run_loop(pmu, data, refs=[ref])
    assert run.error == 1 and run.code == ErrorCode.REF_MISMATCH


def test_split_stop_on_ref_is_flagged():
    data = from_nested([[[tile(1)]]], 2)
    ref = [Beat(1, 1, 0, 0), Beat(None, 0, 1, 1)]  # the stop of the element in its own beat
    pmu = PMU(ELEM, 2, 1, (2,), readers=[Replay(expand_rank=1, ref_type=REF_TYPE)])
    res = run_beats(Loop(pmu), {"in0": (beat_layout(ELEM, 2), to_beats(data)),
                                "ref": (beat_layout(REF_TYPE, 1), ref)},
                    {"out": beat_layout(ELEM, 2)}, 40)
    assert res["error"] == 1 and res["code"] == ErrorCode.BAD_STOP


def test_partial_buffer_under_an_order():
    tokens = from_nested([[[tile(1), tile(2)], [tile(3)]]], 2)
    with pytest.raises(StepRuntimeError, match="does not fill"):
        streamify(bufferize(tokens, 2), 2, order=((2, 2), (1, 2), 0), shape=(2, 2))
    pmu = PMU(ELEM, 2, 2, (2, 2), readers=[Replay(order=((2, 2), (1, 2)))])
    run = run_loop(pmu, tokens)
    assert run.error == 1 and run.code == ErrorCode.BAD_BUFFER


def test_unknown_buffer_id():
    """A reference to a buffer that was never written (or already freed)."""
    pmu = PMU(ELEM, 2, 1, (2,))
    lay = beat_layout(pmu.buffer_type, 1)
    res = run_beats(pmu, {"in0": (beat_layout(ELEM, 2), [Beat(None, 0, 0, 1)]),
                          "buffers": (lay, [Beat(1, 1, 1, 1)])},
                    {"out": beat_layout(ELEM, 2), "refs": lay}, 20)
    assert res["error"] == 1 and res["code"] == ErrorCode.BAD_BUFFER


def test_a_reference_repeated_after_its_last_replay():
    """Decision: a read side frees a buffer after each buffer element's replay, so the same id
    again (the interpreter frees after its *last* occurrence) is flagged, not replayed."""
    pmu = PMU(ELEM, 1, 1, (2,))
    lay = beat_layout(pmu.buffer_type, 0)
    res = run_beats(pmu, {"in0": (beat_layout(ELEM, 1), to_beats([tile(1), tile(2), stop(1)])),
                          "buffers": (lay, [Beat(0, 1, 0, 0), Beat(0, 1, 0, 1)])},
                    {"out": beat_layout(ELEM, 1), "refs": lay}, 30, start={"buffers": 5})
    assert [bt for _, bt in res["out"]["refs"]] == [Beat(0, 1, 0, 1)]
    assert [bt.data[0, 0] for _, bt in res["out"]["out"]] == [1, 2]
    assert res["error"] == 1 and res["code"] == ErrorCode.BAD_BUFFER


# -- handshakes and timing ---------------------------------------------------------------------

def test_no_ready_to_valid_path():
    tokens = from_nested([[[tile(1), tile(2)], []], [[tile(3)]]], 2)
    for readers in ([Replay(2)], [Replay(), Replay(order=((1,), (0,)))]):
        pmu = PMU(ELEM, 2, 1, (2,), readers=readers)
        outs = {pmu.port_names(i)[2]: beat_layout(ELEM, r.out_rank(2, 1)) for i, r in enumerate(readers)}
        check_ready_to_valid(Loop(pmu), {"in0": (beat_layout(ELEM, 2), tokens)},
                             {**outs, "fin": FIN_LAYOUT}, cycles=40)
    pmu = PMU(ELEM, 2, 1, (2,), readers=[Replay(expand_rank=1, ref_type=REF_TYPE)])
    check_ready_to_valid(Loop(pmu), {"in0": (beat_layout(ELEM, 2), tokens),
                                     "ref": (beat_layout(REF_TYPE, 1), [True, True, stop(1)] * 2)},
                         {"out": beat_layout(ELEM, 2), "fin": FIN_LAYOUT}, cycles=40)
    pmu = PMU(ELEM, 2, 1, (2,), mode="dynamic", block_size=1, blocks=4)
    check_ready_to_valid(pmu, {"in0": (beat_layout(ELEM, 2), tokens),
                               "buffers": (beat_layout(pmu.buffer_type, 1), [])},
                         {"refs": beat_layout(pmu.buffer_type, 1)}, cycles=30)


def consecutive(cycles):
    return all(b - a == 1 for a, b in zip(cycles, cycles[1:]))


def test_write_one_beat_per_cycle():
    """20 buffers of 4 tiles enter in 80 consecutive cycles (the block allocator keeps up)."""
    tokens = from_nested([[tile(i + j) for j in range(4)] for i in range(20)], 1)
    pmu = PMU(ELEM, 1, 1, (4,), mode="dynamic", block_size=2, blocks=8)
    res = run_beats(Loop(pmu), {"in0": (beat_layout(ELEM, 1), to_beats(tokens))},
                    {"out": beat_layout(ELEM, 1), "fin": FIN_LAYOUT}, 100)
    assert res["error"] == 0
    assert len(res["in"]["in0"]) == 80 and consecutive(res["in"]["in0"])
    out = res["out"]["out"]
    assert_tokens(from_beats([bt for _, bt in out]), tokens)
    assert consecutive([c for c, _ in out])                  # and leave one per cycle
    assert out[0][0] - res["in"]["in0"][3] == 8              # closing beat -> first replayed beat


def test_read_one_beat_per_cycle_across_replays_and_buffers():
    """Two 8-tile buffers, each replayed 6 times: 96 output beats in 96 consecutive cycles."""
    tokens = from_nested([[[tile(i + j) for j in range(8)]] for i in range(2)], 2)
    pmu = PMU(ELEM, 2, 1, (8,), readers=[Replay(6)])
    res = run_beats(Loop(pmu), {"in0": (beat_layout(ELEM, 2), to_beats(tokens))},
                    {"out": beat_layout(ELEM, 3), "fin": FIN_LAYOUT}, 130)
    out = res["out"]["out"]
    assert len(out) == 96 and consecutive([c for c, _ in out])
    assert_tokens(from_beats([bt for _, bt in out]), streamify(bufferize(tokens, 1), 1, repeat=6))
    assert out[0][0] - res["in"]["in0"][7] == 8              # closing beat -> first replayed beat
    assert res["out"]["fin"][0][1].data == 2


@pytest.mark.parametrize("size, slots, cycles", [(4, 2, 160), (4, 3, 108), (16, 2, 127), (16, 3, 112)])
def test_streaming_round_trip_throughput(size, slots, cycles):
    """Bufferize -> Streamify of a long stream: N-buffering overlaps writing and replaying.

    Measured cycles from the first to the last of 112 (or 100) output beats. With two slots the
    writer waits for the slot the reader frees, which the reader reaches 6 cycles after the
    buffer closed (one in the replay engine's command queue) plus the replay, plus 3 cycles to
    return the block: 4-tile buffers stream at 0.63 beats per cycle, 16-tile buffers at 0.88; a
    third slot hides it for 16-tile buffers (1.0) and almost for 4-tile ones (0.93: the round
    trip is one cycle longer than three buffers take to write).
    """
    n = 112 // size if size == 16 else 25
    tokens = from_nested([[tile(i)] * size for i in range(n)], 1)
    pmu = PMU(ELEM, 1, 1, (size,), slots=slots)
    res = run_beats(Loop(pmu), {"in0": (beat_layout(ELEM, 1), to_beats(tokens))},
                    {"out": beat_layout(ELEM, 1), "fin": FIN_LAYOUT}, 220)
    out = res["out"]["out"]
    assert len(out) == n * size
    assert_tokens(from_beats([bt for _, bt in out]), tokens)
    assert out[-1][0] - out[0][0] + 1 <= cycles


# -- construction ------------------------------------------------------------------------------

def test_repr_and_ports():
    pmu = PMU(ELEM, 3, 1, (4,), mode="dynamic", block_size=2, blocks=5,
              readers=[Replay(2), Replay(expand_rank=1, ref_type=REF_TYPE)])
    assert repr(pmu) == ("PMU(Tile(int8, 1, 2), 3, 1, (4,), mode='dynamic', block_size=2, blocks=5, "
                         "readers=(Replay(2), Replay(expand_rank=1, ref_type=Bool())))")
    assert pmu.port_names(1) == ("buffers1", "ref1", "out1")
    assert {"in0", "refs", "buffers0", "out0", "buffers1", "ref1", "out1", "status",
            "free_blocks"} == set(pmu.signature.members)
    static = PMU(ELEM, 2, 2, (2, 3))
    assert static.blocks == 2 and static.block_size == 6
    Fragment.get(pmu, None), Fragment.get(static, None)  # elaborates


@pytest.mark.parametrize("kwargs, match", [
    (dict(rank=1, b=2, shape=(2, 2)), r"^PMU b must be an int in 1\.\.1, not 2$"),
    (dict(shape=(0,)), r"^PMU shape must be 1 int >= 1, not \(0,\)$"),
    (dict(mode="dynamic", block_size=2, blocks=1),
     r"^PMU blocks must be an int in 2\.\.65536 \(one buffer of shape \[4\] in blocks of 2; a "
     r"16-bit buffer id\), not 1$"),
    (dict(slots=0), r"^PMU slots must be an int in 1\.\.65536, not 0$"),
    (dict(readers=[Replay(order=((5,), (1,)))]),
     r"^PMU readers\[0\]\.order must be within the buffer of 4 elements \(it reads element 4\), "
     r"not \(\(5,\), \(1,\), 0\)$"),
    (dict(mode="dynamic", readers=[Replay(order=((2,), (1,)))]),
     r"^PMU mode must be 'static' for the order of readers\[0\], not 'dynamic'$"),
    (dict(readers=[Replay(expand_rank=2, ref_type=REF_TYPE)]),
     r"^PMU readers\[0\]\.expand_rank must be at most the buffer stream's rank 1, not 2$"),
    (dict(mode="fancy"), r"^PMU mode must be 'static' or 'dynamic', not 'fancy'$"),
    (dict(readers=[]), r"^PMU readers must be a non-empty sequence of Replay, not \[\]$"),
])
def test_bad_parameters(kwargs, match):
    args = dict(rank=2, b=1, shape=(4,))
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        PMU(ELEM, args.pop("rank"), args.pop("b"), args.pop("shape"), **args)


def test_a_refused_pmu_is_not_reported_as_unused(recwarn, monkeypatch):
    """The parameters are checked before the component exists (no private Amaranth names), so
    no half-built PMU is collected later as an unused elaboratable (a warning, or an exception
    from its ``repr`` in ``__del__``)."""
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    Fragment.get(PMU(ELEM, 2, 1, (4,)), None)  # Amaranth reports unused elaboratables from now on
    with pytest.raises(ValueError):
        PMU(ELEM, 2, 3, (4,))
    gc.collect()
    assert [str(w.message) for w in recwarn] == []
    assert [str(u.exc_value) for u in unraisable] == []


def test_bad_replay():
    with pytest.raises(ValueError, match=r"^Replay repeat must be None with expand_rank, not 2$"):
        Replay(2, expand_rank=1, ref_type=REF_TYPE)
    with pytest.raises(ValueError, match=r"^Replay ref_type must be an element type with "
                                         r"expand_rank \(the reference stream's\), not None$"):
        Replay(expand_rank=1)
    with pytest.raises(ValueError, match=r"^Replay repeat must be an int >= 1, not 0$"):
        Replay(0)
    with pytest.raises(ValueError, match=r"^Replay order stride must be 2 ints, not \(1,\)$"):
        Replay(order=((2, 3), (1,)))
