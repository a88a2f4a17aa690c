"""MemoryModel: bursts, lines, the pipeline's exact timing, round robin, counters, the debug port
and the back doors.

Timing of the pipeline (hdl/memory/__init__.py): a request accepted in cycle 0 enters the line
generator's queue (cycle 1) and its first line register (cycle 2), where the arbiter may grant
it; a read line granted in cycle ``t`` is on ``resp`` in cycle ``t + latency``; a write line is
taken (``data.ready``) in the cycle it is granted. So: accepted 0, granted 2, response
``2 + latency``.
"""

import gc
import random

import numpy as np
import pytest
from amaranth.sim import Simulator
from hypothesis import given, settings, strategies as st

from stepforge.compiler.types import int8, int16, int32
from stepforge.hdl.config import HardwareConfig
from stepforge.hdl.memory import (PIPELINE_LATENCY, MemoryGeometry, MemoryModel, MemoryPort,
                                  TensorPlacement, array_from_bytes, array_to_bytes,
                                  LineGenerator, backdoor_read, backdoor_write, fixed_sel,
                                  line_tables)
from stepforge.sim.rtl import verilator as vl

from .helpers import BurstClients

#: Cycles from a request's acceptance to its first line's grant (the queue, the line register).
GRANT_DELAY = 2
#: The shortest latency, the pipeline's own (grant to response) with lanes of one block RAM bank.
LAT = PIPELINE_LATENCY
#: Rows of a lane (64-bit words) that the ECP5 organization cuts into two DP16KD banks: 2,048 rows
#: of 9-bit slices and a last bank of 18-bit slices for the other 52 rows.
BANKED_ROWS = 2100


def config(channels=4, bpc=16, latency=4, **kw):
    return HardwareConfig.sim().replace(mem_channels=channels, mem_bytes_per_channel=bpc,
                                        mem_latency=latency, **kw)


class Trace:
    """What :func:`drive` saw, cycle by cycle.

    Attributes
    ----------
    accepted : dict
        ``("read", c)`` / ``("write", c)``: the cycles the client's requests were accepted.
    lines : list of list of (cycle, count, last, words)
        Each read client's response lines.
    taken : list of list of int
        The cycles each write client's lines were taken (granted).
    stalled, debug_cycles : set of int
        Cycles with ``stall`` high; cycles with a debug access.
    rvalid : list of (cycle, rdata)
        The debug port's read answers.
    """

    def __init__(self, nr, nw):
        self.accepted = {**{("read", c): [] for c in range(nr)},
                         **{("write", c): [] for c in range(nw)}}
        self.lines = [[] for _ in range(nr)]
        self.taken = [[] for _ in range(nw)]
        self.stalled, self.debug_cycles, self.rvalid = set(), set(), []

    def grants(self, latency):
        """``{cycle: ("read" | "write", client)}`` of every granted line (a read line's grant is
        its response cycle minus the latency); ``AssertionError`` if two share a cycle."""
        out = {}
        events = [(t - latency, ("read", c)) for c, ls in enumerate(self.lines) for t, *_ in ls]
        events += [(t, ("write", c)) for c, ts in enumerate(self.taken) for t in ts]
        for t, who in events:
            assert t not in out, f"two lines granted in cycle {t}: {out[t]} and {who}"
            out[t] = who
        return out

    def response_cycles(self, c=0):
        return [t for t, *_ in self.lines[c]]


def drive(model, reads=(), writes=(), *, valid_p=1.0, stall_p=0.0, stall=(), debug=None, seed=0,
          max_cycles=3000):
    """Run bursts on the model's ports in Amaranth's simulator.

    ``reads[c]``: the addresses of read port ``c``'s bursts (its shape is the port's);
    ``writes[c]``: ``(addr, words)`` bursts of write port ``c`` (``count * rows`` words each).
    ``valid_p``: each request and write line is offered with this probability per cycle (and
    held until taken). ``stall``: cycles with ``stall`` high, and at random with ``stall_p``.
    ``debug``: ``{cycle: (op, addr, value)}`` word port accesses (``"w"`` writes, ``"r"`` reads).
    Returns a :class:`Trace` with ``memory`` (bytes), ``bytes_read`` and ``bytes_written`` after
    every line has moved and ``latency + 2`` idle cycles.
    """
    g = model.geometry
    rng = random.Random(seed)
    debug = dict(debug or {})
    stall = set(stall)
    trace = Trace(len(reads), len(writes))
    clients = BurstClients(model, reads, writes, rng, valid_p)
    last_debug = max(debug, default=-1)

    async def bench(ctx):
        dbg = model.debug
        end = None
        for cycle in range(max_cycles):
            if end is None and cycle > last_debug and not clients.writing and all(
                    len(trace.lines[c]) == clients.expect[c] for c in range(len(reads))):
                end = cycle + g.latency + 2          # no response may follow
            if cycle == end:
                break
            s = cycle in stall or rng.random() < stall_p
            ctx.set(model.stall, s)
            if s:
                trace.stalled.add(cycle)
            op, addr, value = debug.get(cycle, (None, 0, 0))
            ctx.set(dbg.addr, addr)
            ctx.set(dbg.we, op == "w")
            ctx.set(dbg.re, op == "r")
            ctx.set(dbg.wdata, value if op == "w" else 0)
            if op:
                trace.debug_cycles.add(cycle)
            took, lines = clients.offer(ctx)
            for c, line in enumerate(lines):
                if line is not None:                     # words past its count are unspecified
                    trace.lines[c].append((cycle, *line))
            if ctx.get(dbg.rvalid):
                trace.rvalid.append((cycle, ctx.get(dbg.rdata)))
            await ctx.tick()
            clients.advance(took)
            for c, taken in enumerate(took["read"]):
                if taken:
                    trace.accepted["read", c].append(cycle)
            for c, (taken, data) in enumerate(zip(took["write"], took["data"])):
                if taken:
                    trace.accepted["write", c].append(cycle)
                if data:
                    trace.taken[c].append(cycle)
        else:
            raise AssertionError("the memory did not finish")
        trace.memory = backdoor_read(ctx, model, 0, g.rows * g.lanes)
        trace.bytes_read = ctx.get(model.bytes_read)
        trace.bytes_written = ctx.get(model.bytes_written)

    sim = Simulator(model)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return trace


