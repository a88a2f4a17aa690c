"""Off-chip load/store units wired to a MemoryModel, against the interpreter's token functions.

Every property test draws a machine (dtype, tile, tensor grid, memory channels, bytes per
channel, latency), a tensor placement at a random base address, random contents, random
valid/ready on the stream ports and random memory stalls, and checks the output tokens, the
memory contents after stores and the traffic counters against :mod:`stepforge.sim.ref.ops_offchip`.
"""

import gc
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stepforge.compiler.graph import Program
from stepforge.compiler.metrics import bind, metrics
from stepforge.compiler.ops.offchip import (LinearOffChipLoad, LinearOffChipStore, RandomOffChipLoad,
                                            RandomOffChipStore)
from stepforge.compiler.types import Bool, Index, Tile, bf16, int8, int16, int32
from stepforge.contract.beat import beat_layout
from stepforge.contract.tokens import Beat, from_nested, is_stop, stop, to_beats
from stepforge.contract.values import values_equal
from stepforge.hdl.config import HardwareConfig
from stepforge.hdl.memory import (PIPELINE_LATENCY, MemoryGeometry, MemoryModel, TensorPlacement,
                                  array_from_bytes, array_to_bytes)
from stepforge.hdl.offchip_load import LinearLoadUnit, RandomLoadUnit
from stepforge.hdl.offchip_store import LinearStoreUnit, RandomStoreUnit
from stepforge.hdl.platform import FamilyPlatform
from stepforge.hdl.unit import ErrorCode
from stepforge.sim.ref.interpreter import run as interpret
from stepforge.sim.ref.ops_offchip import linear_load, linear_store, random_load, random_store
from stepforge.sim.rtl.testbench import check_ready_to_valid
from stepforge.sim.rtl.testbench_memory import MemoryBench, simulate_with_memory

from .test_tokens import ragged

SLACK_WORDS = 6
#: The memory's shortest latency (its pipeline's).
LAT = PIPELINE_LATENCY


def tokens_equal(got, want):
    return len(got) == len(want) and all(
        (is_stop(g) and g == w) if is_stop(w) else (not is_stop(g) and values_equal(g, w))
        for g, w in zip(got, want))


def count_tiles(tokens):
    return sum(1 for t in tokens if not is_stop(t))


