"""MemoryModel: bursts, lines, latency, round robin, counters, the debug port and the back doors."""

import random

import numpy as np
import pytest
from amaranth.hdl import Value
from amaranth.sim import Simulator
from hypothesis import given, settings, strategies as st

from stepforge.compiler.types import int8, int16, int32
from stepforge.hdl.config import HardwareConfig
from stepforge.hdl.memory import (MemoryGeometry, MemoryModel, MemoryPort, TensorPlacement,
                                  array_from_bytes, array_to_bytes, backdoor_read, backdoor_write)


def config(channels=4, bpc=16, latency=4, **kw):
    return HardwareConfig.sim().replace(mem_channels=channels, mem_bytes_per_channel=bpc,
                                        mem_latency=latency, **kw)


def drive(model, reads=(), writes=(), *, valid_p=1.0, stall_p=0.0, seed=0, debug=(),
          max_cycles=3000):
    """Run bursts on the model's ports; return what each read client received and the timing.

    ``reads[c]``: lists of ``(addr, count)`` or ``(addr, count, rows, stride)``; ``writes[c]``:
    lists of ``(addr, words)`` or ``(addr, count, rows, stride, words)``.
    ``debug``: ``(op, addr, value)`` accesses performed first (``"w"`` writes, ``"r"`` reads).
    Returns ``dict(lines=[[(count, last, words)] per read client], first=[cycle], memory=bytes,
    bytes_read, bytes_written, debug=[values read], grants=[client per cycle])``.
    """
    g = model.geometry
    L = g.lanes
    rng = random.Random(seed)
    out = {"lines": [[] for _ in reads], "first": [None] * len(reads), "debug": [], "grants": []}

    async def bench(ctx):
        dbg = model.debug
        for op, addr, value in debug:
            ctx.set(dbg.addr, addr)
            ctx.set(dbg.we, op == "w")
            ctx.set(dbg.wdata, value if op == "w" else 0)
            ctx.set(dbg.re, op == "r")
            await ctx.tick()
            ctx.set(dbg.we, 0)
            ctx.set(dbg.re, 0)
            if op == "r":
                assert ctx.get(dbg.rvalid)
                out["debug"].append(ctx.get(dbg.rdata))
                await ctx.tick()  # rdata holds
                out["debug"][-1] = (out["debug"][-1], ctx.get(dbg.rdata))
        rq = [[burst(b) for b in r] for r in reads]
        wq = [[burst(b[:-1] if len(b) == 5 else (b[0], len(b[1]))) for b in w] for w in writes]
        # Write lines: each burst cut into lines as the memory takes them.
        wl = []
        for w, bursts in zip(writes, wq):
            lines = []
            for b, (_, count, rows, stride) in zip(w, bursts):
                words = list(b[-1])
                for k in g.burst_lines(count, rows, stride):
                    lines.append(words[:k])
                    words = words[k:]
            wl.append(lines)
        expect_lines = [sum(len(g.burst_lines(*b[1:])) for b in r) for r in rq]
        holding_r = [False] * len(reads)
        holding_w = [False] * len(writes)
        holding_d = [False] * len(writes)
        for cycle in range(max_cycles):
            if (all(len(out["lines"][c]) == expect_lines[c] for c in range(len(reads)))
                    and not any(wq) and not any(wl)):
                # every write line is taken; let the memory settle one cycle
                await ctx.tick()
                break
            ctx.set(model.stall, rng.random() < stall_p)
            for c, port in enumerate(model.read[i] for i in range(len(reads))):
                v = bool(rq[c]) and (holding_r[c] or rng.random() < valid_p)
                holding_r[c] = v
                ctx.set(port.req.valid, v)
                if v:
                    set_request(ctx, port, rq[c][0])
            for c, port in enumerate(model.write[i] for i in range(len(writes))):
                v = bool(wq[c]) and (holding_w[c] or rng.random() < valid_p)
                holding_w[c] = v
                ctx.set(port.req.valid, v)
                if v:
                    set_request(ctx, port, wq[c][0])
                dv = bool(wl[c]) and (holding_d[c] or rng.random() < valid_p)
                holding_d[c] = dv
                ctx.set(port.data.valid, dv)
                if dv:
                    words = wl[c][0] + [0] * (L - len(wl[c][0]))
                    ctx.set(Value.cast(port.data.payload),
                            sum(w << (i * g.word_bits) for i, w in enumerate(words)))
            # sample
            took_r = [ctx.get(model.read[c].req.valid) and ctx.get(model.read[c].req.ready)
                      for c in range(len(reads))]
            took_w = [ctx.get(model.write[c].req.valid) and ctx.get(model.write[c].req.ready)
                      for c in range(len(writes))]
            took_d = [ctx.get(model.write[c].data.valid) and ctx.get(model.write[c].data.ready)
                      for c in range(len(writes))]
            for c in range(len(reads)):
                resp = model.read[c].resp
                if ctx.get(resp.valid):
                    n = ctx.get(resp.count)
                    words = list(ctx.get(resp.data))[:n]
                    out["lines"][c].append((n, ctx.get(resp.last), words))
                    if out["first"][c] is None:
                        out["first"][c] = cycle
            grant = None
            for c in range(len(writes)):
                if took_d[c]:
                    grant = len(reads) + c
            out["grants"].append(grant)
            await ctx.tick()
            for c in range(len(reads)):
                if took_r[c]:
                    rq[c].pop(0)
                    holding_r[c] = False
            for c in range(len(writes)):
                if took_w[c]:
                    wq[c].pop(0)
                    holding_w[c] = False
                if took_d[c]:
                    wl[c].pop(0)
                    holding_d[c] = False
        else:
            raise AssertionError("the memory did not finish")
        out["cycles"] = cycle
        out["memory"] = backdoor_read(ctx, model, 0, g.size_words)
        out["bytes_read"] = ctx.get(model.bytes_read)
        out["bytes_written"] = ctx.get(model.bytes_written)

    sim = Simulator(model)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