def replay(model, trace, reads, writes, debug, flat):
    """Check every read line and debug read against a flat memory updated in grant order.

    ``flat`` (word values) is updated in place with the writes. A write granted in cycle ``t`` is
    seen by every read granted (or debug read issued) after ``t``.
    """
    g = model.geometry
    events = []             # (cycle, kind, ...)
    for c, addrs in enumerate(reads):
        offs = g.line_offsets(*model.read_ports[c][:3])
        want = [(a, k, o) for a in addrs for k, o in enumerate(offs)]
        assert len(trace.lines[c]) == len(want)
        for (t, n, last, words), (a, k, o) in zip(trace.lines[c], want):
            assert (n, last) == (len(o), int(k == len(offs) - 1))
            events.append((t - g.latency, "r", [a + x for x in o], words))
    for c, bursts in enumerate(writes):
        offs = g.line_offsets(*model.write_ports[c][:3])
        lines = []
        for a, words in bursts:
            w = 0
            for o in offs:
                lines.append(([a + x for x in o], words[w:w + len(o)]))
                w += len(o)
        assert len(trace.taken[c]) == len(lines)
        for t, (addrs, words) in zip(trace.taken[c], lines):
            events.append((t, "w", addrs, words))
    # a word port access offered in cycle t takes the memory in cycle t + 1 (stage W)
    for t, (op, addr, value) in debug.items():
        events.append((t + 1, "dw" if op == "w" else "dr", [addr], [value]))
    answers = dict(trace.rvalid)
    wl = model.word_latency
    assert sorted(answers) == sorted(t + wl for t, (op, _, _) in debug.items() if op == "r")
    for t, kind, addrs, words in sorted(events, key=lambda e: e[0]):
        if kind in ("w", "dw"):
            for a, v in zip(addrs, words):
                flat[a] = v
        elif kind == "r":
            assert words == [flat[a] for a in addrs], f"read line granted in cycle {t}"
        else:
            assert answers[t - 1 + wl] == flat[addrs[0]], f"debug read in cycle {t - 1}"


def words_of(buf, g):
    return [int.from_bytes(buf[i:i + g.word_bytes], "little") for i in range(0, len(buf), g.word_bytes)]


def burst_words(flat, addr, count, rows=1, stride=0):
    return [w for r in range(rows) for w in flat[addr + r * stride:addr + r * stride + count]]


def check_timing(model, trace, reads, writes):
    """One line per cycle, none while stalled or in the cycle after a debug access, and every
    burst's first line granted no earlier than two cycles after its request was accepted."""
    g = model.geometry
    grants = trace.grants(g.latency)
    assert not set(grants) & (trace.stalled | {t + 1 for t in trace.debug_cycles})
    for kind, clients in (("read", reads), ("write", writes)):
        for c, bursts in enumerate(clients):
            burst = (model.read_ports if kind == "read" else model.write_ports)[c]
            n = g.lines(*burst[:3])
            cycles = sorted(t for t, who in grants.items() if who == (kind, c))
            assert len(trace.accepted[kind, c]) == len(bursts)
            for k, acc in enumerate(trace.accepted[kind, c]):
                assert cycles[k * n] >= acc + GRANT_DELAY


# -- geometry ---------------------------------------------------------------------------------

