"""Beat layouts and the pack/unpack codec (docs/wire.md)."""

import ml_dtypes
import numpy as np
import pytest
import sympy
from amaranth.hdl import Shape, signed, unsigned
from amaranth.lib import data, stream
from hypothesis import given, settings
from hypothesis import strategies as st

from stepforge.compiler.types import (DTYPES, Bool, Buffer, Index, Select, Tile, Tuple, bf16,
                                      fp32, int8, int16, int32)
from stepforge.contract.beat import (beat_layout, beat_signature, dtype_shape, element_layout,
                                pack_beat, pack_element, stop_width, unpack_beat, unpack_element)
from stepforge.contract.tokens import Beat, from_beats, from_nested, to_beats, to_nested

B = sympy.Symbol("B", positive=True, integer=True)


class BufRef:
    """Stands in for the interpreter's buffer reference (anything with an ``id``)."""

    def __init__(self, id):
        self.id = id


def same(a, b):
    """Structural equality with numpy arrays compared by dtype and raw bits."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        bits = {1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize]
        return np.array_equal(a.view(bits), b.view(bits))
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(same, a, b))
    return type(a) is type(b) and a == b


# Layouts ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("rank, width", [(0, 1), (1, 1), (2, 2), (3, 2), (4, 3), (7, 3), (8, 4)])
def test_stop_width(rank, width):
    assert stop_width(rank) == width


@pytest.mark.parametrize("rank", [-1, 1.0, True, None])
def test_stop_width_bad_rank(rank):
    with pytest.raises(ValueError, match="a stream rank must be an int >= 0"):
        stop_width(rank)


def test_dtype_shapes():
    assert [dtype_shape(d) for d in (int8, int16, int32, bf16, fp32)] == \
           [signed(8), signed(16), signed(32), unsigned(16), unsigned(32)]


def test_element_layouts():
    assert element_layout(Tile(int16, 2, 3)) == \
        data.ArrayLayout(data.ArrayLayout(signed(16), 3), 2)
    assert element_layout(Tile(bf16, 1, 1)) == \
        data.ArrayLayout(data.ArrayLayout(unsigned(16), 1), 1)
    assert element_layout(Tile(int8, B, 4), row_bound=5) == data.StructLayout({
        "rows": range(6), "data": data.ArrayLayout(data.ArrayLayout(signed(8), 4), 5)})
    assert element_layout(Tile(int8, B, 4), row_bound={B: 2}) == \
        element_layout(Tile(int8, B, 4), row_bound={"B": 2})
    assert element_layout(Index()) == unsigned(32)
    assert element_layout(Bool()) == unsigned(1)
    assert element_layout(Select(5)) == unsigned(5)
    assert element_layout(Buffer(Tile(int16, 4, 4), (B, 4))) == unsigned(16)
    assert element_layout(Tuple(Index(), Tile(fp32, 1, 2))) == data.StructLayout({
        "f0": unsigned(32), "f1": data.ArrayLayout(data.ArrayLayout(unsigned(32), 2), 1)})


def test_beat_layout_fields_and_offsets():
    layout = beat_layout(Tile(int16, 4, 4), 2)
    assert layout == data.StructLayout({
        "data": data.ArrayLayout(data.ArrayLayout(signed(16), 4), 4),
        "has_data": unsigned(1), "stop": unsigned(2), "last": unsigned(1)})
    assert [(name, f.offset, Shape.cast(f.shape).width) for name, f in layout] == \
           [("data", 0, 256), ("has_data", 256, 1), ("stop", 257, 2), ("last", 259, 1)]
    assert layout.size == 260
    assert beat_layout(Index(), 0).size == 32 + 1 + 1 + 1


def test_beat_signature():
    sig = beat_signature(Select(3), 3)
    assert isinstance(sig, stream.Signature)
    assert sig == stream.Signature(beat_layout(Select(3), 3))
    assert sig.members["payload"].shape == beat_layout(Select(3), 3)


@pytest.mark.parametrize("elem, kwargs, message", [
    (Tile(int8, B, 4), {}, r"dynamic row count B; pass row_bound="),
    (Tile(int8, B, 4), {"row_bound": {"C": 3}}, r"row_bound has no entry for the row count B"),
    (Tile(int8, B, 4), {"row_bound": 0}, r"the row bound of B must be an int >= 1, not 0"),
    (Tile(int8, 4, B), {"row_bound": 4}, r"a dynamic column count \(B\) has no wire encoding"),
    (Tile(int8, 0, 4), {}, r"a tile needs at least one row"),
    (Select(0), {}, r"a selector needs at least one target"),
    (Tuple(), {}, r"an empty Tuple has no wire encoding"),
])
def test_element_layout_errors(elem, kwargs, message):
    with pytest.raises(ValueError, match=message):
        element_layout(elem, **kwargs)


def test_element_layout_not_a_type():
    with pytest.raises(TypeError, match="expected a STeP element type, not 'int16'"):
        element_layout("int16")


# Exact encodings --------------------------------------------------------------------------------

def test_pack_exact_bits_int8_tile():
    layout = beat_layout(Tile(int8, 1, 2), 1)
    beat = Beat(np.array([[1, -1]], dtype=np.int8), 1, 1, 1)
    # data 0xff01, has_data bit 16, stop bit 17, last bit 18
    assert pack_beat(layout, beat) == 0x7ff01
    assert same(unpack_beat(layout, 0x7ff01).data, beat.data)


def test_pack_exact_bits_row_major():
    layout = beat_layout(Tile(int16, 2, 2), 0)
    tile = np.array([[0x1234, 0x5678], [-2, 0x7fff]], dtype=np.int16)
    assert pack_beat(layout, Beat(tile, 1, 0, 0)) == \
        (1 << 64) | 0x7fff_fffe_5678_1234


@pytest.mark.parametrize("value, bits", [
    (-0.0, 0x8000_0000), (1.0, 0x3f80_0000), (float("inf"), 0x7f80_0000),
    (np.uint32(0x7fc0_0001).view(np.float32), 0x7fc0_0001),   # a NaN payload
    (np.uint32(0x0000_0001).view(np.float32), 0x0000_0001),   # the smallest subnormal
])
def test_fp32_exact_bits(value, bits):
    layout = beat_layout(Tile(fp32, 1, 1), 0)
    tile = np.array([[value]], dtype=np.float32)
    packed = pack_beat(layout, Beat(tile, 1, 0, 0))
    assert packed == (1 << 32) | bits
    out = unpack_beat(layout, packed).data
    assert out.dtype == np.float32 and out.view(np.uint32).tolist() == [[bits]]


@pytest.mark.parametrize("bits", [0x8000, 0x3f80, 0x7fc1, 0xffff, 0x0001, 0xc0a0])
def test_bf16_exact_bits(bits):
    layout = beat_layout(Tile(bf16, 1, 1), 0)
    tile = np.array([[bits]], dtype=np.uint16).view(ml_dtypes.bfloat16)
    packed = pack_beat(layout, Beat(tile, 1, 0, 0))
    assert packed == (1 << 16) | bits
    out = unpack_beat(layout, packed).data
    assert out.dtype == ml_dtypes.bfloat16 and out.view(np.uint16).tolist() == [[bits]]


def test_float_from_other_dtypes_only_when_exact():
    layout = beat_layout(Tile(bf16, 1, 2), 0)
    assert pack_beat(layout, Beat(np.array([[1.5, -2.0]]), 1, 0, 0)) == \
        pack_beat(layout, Beat(np.array([[1.5, -2.0]], dtype=ml_dtypes.bfloat16), 1, 0, 0))
    with pytest.raises(ValueError, match="not exactly representable in bfloat16"):
        pack_beat(layout, Beat(np.array([[1.0 + 2**-10, 0.0]]), 1, 0, 0))
    layout32 = beat_layout(Tile(fp32, 1, 1), 0)
    assert pack_beat(layout32, Beat(np.array([[1.5]], dtype=ml_dtypes.bfloat16), 1, 0, 0)) == \
        (1 << 32) | 0x3fc0_0000


@pytest.mark.parametrize("dtype", [int8, int16, int32])
def test_int_extremes(dtype):
    layout = beat_layout(Tile(dtype, 1, 2), 0)
    tile = np.array([[dtype.min, dtype.max]], dtype=dtype.np)
    packed = pack_beat(layout, Beat(tile, 1, 0, 0))
    assert packed == (1 << 2 * dtype.bits) | (((1 << dtype.bits) - 1) >> 1 << dtype.bits) \
        | (1 << dtype.bits - 1)
    assert same(unpack_beat(layout, packed).data, tile)
    with pytest.raises(ValueError, match=rf"values outside \[{dtype.min}, {dtype.max}\]"):
        pack_beat(layout, Beat(np.array([[dtype.min - 1, 0]], dtype=np.int64), 1, 0, 0))
    with pytest.raises(ValueError, match=rf"values outside \[{dtype.min}, {dtype.max}\]"):
        pack_beat(layout, Beat(np.array([[0, dtype.max + 1]], dtype=np.int64), 1, 0, 0))


def test_int_tile_rejects_floats_and_wrong_shapes():
    layout = beat_layout(Tile(int16, 2, 2), 0)
    with pytest.raises(TypeError, match="an integer tile needs an integer array, not float64"):
        pack_beat(layout, Beat(np.zeros((2, 2)), 1, 0, 0))
    with pytest.raises(ValueError, match=r"a tile value of shape \(2, 3\) does not fit"):
        pack_beat(layout, Beat(np.zeros((2, 3), dtype=np.int16), 1, 0, 0))
    with pytest.raises(ValueError, match=r"a tile value of shape \(4,\) does not fit"):
        pack_beat(layout, Beat(np.zeros(4, dtype=np.int16), 1, 0, 0))


def test_dynamic_rows_padding_and_bounds():
    layout = beat_layout(Tile(int8, B, 2), 1, row_bound=3)
    tile = np.array([[5, -6], [7, -8]], dtype=np.int8)
    packed = pack_beat(layout, Beat(tile, 1, 1, 0))
    # rows (2 bits) = 2, then rows 0..2 of 2 int8 each (row 2 zero), then has_data, stop, last
    assert packed == 2 | (0x00_00_f8_07_fa_05 << 2) | (0b011 << 50)
    assert same(unpack_beat(layout, packed).data, tile)
    empty = np.zeros((0, 2), dtype=np.int8)
    assert same(unpack_beat(layout, pack_beat(layout, Beat(empty, 1, 0, 1))).data, empty)
    with pytest.raises(ValueError, match=r"a tile value of shape \(4, 2\) does not fit"):
        pack_beat(layout, Beat(np.zeros((4, 2), dtype=np.int8), 1, 0, 0))
    with pytest.raises(ValueError, match="a dynamic tile claims 3 rows, more than its bound 2"):
        unpack_beat(beat_layout(Tile(int8, B, 1), 0, row_bound=2), 3 | 1 << 18)


def test_scalars():
    index = beat_layout(Index(), 2)
    assert pack_beat(index, Beat(0xdead_beef, 1, 2, 0)) == 0xdead_beef | 1 << 32 | 2 << 33
    assert unpack_beat(index, 0xdead_beef | 1 << 32 | 2 << 33) == Beat(0xdead_beef, 1, 2, 0)
    buffers = beat_layout(Buffer(Tile(int8, 2, 2), (4,)), 1)
    packed = pack_beat(buffers, Beat(BufRef(513), 1, 0, 1))
    assert packed == 513 | 1 << 16 | 1 << 18
    assert unpack_beat(buffers, packed) == Beat(513, 1, 0, 1)
    flags = beat_layout(Bool(), 0)
    assert [pack_beat(flags, Beat(v, 1, 0, 0)) for v in (False, True, np.bool_(True), 1)] == \
           [0b10, 0b11, 0b11, 0b11]
    select = beat_layout(Select(4), 1)
    assert pack_beat(select, Beat(0b1010, 1, 1, 0)) == 0b1_1_1010
    assert unpack_beat(select, 0b1_1_1010).data == 0b1010


@pytest.mark.parametrize("elem, value, message", [
    (Index(), -1, r"-1 does not fit unsigned\(32\)"),
    (Index(), 1 << 32, r"4294967296 does not fit unsigned\(32\)"),
    (Select(3), 8, r"8 does not fit unsigned\(3\)"),
    (Buffer(Tile(int8, 1, 1), (2,)), BufRef(1 << 16), r"65536 does not fit unsigned\(16\)"),
    (Index(), 1.0, r"expected an int for unsigned\(32\), not 1.0"),
    (Tuple(Index(), Bool()), (1,), r"expected a tuple of 2 values"),
])
def test_scalar_errors(elem, value, message):
    with pytest.raises((ValueError, TypeError), match=message):
        pack_beat(beat_layout(elem, 1), Beat(value, 1, 0, 0))


def test_beat_field_errors():
    layout = beat_layout(Index(), 2)
    with pytest.raises(ValueError, match=r"beat field stop=4 does not fit 2 bit\(s\)"):
        pack_beat(layout, Beat(1, 1, 4, 0))
    with pytest.raises(ValueError, match=r"beat field has_data=2 does not fit 1 bit\(s\)"):
        pack_beat(layout, Beat(1, 2, 0, 0))
    with pytest.raises(ValueError, match="has has_data=1 but no data"):
        pack_beat(layout, Beat(None, 1, 0, 0))
    with pytest.raises(ValueError, match=r"does not fit the 36-bit beat layout"):
        unpack_beat(layout, 1 << 36)
    with pytest.raises(TypeError, match="expected a beat layout from beat_layout()"):
        pack_beat(element_layout(Tile(int8, 1, 1)), Beat(1, 1, 0, 0))


def test_no_data_beats_pack_zero_data_and_unpack_none():
    layout = beat_layout(Tile(int16, 2, 2), 2)
    assert pack_beat(layout, Beat(None, 0, 2, 1)) == (2 << 65) | (1 << 67)
    # data bits of a has_data = 0 beat are ignored, and a stale value in Beat.data is not packed
    assert unpack_beat(layout, 0xffff | (1 << 65)) == Beat(None, 0, 1, 0)
    stale = np.ones((2, 2), dtype=np.int16)
    assert pack_beat(layout, Beat(stale, 0, 1, 0)) == 1 << 65


def test_pack_element_matches_beat_data_field():
    elem = Tuple(Tile(int8, 1, 2), Index())
    shape = element_layout(elem)
    value = (np.array([[-1, 2]], dtype=np.int8), 7)
    bits = pack_element(shape, value)
    assert bits == 0x02ff | 7 << 16
    assert same(unpack_element(shape, bits), value)
    assert pack_beat(beat_layout(elem, 0), Beat(value, 1, 0, 0)) == bits | 1 << 48
    assert unpack_element(unsigned(32), 5) == 5
    with pytest.raises(ValueError, match="does not fit 48 bits"):
        unpack_element(shape, 1 << 48)


# Properties -------------------------------------------------------------------------------------

_TILE_DTYPES = sorted(DTYPES.values(), key=lambda d: d.name)


@st.composite
def tile_values(draw, dtype, rows, cols):
    bits = draw(st.lists(st.integers(0, (1 << dtype.bits) - 1),
                         min_size=rows * cols, max_size=rows * cols))
    raw = np.array(bits, dtype={8: np.uint8, 16: np.uint16, 32: np.uint32}[dtype.bits])
    return raw.view(dtype.np).reshape(rows, cols)  # every bit pattern, NaNs and negatives too


@st.composite
def elem_and_value(draw, depth=0):
    kind = draw(st.sampled_from(["tile", "dyntile", "index", "bool", "select", "buffer"]
                                + (["tuple"] if depth < 2 else [])))
    if kind in ("tile", "dyntile"):
        dtype = draw(st.sampled_from(_TILE_DTYPES))
        cols = draw(st.integers(1, 3))
        if kind == "tile":
            rows = draw(st.integers(1, 3))
            return Tile(dtype, rows, cols), draw(tile_values(dtype, rows, cols))
        rows = draw(st.integers(0, 3))
        return Tile(dtype, B, cols), draw(tile_values(dtype, rows, cols))
    if kind == "index":
        return Index(), draw(st.integers(0, 2**32 - 1))
    if kind == "bool":
        return Bool(), draw(st.integers(0, 1))
    if kind == "select":
        n = draw(st.integers(1, 40))
        return Select(n), draw(st.integers(0, 2**n - 1))
    if kind == "buffer":
        return Buffer(Tile(int8, 2, 2), (3,)), draw(st.integers(0, 2**16 - 1))
    parts = draw(st.lists(elem_and_value(depth + 1), min_size=1, max_size=3))
    return Tuple(*(e for e, _ in parts)), tuple(v for _, v in parts)


@given(ev=elem_and_value(), rank=st.integers(0, 9), stop=st.integers(0, 9),
       last=st.integers(0, 1))
def test_round_trip_any_element(ev, rank, stop, last):
    elem, value = ev
    layout = beat_layout(elem, rank, row_bound=3)
    beat = Beat(value, 1, min(stop, rank), last)
    bits = pack_beat(layout, beat)
    assert 0 <= bits < 1 << layout.size
    assert bits >> (layout.size - 1) == last
    out = unpack_beat(layout, bits)
    assert (out.has_data, out.stop, out.last) == (1, beat.stop, last)
    assert same(out.data, value)
    assert pack_beat(layout, out) == bits


@given(tensors=st.lists(st.lists(st.lists(st.integers(-128, 127), max_size=3), max_size=3),
                        max_size=3))
def test_round_trip_stream(tensors):
    """A rank-2 stream of 1x1 int8 tiles survives tokens -> beats -> bits -> beats -> tokens."""
    layout = beat_layout(Tile(int8, 1, 1), 2)
    tiles = [[[np.array([[x]], dtype=np.int8) for x in row] for row in t] for t in tensors]
    bits = [pack_beat(layout, b) for b in to_beats(from_nested(tiles, 2))]
    decoded = to_nested(from_beats([unpack_beat(layout, b) for b in bits]), 2)
    as_ints = [[[int(t[0, 0]) for t in row] for row in x] for x in decoded]
    assert as_ints == to_nested(from_nested(tensors, 2), 2)


# The pipelined BeatReader against the packed beats ----------------------------------------------

from stepforge.hdl.beat_io import BeatReader, words_per_beat              # noqa: E402
from stepforge.hdl.config import HardwareConfig                          # noqa: E402
from stepforge.hdl.memory import PIPELINE_LATENCY, MemoryGeometry, MemoryModel  # noqa: E402
from stepforge.hdl.unit import ErrorCode                                 # noqa: E402
from stepforge.sim.rtl.testbench import simulate                         # noqa: E402
from stepforge.sim.rtl.testbench_memory import MemoryBench               # noqa: E402

from .test_tokens import ragged                                          # noqa: E402

READER_MEMORY = 4096


def read_stream(elem, rank, beats, *, channels=4, bpc=16, latency=PIPELINE_LATENCY, base=3,
                max_beats=None, depth=None, ready_p=1.0, stall_p=0.0, seed=0, garbage=0xA5):
    """Pack ``beats`` into a memory from word ``base`` (every other byte ``garbage``: what a
    reader finds past the stream), read them back with a BeatReader and return ``(reader, run,
    counters)``: ``counters`` are the reader's ``bytes`` and ``beats`` and the memory's
    ``bytes_read`` once the reader is idle (every speculative burst back)."""
    layout = beat_layout(elem, rank)
    cfg = HardwareConfig.sim().replace(mem_channels=channels, mem_bytes_per_channel=bpc,
                                       mem_latency=latency)
    geometry = MemoryGeometry.from_config(cfg, READER_MEMORY)
    reader = BeatReader(layout, geometry, base, max_beats, depth=depth)
    W, wpb = geometry.word_bytes, words_per_beat(layout, geometry)
    image = bytearray([garbage]) * READER_MEMORY
    for k, b in enumerate(beats):
        image[(base + k * wpb) * W:(base + (k + 1) * wpb) * W] = \
            pack_beat(layout, b).to_bytes(wpb * W, "little")
    memory = MemoryModel.for_clients(cfg, READER_MEMORY, [reader], bytes(image))
    bench = MemoryBench(reader, memory, stall_p=stall_p, seed=seed + 1)

    async def counters(ctx):
        for _ in range(200):
            if not ctx.get(reader.status.busy):
                break
            await ctx.tick()
        for _ in range(geometry.latency):     # the memory counts a line before it answers
            await ctx.tick()
        return {"bytes": ctx.get(reader.bytes), "beats": ctx.get(reader.beats),
                "memory": ctx.get(memory.bytes_read), "busy": ctx.get(reader.status.busy)}

    run = simulate(bench, {}, {"out": layout}, ready_p=ready_p, seed=seed, inspect=counters)
    return reader, run, run.inspected


@st.composite
def reader_streams(draw):
    """A stream of Index, Select or tile beats (1-3 memory lines a beat on 1-4 channels)."""
    kind = draw(st.sampled_from(["index", "select", "tile"]))
    rank = draw(st.integers(1, 3))
    leaf = {"index": st.integers(0, 2**32 - 1), "select": st.integers(0, 7),
            "tile": st.integers(-2**15, 2**15 - 1)}[kind]
    nested = draw(ragged(rank, leaf, 5))
    elem = {"index": Index(), "select": Select(3), "tile": Tile(int16, 2, 4)}[kind]
    if kind == "tile":
        def tiles(x, r):
            return np.full((2, 4), x, dtype=np.int16) if r == 0 else [tiles(y, r - 1) for y in x]
        nested = tiles(nested, rank + 1)
    return elem, rank, to_beats(from_nested(nested, rank))


@settings(deadline=None, max_examples=50)
@given(stream=reader_streams(), channels=st.sampled_from([1, 2, 4]),
       bpc=st.sampled_from([4, 8, 16]), latency=st.integers(PIPELINE_LATENCY, PIPELINE_LATENCY + 3),
       base=st.integers(0, 9), bound=st.sampled_from([None, 0, 1, 7]),
       depth=st.sampled_from([None, 1, 2, 3]), ready_p=st.floats(0.2, 1.0),
       stall_p=st.floats(0.0, 0.6), seed=st.integers(0, 2**16))
def test_reader_delivers_every_beat_once(stream, channels, bpc, latency, base, bound, depth,
                                         ready_p, stall_p, seed):
    """Random beats, random ``out.ready`` and memory stalls: the exact beats in order, nothing
    dropped or duplicated; ``bytes`` agrees with the memory's count (speculative bursts
    included), at most ``depth - 1`` of them and none at or past ``max_beats``."""
    elem, rank, beats = stream
    max_beats = None if bound is None else len(beats) + bound
    reader, run, got = read_stream(elem, rank, beats, channels=channels, bpc=bpc,
                                   latency=latency, base=base, max_beats=max_beats,
                                   depth=depth, ready_p=ready_p, stall_p=stall_p, seed=seed)
    layout = beat_layout(elem, rank)
    assert run.payloads["out"] == [pack_beat(layout, b) for b in beats]
    assert run.error == 0 and got["busy"] == 0
    per_beat = reader.wpb * reader.geometry.word_bytes
    assert got["beats"] == len(beats)
    assert got["bytes"] == got["memory"]
    extra = got["bytes"] // per_beat - len(beats)
    assert got["bytes"] % per_beat == 0 and 0 <= extra <= reader.depth - 1
    if max_beats is not None:
        assert extra <= max_beats - len(beats)


@pytest.mark.parametrize("elem, rank, n, lines", [(Index(), 1, 64, 1), (Select(3), 2, 48, 1),
                                                  (Tile(int16, 4, 4), 1, 24, 1),
                                                  (Tile(int32, 4, 4), 1, 24, 2),
                                                  (Tile(int32, 4, 8), 1, 16, 3)])
def test_reader_throughput(elem, rank, n, lines):
    """With the memory free and ``out`` always ready the reader delivers one beat every
    ``lines`` cycles (the memory moves one line per cycle): beat ``k`` in cycle ``mem_latency + 2
    + lines + k * lines`` (its burst is granted 2 cycles after the request, its last line comes
    ``mem_latency + lines - 1`` later and one more cycle puts it through the FIFO). The
    unpipelined reader took ``lines + mem_latency + 3`` cycles per beat."""
    if isinstance(elem, Tile):
        value = np.arange(elem.rows * elem.cols).reshape(elem.rows, elem.cols).astype(elem.dtype.np)
        flat = [value] * n
    else:
        flat = [x % 8 for x in range(n)]
    tokens = from_nested([flat] if rank == 1 else [[flat]], rank)
    beats = to_beats(tokens)
    reader, run, got = read_stream(elem, rank, beats)
    assert reader.nlines == lines
    assert run.payloads["out"] == [pack_beat(beat_layout(elem, rank), b) for b in beats]
    assert run.cycles == (len(beats) - 1) * lines + 1          # first to last beat
    first = PIPELINE_LATENCY + 2 + lines                        # cycles before the first beat
    assert run.status_counts["stall_in"] == first + (len(beats) - 1) * (lines - 1)
    assert run.status_counts["stall_out"] == 0


def test_reader_stops_at_max_beats():
    """A stream that fills its room exactly: no request goes past beat ``max_beats - 1``, so the
    memory reads exactly the stream's bytes."""
    beats = to_beats(from_nested([list(range(20))], 1))
    reader, run, got = read_stream(Index(), 1, beats, max_beats=len(beats))
    assert [unpack_beat(beat_layout(Index(), 1), p).data for p in run.payloads["out"]] == \
        list(range(20))
    assert got["bytes"] == got["memory"] == len(beats) * reader.wpb * reader.geometry.word_bytes


def test_reader_without_last_within_max_beats_is_over_bound():
    """A stream whose beat ``max_beats - 1`` has no ``last`` raises OVER_BOUND once every beat
    has come back (and reads nothing past its room)."""
    beats = to_beats(from_nested([list(range(12))], 1))
    reader, run, got = read_stream(Index(), 1, beats, max_beats=8)
    assert run.error == 1 and run.code == ErrorCode.OVER_BOUND
    assert len(run.payloads["out"]) == 8
    assert got["bytes"] == got["memory"] == 8 * reader.wpb * reader.geometry.word_bytes


@pytest.mark.parametrize("kwargs, message", [
    ({"max_beats": 0}, r"BeatReader max_beats must be None or an int >= 1, not 0"),
    ({"depth": True}, r"BeatReader depth must be None or an int >= 1, not True"),
])
def test_reader_parameter_errors(kwargs, message):
    g = MemoryGeometry.from_config(HardwareConfig.sim(), READER_MEMORY)
    with pytest.raises(ValueError, match=message):
        BeatReader(beat_layout(Index(), 1), g, 0, **kwargs)