def burst(b):
    """``(addr, count, rows, stride)`` of a read burst written with or without rows/stride."""
    return tuple(b) if len(b) == 4 else (b[0], b[1], 1, 0)


def set_request(ctx, port, b):
    addr, count, rows, stride = b
    p = port.req.payload
    ctx.set(p.addr, addr)
    ctx.set(p.count, count)
    ctx.set(p.rows, rows)
    ctx.set(p.stride, stride)


def burst_words(flat, addr, count, rows=1, stride=0):
    return [w for r in range(max(rows, 1)) for w in flat[addr + r * stride:addr + r * stride + count]]


def words_of(buf, g):
    return [int.from_bytes(buf[i:i + g.word_bytes], "little") for i in range(0, len(buf), g.word_bytes)]


# -- geometry ---------------------------------------------------------------------------------

def test_geometry_of_the_presets():
    g = MemoryGeometry.from_config(HardwareConfig.sim(), 4096)
    # 4 channels x 16 B, 4x4 int16 tiles (8-byte rows): 8-byte words, 8 lanes, 64 B per cycle
    assert (g.word_bytes, g.lanes, g.line_bytes, g.size_words, g.rows) == (8, 8, 64, 512, 64)
    assert g.addr_bits == 9 and g.lines(17) == 3
    g = MemoryGeometry.from_config(HardwareConfig.ice40_up5k(), 1000)
    assert (g.word_bytes, g.lanes, g.line_bytes, g.size_words) == (2, 1, 2, 500)
    g = MemoryGeometry.from_config(HardwareConfig.ecp5_85f(), 1024)
    assert (g.word_bytes, g.lanes, g.line_bytes) == (8, 2, 16)
    with pytest.raises(ValueError, match="does not divide"):
        MemoryGeometry.from_config(HardwareConfig.sim(), 1024, word_bytes=3)
    with pytest.raises(ValueError, match="whole number"):
        g.words(12, "a row")