class Machine:
    """A drawn machine: config, tensor shape, tile, memory image and placement.

    The placement (and its geometry) exists before the memory: units are built on it, then
    :meth:`memory` builds a memory with a port for each of them.
    """

    def __init__(self, dtype, tile, grid, channels, bpc, latency, base, seed):
        self.dtype, self.tile = dtype, tile
        self.shape = (grid[0] * tile[0], grid[1] * tile[1])
        self.config = HardwareConfig(tile_rows=tile[0], tile_cols=tile[1], dtype=dtype,
                                     mem_channels=channels, mem_bytes_per_channel=bpc,
                                     mem_latency=latency)
        word = math.gcd(bpc, tile[1] * dtype.nbytes)
        self.base = base
        tensor_words = self.shape[0] * self.shape[1] * dtype.nbytes // word
        self.size = (base + tensor_words + SLACK_WORDS) * word
        self.word = word
        self.geometry = MemoryGeometry.from_config(self.config, self.size)
        self.placement = TensorPlacement(self.geometry, dtype, self.shape, tile, base=base)
        self.rng = np.random.default_rng(seed)
        info = np.iinfo(dtype.np)
        self.tensor = self.rng.integers(info.min, info.max, self.shape, endpoint=True).astype(dtype.np)
        self.filler = bytes(self.rng.integers(0, 256, self.size, dtype=np.uint8))

    def memory(self, units, with_tensor=True, **kw):
        """A memory holding the filler (and the tensor) with a port for each of ``units``."""
        image = bytearray(self.filler)
        if with_tensor:
            raw = array_to_bytes(self.tensor, self.dtype)
            image[self.base * self.word:self.base * self.word + len(raw)] = raw
        units = units if isinstance(units, list) else [units]
        self.model = MemoryModel.for_clients(self.config, self.size, units, bytes(image), **kw)
        assert self.model.geometry == self.geometry
        return self.model

    def tensor_in(self, image):
        return array_from_bytes(image[self.base * self.word:], self.shape, self.dtype)

    def outside(self, image):
        """The image without the tensor (must be untouched by a store)."""
        lo = self.base * self.word
        return image[:lo] + image[lo + self.tensor.nbytes:]

    def random_tile(self):
        info = np.iinfo(self.dtype.np)
        return self.rng.integers(info.min, info.max, self.tile, endpoint=True).astype(self.dtype.np)

    @property
    def tile_type(self):
        return Tile(self.dtype, *self.tile)

    @property
    def tile_bytes(self):
        return self.tile[0] * self.tile[1] * self.dtype.nbytes

    @property
    def ntiles(self):
        return (self.shape[0] // self.tile[0]) * (self.shape[1] // self.tile[1])


@st.composite
def machines(draw):
    dtype = draw(st.sampled_from([int8, int16, int32]))
    tile = (draw(st.integers(1, 3)), draw(st.sampled_from([1, 2, 4])))
    grid = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    bpc = draw(st.sampled_from([2, 4, 8, 16]))
    word = math.gcd(bpc, tile[1] * dtype.nbytes)
    # at most 16 lanes: wider lines cost simulation time, not coverage
    channels = draw(st.sampled_from([c for c in (1, 2, 4) if c * bpc // word <= 16]))
    latency = draw(st.integers(LAT, LAT + 3))
    return Machine(dtype, tile, grid, channels, bpc, latency,
                   draw(st.integers(0, 5)), draw(st.integers(0, 2**32 - 1)))


@st.composite
def walks(draw, ntiles):
    """(out_shape, stride, offset) whose every tile lies in ``range(ntiles)``."""
    depth = draw(st.integers(0, 3))
    out_shape = [draw(st.integers(1, 3)) for _ in range(depth)]
    stride = [draw(st.integers(-ntiles, ntiles)) for _ in range(depth)]

    def span():
        lo = sum(min(0, s * (n - 1)) for n, s in zip(out_shape, stride))
        hi = sum(max(0, s * (n - 1)) for n, s in zip(out_shape, stride))
        return lo, hi
    while span()[1] - span()[0] > ntiles - 1:   # shrink the largest stride until it fits
        d = max(range(depth), key=lambda i: abs(stride[i]) * (out_shape[i] - 1))
        stride[d] -= 1 if stride[d] > 0 else -1
    lo, hi = span()
    offset = draw(st.integers(-lo, ntiles - 1 - hi))
    return tuple(out_shape), tuple(stride), offset


PATTERNS = st.tuples(st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.floats(0.0, 0.5),
                     st.integers(0, 2**16))


# -- LinearLoadUnit -----------------------------------------------------------------------------

@settings(deadline=None, max_examples=25)
@given(machines().flatmap(lambda mc: st.tuples(st.just(mc), walks(mc.ntiles))), PATTERNS)
def test_linear_load_matches_interpreter(case, pattern):
    mc, (out_shape, stride, offset) = case
    valid_p, ready_p, stall_p, seed = pattern
    unit = LinearLoadUnit(mc.placement, out_shape, stride, offset=offset)
    mem = mc.memory(unit)
    run = simulate_with_memory(unit, mem, {}, {"out": beat_layout(mc.tile_type, len(out_shape))},
                               ready_p=ready_p, stall_p=stall_p, stall_seed=seed, seed=seed)
    want = linear_load(mc.tensor, mc.tile, out_shape, stride, offset)
    assert tokens_equal(run.outputs["out"], want)
    assert run.inspected["bytes_read"] == count_tiles(want) * mc.tile_bytes
    assert run.inspected["bytes_written"] == 0 and run.error == 0


@settings(deadline=None, max_examples=15)
@given(machines().flatmap(lambda mc: st.tuples(st.just(mc), walks(mc.ntiles))), PATTERNS)
def test_ecp5_form_of_a_load_moves_the_same_beats_in_the_same_cycles(case, pattern):
    # elaborated for ECP5, a load of one-line tiles reads its tile buffer at the head slot and at
    # the one after it and picks behind the read registers: the same beats, the same status
    # counts, the same cycles as the generic form under the same back-pressure and stalls
    mc, (out_shape, stride, offset) = case
    valid_p, ready_p, stall_p, seed = pattern
    runs = []
    for platform in (None, FamilyPlatform("ecp5")):
        unit = LinearLoadUnit(mc.placement, out_shape, stride, offset=offset)
        mem = mc.memory(unit)
        runs.append(simulate_with_memory(
            unit, mem, {}, {"out": beat_layout(mc.tile_type, len(out_shape))}, ready_p=ready_p,
            stall_p=stall_p, stall_seed=seed, seed=seed, platform=platform))
    generic, ecp5 = runs
    assert generic.payloads == ecp5.payloads and generic.cycles == ecp5.cycles
    assert generic.status_counts == ecp5.status_counts
    assert tokens_equal(ecp5.outputs["out"], linear_load(mc.tensor, mc.tile, out_shape, stride,
                                                         offset))


@settings(deadline=None, max_examples=25)
@given(machines().flatmap(lambda mc: st.tuples(st.just(mc), walks(mc.ntiles))),
       st.integers(0, 2).flatmap(lambda r: st.tuples(st.just(r), ragged(r, st.integers(0, 9), 3))),
       PATTERNS)
def test_linear_load_with_reference_matches_interpreter(case, ref, pattern):
    mc, (out_shape, stride, offset) = case
    ref_rank, ref_tensors = ref
    valid_p, ready_p, stall_p, seed = pattern
    ref_tokens = from_nested(ref_tensors, ref_rank)
    unit = LinearLoadUnit(mc.placement, out_shape, stride, offset=offset, ref_type=Index(),
                          ref_rank=ref_rank)
    mem = mc.memory(unit)
    rank = len(out_shape) + ref_rank
    run = simulate_with_memory(unit, mem, {"ref": (beat_layout(Index(), ref_rank), ref_tokens)},
                               {"out": beat_layout(mc.tile_type, rank)}, valid_p=valid_p,
                               ready_p=ready_p, stall_p=stall_p, stall_seed=seed, seed=seed)
    want = linear_load(mc.tensor, mc.tile, out_shape, stride, offset, ref=ref_tokens)
    assert tokens_equal(run.outputs["out"], want)
    assert run.inspected["bytes_read"] == count_tiles(want) * mc.tile_bytes


def test_linear_load_reference_framing():
    # an empty reference fibre (a stop-only beat) becomes S_(len(out_shape) + r); a bare Done
    # stays bare
    mc = Machine(int16, (2, 2), (2, 2), 2, 4, LAT, 0, 7)
    unit = LinearLoadUnit(mc.placement, (2,), (1,), ref_type=Index(), ref_rank=1)
    mem = mc.memory(unit)
    beats = [Beat(4, 1, 1, 0), Beat(None, 0, 1, 0), Beat(5, 1, 1, 0), Beat(None, 0, 0, 1)]
    run = simulate_with_memory(unit, mem, {"ref": (beat_layout(Index(), 1), beats)},
                               {"out": beat_layout(mc.tile_type, 2)})
    want = linear_load(mc.tensor, mc.tile, (2,), (1,), ref=[4, stop(1), stop(1), 5, stop(1)])
    assert tokens_equal(run.outputs["out"], want)
    assert [b.stop for b in run.beats["out"]] == [0, 2, 2, 0, 2, 0]
    assert run.beats["out"][-1] == Beat(None, 0, 0, 1)


# -- RandomLoadUnit -----------------------------------------------------------------------------

@settings(deadline=None, max_examples=25)
@given(machines().flatmap(lambda mc: st.tuples(
           st.just(mc), st.integers(0, 2).flatmap(lambda r: st.tuples(
               st.just(r), ragged(r, st.integers(0, mc.ntiles - 1), 3))))),
       PATTERNS)
def test_random_load_matches_interpreter(case, pattern):
    mc, (rank, addrs) = case
    valid_p, ready_p, stall_p, seed = pattern
    tokens = from_nested(addrs, rank)
    unit = RandomLoadUnit(mc.placement, rank)
    mem = mc.memory(unit)
    run = simulate_with_memory(unit, mem, {"addr": (beat_layout(Index(), rank), tokens)},
                               {"out": beat_layout(mc.tile_type, rank)}, valid_p=valid_p,
                               ready_p=ready_p, stall_p=stall_p, stall_seed=seed, seed=seed)
    want = random_load(tokens, mc.tensor, mc.tile)
    assert tokens_equal(run.outputs["out"], want)
    assert run.inspected["bytes_read"] == count_tiles(want) * mc.tile_bytes and run.error == 0


def test_random_load_out_of_range_stops_the_unit():
    mc = Machine(int16, (2, 2), (2, 2), 2, 4, LAT, 1, 3)
    unit = RandomLoadUnit(mc.placement, 1)
    mem = mc.memory(unit)
    tokens = [3, 0, stop(1), 4, 1, 2, stop(1)]      # 4 is outside the 4 tiles
    # the output never sends last: the run ends when the error rises
    run = simulate_with_memory(unit, mem, {"addr": (beat_layout(Index(), 1), tokens)},
                               {"out": beat_layout(mc.tile_type, 1)})
    assert run.error == 1 and run.code == ErrorCode.ADDRESS_RANGE
    assert run.accepted["addr"] == 2                 # 3 and (0, S1); the bad beat is not taken
    assert "out" not in run.outputs                  # no Done: the stream never ends
    assert run.inspected["bytes_read"] <= 2 * mc.tile_bytes


def test_random_load_keeps_stopped_after_error():
    from amaranth.sim import Simulator
    mc = Machine(int8, (1, 4), (2, 1), 1, 4, LAT, 0, 5)
    unit = RandomLoadUnit(mc.placement, 0)
    mem = mc.memory(unit)
    bench = MemoryBench(unit, mem)
    seen = {}

    async def tb(ctx):
        ctx.set(unit.addr.valid, 1)
        ctx.set(unit.addr.payload.has_data, 1)
        ctx.set(unit.addr.payload.data, 2)           # tile 2 of 2: out of range
        ctx.set(unit.out.ready, 1)
        seen["ready0"] = ctx.get(unit.addr.ready)
        await ctx.tick()
        seen["error"] = (ctx.get(unit.status.error), ctx.get(unit.status.code))
        ctx.set(unit.addr.payload.data, 0)           # a good address afterwards is refused too
        for _ in range(12):
            seen.setdefault("readies", []).append(ctx.get(unit.addr.ready))
            seen.setdefault("valids", []).append(ctx.get(unit.out.valid))
            await ctx.tick()
        seen["bytes"] = ctx.get(mem.bytes_read)

    sim = Simulator(bench)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert seen["ready0"] == 0 and seen["error"] == (1, ErrorCode.ADDRESS_RANGE)
    assert not any(seen["readies"]) and not any(seen["valids"]) and seen["bytes"] == 0


# -- LinearStoreUnit ----------------------------------------------------------------------------

@settings(deadline=None, max_examples=25)
@given(machines().flatmap(lambda mc: st.tuples(
           st.just(mc), st.integers(0, 2), st.integers(0, mc.ntiles))), PATTERNS,
       st.sampled_from([1, 2]))
def test_linear_store_matches_interpreter(case, pattern, queue):
    mc, rank, n = case
    valid_p, ready_p, stall_p, seed = pattern
    # n tiles cut into a random ragged rank-`rank` stream (empty fibres included)
    rng = np.random.default_rng(seed)
    tiles = [mc.random_tile() for _ in range(n)]
    tokens = []
    for t in tiles:
        tokens.append(t)
        if rank and rng.random() < 0.5:
            tokens.append(stop(int(rng.integers(1, rank + 1))))
        if rank and rng.random() < 0.2:
            tokens.append(stop(int(rng.integers(1, rank + 1))))
    if rank:
        tokens = [t for i, t in enumerate(tokens)
                  if not (is_stop(t) and i and is_stop(tokens[i - 1]) and t.level > 1
                          and tokens[i - 1].level >= t.level)]
        tokens.append(stop(rank))
    unit = LinearStoreUnit(mc.placement, rank, tile_queue=queue)
    mem = mc.memory(unit, with_tensor=False)
    run = simulate_with_memory(unit, mem, {"in0": (beat_layout(mc.tile_type, rank), tokens)}, {},
                               valid_p=valid_p, stall_p=stall_p, stall_seed=seed, seed=seed)
    image = run.inspected["memory"]
    want = array_from_bytes(mc.filler[mc.base * mc.word:], mc.shape, mc.dtype).copy()
    assert linear_store(tokens, want, mc.tile) == n
    assert (mc.tensor_in(image) == want).all()
    assert mc.outside(image) == mc.outside(mc.filler)
    assert run.inspected["bytes_written"] == n * mc.tile_bytes and run.error == 0
    assert run.accepted["in0"] == len(to_beats(tokens))


def test_linear_store_too_many_tiles():
    mc = Machine(int16, (2, 2), (1, 2), 2, 4, LAT, 0, 9)
    unit = LinearStoreUnit(mc.placement, 0)
    mem = mc.memory(unit, with_tensor=False)
    tiles = [mc.random_tile() for _ in range(3)]
    # the run ends when the error is up and the writes in flight have drained
    run = simulate_with_memory(unit, mem, {"in0": (beat_layout(mc.tile_type, 0), tiles)}, {},
                               stop_on_error=False,
                               wait_for=unit.status.error & ~unit.status.busy)
    assert run.error == 1 and run.code == ErrorCode.ADDRESS_RANGE
    assert run.accepted["in0"] == 2 and run.inspected["bytes_written"] == 2 * mc.tile_bytes
    assert (mc.tensor_in(run.inspected["memory"]) == np.hstack(tiles[:2])).all()


# -- RandomStoreUnit ----------------------------------------------------------------------------

def restructure(rng, elems, rank):
    """``elems`` as a random rank-``rank`` token stream (random stops, empty fibres)."""
    if rank == 0:
        return list(elems)
    it, left = iter(elems), [len(elems)]

    def build(level):
        if level == 1:
            k = min(int(rng.integers(0, 3)), left[0])
            left[0] -= k
            return [next(it) for _ in range(k)]
        return [build(level - 1) for _ in range(int(rng.integers(1, 3)))]
    tensors = []
    while left[0] or (not tensors and rng.random() < 0.7):
        tensors.append(build(rank))
    return from_nested(tensors, rank)


@settings(deadline=None, max_examples=25)
@given(machines().flatmap(lambda mc: st.tuples(
           st.just(mc), st.lists(st.integers(0, mc.ntiles - 1), max_size=6))),
       st.integers(0, 2), st.integers(0, 2), PATTERNS)
def test_random_store_matches_interpreter(case, addr_rank, data_rank, pattern):
    mc, addrs = case
    valid_p, ready_p, stall_p, seed = pattern
    rng = np.random.default_rng(seed)
    addr_tokens = restructure(rng, addrs, addr_rank)
    data_tokens = restructure(rng, [mc.random_tile() for _ in addrs], data_rank)
    unit = RandomStoreUnit(mc.placement, addr_rank, data_rank)
    mem = mc.memory(unit)
    run = simulate_with_memory(
        unit, mem, {"addr": (beat_layout(Index(), addr_rank), addr_tokens),
                    "data": (beat_layout(mc.tile_type, data_rank), data_tokens)},
        {"ack": beat_layout(Bool(), addr_rank)}, valid_p=valid_p, ready_p=ready_p,
        stall_p=stall_p, stall_seed=seed, seed=seed)
    want_mem = mc.tensor.copy()
    want = random_store(addr_tokens, data_tokens, want_mem, mc.tile)
    assert tokens_equal(run.outputs["ack"], want)
    assert (mc.tensor_in(run.inspected["memory"]) == want_mem).all()
    assert run.inspected["bytes_written"] == len(addrs) * mc.tile_bytes and run.error == 0


@pytest.mark.parametrize("addr, ndata, code, accepted", [
    ([0, 7, 1], 3, ErrorCode.ADDRESS_RANGE, 1),      # 7 is outside the 6 tiles
    ([0, 1, 2], 2, ErrorCode.EARLY_END, 2),          # the data ends before the addresses
    ([0, 1], 3, ErrorCode.LEFTOVER, 2),              # a data tile has no address
])
def test_random_store_errors(addr, ndata, code, accepted):
    mc = Machine(int16, (2, 2), (2, 3), 2, 4, LAT, 0, 11)
    unit = RandomStoreUnit(mc.placement, 0, 0)
    mem = mc.memory(unit)
    data = [mc.random_tile() for _ in range(ndata)]
    run = simulate_with_memory(unit, mem, {"addr": (beat_layout(Index(), 0), addr),
                                           "data": (beat_layout(mc.tile_type, 0), data)},
                               {"ack": beat_layout(Bool(), 0)}, stop_on_error=False,
                               wait_for=unit.status.error & ~unit.status.busy)
    assert run.error == 1 and run.code == code
    assert run.accepted["addr"] == accepted
    assert run.inspected["bytes_written"] == accepted * mc.tile_bytes


# -- traffic against the symbolic metrics -------------------------------------------------------

def test_counters_equal_the_symbolic_traffic():
    # the memory model's byte counters equal the front end's symbolic traffic, bound to the
    # interpreter's trace of the same program; the stored tensors equal the interpreter's memory
    p = Program("traffic")
    R = p.symbol("R", ragged=True, bound=2)
    D, E = p.symbol("D", bound=8), p.symbol("E", bound=8)
    X = p.tensor("X", (4, 8), int16)
    Y = p.tensor("Y", (4, 8), int16, role="output")
    Z = p.tensor("Z", (4, 8), int16, role="inout")
    ld = LinearOffChipLoad(X, (2, 4), (2, 2), (-1, 2), offset=1, ref=p.input("ref", (2, R), Index()))
    gather = RandomOffChipLoad(p.input("a", (1, D), Index()), X, (2, 4))
    store = LinearOffChipStore(p.input("s", (2, R), Tile(int16, 2, 4)), Y)
    scatter = RandomOffChipStore(p.input("w", (1, E), Index()),
                                 p.input("v", (2, R), Tile(int16, 2, 4)), Z)
    for n in (ld, gather, scatter):
        p.output(n, "out_" + n.name)

    mc = Machine(int16, (2, 4), (2, 2), 2, 8, LAT, 0, 1)
    t = [mc.random_tile() for _ in range(4)]
    inputs = {"ref": [[1, 2], [3]], "a": [[3, 0, 3, 2, 1]], "s": [[t[0], t[1]], [t[2], t[3]]],
              "w": [[2, 0, 2]], "v": [[t[0]], [t[1], t[2]]]}
    r = interpret(p, {"X": mc.tensor, "Z": mc.tensor}, inputs)
    sym = metrics(p).subs(bind(p, r.trace)).per_node

    def hw(unit, ins, outs):
        return simulate_with_memory(unit, mc.memory(unit), ins, outs, stall_p=0.2).inspected

    def stream(name, elem):
        return beat_layout(elem, 1), from_nested(inputs[name], 1)
    got = hw(LinearLoadUnit(mc.placement, (2, 2), (-1, 2), offset=1, ref_type=Index(), ref_rank=1),
             {"ref": stream("ref", Index())}, {"out": beat_layout(mc.tile_type, 3)})
    assert got["bytes_read"] == sym[ld.name]["offchip_read"] == 12 * mc.tile_bytes
    got = hw(RandomLoadUnit(mc.placement, 1), {"addr": stream("a", Index())},
             {"out": beat_layout(mc.tile_type, 1)})
    assert got["bytes_read"] == sym[gather.name]["offchip_read"] == 5 * mc.tile_bytes
    got = hw(LinearStoreUnit(mc.placement, 1), {"in0": stream("s", mc.tile_type)}, {})
    assert got["bytes_written"] == sym[store.name]["offchip_write"] == 4 * mc.tile_bytes
    assert (mc.tensor_in(got["memory"]) == r.tensors["Y"]).all()      # the interpreter's memory
    got = hw(RandomStoreUnit(mc.placement, 1, 1),
             {"addr": stream("w", Index()), "data": stream("v", mc.tile_type)},
             {"ack": beat_layout(Bool(), 1)})
    assert got["bytes_written"] == sym[scatter.name]["offchip_write"] == 3 * mc.tile_bytes
    assert (mc.tensor_in(got["memory"]) == r.tensors["Z"]).all()


# -- throughput ---------------------------------------------------------------------------------

THROUGHPUT_CASES = [
    # name, dtype, tensor, tile, (channels, bytes/channel, latency): the walk re-reads 16 tiles
    ("4x4 int16, full-width tile", int16, (4, 4), (4, 4), (4, 16, 4)),
    ("4x4 int16 of a 12-col tensor", int16, (4, 12), (4, 4), (4, 16, 4)),
    ("4x4 int16 of a 16-col tensor", int16, (4, 16), (4, 4), (4, 16, 4)),
    ("4x4 int16 of a 32-col tensor", int16, (4, 32), (4, 4), (4, 16, 4)),
    ("8x16 int16, full-width tile", int16, (8, 16), (8, 16), (4, 16, 4)),
    ("8x16 int16 of a 48-col tensor", int16, (8, 48), (8, 16), (4, 16, 4)),
    ("8x16 int16 of a 32-col tensor", int16, (8, 32), (8, 16), (4, 16, 4)),
    ("4x4 int16, ECP5 preset (2 x 8 B)", int16, (4, 8), (4, 4),
     (2, 8, HardwareConfig.ecp5_85f().mem_latency)),
    ("2x2 int16, iCE40 preset (4 x 2 B)", int16, (4, 8), (2, 2),
     (4, 2, HardwareConfig.ice40_up5k().mem_latency)),
    ("4x4 bf16, 1 x 2 B", bf16, (4, 8), (4, 4), (1, 2, LAT)),
]


def measure_load(dtype, shape, tile, mem_params, ntiles=16):
    channels, bpc, latency = mem_params
    cfg = HardwareConfig(tile_rows=tile[0], tile_cols=tile[1], dtype=dtype, mem_channels=channels,
                         mem_bytes_per_channel=bpc, mem_latency=latency)
    tensor_bytes = shape[0] * shape[1] * dtype.nbytes
    pl = TensorPlacement(MemoryGeometry.from_config(cfg, tensor_bytes), dtype, shape, tile)
    unit = LinearLoadUnit(pl, (ntiles,), (0,))
    mem = MemoryModel.for_clients(cfg, tensor_bytes, [unit], bytes(tensor_bytes))
    run = simulate_with_memory(unit, mem, {}, {"out": beat_layout(Tile(dtype, *tile), 1)})
    per_tile = (run.cycles - 1) / (ntiles - 1)
    g = mem.geometry
    ideal = pl.tile_bytes / g.line_bytes
    model = len(pl.tile_lines)
    return per_tile, ideal, model, run.inspected["bytes_read"] == ntiles * pl.tile_bytes


@pytest.mark.parametrize("name, dtype, shape, tile, mem_params", THROUGHPUT_CASES)
def test_load_streams_at_the_memory_rate(name, dtype, shape, tile, mem_params):
    per_tile, ideal, lines, exact = measure_load(dtype, shape, tile, mem_params)
    print(f"{name}: {per_tile:.2f} cycles/tile, ideal {ideal:.2f}, lines/tile {lines}")
    # one line per cycle from the memory (lines pack tile rows that sit in distinct lanes) and
    # at most one tile per cycle at the output
    assert per_tile == pytest.approx(max(1, lines))
    assert per_tile >= ideal and exact


@pytest.mark.parametrize("shape, lines", [((16, 8), 1), ((4, 48), 2), ((8, 32), 4)])
def test_store_streams_at_the_memory_rate(shape, lines):
    # sim preset, 4x4 int16 tiles: the tile rows are 1 word, cols / 4 words apart; the 8 lanes
    # take 4, 2 or 1 of them per line (bank conflicts)
    cfg, size = HardwareConfig.sim(), shape[0] * shape[1] * 2
    pl = TensorPlacement(MemoryGeometry.from_config(cfg, size), int16, shape, (4, 4))
    assert len(pl.tile_lines) == lines
    n = pl.ntiles
    tiles = [np.full((4, 4), k, np.int16) for k in range(n)]
    unit = LinearStoreUnit(pl, 0)
    mem = MemoryModel.for_clients(cfg, size, [unit])
    run = simulate_with_memory(unit, mem,
                               {"in0": (beat_layout(Tile(int16, 4, 4), 0), tiles)}, {})
    print(f"store, 4x4 int16 of a {shape} tensor: {run.cycles / n:.2f} cycles/tile, "
          f"lines/tile {lines}")
    # the memory's rate, `lines` per tile: the tile writer requests a tile's burst when the tile
    # enters its two-tile queue, a tile ahead of the lines going out. Start-up: the first tile
    # enters in cycle 1, its request is accepted then and its first line granted two cycles later
    # (hdl/memory); `done` rises the cycle after the last line, and the bench reads back
    # `mem_latency` cycles later: at most 5 cycles beyond the memory's `lines` per tile.
    assert n * lines < run.cycles <= n * lines + 5
    assert run.inspected["bytes_written"] == n * 32
    # one tile held: a tile enters after the previous one retired, lines + 2 cycles per tile
    unit = LinearStoreUnit(pl, 0, tile_queue=1)
    mem = MemoryModel.for_clients(cfg, size, [unit])
    run = simulate_with_memory(unit, mem,
                               {"in0": (beat_layout(Tile(int16, 4, 4), 0), tiles)}, {})
    assert n * (lines + 2) <= run.cycles <= n * (lines + 2) + 5
    assert run.inspected["bytes_written"] == n * 32


def test_default_buffer_covers_the_latency():
    # 32 one-line tiles, latency 8: a tile holds its slot for about latency + 5 + lines cycles
    # (request accepted, its line granted 2 cycles later, the data `latency` cycles after that,
    # the slot read again once full, then out), so the default latency + 6 = 14 slots stream a
    # tile per cycle (32 cycles from the first to the last output); one slot fewer loses 2
    # cycles, and 2 slots give a tile about every (latency + 6) / 2 cycles
    cycles = {}
    for buffer_tiles in (2, 13, None):
        cfg = HardwareConfig(tile_rows=2, tile_cols=4, dtype=int16, mem_channels=2,
                             mem_bytes_per_channel=8, mem_latency=8)
        pl = TensorPlacement(MemoryGeometry.from_config(cfg, 64), int16, (2, 4), (2, 4))
        assert pl.tile_lines == [2]
        unit = LinearLoadUnit(pl, (32,), (0,), buffer_tiles=buffer_tiles)
        mem = MemoryModel.for_clients(cfg, 64, [unit], bytes(64))
        run = simulate_with_memory(unit, mem, {}, {"out": beat_layout(Tile(int16, 2, 4), 1)})
        cycles[buffer_tiles] = run.cycles
    assert cycles == {2: 212, 13: 34, None: 32}
    assert unit.buffer_tiles == 8 + 6 and unit.onchip_bytes == (8 + 6) * 16


# -- structure -----------------------------------------------------------------------------------

def test_no_ready_to_valid_path():
    mc = Machine(int16, (2, 2), (2, 2), 2, 4, LAT, 0, 3)
    unit = LinearLoadUnit(mc.placement, (2, 2), (2, 1), ref_type=Index(), ref_rank=0)
    mem = mc.memory(unit)
    check_ready_to_valid(MemoryBench(unit, mem), {"ref": (beat_layout(Index(), 0), [0, 1, 2])},
                         {"out": beat_layout(mc.tile_type, 2)})
    unit = RandomStoreUnit(mc.placement, 0, 0)
    mem = mc.memory(unit)
    check_ready_to_valid(MemoryBench(unit, mem),
                         {"addr": (beat_layout(Index(), 0), [1, 3]),
                          "data": (beat_layout(mc.tile_type, 0), [mc.random_tile()] * 2)},
                         {"ack": beat_layout(Bool(), 0)})


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")   # built for repr only
def test_reprs_mirror_the_constructors():
    mc = Machine(int16, (2, 2), (2, 2), 2, 4, LAT, 3, 3)
    pl = mc.placement
    assert repr(pl) == (f"TensorPlacement({mc.geometry!r}, int16, (4, 4), (2, 2), base=3)")
    assert repr(LinearLoadUnit(pl, (2,), (1,), offset=1, ref_type=Index(), ref_rank=1,
                               buffer_tiles=3)) == (
        f"LinearLoadUnit({pl!r}, (2,), (1,), offset=1, ref_type=Index(), ref_rank=1, "
        f"buffer_tiles=3)")
    assert repr(RandomLoadUnit(pl, 2)) == f"RandomLoadUnit({pl!r}, 2)"
    assert repr(LinearStoreUnit(pl, 1)) == f"LinearStoreUnit({pl!r}, 1)"
    assert repr(LinearStoreUnit(pl, 1, tile_queue=1)) == f"LinearStoreUnit({pl!r}, 1, tile_queue=1)"
    with pytest.raises(ValueError,
                       match="LinearStoreUnit tile_queue must be an int in 1..2, not 3"):
        LinearStoreUnit(pl, 1, tile_queue=3)
    assert repr(RandomStoreUnit(pl, 1, 0)) == f"RandomStoreUnit({pl!r}, 1, 0)"
    gc.collect()    # dropped (every Elaboratable is a reference cycle) under the filter above
    with pytest.raises(ValueError, match=r"^LinearLoadUnit walk \(out_shape, stride, offset\) must "
                                         r"be within the 4 tiles of tensor \(4, 4\) \(it reads tile "
                                         r"4\), not \(\(3,\), \(2,\), 0\)$"):
        LinearLoadUnit(pl, (3,), (2,), offset=0)
    with pytest.raises(ValueError, match=r"^LinearLoadUnit ref_type and ref_rank must be both "
                                         r"given or both None, not \(Index\(\), None\)$"):
        LinearLoadUnit(pl, (2,), (1,), ref_type=Index())
    with pytest.raises(TypeError, match=r"^RandomLoadUnit placement must be a TensorPlacement, "
                                        r"not MemoryGeometry\("):
        RandomLoadUnit(mc.geometry, 1)
    with pytest.raises(ValueError, match=r"^LinearLoadUnit buffer_tiles must be an int >= 1, "
                                         r"not 0$"):
        LinearLoadUnit(pl, (2,), (1,), buffer_tiles=0)
