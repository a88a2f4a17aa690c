# amaranth: UnusedElaboratable=no
"""SDRAMMemory: the memory system's burst ports served from an SDRAM chip (its cycle-accurate
model, which flags any broken timing rule), checked word for word against a flat memory."""

import random

import pytest
from amaranth.hdl import Module
from hypothesis import given, settings, strategies as st
from amaranth.lib import wiring
from amaranth.sim import Simulator

from stepforge.hdl.config import HardwareConfig
from stepforge.hdl.memory.sdram_memory import SDRAMMemory
from stepforge.hdl.sdram import ULX3S_SDRAM, SDRAMChipModel

from .helpers import BurstClients

CLK = 100_000_000
INIT = 20
#: Words of the chip model (2 banks' rows of 512 columns are plenty for these tests).
DEPTH = 1 << 14


def config(channels=2, bpc=8):
    return HardwareConfig.ecp5_85f().replace(mem_channels=channels, mem_bytes_per_channel=bpc)


class Bench(wiring.Component):
    """An SDRAMMemory wired to the chip model."""

    def __init__(self, memory):
        self.memory = memory
        self.chip = SDRAMChipModel(memory.timing, memory.clk_hz, init_cycles=INIT,
                                   depth_words=DEPTH)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.memory = self.memory
        m.submodules.chip = self.chip
        wiring.connect(m, self.memory.sdram, self.chip.pins)
        return m


def run(memory, reads=(), writes=(), *, valid_p=1.0, stall_p=0.0, seed=0, max_cycles=20000,
        reads_after_writes=False, preload=()):
    """Drive bursts on the memory's ports; returns the response lines of each read client, the
    byte counters and the cycle the last line moved.

    ``reads[c]``: addresses of read client ``c``'s bursts; ``writes[c]``: ``(addr, words)``.
    With ``reads_after_writes`` no read request is offered before every write line was taken.
    ``preload``: memory words from address 0, put in the chip's storage before the run (its
    back door); ``out["memory"]`` holds the memory's words after it.
    """
    g = memory.geometry
    rng = random.Random(seed)
    bench = Bench(memory)
    clients = BurstClients(memory, reads, writes, rng, valid_p)
    out = {"lines": [[] for _ in reads]}

    async def testbench(ctx):
        for a, word in enumerate(preload):
            for p in range(memory.pieces):
                ctx.set(bench.chip.data[a * memory.pieces + p], (word >> (16 * p)) & 0xFFFF)
        for cycle in range(max_cycles):
            assert not ctx.get(bench.chip.violation), \
                f"chip model: {ctx.get(bench.chip.violation_code)} in cycle {cycle}"
            if not clients.writing and all(len(out["lines"][c]) == clients.expect[c]
                                           for c in range(len(reads))):
                out["end"] = cycle
                for _ in range(40):              # no line may follow, no rule may break
                    await ctx.tick()
                    assert not any(ctx.get(p.resp.valid) for p in memory.read)
                    assert not ctx.get(bench.chip.violation)
                break
            ctx.set(memory.stall, rng.random() < stall_p)
            took, lines = clients.offer(ctx, reads_ok=not (reads_after_writes and clients.writing))
            for c, line in enumerate(lines):
                if line is not None:
                    out["lines"][c].append(line)
            await ctx.tick()
            clients.advance(took)
        else:
            raise AssertionError(f"the SDRAM memory did not finish in {max_cycles} cycles")
        pieces = [] if not preload else [ctx.get(bench.chip.data[k]) for k in range(g.size_words * memory.pieces)]
        out["memory"] = pieces and [sum(pieces[a * memory.pieces + p] << (16 * p)
                             for p in range(memory.pieces)) for a in range(g.size_words)]
        out["bytes_read"] = ctx.get(memory.bytes_read)
        out["bytes_written"] = ctx.get(memory.bytes_written)

    sim = Simulator(bench)
    sim.add_clock(1 / CLK)
    sim.add_testbench(testbench)
    sim.run()
    return out


def expected_lines(g, burst, addrs, flat):
    out = []
    for a in addrs:
        for offs in g.line_offsets(*burst):
            out.append([flat[a + o] for o in offs])
    return out


def check_reads(memory, reads, result, flat):
    g = memory.geometry
    for c, addrs in enumerate(reads):
        burst = memory.read_ports[c][:3]
        want = expected_lines(g, burst, addrs, flat)
        got = result["lines"][c]
        assert [w for _, _, w in got] == want, f"read client {c}"
        assert [n for n, _, _ in got] == [len(w) for w in want]
        n = g.lines(*burst)
        assert [last for _, last, _ in got] == [int(k % n == n - 1) for k in range(len(want))]


SHAPES = [(4, 1, 0), (1, 4, 64), (2, 4, 64), (3, 2, 5), (5, 2, 9), (16, 1, 0), (1, 1, 0)]