def test_placement_and_request_pattern():
    g = MemoryGeometry.from_config(HardwareConfig.sim(), 4096)
    p = TensorPlacement(g, int16, (8, 16), (4, 4), base=10)
    # a 4x4 int16 tile is 4 rows of one 8-byte word, 4 words (one tensor row) apart
    assert (p.row_words, p.tensor_row_words, p.tile_words, p.grid) == (1, 4, 4, (2, 4))
    # one burst per tile: 4 segments of 1 word, 4 words apart; lanes 0, 4, 0, 4: two lines
    assert p.burst(5) == (10 + 16 + 1, 1, 4, 4) and p.tile_lines == [2, 2]
    full = TensorPlacement(g, int16, (8, 4), (4, 4))
    assert full.contiguous and full.burst(1) == (4, 4, 1, 0) and full.tile_lines == [4]
    assert sum(p.tile_lines) * g.word_bytes == p.tile_bytes == 32
    with pytest.raises(ValueError, match="whole number"):
        TensorPlacement(g, int8, (8, 16), (4, 4))       # 4-byte tile rows, 8-byte words
    with pytest.raises(ValueError, match="does not fit"):
        TensorPlacement(g, int32, (64, 32), (4, 4))
    with pytest.raises(ValueError, match="does not divide"):
        TensorPlacement(g, int16, (8, 16), (3, 4))


def test_repr_and_ports():
    m = MemoryModel(config(), 256, b"\x01\x02", read_ports=2, write_ports=1)
    m._MustUse__silence = True  # never elaborated
    assert repr(m).startswith("MemoryModel(HardwareConfig(") and "init=<2 bytes>" in repr(m)
    assert "read_ports=2, write_ports=1, word_bytes=8" in repr(m)
    assert m.read[1].signature.flip() == MemoryPort(m.geometry, "read")
    assert m.write[0].signature.flip() == MemoryPort(m.geometry, "write")
    with pytest.raises(ValueError, match="more than"):
        MemoryModel(config(), 8, bytes(9))
    with pytest.raises(ValueError, match="at least one"):
        MemoryModel(config(), 64, read_ports=0, write_ports=0)


def test_array_bytes_round_trip():
    a = np.arange(-6, 6, dtype=np.int16).reshape(3, 4)
    buf = array_to_bytes(a, int16)
    assert buf[:2] == (-6).to_bytes(2, "little", signed=True) and len(buf) == 24
    assert (array_from_bytes(buf, (3, 4), int16) == a).all()


# -- behaviour --------------------------------------------------------------------------------