def test_geometry_of_the_presets():
    g = MemoryGeometry.from_config(HardwareConfig.sim(), 4096)
    # 4 channels x 16 B, 4x4 int16 tiles (8-byte rows): 8-byte words, 8 lanes, 64 B per cycle
    assert (g.word_bytes, g.lanes, g.line_bytes, g.size_words, g.rows) == (8, 8, 64, 512, 64)
    assert (g.addr_bits, g.lane_bits, g.latency, g.lines(17)) == (9, 3, 4, 3)
    # iCE40 UP5K: 4 channels x 2 B of 2-byte words (2x2 int16 tiles), latency 4; ECP5: 2 x 8 B
    # of 8-byte words, latency 6 (room for banked lanes)
    g = MemoryGeometry.from_config(HardwareConfig.ice40_up5k(), 1000)
    assert (g.word_bytes, g.lanes, g.line_bytes, g.size_words, g.latency) == (2, 4, 8, 500, 4)
    g = MemoryGeometry.from_config(HardwareConfig.ecp5_85f(), 1024)
    assert (g.word_bytes, g.lanes, g.line_bytes, g.latency) == (8, 2, 16, 6)
    with pytest.raises(ValueError, match="does not divide"):
        MemoryGeometry.from_config(HardwareConfig.sim(), 1024, word_bytes=3)
    with pytest.raises(ValueError, match="whole number"):
        g.words(12, "a row")


def test_placement_and_its_port():
    g = MemoryGeometry.from_config(HardwareConfig.sim(), 4096)
    p = TensorPlacement(g, int16, (8, 16), (4, 4), base=10)
    # a 4x4 int16 tile is 4 rows of one 8-byte word, 4 words (one tensor row) apart
    assert (p.row_words, p.tensor_row_words, p.tile_words, p.grid) == (1, 4, 4, (2, 4))
    # one burst per tile: 4 segments of 1 word, 4 words apart; lanes 0, 4, 0, 4: two lines
    assert p.burst(5) == (10 + 16 + 1, 1, 4, 4) and p.tile_lines == [2, 2]
    assert p.port("read") == MemoryPort(g, "read", (1, 4, 4)) != p.port("write")
    assert p.port("write").lines == [2, 2] and p.port("write").kind == "write"
    full = TensorPlacement(g, int16, (8, 4), (4, 4))
    assert full.contiguous and full.burst(1) == (4, 4, 1, 0) and full.tile_lines == [4]
    assert full.port("read").burst == (4, 1, 0)
    assert sum(p.tile_lines) * g.word_bytes == p.tile_bytes == 32
    with pytest.raises(ValueError, match="whole number"):
        TensorPlacement(g, int8, (8, 16), (4, 4))       # 4-byte tile rows, 8-byte words
    with pytest.raises(ValueError, match="does not fit"):
        TensorPlacement(g, int32, (64, 32), (4, 4))
    with pytest.raises(ValueError, match="does not divide"):
        TensorPlacement(g, int16, (8, 16), (3, 4))


def test_line_packing_rule():
    g = MemoryGeometry.from_config(HardwareConfig.sim(), 4096)      # 8 lanes
    assert g.burst_lines(4, 4, 16) == [4, 4, 4, 4]     # stride 16 = 0 mod 8: every row conflicts
    assert g.burst_lines(1, 4, 4) == [2, 2]            # stride 4: rows at lanes 0, 4, 0, 4
    assert g.burst_lines(1, 4, 2) == [4]               # stride 2: lanes 0, 2, 4, 6
    assert g.burst_lines(2, 3, 3) == [6]               # lanes {0,1}, {3,4}, {6,7}
    assert g.burst_lines(3, 3, 8) == [3, 3, 3]
    assert g.burst_lines(20, 2, 40) == [8, 8, 4, 8, 8, 4]      # long segments go alone
    assert g.burst_lines(1, 12, 1) == [8, 4]           # contiguous rows; at most 8 per line
    assert g.burst_lines(2, 3, 0) == [2, 2, 2]         # stride 0: the same lanes every row
    assert g.burst_lines(0, 3, 1) == [] and g.burst_lines(5) == [5]
    assert g.line_offsets(2, 3, 3) == [[0, 1, 3, 4, 6, 7]]
    assert g.line_offsets(1, 4, 4) == [[0, 4], [8, 12]]
    assert g.line_offsets(10, 2, 20) == [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9], [20, 21, 22, 23, 24,
                                                                            25, 26, 27], [28, 29]]
    narrow = MemoryGeometry.from_config(HardwareConfig.sim(), 4096, max_segments=2)
    assert narrow.burst_lines(1, 4, 1) == [2, 2]