@pytest.mark.parametrize("seed", range(3))
def test_writes_then_reads_match_a_flat_memory(seed):
    rng = random.Random(seed)
    wshape = rng.choice(SHAPES)
    rshapes = [rng.choice(SHAPES), rng.choice(SHAPES)]
    memory = SDRAMMemory(config(), 8192, timing=ULX3S_SDRAM, clk_hz=CLK, init_cycles=INIT,
                         read_ports=rshapes, write_ports=[wshape])
    g = memory.geometry
    span = lambda s: (s[1] - 1) * s[2] + s[0]                 # noqa: E731
    flat = [0] * g.size_words
    region = 600
    writes = []
    for _ in range(12):
        a = rng.randrange(region - span(wshape))
        words = [rng.getrandbits(g.word_bits) for _ in range(wshape[0] * wshape[1])]
        writes.append((a, words))
        for k, w in enumerate(words):
            flat[a + (k // wshape[0]) * wshape[2] + k % wshape[0]] = w
    reads = [[rng.randrange(region - span(s)) for _ in range(10)] for s in rshapes]
    result = run(memory, reads, [writes], valid_p=0.6, stall_p=0.1, seed=seed,
                 reads_after_writes=True)
    check_reads(memory, reads, result, flat)
    assert result["bytes_written"] == 12 * wshape[0] * wshape[1] * g.word_bytes
    assert result["bytes_read"] == sum(10 * s[0] * s[1] * g.word_bytes for s in rshapes)


@pytest.mark.parametrize("seed", range(2))
def test_reads_and_writes_at_once_on_disjoint_regions(seed):
    """Two readers of a region preloaded into the chip and two writers of another region, all
    at once, under random valid and stall; then the written region read back."""
    rng = random.Random(100 + seed)
    shape = (2, 4, 64)
    memory = SDRAMMemory(config(), 8192, timing=ULX3S_SDRAM, clk_hz=CLK, init_cycles=INIT,
                         read_ports=[shape, (16, 1, 0)], write_ports=[shape, (4, 1, 0)])
    g = memory.geometry
    flat = [rng.getrandbits(g.word_bits) for _ in range(512)] + [0] * (g.size_words - 512)
    writes = [[(512 + rng.randrange(100), [rng.getrandbits(g.word_bits) for _ in range(8)])
               for _ in range(6)],
              [(850 + 4 * k, [rng.getrandbits(g.word_bits) for _ in range(4)])
               for k in range(8)]]
    reads = [[rng.randrange(512 - 3 * 64 - 2) for _ in range(8)],
             [rng.randrange(512 - 16) for _ in range(6)]]
    result = run(memory, reads, writes, valid_p=0.7, stall_p=0.05, seed=seed,
                 preload=flat[:512])
    check_reads(memory, reads, result, flat)
    for c, bursts in enumerate(writes):
        count, rows, stride = memory.write_ports[c][:3]
        for a, words in bursts:
            for k, w in enumerate(words):
                flat[a + (k // count) * stride + k % count] = w
    assert result["memory"][512:900] == flat[512:900]


def test_a_long_burst_streams_a_word_per_cycle():
    """64-word bursts of 8-byte words (256 SDRAM words each) back to back: after the chip's
    initialization, within 5 % of one 16-bit word per cycle."""
    memory = SDRAMMemory(config(), 65536, timing=ULX3S_SDRAM, clk_hz=CLK, init_cycles=INIT,
                         read_ports=[(64, 1, 0)])
    quick = run(memory, [[0]])
    many = run(memory, [[k * 64 for k in range(9)]])
    words = 8 * 64 * memory.pieces
    assert many["end"] - quick["end"] <= words * 1.05


def test_repr_and_errors():
    memory = SDRAMMemory(config(), 4096, timing=ULX3S_SDRAM, clk_hz=CLK,
                         read_ports=[(4, 1, 0, 0)])
    assert repr(memory).startswith("SDRAMMemory(HardwareConfig(")
    assert "read_ports=[(4, 1, 0, 0)], write_ports=[]" in repr(memory)
    with pytest.raises(ValueError, match=r"^an SDRAMMemory needs at least one read or write "
                                         r"port$"):
        SDRAMMemory(config(), 4096, timing=ULX3S_SDRAM)
    with pytest.raises(ValueError, match=r"^SDRAMMemory of 67108872 bytes exceeds the chip's "
                                         r"33554432 bytes$"):
        SDRAMMemory(config(), (1 << 26) + 1, timing=ULX3S_SDRAM, read_ports=[(1, 1, 0)])
    with pytest.raises(ValueError, match=r"^SDRAMMemory needs memory words of a power-of-two "
                                         r"number of 16-bit SDRAM words, not 1-byte words$"):
        SDRAMMemory(config(), 4096, timing=ULX3S_SDRAM, read_ports=[(1, 1, 0)], word_bytes=1)
    with pytest.raises(TypeError, match=r"^SDRAMMemory timing must be an SDRAMTiming, not 3$"):
        SDRAMMemory(config(), 4096, timing=3, read_ports=[(1, 1, 0)])


def test_verilog_converts():
    from amaranth.back import verilog
    memory = SDRAMMemory(config(), 1 << 20, timing=ULX3S_SDRAM, clk_hz=CLK,
                         read_ports=[(2, 4, 64), (16, 1, 0)], write_ports=[(4, 1, 0)])
    text = verilog.convert(memory, name="sdram_memory")
    assert "module sdram_memory" in text


def test_word_port_writes_and_reads_with_its_ready():
    """The host's word port: writes and reads offered whenever ``debug_ready`` is high, read
    back in order; an access offered while it is low sets ``debug_overrun``."""
    memory = SDRAMMemory(config(), 4096, timing=ULX3S_SDRAM, clk_hz=CLK, init_cycles=INIT,
                         read_ports=[(4, 1, 0)])
    bench = Bench(memory)
    rng = random.Random(5)
    words = {a: rng.getrandbits(64) for a in rng.sample(range(512), 24)}
    seen = {}

    async def testbench(ctx):
        dbg = memory.debug
        ops = [("w", a, v) for a, v in words.items()] + [("r", a, 0) for a in words]
        reads = []
        for _ in range(6000):
            if ctx.get(dbg.rvalid):
                seen[reads.pop(0)] = ctx.get(dbg.rdata)
            ready = ctx.get(memory.debug_ready)
            op = ops[0] if ops and ready else None
            ctx.set(dbg.we, op is not None and op[0] == "w")
            ctx.set(dbg.re, op is not None and op[0] == "r")
            ctx.set(dbg.addr, op[1] if op else 0)
            ctx.set(dbg.wdata, op[2] if op else 0)
            if op:
                ops.pop(0)
                if op[0] == "r":
                    reads.append(op[1])
            await ctx.tick()
            if not ops and not reads:
                break
        ctx.set(dbg.we, 0)
        ctx.set(dbg.re, 0)
        assert not ctx.get(memory.debug_overrun)
        assert not ctx.get(bench.chip.violation)
        # now offer two accesses back to back: the second one is refused and flagged
        ctx.set(dbg.re, 1)
        await ctx.tick()
        assert not ctx.get(memory.debug_ready)
        await ctx.tick()
        ctx.set(dbg.re, 0)
        await ctx.tick()
        assert ctx.get(memory.debug_overrun)
        assert ctx.get(memory.bytes_read) == 0 and ctx.get(memory.bytes_written) == 0

    sim = Simulator(bench)
    sim.add_clock(1 / CLK)
    sim.add_testbench(testbench)
    sim.run()
    assert seen == words


@st.composite
def sdram_case(draw):
    """A machine (lanes of 2-, 4- or 8-byte words), read and write ports of random burst
    shapes, and their bursts: reads in the preloaded low half, each writer in a region of its
    own (so the result does not depend on the order the memory serves different clients in)."""
    channels, bpc = draw(st.sampled_from([(1, 2), (1, 8), (2, 8), (1, 16), (2, 4)]))
    word = draw(st.sampled_from([w for w in (2, 4, 8) if bpc % w == 0]))
    lanes = channels * bpc // word
    nr, nw = draw(st.integers(1, 3)), draw(st.integers(0, 2))

    def shape():
        count = draw(st.integers(1, 2 * lanes + 1))
        rows = draw(st.integers(1, 4))
        return (count, rows, draw(st.integers(0, 2 * count + 3)))
    return word, channels, bpc, [shape() for _ in range(nr)], [shape() for _ in range(nw)]


@settings(deadline=None, max_examples=12)
@given(sdram_case(), st.integers(0, 2**16), st.floats(0.3, 1.0), st.floats(0.0, 0.5))
def test_random_bursts_match_a_flat_memory(case, seed, valid_p, stall_p):
    word, channels, bpc, rshapes, wshapes = case
    rng = random.Random(seed)
    memory = SDRAMMemory(config(channels, bpc), 1024 * word, timing=ULX3S_SDRAM, clk_hz=CLK,
                         init_cycles=INIT, read_ports=rshapes, write_ports=wshapes,
                         word_bytes=word)
    g = memory.geometry
    span = lambda s: (s[1] - 1) * s[2] + s[0]                 # noqa: E731
    flat = [rng.getrandbits(g.word_bits) for _ in range(512)] + [0] * 512
    reads = [[rng.randrange(512 - span(s) + 1) for _ in range(rng.randrange(1, 4))]
             for s in rshapes]
    writes = [[(512 + 256 * c + rng.randrange(256 - span(s) + 1),
                [rng.getrandbits(g.word_bits) for _ in range(s[0] * s[1])])
               for _ in range(rng.randrange(0, 3))] for c, s in enumerate(wshapes)]
    result = run(memory, reads, writes, valid_p=valid_p, stall_p=stall_p, seed=seed,
                 preload=flat[:512] + [0])
    check_reads(memory, reads, result, flat)
    for (count, rows, stride), bursts in zip(wshapes, writes):
        for a, words in bursts:                               # one writer's bursts in order
            for k, w in enumerate(words):
                flat[a + (k // count) * stride + k % count] = w
    assert result["memory"][:1024] == flat
    assert result["bytes_read"] == sum(len(r) * s[0] * s[1] for r, s in zip(reads, rshapes)) * word
    assert result["bytes_written"] == sum(len(b[1]) for w in writes for b in w) * word