@st.composite
def memory_case(draw):
    channels = draw(st.sampled_from([1, 2, 3, 4]))
    bpc = draw(st.sampled_from([2, 4, 8, 16]))
    # at most 16 lanes: wider lines cost simulation time, not coverage
    word = draw(st.sampled_from([w for w in (1, 2, 4, 8) if bpc % w == 0
                                 and channels * bpc // w <= 16]))
    latency = draw(st.integers(0, 3))
    return channels, bpc, word, latency


@settings(deadline=None, max_examples=25)
@given(memory_case(), st.integers(0, 2**16), st.floats(0.3, 1.0), st.floats(0.0, 0.5))
def test_random_bursts_match_a_flat_memory(case, seed, valid_p, stall_p):
    channels, bpc, word, latency = case
    rng = random.Random(seed)
    size = 96 * word
    init = bytes(rng.randrange(256) for _ in range(size // 2))
    model = MemoryModel(config(channels, bpc, latency), size, init, read_ports=2, write_ports=2,
                        word_bytes=word)
    g = model.geometry
    half, quarter = g.size_words // 2, g.size_words // 4

    def bursts(lo, hi, k):
        # 1-D and 2-D bursts (rows segments, stride apart) inside [lo, hi)
        out = []
        for _ in range(k):
            rows = rng.choice([0, 1, 1, 2, 3, 4])
            count = rng.randrange(0, min(hi - lo, 2 * g.lanes + 2) // max(rows, 1) + 1)
            span = max(rows, 1) - 1
            stride = rng.randrange(count, count + 6) if span else rng.choice([0, 5])
            a = rng.randrange(lo, max(lo + 1, hi - span * stride - count + 1))
            if a + span * stride + count > hi:
                rows, span, stride = 1, 0, 0
                count = min(count, hi - a)
            out.append((a, count, rows, stride))
        return out
    reads = [bursts(0, half, rng.randrange(1, 5)) for _ in range(2)]
    writes = [[(*b, [rng.randrange(1 << g.word_bits) for _ in range(b[1] * max(b[2], 1))])
               for b in bursts(half + q * quarter, half + (q + 1) * quarter, rng.randrange(0, 4))]
              for q in range(2)]
    res = drive(model, reads, writes, valid_p=valid_p, stall_p=stall_p, seed=seed)
    flat = words_of(init + bytes(g.size_bytes - len(init)), g)
    for c, rb in enumerate(reads):
        want = []
        for b in rb:
            words = burst_words(flat, *b)
            counts = g.burst_lines(*b[1:])
            for i, k in enumerate(counts):
                want.append((k, int(i == len(counts) - 1), words[:k]))
                words = words[k:]
        assert res["lines"][c] == want
    for wb in writes:
        for a, count, rows, stride, ws in wb:
            for r in range(max(rows, 1)):
                flat[a + r * stride:a + r * stride + count] = ws[r * count:(r + 1) * count]
    assert words_of(res["memory"], g)[:len(flat)] == flat
    assert res["bytes_read"] == sum(b[1] * max(b[2], 1) for rb in reads for b in rb) * word
    assert res["bytes_written"] == sum(len(b[-1]) for wb in writes for b in wb) * word


def test_line_packing_rule():
    g = MemoryGeometry.from_config(HardwareConfig.sim(), 4096)      # 8 lanes
    assert g.burst_lines(4, 4, 16) == [4, 4, 4, 4]     # stride 16 = 0 mod 8: every row conflicts
    assert g.burst_lines(1, 4, 4) == [2, 2]            # stride 4: rows at lanes 0, 4, 0, 4
    assert g.burst_lines(1, 4, 2) == [4]               # stride 2: lanes 0, 2, 4, 6
    assert g.burst_lines(2, 3, 3) == [6]               # lanes {0,1}, {3,4}, {6,7}
    assert g.burst_lines(3, 3, 8) == [3, 3, 3]
    assert g.burst_lines(20, 2, 40) == [8, 8, 4, 8, 8, 4]      # long segments go alone
    assert g.burst_lines(1, 12, 1) == [8, 4]           # contiguous rows; at most 8 per line
    assert g.burst_lines(0, 3, 1) == [] and g.burst_lines(5) == [5]
    narrow = MemoryGeometry.from_config(HardwareConfig.sim(), 4096, max_segments=2)
    assert narrow.burst_lines(1, 4, 1) == [2, 2]


@pytest.mark.parametrize("count, rows, stride", [(1, 4, 4), (1, 4, 2), (2, 3, 3), (3, 3, 8),
                                                 (20, 2, 40), (1, 12, 1), (4, 2, 5)])
def test_strided_bursts_take_one_line_per_cycle(count, rows, stride):
    init = bytes(range(256)) * 8
    model = MemoryModel(config(4, 16, 2), 2048, init)
    g = model.geometry
    res = drive(model, [[(3, count, rows, stride)]])
    counts = g.burst_lines(count, rows, stride)
    assert [n for n, _, _ in res["lines"][0]] == counts
    assert res["cycles"] == 1 + g.latency + len(counts)          # one line per cycle
    flat = words_of(init, g)
    assert [w for _, _, ws in res["lines"][0] for w in ws] == burst_words(flat, 3, count, rows,
                                                                           stride)


@pytest.mark.parametrize("latency", [0, 1, 4])
def test_latency_and_peak_bandwidth(latency):
    model = MemoryModel(config(4, 16, latency), 2048, bytes(range(256)) * 8, read_ports=1,
                        write_ports=1)
    g = model.geometry
    res = drive(model, [[(3, 8 * g.lanes)]])
    lines = res["lines"][0]
    # accepted in cycle 0, first line granted in cycle 1, data `latency` cycles later
    assert res["first"][0] == 1 + latency
    assert [n for n, _, _ in lines] == [g.lanes] * 8           # a full line (64 B) per cycle
    assert res["cycles"] == 1 + latency + 8                     # back to back, no bubble
    assert res["bytes_read"] == 8 * g.line_bytes


def test_round_robin_shares_lines_fairly():
    model = MemoryModel(config(2, 8, 2), 1024, read_ports=2, write_ports=1)
    g = model.geometry
    words = [[7] * (4 * g.lanes)]
    res = drive(model, [[(0, 4 * g.lanes)], [(16, 4 * g.lanes)]], [[(64, words[0])]])
    # three clients with a burst of four lines each, accepted in cycle 0: the grants rotate
    # read 0, read 1, write, read 0, ... from cycle 1 on, one line per cycle
    assert [i for i, c in enumerate(res["grants"]) if c == 2] == [3, 6, 9, 12]
    assert res["first"] == [1 + g.latency, 2 + g.latency]
    assert [n for n, _, _ in res["lines"][0]] == [g.lanes] * 4
    assert res["bytes_read"] == 2 * res["bytes_written"] == 8 * g.lanes * g.word_bytes


def test_stall_blocks_every_grant():
    model = MemoryModel(config(1, 4, 1), 256, read_ports=1, write_ports=0)
    res = drive(model, [[(0, 4)]], stall_p=0.0)
    fast = res["cycles"]
    res = drive(model, [[(0, 4)]], stall_p=0.6, seed=3)
    assert res["cycles"] > fast and len(res["lines"][0]) == 4


@pytest.mark.parametrize("latency", [0, 2])
def test_debug_port_and_init(latency):
    init = bytes(range(1, 65))
    model = MemoryModel(config(2, 8, latency), 128, init, read_ports=1, write_ports=1)
    g = model.geometry
    res = drive(model, [[(2, 3)]], debug=[("r", 1, 0), ("w", 2, 0xDEADBEEF), ("w", 9, 5),
                                          ("r", 2, 0), ("r", 9, 0)])
    w1 = int.from_bytes(init[8:16], "little")
    assert res["debug"] == [(w1, w1), (0xDEADBEEF, 0xDEADBEEF), (5, 5)]
    # a client read sees the debug write; debug accesses are not counted as traffic
    assert res["lines"][0] == [(2, 0, [0xDEADBEEF, int.from_bytes(init[24:32], "little")]),
                               (1, 1, [int.from_bytes(init[32:40], "little")])]
    assert res["bytes_read"] == 3 * g.word_bytes and res["bytes_written"] == 0


def test_backdoor_write_then_client_read():
    model = MemoryModel(config(), 512)
    got = {}

    async def bench(ctx):
        backdoor_write(ctx, model, 5, bytes(range(24)))
        assert backdoor_read(ctx, model, 5, 3) == bytes(range(24))
        port = model.read[0]
        ctx.set(port.req.valid, 1)
        ctx.set(port.req.payload.addr, 6)
        ctx.set(port.req.payload.count, 1)
        await ctx.tick()
        ctx.set(port.req.valid, 0)
        for _ in range(10):
            if ctx.get(port.resp.valid):
                got["word"] = ctx.get(port.resp.data)[0]
            await ctx.tick()

    sim = Simulator(model)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got["word"] == int.from_bytes(bytes(range(8, 16)), "little")
    with pytest.raises(ValueError, match="leaves the memory"):
        backdoor_read(None, model, 60, 8)


def test_verilog_has_no_variable_shift():
    # word selects are case statements, not `{...} >> index`: Verilator turns such a shift of a
    # concatenation into a wide variable shift (VL_SHIFTR_WWI) on every cycle (docs/toolchain.md)
    from stepforge.sim import verilator as vl
    model = MemoryModel(HardwareConfig.sim(), 4096 * 16, storage="verilog", read_ports=2,
                        write_ports=2, word_bytes=4)
    assert model.geometry.lanes == 16
    verilog = vl.convert(model, name="memory")
    shifts = [line.strip() for line in verilog.splitlines() if ">>" in line]
    assert not shifts, shifts[:3]