@pytest.mark.parametrize("lanes", [1, 2, 4, 8])
@pytest.mark.parametrize("kind", ["read", "write"])
def test_line_tables_agree_with_line_offsets(lanes, kind):
    # the generator's constant tables, applied to a first word in every lane, move exactly the
    # words of MemoryGeometry.line_offsets: lane j of a line holds word addr + offset, at row
    # (addr + offset) // lanes; `sel` routes word i to lane j (write) / lane j to word i (read)
    g = MemoryGeometry(word_bytes=4, channels=lanes, bytes_per_channel=4, latency=LAT,
                       size_words=4096)
    rng = random.Random(lanes)
    shapes = [(1, 1, 0), (lanes, 1, 0), (3 * lanes + 1, 1, 0), (1, 4, 4), (2, 3, 3), (1, 12, 1),
              (3, 3, 8), (2, 3, 0), (10, 2, 20), (4, 2, 5)]
    shapes += [(rng.randrange(1, 2 * lanes + 3), rng.randrange(1, 6), rng.randrange(0, 12))
               for _ in range(20)]
    for burst in shapes:
        port = MemoryPort(g, kind, burst)
        lines, patterns = line_tables(port)
        offsets = g.line_offsets(*burst)
        assert [c for _, c, _ in lines] == [len(o) for o in offsets] == port.lines
        for addr in range(3 * lanes, 4 * lanes):       # the first word in every lane
            start = addr
            for n, ((p, count, delta), offs) in enumerate(zip(lines, offsets)):
                assert start == addr + offs[0]
                r, row = start % lanes, start // lanes
                table = patterns[p][r]
                want = {(addr + o) % lanes: (i, (addr + o) // lanes) for i, o in enumerate(offs)}
                assert {j for j, (_, used, _) in enumerate(table) if used} == set(want)
                for j, (i, wrow) in want.items():
                    assert row + table[j][0] == wrow, (burst, addr, n, j)
                    if kind == "write":
                        assert table[j][2] == i
                    else:
                        assert table[i][2] == j
                assert delta == (offsets[n + 1][0] - offs[0] if n + 1 < len(offsets) else 0)
                start += delta


def test_array_bytes_round_trip():
    a = np.arange(-6, 6, dtype=np.int16).reshape(3, 4)
    buf = array_to_bytes(a, int16)
    assert buf[:2] == (-6).to_bytes(2, "little", signed=True) and len(buf) == 24
    assert (array_from_bytes(buf, (3, 4), int16) == a).all()


# -- construction -------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")   # never elaborated
def test_repr_and_ports():
    m = MemoryModel(config(), 256, b"\x01\x02", read_ports=[(2, 1, 0), (1, 4, 4)],
                    write_ports=[(8, 1, 0)])
    assert repr(m) == (f"MemoryModel({config()!r}, 256, init=<2 bytes>, storage='amaranth', "
                       f"read_ports=[(2, 1, 0), (1, 4, 4)], write_ports=[(8, 1, 0)], "
                       f"word_bytes=8, count_bits=16, max_segments=8, counter_bits=48)")
    assert m.read == [m.read0, m.read1] and m.write == [m.write0]
    assert m.read1.signature.flip() == MemoryPort(m.geometry, "read", (1, 4, 4))
    assert m.write0.signature.flip() == MemoryPort(m.geometry, "write", (8, 1, 0))
    assert m.read0.req.payload.shape() == m.geometry.request_layout
    assert list(m.geometry.request_layout.members) == ["addr"]
    assert m.word_latency == m.geometry.latency + 1 == 5
    assert repr(MemoryPort(m.geometry, "read", (1, 4, 4))) == (
        f"MemoryPort({m.geometry!r}, 'read', (1, 4, 4))")
    assert not hasattr(m.read0, "data") and not hasattr(m.write0, "resp")
    del m
    gc.collect()    # dropped (every Elaboratable is a reference cycle) under the filter above


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")   # never elaborated
def test_for_clients_builds_a_port_per_client_in_order():
    cfg = config()
    g = MemoryGeometry.from_config(cfg, 1024)
    p = TensorPlacement(g, int16, (8, 16), (4, 4))
    clients = [p.port("write"), MemoryPort(g, "read", (3, 1, 0)), p.port("read"),
               MemoryPort(g, "write", (5, 2, 9))]
    m = MemoryModel.for_clients(cfg, 1024, clients, init=b"\x07", counter_bits=40)
    assert m.geometry == g and m.counter_bits == 40 and "init=<1 bytes>" in repr(m)
    assert m.read_ports == ((3, 1, 0), (1, 4, 4)) and m.write_ports == ((1, 4, 4), (5, 2, 9))
    assert [port.signature.flip() for port in m.read + m.write] == [clients[i]
                                                                     for i in (1, 2, 0, 3)]
    del m
    gc.collect()    # dropped (every Elaboratable is a reference cycle) under the filter above


@pytest.mark.parametrize("make, error, message", [
    (lambda: MemoryModel(config(latency=3), 64, read_ports=[(1, 1, 0)]), ValueError,
     "MemoryModel latency must be >= 4 (its pipeline, with lanes of 1 block RAM bank(s)), not 3"),
    (lambda: MemoryModel(config(latency=5, family="ecp5"), BANKED_ROWS * 64,
                         read_ports=[(1, 1, 0)]), ValueError,
     "MemoryModel latency must be >= 6 (its pipeline, with lanes of 2 block RAM bank(s)), not 5"),
    (lambda: MemoryModel(config(channels=3), 64, read_ports=[(1, 1, 0)]), ValueError,
     "the memory's lanes must be a power of two, not 6 (3 channels x 16 B / 8 B words)"),
    (lambda: MemoryModel(config(), 64, read_ports=[(1, 1)]), ValueError,
     "MemoryModel read_ports[0] must be (count, rows, stride) or (count, rows, stride, "
     "start_lane), not (1, 1)"),
    (lambda: MemoryModel(config(), 64, write_ports=[(1, 1, 0, 8)]), ValueError,
     "MemoryPort start_lane must be None or an int in 0..7, not 8"),
    (lambda: MemoryModel(config(), 64, write_ports=[(0, 1, 0)]), ValueError,
     "MemoryPort burst count must be an int >= 1, not 0"),
    (lambda: MemoryModel(config(), 64, read_ports=[(1, 0, 0)]), ValueError,
     "MemoryPort burst rows must be an int >= 1, not 0"),
    (lambda: MemoryModel(config(), 64, read_ports=[(1, 2, -1)]), ValueError,
     "MemoryPort burst stride must be an int >= 0, not -1"),
    (lambda: MemoryModel(config(), 64, read_ports=[(1 << 12, 1, 0)], count_bits=12), ValueError,
     "MemoryPort burst (4096, 1, 0) does not fit count_bits=12"),
    (lambda: MemoryPort(MemoryGeometry.from_config(config(), 64), "read", [1, 1, 0]), ValueError,
     "MemoryPort burst must be a tuple (count, rows, stride), not [1, 1, 0]"),
    (lambda: MemoryPort(MemoryGeometry.from_config(config(), 64), "rw", (1, 1, 0)), ValueError,
     "MemoryPort kind must be 'read' or 'write', not 'rw'"),
    (lambda: MemoryModel(config(), 64), ValueError,
     "a MemoryModel needs at least one read or write port"),
    (lambda: MemoryModel(config(), 8, bytes(9), read_ports=[(1, 1, 0)]), ValueError,
     "MemoryModel init holds 9 bytes, more than the memory's 8"),
    (lambda: MemoryModel(config(), 64, b"\x01", storage="verilog", read_ports=[(1, 1, 0)]),
     ValueError, "MemoryModel: storage='verilog' starts at zero; fill it through the debug port "
                 "instead of init"),
    (lambda: MemoryModel(None, 64), TypeError, "MemoryModel config must be a HardwareConfig, "
                                               "not None"),
])
def test_construction_errors(make, error, message):
    with pytest.raises(error) as info:
        make()
    assert str(info.value) == message


# -- behaviour --------------------------------------------------------------------------------

@st.composite
def memory_case(draw):
    channels = draw(st.sampled_from([1, 2, 4]))
    bpc = draw(st.sampled_from([2, 4, 8, 16]))
    # at most 16 lanes: wider lines cost simulation time, not coverage
    word = draw(st.sampled_from([w for w in (1, 2, 4, 8) if bpc % w == 0
                                 and channels * bpc // w <= 16]))
    latency = draw(st.integers(PIPELINE_LATENCY, PIPELINE_LATENCY + 2))
    return channels, bpc, word, latency


def random_bursts(channels, bpc, word, latency, seed, valid_p, stall_p, nr, nw, with_debug, *,
                  family=None, size_words=128):
    """Random clients, bursts, stalls and debug accesses on a memory, checked by :func:`replay`.

    Every client has its own burst shape (count, rows, stride), drawn here; its bursts start at
    random addresses anywhere in the memory (reads and writes overlap); every line read must hold
    the flat memory as of its grant, with the writes (and debug writes) applied in grant order.
    """
    rng = random.Random(seed)
    L = channels * bpc // word
    init = bytes(rng.randrange(256) for _ in range(size_words * word))

    def shape():
        count = rng.randrange(1, 2 * L + 3)
        rows = rng.choice([1, 1, 2, 3, 4])
        stride = rng.choice([0, count, count + rng.randrange(1, 6), rng.randrange(0, count + 6),
                             rng.randrange(0, size_words // 8)])
        stride = 0 if rows == 1 else min(stride, (size_words // 2 - count) // (rows - 1))
        # half the clients declare the lane their bursts start in (fixed routing, no crossbar)
        return (count, rows, stride) + ((rng.randrange(L),) if rng.random() < 0.5 else ())
    reads_shape = [shape() for _ in range(nr)]
    writes_shape = [shape() for _ in range(nw)]
    model = MemoryModel(config(channels, bpc, latency, family=family), size_words * word, init,
                        read_ports=reads_shape, write_ports=writes_shape, word_bytes=word)
    g = model.geometry
    assert g.lanes == L

    def addrs(burst, k):
        span = (burst[1] - 1) * burst[2] + burst[0]
        lane, step = (burst[3], L) if len(burst) == 4 else (0, 1)
        return [rng.randrange(lane, size_words - span + 1, step) for _ in range(k)]
    reads = [addrs(b, rng.randrange(1, 4)) for b in reads_shape]
    writes = [[(a, [rng.randrange(1 << g.word_bits) for _ in range(b[0] * b[1])])
               for a in addrs(b, rng.randrange(0, 3))] for b in writes_shape]
    debug = {}
    if with_debug:
        for t in rng.sample(range(40), 8):
            debug[t] = (rng.choice("rw"), rng.randrange(size_words), rng.randrange(1 << g.word_bits))
    trace = drive(model, reads, writes, valid_p=valid_p, stall_p=stall_p, debug=debug, seed=seed)
    check_timing(model, trace, reads, writes)
    flat = words_of(init, g)
    replay(model, trace, reads, writes, debug, flat)
    assert words_of(trace.memory, g)[:size_words] == flat
    assert trace.bytes_read == sum(len(r) * b[0] * b[1] for r, b in zip(reads, reads_shape)) * word
    assert trace.bytes_written == sum(len(b[1]) for w in writes for b in w) * word
    return model


@settings(deadline=None, max_examples=25)
@given(memory_case(), st.integers(0, 2**16), st.floats(0.3, 1.0), st.floats(0.0, 0.5),
       st.integers(1, 3), st.integers(0, 2), st.booleans())
def test_random_bursts_match_a_flat_memory(case, seed, valid_p, stall_p, nr, nw, with_debug):
    random_bursts(*case, seed, valid_p, stall_p, nr, nw, with_debug)


@pytest.mark.parametrize("seed, latency", [(1, LAT + 2), (2, LAT + 2), (3, LAT + 3)])
def test_random_bursts_on_banked_lanes(seed, latency):
    # ECP5 lanes of 2,100 rows are two DP16KD banks deep (two pipeline cycles more): bursts and
    # debug accesses anywhere in the memory, across the banks
    model = random_bursts(2, 8, 8, latency, seed, 0.7, 0.3, 2, 2, True, family="ecp5",
                          size_words=2 * BANKED_ROWS)
    assert model.organization.banks == 2 and model.pipeline_latency == LAT + 2


@pytest.mark.parametrize("count, rows, stride", [(1, 4, 4), (1, 4, 2), (2, 3, 3), (3, 3, 8),
                                                 (20, 2, 40), (1, 12, 1), (4, 2, 5), (2, 3, 0)])
def test_strided_bursts_take_one_line_per_cycle(count, rows, stride):
    init = bytes(range(256)) * 8
    model = MemoryModel(config(4, 16, LAT), 2048, init, read_ports=[(count, rows, stride)])
    g = model.geometry
    trace = drive(model, [[3]])
    counts = g.burst_lines(count, rows, stride)
    assert [n for _, n, _, _ in trace.lines[0]] == counts
    # accepted in cycle 0, lines granted from cycle 2 on, one per cycle
    assert trace.accepted["read", 0] == [0]
    assert trace.response_cycles() == [2 + LAT + i for i in range(len(counts))]
    assert [last for _, _, last, _ in trace.lines[0]] == [0] * (len(counts) - 1) + [1]
    flat = words_of(init, g)
    assert [w for *_, ws in trace.lines[0] for w in ws] == burst_words(flat, 3, count, rows,
                                                                        stride)


@pytest.mark.parametrize("latency, family, rows", [
    (LAT, None, 32), (LAT + 1, None, 32), (LAT + 4, None, 32),
    (LAT + 2, "ecp5", BANKED_ROWS), (LAT + 3, "ecp5", BANKED_ROWS)])
def test_latency_and_peak_bandwidth(latency, family, rows):
    init = bytes((7 * i + i // 256) % 256 for i in range(rows * 64))
    model = MemoryModel(config(4, 16, latency, family=family), rows * 64, init,
                        read_ports=[(64, 1, 0)], write_ports=[(8, 1, 0)])
    g = model.geometry
    assert g.lanes == 8 and model.organization.banks == (2 if family else 1)
    # banked lanes: the burst runs from bank 0 (rows below 1,024) into bank 1
    addr = 3 if family is None else (1024 - 4) * 8 + 3
    trace = drive(model, [[addr]])
    # accepted in cycle 0, first line granted in cycle 2, its data `latency` cycles later; then a
    # full line (64 B) every cycle, no bubble
    assert trace.accepted["read", 0] == [0]
    assert trace.response_cycles() == [2 + latency + i for i in range(8)]
    assert [n for _, n, _, _ in trace.lines[0]] == [8] * 8
    assert [w for *_, ws in trace.lines[0] for w in ws] == words_of(init, g)[addr:addr + 64]
    assert trace.bytes_read == 8 * g.line_bytes == 512 and trace.bytes_written == 0


@pytest.mark.parametrize("burst", [(1, 1, 0), (8, 1, 0), (1, 4, 2), (17, 1, 0), (1, 4, 4)])
def test_back_to_back_bursts_from_one_client(burst):
    model = MemoryModel(config(4, 16, LAT), 2048, bytes(range(256)) * 8, read_ports=[burst],
                        write_ports=[burst])
    g = model.geometry
    n = g.lines(*burst)
    words = burst[0] * burst[1]
    trace = drive(model, [[5 * k for k in range(6)]],
                  [[(100 + 5 * k, list(range(k, k + words))) for k in range(6)]])
    # both clients' lines alternate from cycle 2 (read 0 first); a client's next burst follows
    # its last line without a bubble
    assert trace.response_cycles() == [2 + 2 * i + LAT for i in range(6 * n)]
    assert trace.taken[0] == [3 + 2 * i for i in range(6 * n)]
    flat = words_of(bytes(range(256)) * 8, g)
    replay(model, trace, [[5 * k for k in range(6)]],
           [[(100 + 5 * k, list(range(k, k + words))) for k in range(6)]], {}, flat)
    assert words_of(trace.memory, g) == flat


@pytest.mark.parametrize("kind", ["read", "write"])
def test_one_line_bursts_stream_at_one_per_cycle(kind):
    # a single client issuing a one-line burst every cycle: a line every cycle, from cycle 2
    init = bytes(range(256)) * 4
    model = MemoryModel(config(2, 8, LAT + 2), 1024, init, **{f"{kind}_ports": [(2, 1, 0)]})
    flat = words_of(init, model.geometry)
    addrs = [3 * k for k in range(10)]
    if kind == "read":
        reads, writes = [addrs], []
        trace = drive(model, reads)
        assert trace.response_cycles() == [2 + LAT + 2 + i for i in range(10)]
    else:
        reads, writes = [], [[(a, [1000 + a, 2000 + a]) for a in addrs]]
        trace = drive(model, reads, writes)
        assert trace.taken[0] == [2 + i for i in range(10)]
    # req.ready stays high: a request accepted every cycle
    assert trace.accepted[kind, 0] == list(range(10))
    replay(model, trace, reads, writes, {}, flat)
    assert words_of(trace.memory, model.geometry) == flat


def test_round_robin_shares_lines_fairly():
    model = MemoryModel(config(2, 8, LAT), 1024, read_ports=[(4, 1, 0), (8, 1, 0)],
                        write_ports=[(6, 1, 0)])
    g = model.geometry
    assert g.lanes == 2                 # bursts of 2, 4 and 3 lines
    trace = drive(model, [[0], [16]], [[(64, [7] * 6)]])
    # three clients, a burst each accepted in cycle 0: from cycle 2 the grants rotate read 0,
    # read 1, write, ...; a client that has no line left drops out of the rotation
    grants = trace.grants(g.latency)
    order = ["r0", "r1", "w", "r0", "r1", "w", "r1", "w", "r1"]
    assert [f"{k[0]}{c}".replace("w0", "w") for _, (k, c) in sorted(grants.items())] == order
    assert sorted(grants) == list(range(2, 11))
    assert trace.response_cycles(0) == [2 + LAT, 5 + LAT]
    assert trace.response_cycles(1) == [3 + LAT, 6 + LAT, 8 + LAT, 10 + LAT]
    assert trace.taken[0] == [4, 7, 9]
    assert trace.bytes_read == 12 * g.word_bytes and trace.bytes_written == 6 * g.word_bytes


def test_round_robin_is_fair_under_contention():
    # four clients that always have a line ready each get every fourth grant
    model = MemoryModel(config(2, 8, LAT), 4096, read_ports=[(8, 4, 8)] * 3,
                        write_ports=[(8, 4, 8)])
    n = model.geometry.lines(8, 4, 8)
    assert n == 16                      # 2 lanes: each 8-word row in 4 lines
    trace = drive(model, [[0, 64]] * 3, [[(256, list(range(32)))] * 2])
    grants = trace.grants(LAT)
    assert sorted(grants) == list(range(2, 2 + 4 * 2 * n))
    who = [grants[t] for t in sorted(grants)]
    assert who == [("read", 0), ("read", 1), ("read", 2), ("write", 0)] * (2 * n)


def test_stall_blocks_every_grant():
    model = MemoryModel(config(2, 8, LAT), 1024, bytes(range(256)), read_ports=[(8, 1, 0)])
    g = model.geometry
    trace = drive(model, [[0]], stall=[2, 3, 5, 9])
    # the four lines would be granted in cycles 2..5; stalls in 2, 3 and 5 push them to 4, 6, 7, 8
    assert trace.response_cycles() == [4 + LAT, 6 + LAT, 7 + LAT, 8 + LAT]
    assert [w for *_, ws in trace.lines[0] for w in ws] == words_of(bytes(range(64)), g)
    fast = drive(model, [[0]], stall_p=0.0).response_cycles()[-1]
    trace = drive(model, [[0]], stall_p=0.6, seed=3)
    assert trace.response_cycles()[-1] > fast and len(trace.lines[0]) == 4
    check_timing(model, trace, [[0]], [])


@pytest.mark.parametrize("latency", [LAT, LAT + 3])
def test_debug_port_latency_and_priority(latency):
    init = bytes(range(1, 129))
    model = MemoryModel(config(2, 8, latency), 128, init, read_ports=[(3, 1, 0)],
                        write_ports=[(2, 1, 0)])
    g = model.geometry
    w = words_of(init, g)
    # reads in cycles 10, 11, 12 (pipelined), a write in 13 read back in 14, a read of a word the
    # client writes (granted in cycle 6), accesses in 1, 2 and 4 that hold the client reads off
    # (an access takes the memory in the next cycle, and answers word_latency cycles after it)
    debug = {1: ("w", 2, 0xDEADBEEF), 2: ("r", 1, 0), 4: ("r", 5, 0),
             10: ("r", 1, 0), 11: ("r", 3, 0), 12: ("r", 7, 0), 13: ("w", 9, 5), 14: ("r", 9, 0),
             15: ("r", 12, 0)}
    trace = drive(model, [[1]], [[(12, [0x1111, 0x2222])]], debug=debug)
    wl = model.word_latency
    assert wl == latency + 1
    assert trace.rvalid == [(2 + wl, w[1]), (4 + wl, w[5]), (10 + wl, w[1]),
                            (11 + wl, w[3]), (12 + wl, w[7]), (14 + wl, 5), (15 + wl, 0x1111)]
    # both clients have a line from cycle 2; the debug accesses of cycles 1, 2 and 4 hold them
    # off in 2, 3 and 5: read 0 (first in the rotation) in cycle 4, the write in 6, read 0's
    # second line in 7
    grants = trace.grants(latency)
    assert sorted(grants.items()) == [(4, ("read", 0)), (6, ("write", 0)), (7, ("read", 0))]
    # the client read after the debug write in cycle 2 sees it; debug accesses are not counted
    assert [ws for *_, ws in trace.lines[0]] == [[w[1], 0xDEADBEEF], [w[3]]]
    assert trace.bytes_read == 3 * g.word_bytes and trace.bytes_written == 2 * g.word_bytes


def test_backdoor_write_then_client_read():
    model = MemoryModel(config(), 512, read_ports=[(2, 1, 0)])
    got = []

    async def bench(ctx):
        backdoor_write(ctx, model, 5, bytes(range(24)))
        assert backdoor_read(ctx, model, 5, 3) == bytes(range(24))
        port = model.read0
        ctx.set(port.req.valid, 1)
        ctx.set(port.req.payload.addr, 6)
        await ctx.tick()
        ctx.set(port.req.valid, 0)
        for cycle in range(1, 12):
            if ctx.get(port.resp.valid):
                got.append((cycle, list(ctx.get(port.resp.data))[:ctx.get(port.resp.count)]))
            await ctx.tick()

    sim = Simulator(model)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == [(2 + 4, [int.from_bytes(bytes(range(8, 16)), "little"),
                            int.from_bytes(bytes(range(16, 24)), "little")])]
    with pytest.raises(ValueError, match="a back-door read of 8 words at 60 leaves the memory"):
        backdoor_read(None, model, 60, 8)
    with pytest.raises(ValueError, match="a back-door write of 1 words at 64 leaves the memory"):
        backdoor_write(None, model, 64, bytes(8))


def test_verilog_has_no_variable_shift():
    # word selects are case statements, not `{...} >> index`: Verilator turns such a shift of a
    # concatenation into a wide variable shift (VL_SHIFTR_WWI) on every cycle (docs/toolchain.md)
    model = MemoryModel(HardwareConfig.sim(), 4096 * 16, storage="verilog",
                        read_ports=[(1, 4, 5), (16, 1, 0)], write_ports=[(3, 2, 7), (4, 4, 4)],
                        word_bytes=4)
    assert model.geometry.lanes == 16
    verilog = vl.convert(model, name="memory")
    shifts = [line.strip() for line in verilog.splitlines() if ">>" in line]
    assert not shifts, shifts[:3]


@pytest.mark.parametrize("burst", [(1, 1, 0), (8, 1, 0), (1, 4, 4), (3, 3, 8), (20, 2, 40)])
def test_line_generator_lints_clean(burst):
    # only Amaranth's width warnings (docs/toolchain.md): a case over the line's pattern or index
    # must cover every value of its selector
    g = MemoryGeometry.from_config(config(), 4096)
    gen = LineGenerator(MemoryPort(g, "read", burst))
    warnings = vl.lint(vl.convert(gen, name="lines"), top="lines")
    kinds = {w.split(":")[0].split("-")[-1] for w in warnings}
    assert kinds <= {"WIDTHEXPAND", "WIDTHTRUNC"}, warnings


def test_fixed_sel_routes_a_client_with_a_known_start_lane():
    g = MemoryGeometry.from_config(config(4, 4), 256)           # 4 lanes of 4-byte words
    assert g.lanes == 4
    # a 6-word run from lane 1: lines of words 0-3 (lanes 1, 2, 3, 0) and 4-5 (lanes 1, 2)
    assert fixed_sel(MemoryPort(g, "write", (6, 1, 0), start_lane=1)) == (3, 0, 1, 2)
    assert fixed_sel(MemoryPort(g, "read", (6, 1, 0), start_lane=1)) == (1, 2, 3, 0)
    # four 1-word rows 5 words apart from lane 0: one line, lanes 0, 1, 2, 3
    assert fixed_sel(MemoryPort(g, "read", (1, 4, 5), start_lane=0)) == (0, 1, 2, 3)
    # 3-word rows 3 apart from lane 0: lines (0, 1, 2), (3, 4, 5) in lanes 3, 0, 1: word 0 moves
    assert fixed_sel(MemoryPort(g, "read", (3, 2, 3), start_lane=0)) is None
    assert fixed_sel(MemoryPort(g, "read", (4, 1, 0))) is None    # any start lane
    port = MemoryPort(g, "write", (4, 1, 0), start_lane=2)
    assert port.shape == (4, 1, 0, 2) and repr(port).endswith("(4, 1, 0), start_lane=2)")
