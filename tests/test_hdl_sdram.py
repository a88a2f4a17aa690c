# amaranth: UnusedElaboratable=no
"""The SDRAM controller against the cycle-accurate chip model, and the model's own checks.

The controller and the model are joined pin to pin; a testbench drives ``cmd`` and ``wdata``
with random gaps, keeps a Python dict as the reference memory and compares every read word.
The model flags any broken timing or protocol rule (``violation``); the model's rules are
checked on their own by driving its pins directly with illegal sequences, each next to the
legal sequence one cycle longer.
"""

import random
from dataclasses import replace

import pytest
from amaranth.hdl import Elaboratable, Module
from amaranth.lib import wiring
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from stepforge.hdl.sdram import (ULX3S_SDRAM, SDRAMChipModel, SDRAMController,
                                 SDRAMPinSignature, SDRAMTiming, SDRAMViolation, mode_register)

CLK = 100_000_000
INIT = 20
V = SDRAMViolation
CYC = ULX3S_SDRAM.cycles(CLK)     # rp 2, rcd 2, ras 5, rc 7, rrd 2, wr 2, rfc 7, mrd 2, CL 3
COLS = 1 << ULX3S_SDRAM.col_bits
ROW_SET = ULX3S_SDRAM.banks * COLS   # words from one row of bank 0 to the same row of bank 0

# (ras_n, cas_n, we_n) of each command
CODES = {(0, 1, 1): "ACT", (1, 0, 1): "READ", (1, 0, 0): "WRITE", (0, 1, 0): "PRE",
         (0, 0, 1): "REF", (0, 0, 0): "MRS", (1, 1, 0): "BST"}
PINS = {name: code for code, name in CODES.items()}


class Pair(Elaboratable):
    """The controller and the chip model, pin to pin."""

    def __init__(self, timing=ULX3S_SDRAM, *, depth_words=4 * ROW_SET, max_burst=256):
        self.ctrl = SDRAMController(timing, CLK, max_burst=max_burst, init_cycles=INIT)
        self.chip = SDRAMChipModel(timing, CLK, init_cycles=INIT, depth_words=depth_words)

    def elaborate(self, platform):
        m = Module()
        m.submodules.ctrl, m.submodules.chip = self.ctrl, self.chip
        wiring.connect(m, self.ctrl.pins, self.chip.pins)
        return m


def command_on(ctx, pins):
    """The command on ``pins`` this cycle as ``(name, ba, a)``, or None for NOP / INHIBIT."""
    if ctx.get(pins.cs_n) or not ctx.get(pins.clk_en):
        return None
    name = CODES.get((ctx.get(pins.ras_n), ctx.get(pins.cas_n), ctx.get(pins.we_n)))
    return None if name is None else (name, ctx.get(pins.ba), ctx.get(pins.a))


def run_pair(pair, commands, wwords, *, budget, cmd_gap=lambda: 0, wdata_gap=lambda: 0):
    """Send ``commands`` (``(addr, write, length)``) and the write words ``wwords`` with the
    gaps the two functions draw before each (a valid beat then waits for ``ready``); collect
    the read words until every expected one came. Returns ``(reads, trace, accepted)``:
    ``trace[i]`` the command on the pins in cycle ``i``, ``accepted[k]`` the cycle command
    ``k`` was taken, ``reads`` the ``(cycle, word)`` of ``rdata``. Fails past ``budget``
    cycles or on a violation."""
    ctrl, chip = pair.ctrl, pair.chip
    expected = sum(length for _, write, length in commands if not write)
    reads, trace, accepted = [], [], []

    async def bench(ctx):
        ci = wi = 0
        cwait, wwait = cmd_gap(), wdata_gap()
        for cycle in range(budget):
            if ci == len(commands) and wi == len(wwords) and len(reads) == expected:
                break
            cvalid = ci < len(commands) and cwait == 0
            ctx.set(ctrl.cmd.valid, cvalid)
            if cvalid:
                addr, write, length = commands[ci]
                ctx.set(ctrl.cmd.payload, {"addr": addr, "write": write, "length": length})
            wvalid = wi < len(wwords) and wwait == 0
            ctx.set(ctrl.wdata.valid, wvalid)
            if wvalid:
                ctx.set(ctrl.wdata.payload, wwords[wi])
            ctaken = cvalid and ctx.get(ctrl.cmd.ready)
            wtaken = wvalid and ctx.get(ctrl.wdata.ready)
            if ctx.get(ctrl.rdata.valid):
                reads.append((cycle, ctx.get(ctrl.rdata.payload)))
            trace.append(command_on(ctx, ctrl.pins))
            await ctx.tick()
            assert not ctx.get(chip.violation), \
                f"cycle {cycle}: {ctx.get(chip.violation_code)}"
            if ctaken:
                accepted.append(cycle)
                ci, cwait = ci + 1, cmd_gap()
            elif cwait:
                cwait -= 1
            if wtaken:
                wi, wwait = wi + 1, wdata_gap()
            elif wwait:
                wwait -= 1
        else:
            raise AssertionError(f"budget of {budget} cycles exceeded: {ci} of {len(commands)} "
                                 f"commands, {wi} of {len(wwords)} write words, {len(reads)} of "
                                 f"{expected} read words")
        for _ in range(8):       # the last write's tWR, any late rule
            await ctx.tick()
        assert not ctx.get(chip.violation), ctx.get(chip.violation_code)
        assert not ctx.get(ctrl.rdata.valid)

    sim = Simulator(pair)
    sim.add_clock(1 / CLK)
    sim.add_testbench(bench)
    sim.run()
    return reads, trace, accepted


def reference(commands, wwords, space):
    """The words every read command returns, from a dict (unwritten words are 0)."""
    memory, out, words = {}, [], iter(wwords)
    for addr, write, length in commands:
        for i in range(length):
            a = (addr + i) % space
            if write:
                memory[a] = next(words)
            else:
                out.append(memory.get(a, 0))
    return out


# -- 1. random traffic ----------------------------------------------------------------------

SPACE = 4 * ROW_SET          # 4 rows of every bank: 8192 words
PLACES = ["random", "row_end", "same_row", "other_row"]


@st.composite
def traffic(draw):
    """Commands at random places: anywhere, across a row end (the burst ends in the next
    bank), in the previous command's row, in another row of the previous command's bank."""
    ops = draw(st.lists(st.tuples(st.booleans(), st.sampled_from(PLACES),
                                  st.integers(0, SPACE - 1), st.integers(1, 48)),
                        min_size=3, max_size=9))
    commands, previous = [], 0
    for write, place, offset, length in ops:
        if place == "row_end":
            back = 1 + offset % max(1, length - 1)
            addr = (offset // COLS + 1) * COLS - back
        elif place == "same_row":
            addr = previous // COLS * COLS + offset % COLS
        elif place == "other_row":
            addr = (previous + ROW_SET * (1 + offset % 3)) % SPACE
        else:
            addr = offset
        addr = min(addr, SPACE - length)
        commands.append((addr, write, length))
        previous = addr
    # a read of everything written, so every write is checked at least once
    commands += [(a, False, n) for a, w, n in list(commands) if w]
    return commands, draw(st.integers(0, 2**32 - 1))


# refresh every 150 cycles in all three, so bursts get cut by refreshes
TIMINGS = {
    "ulx3s": replace(ULX3S_SDRAM, t_refi=1500),
    "cl2": replace(ULX3S_SDRAM, t_refi=1500, cas_latency=2),
    # every gap longer than the schedule gives for free at 100 MHz (tWR and tRRD are
    # otherwise covered by the cycles of PLAN and the turnaround), so each timer is needed:
    # rp 4, rcd 3, ras 7, rc 12, rrd 6, wr 5, rfc 9
    "stretched": replace(ULX3S_SDRAM, t_refi=1500, t_rp=35, t_rcd=25, t_ras=70, t_rc=120,
                         t_rrd=55, t_wr=45, t_rfc=90),
}


@pytest.mark.parametrize("timing", list(TIMINGS))
@settings(max_examples=10)
@given(case=traffic())
def test_random_bursts(timing, case):
    """Random reads and writes with random gaps on ``cmd`` and ``wdata``: every word read is
    the reference memory's, in order, with no rule broken and refreshes in between."""
    commands, seed = case
    rng = random.Random(seed)
    wwords = [rng.randrange(1 << 16) for _ in range(sum(n for _, w, n in commands if w))]
    pair = Pair(TIMINGS[timing], max_burst=48)
    words = sum(n for _, _, n in commands)
    reads, trace, _ = run_pair(pair, commands, wwords, budget=INIT + 40 + 12 * words
                               + 30 * len(commands),
                               cmd_gap=lambda: rng.choice([0, 0, 0, 1, 5]),
                               wdata_gap=lambda: rng.choice([0, 0, 0, 0, 1, 3]))
    assert [w for _, w in reads] == reference(commands, wwords, SPACE)


BANK_HIGH = replace(ULX3S_SDRAM, t_refi=1500, address_map="bank_row_col")


def bank_high(addr):
    """The address with the bank, row and column of ``addr`` under the default map, under
    ``"bank_row_col"``."""
    bank, row, col = ULX3S_SDRAM.split(addr)
    return (bank << (ULX3S_SDRAM.row_bits + ULX3S_SDRAM.col_bits)) | (row << ULX3S_SDRAM.col_bits) | col


@settings(max_examples=10)
@given(case=traffic())
def test_random_bursts_bank_row_col(case):
    """The random traffic of :func:`test_random_bursts` with the bank on top of the address:
    the same banks, rows and columns at their new addresses; a burst across a row's end goes
    on in the next row of its bank."""
    commands, seed = case
    commands = [(bank_high(a), w, n) for a, w, n in commands]
    assert BANK_HIGH.split(commands[0][0]) == ULX3S_SDRAM.split(case[0][0][0])
    rng = random.Random(seed)
    wwords = [rng.randrange(1 << 16) for _ in range(sum(n for _, w, n in commands if w))]
    pair = Pair(BANK_HIGH, max_burst=48, depth_words=8 * ROW_SET)   # rows 0-7 stored apart
    words = sum(n for _, _, n in commands)
    reads, _, _ = run_pair(pair, commands, wwords, budget=INIT + 40 + 12 * words
                           + 30 * len(commands),
                           cmd_gap=lambda: rng.choice([0, 0, 0, 1, 5]),
                           wdata_gap=lambda: rng.choice([0, 0, 0, 0, 1, 3]))
    assert [w for _, w in reads] == reference(commands, wwords, BANK_HIGH.words)


def test_bank_row_col_keeps_a_row_open_in_each_bank():
    """Two streams in two banks interleaved a few words at a time: with the bank on top each
    keeps its row open (two ACTIVATEs in all); with the default map the same addresses fall
    in one bank and every turn closes the other's row."""
    a, b = 0, ULX3S_SDRAM.bank_words + 64          # bank 0 and bank 1 under "bank_row_col"
    commands = [(base + 4 * k, False, 4) for k in range(8) for base in (a, b)]
    for timing, acts in ((BANK_HIGH, 2), (replace(ULX3S_SDRAM, t_refi=1500), 16)):
        _, trace, _ = run_pair(Pair(timing, depth_words=1 << 22), commands, [], budget=600)
        assert sum(1 for c in trace if c is not None and c[0] == "ACT") == acts, timing


@pytest.mark.parametrize("timing", list(TIMINGS))
def test_crossing_and_conflicts(timing):
    """A fixed case: a write across the end of bank 3's row into bank 0 of the next row, a
    read across a row end, row conflicts in an open bank (one word each, so the PRECHARGE
    waits for tRAS and the ACTIVATE for tRC), a read right after a write and a write right
    after a read."""
    rng = random.Random(7)
    last = ROW_SET - 10                                  # bank 3, row 0, column 502
    commands = [(last, True, 20), (last, False, 20), (ROW_SET + 3, True, 5),
                (3, False, 5), (ROW_SET + 3, False, 5), (COLS - 4, True, 8),
                (COLS - 4, False, 8), (2 * ROW_SET, False, 1), (5, True, 1),
                (2 * ROW_SET + 1, False, 1), (6, False, 1), (2 * ROW_SET + 5, True, 1),
                (COLS + 9, True, 1), (5, False, 1)]
    wwords = [rng.randrange(1 << 16) for _ in range(sum(n for _, w, n in commands if w))]
    reads, trace, _ = run_pair(Pair(TIMINGS[timing]), commands, wwords, budget=1000)
    assert [w for _, w in reads] == reference(commands, wwords, SPACE)
    issued = [c for c in trace if c is not None]
    # the first write crosses from (bank 3, row 0) to (bank 0, row 1): both opened, and
    # bank 0's row 1 is precharged for row 0 of the fourth command
    assert ("ACT", 3, 0) in issued and ("ACT", 0, 1) in issued
    assert ("PRE", 0, 0) in issued
    assert sum(1 for c in issued if c[0] in ("READ", "WRITE")) == sum(n for _, _, n in commands)


# -- 2. initialization and throughput ---------------------------------------------------------

def test_init_sequence():
    """Exactly ``INIT`` cycles of NOPs, PRECHARGE ALL, tRP, REFRESH, tRFC, REFRESH, tRFC, LOAD
    MODE REGISTER (CL 3, burst length 1), tMRD, then ``init_done``."""
    pair = Pair()
    ctrl = pair.ctrl
    seen = []

    async def bench(ctx):
        for cycle in range(80):
            seen.append((cycle, command_on(ctx, ctrl.pins), ctx.get(ctrl.init_done),
                         ctx.get(ctrl.cmd.ready)))
            await ctx.tick()

    sim = Simulator(pair)
    sim.add_clock(1 / CLK)
    sim.add_testbench(bench)
    sim.run()
    issued = [(c, cmd) for c, cmd, _, _ in seen if cmd is not None]
    pre, ref1, ref2, mrs = INIT, INIT + CYC.rp, INIT + CYC.rp + CYC.rfc, \
        INIT + CYC.rp + 2 * CYC.rfc
    assert [(c, cmd[0]) for c, cmd in issued] == [(pre, "PRE"), (ref1, "REF"), (ref2, "REF"),
                                                  (mrs, "MRS")]
    assert issued[0][1][2] == 1 << 10 and issued[3][1][2] == mode_register(3) == 0x30
    # IDLE (and ``init_done``) tMRD after the MRS on the pins
    done = [c for c, _, d, _ in seen if d]
    assert done[0] == mrs + CYC.mrd
    assert all(r == d for _, _, d, r in seen)


def test_throughput_one_row():
    """256 words written and read back in one row: one READ or WRITE per cycle, and the
    first read word ``2 + CL + 2`` cycles after the command is taken on a row hit (PLAN,
    the READ decided, the pin register, CL, the input register), ``+ tRCD`` on a closed bank,
    ``+ tRP + tRCD`` on a row conflict."""
    base = 1 * COLS + 2 * ROW_SET                       # bank 1, row 2, column 0
    commands = [(base, True, 256), (base, False, 256),              # row hit
                (base + COLS, False, 256),                          # bank 2: closed
                (base + ROW_SET, False, 256)]                       # bank 1, row 3: conflict
    wwords = [(37 * i + 11) & 0xFFFF for i in range(256)]
    # (refresh pushed out of the run: one interval is 2000 cycles)
    pair = Pair(replace(ULX3S_SDRAM, t_refi=20_000))
    reads, trace, accepted = run_pair(pair, commands, wwords, budget=2000)
    assert [w for _, w in reads[:256]] == wwords
    assert [w for _, w in reads[256:]] == [0] * 512
    # a command to an open row skips PLAN: READ decided as it is taken, the pin register, CL,
    # the input register; a closed bank or a conflict goes through PLAN first
    hit = 1 + CYC.cl + 2
    firsts = [reads[k * 256][0] for k in range(3)]
    assert [f - a for f, a in zip(firsts, accepted[1:])] == [hit, hit + 1 + CYC.rcd,
                                                              hit + 1 + CYC.rp + CYC.rcd]
    for k in range(3):                      # 256 words in 256 consecutive cycles
        assert reads[k * 256 + 255][0] - reads[k * 256][0] == 255
    writes = [c for c, cmd in enumerate(trace) if cmd and cmd[0] == "WRITE"]
    assert writes == list(range(writes[0], writes[0] + 256))
    assert not any(cmd and cmd[0] == "REF" for cmd in trace[INIT + 20:])


# -- 3. refresh --------------------------------------------------------------------------------

def test_refresh_interval():
    """With t_refi = 100 cycles and reads streaming back to back, a REFRESH comes in every
    interval: the k-th after initialization within a few cycles of ``k * t_refi``."""
    timing = replace(ULX3S_SDRAM, t_refi=1000)
    refi = timing.cycles(CLK).refi
    assert refi == 100
    intervals = 20
    pair = Pair(timing)
    commands = [((i * 200 + 100) % SPACE, False, 200) for i in range(intervals * refi // 200)]
    reads, trace, _ = run_pair(pair, commands, [], budget=INIT + 3000)
    assert len(reads) == 200 * len(commands)
    refreshes = [c for c, cmd in enumerate(trace) if cmd and cmd[0] == "REF"][2:]
    done = INIT + CYC.rp + 2 * CYC.rfc + CYC.mrd        # init_done rises
    run = len(trace) - done
    assert len(refreshes) >= run // refi - 1 >= intervals - 1
    # the k-th request comes k * refi cycles after init_done; it is served (PRECHARGE ALL
    # after tRAS, REFRESH after tRP) once an ACTIVATE under way is done: within
    # 2 * (tRAS + tRP) + 4 cycles
    for k, c in enumerate(refreshes, 1):
        assert CYC.rp < c - (done + k * refi) <= 2 * (CYC.ras + CYC.rp) + 4, (k, c)


# -- 4. the model's rules ----------------------------------------------------------------------

def init_sequence(cyc, init=INIT):
    """Legal power-up: NOPs, PRECHARGE ALL, two REFRESH, LOAD MODE REGISTER, tMRD."""
    return ([None] * init + [("PRE", 0, 1 << 10)] + [None] * (cyc.rp - 1)
            + [("REF", 0, 0)] + [None] * (cyc.rfc - 1) + [("REF", 0, 0)]
            + [None] * (cyc.rfc - 1) + [("MRS", 0, mode_register(cyc.cl))]
            + [None] * (cyc.mrd - 1))


def drive_model(steps, timing=ULX3S_SDRAM, *, depth_words=None):
    """Drive the model's pins with ``steps`` (per cycle: None for NOP, ``(name, ba, a)`` or
    ``(name, ba, a, dq_o, dq_oe, dqm)``; a WRITE drives ``dq_oe`` unless told). Returns per
    cycle ``(dq_i, violation code after the cycle's edge)``."""
    chip = SDRAMChipModel(timing, CLK, init_cycles=INIT,
                          depth_words=depth_words or timing.banks << timing.col_bits)
    out = []

    async def bench(ctx):
        ctx.set(chip.pins.clk_en, 1)
        for step in steps:
            name, ba, a, dq, oe, dqm = (step + (0, None, 0)[len(step) - 3:] if step
                                        else ("NOP", 0, 0, 0, None, 0))
            ras, cas, we = PINS.get(name, (1, 1, 1))
            for pin, value in (("cs_n", 0), ("ras_n", ras), ("cas_n", cas), ("we_n", we),
                               ("ba", ba), ("a", a), ("dq_o", dq), ("dqm", dqm),
                               ("dq_oe", name == "WRITE" if oe is None else oe)):
                ctx.set(getattr(chip.pins, pin), value)
            dq_i = ctx.get(chip.pins.dq_i)
            await ctx.tick()
            out.append((dq_i, ctx.get(chip.violation_code)))
            assert ctx.get(chip.violation) == (ctx.get(chip.violation_code) != V.NONE)

    sim = Simulator(chip)
    sim.add_clock(1 / CLK)
    sim.add_testbench(bench)
    sim.run()
    return out


def first_violation(out):
    """``(cycle, code)`` of the first broken rule, or None."""
    return next(((c, code) for c, (_, code) in enumerate(out) if code != V.NONE), None)


def gap(n):
    """The NOPs that put the next command ``n`` cycles after the last."""
    return [None] * (n - 1)


ACT, PRE = ("ACT", 0, 5), ("PRE", 0, 0)
SLOW_RC = replace(ULX3S_SDRAM, t_rc=90)          # tRC 9 > tRAS 5 + tRP 2
# name: (timing, steps after init, the code, or None when legal); each illegal sequence is
# next to a legal one that differs by a cycle
RULES = {
    "read_closed_bank": (None, [("READ", 0, 0)], V.BANK_CLOSED),
    "write_closed_bank": (None, [("WRITE", 2, 0)], V.BANK_CLOSED),
    "read_after_rcd": (None, [ACT] + gap(CYC.rcd) + [("READ", 0, 0)], None),
    "read_before_rcd": (None, [ACT] + gap(CYC.rcd - 1) + [("READ", 0, 0)], V.T_RCD),
    "pre_after_ras": (None, [ACT] + gap(CYC.ras) + [PRE], None),
    "pre_before_ras": (None, [ACT] + gap(CYC.ras - 1) + [PRE], V.T_RAS),
    "pre_idle_bank": (None, [PRE, ("PRE", 0, 1 << 10)], None),
    "act_after_rp": (None, [ACT] + gap(CYC.ras + 1) + [PRE] + gap(CYC.rp) + [ACT], None),
    "act_before_rp": (None, [ACT] + gap(CYC.ras + 1) + [PRE] + gap(CYC.rp - 1) + [ACT],
                      V.T_RP),
    "act_after_rc": (SLOW_RC, [ACT] + gap(CYC.ras) + [PRE] + gap(9 - CYC.ras) + [ACT], None),
    "act_before_rc": (SLOW_RC, [ACT] + gap(CYC.ras) + [PRE] + gap(8 - CYC.ras) + [ACT],
                      V.T_RC),
    "act_open_bank": (None, [ACT] + gap(CYC.rc) + [ACT], V.ACT_OPEN),
    "act_after_rrd": (None, [ACT] + gap(CYC.rrd) + [("ACT", 1, 5)], None),
    "act_before_rrd": (None, [ACT, ("ACT", 1, 5)], V.T_RRD),
    "pre_after_wr": (None, [ACT] + gap(CYC.rcd) + [("WRITE", 0, 3)] + gap(CYC.ras) + [PRE],
                     None),
    "pre_before_wr": (None, [ACT] + gap(CYC.ras) + [("WRITE", 0, 3)] + gap(CYC.wr - 1)
                      + [PRE], V.T_WR),
    "act_after_rfc": (None, [("REF", 0, 0)] + gap(CYC.rfc) + [ACT], None),
    "act_before_rfc": (None, [("REF", 0, 0)] + gap(CYC.rfc - 1) + [ACT], V.T_RFC),
    "refresh_bank_open": (None, [ACT] + gap(CYC.rc) + [("REF", 0, 0)], V.NOT_IDLE),
    "act_after_mrd": (None, [("MRS", 0, 0x30)] + gap(CYC.mrd) + [ACT], None),
    "act_before_mrd": (None, [("MRS", 0, 0x30)] + gap(CYC.mrd - 1) + [ACT], V.T_MRD),
    "mode_burst_2": (None, [("MRS", 0, 0x31)], V.MODE),
    "mode_cl_2": (None, [("MRS", 0, 0x20)], V.MODE),
    "mode_interleaved_single_write": (None, [("MRS", 0, 0x30 | 1 << 3 | 1 << 9)], None),
    "write_after_turnaround": (None, [ACT] + gap(CYC.rcd) + [("READ", 0, 0)]
                               + gap(CYC.cl + 2) + [("WRITE", 0, 1)], None),
    "write_into_read_data": (None, [ACT] + gap(CYC.rcd) + [("READ", 0, 0)]
                             + gap(CYC.cl) + [("WRITE", 0, 1)], V.CONTENTION),
    "write_into_turn_off": (None, [ACT] + gap(CYC.rcd) + [("READ", 0, 0)]
                            + gap(CYC.cl + 1) + [("WRITE", 0, 1)], V.CONTENTION),
    "burst_terminate": (None, [("BST", 0, 0)], V.UNSUPPORTED),
    "read_auto_precharge": (None, [ACT] + gap(CYC.rcd) + [("READ", 0, 1 << 10)],
                            V.UNSUPPORTED),
    "write_undriven": (None, [ACT] + gap(CYC.rcd) + [("WRITE", 0, 1, 0, 0, 0)],
                       V.WRITE_UNDRIVEN),
}


@pytest.mark.parametrize("name", list(RULES))
def test_model_rule(name):
    """Each sequence after a legal initialization: the violation comes in the cycle after its
    last command, with the exact code; its legal neighbour has none."""
    timing, steps, code = RULES[name]
    timing = timing or ULX3S_SDRAM
    prefix = init_sequence(timing.cycles(CLK))
    out = drive_model(prefix + steps + [None, None], timing)
    expected = None if code is None else (len(prefix) + len(steps) - 1, code)
    assert first_violation(out) == expected


@pytest.mark.parametrize("steps, code", [
    ([None] * (INIT - 1) + [("PRE", 0, 1 << 10)], V.INIT),              # one cycle early
    ([None] * INIT + [("REF", 0, 0)], V.INIT),                          # not PRECHARGE ALL
    ([None] * INIT + [("PRE", 0, 1 << 10), None, ("MRS", 0, 0x30)], V.INIT),   # no REFRESH
    (init_sequence(CYC)[:-CYC.mrd - 1] + [ACT], V.INIT),                # no LOAD MODE
    (init_sequence(CYC) + [ACT], None),
])
def test_model_init_rules(steps, code):
    out = drive_model(steps + [None])
    assert first_violation(out) == (None if code is None else (len(steps) - 1, code))


def overdue_cycle(refreshes, mrs, refi, cycles):
    """The documented refresh rule in Python: the cycle whose edge flags ``REFRESH_OVERDUE``
    (a refresh owed every ``refi`` cycles from the LOAD MODE REGISTER in cycle ``mrs``, one
    paid by each REFRESH, at most 8 paid in advance, flagged the cycle after 9 are owed)."""
    owed = 0
    for c in range(mrs + 1, cycles):
        tick, ref = (c - mrs) % refi == 0, c in refreshes
        if tick and not ref:
            owed += 1
        elif ref and not tick:
            owed = max(owed - 1, -8)
        if owed == 9:
            return c + 1
    return None


@pytest.mark.parametrize("ahead", [0, 8, 12])
def test_model_refresh_overdue(ahead):
    """``ahead`` refreshes right after initialization, then none: the violation comes when 9
    are owed (from cycle ``mrs + 9 * refi`` with none, ``mrs + 17 * refi`` with 8 paid in
    advance; the 9th to 12th in advance do not count)."""
    timing = replace(ULX3S_SDRAM, t_refi=300)               # 30 cycles
    cyc = timing.cycles(CLK)
    prefix = init_sequence(cyc)
    mrs = len(prefix) - cyc.mrd
    steps = prefix + ([("REF", 0, 0)] + [None] * (cyc.rfc - 1)) * ahead
    steps += [None] * (20 * cyc.refi)
    refreshes = {c for c, s in enumerate(steps) if s and s[0] == "REF" and c > mrs}
    expected = overdue_cycle(refreshes, mrs, cyc.refi, len(steps))
    assert expected == mrs + {0: 9, 8: 17, 12: 19}[ahead] * cyc.refi + 1
    assert first_violation(drive_model(steps, timing)) == (expected, V.REFRESH_OVERDUE)


def test_model_refresh_kept():
    timing = replace(ULX3S_SDRAM, t_refi=300)
    cyc = timing.cycles(CLK)
    kept = init_sequence(cyc) + ([None] * (cyc.refi - 1) + [("REF", 0, 0)]) * 12
    assert first_violation(drive_model(kept, timing)) is None


def test_model_data():
    """A word written is on ``dq_i`` exactly CL cycles after its READ (0 in the other
    cycles); ``dqm`` masks bytes of a write; in a memory of 2 rows per bank, row 2 is row 0
    and row 1 is apart."""
    steps = init_sequence(CYC)
    reads = {}

    def add(*commands, after=1):
        steps.extend(gap(after))
        for c in commands:
            if c[0] == "READ":
                reads[len(steps)] = c
            steps.append(c)

    add(("ACT", 1, 0))
    add(("WRITE", 1, 7, 0xBEEF, 1, 0), ("WRITE", 1, 8, 0x1234, 1, 0),
        ("WRITE", 1, 8, 0xAB00, 1, 0b01),                   # the high byte only
        ("READ", 1, 7), ("READ", 1, 8), after=CYC.rcd)
    add(("PRE", 1, 0), after=CYC.ras)
    add(("ACT", 1, 2), after=CYC.rp)
    add(("READ", 1, 7), after=CYC.rcd)
    add(("PRE", 1, 0), after=CYC.ras)
    add(("ACT", 1, 1), after=CYC.rp)
    add(("READ", 1, 7), ("READ", 1, 8), after=CYC.rcd)
    steps.extend([None] * 6)
    out = drive_model(steps, depth_words=2 * ROW_SET)
    assert first_violation(out) is None
    dq = [d for d, _ in out]
    r = sorted(reads)
    assert [dq[c + CYC.cl] for c in r] == [0xBEEF, 0xAB34, 0xBEEF, 0, 0]
    driven = {c + CYC.cl for c in r}
    assert all(dq[c] == 0 for c in range(len(dq)) if c not in driven)


# -- 5. representation and configuration --------------------------------------------------------

def test_repr_and_members():
    ctrl = SDRAMController(ULX3S_SDRAM, CLK, max_burst=64, init_cycles=50)
    assert repr(ctrl) == "SDRAMController(SDRAMTiming(), 100000000, max_burst=64, " \
                         "init_cycles=50)"
    assert repr(SDRAMController(replace(ULX3S_SDRAM, cas_latency=2), 50e6)) == \
        "SDRAMController(SDRAMTiming(cas_latency=2), 50000000.0, max_burst=256)"
    assert repr(SDRAMChipModel(ULX3S_SDRAM, CLK, depth_words=4096)) == \
        "SDRAMChipModel(SDRAMTiming(), 100000000, depth_words=4096)"
    assert repr(ULX3S_SDRAM) == "SDRAMTiming()"
    assert repr(replace(ULX3S_SDRAM, t_refi=1000)) == "SDRAMTiming(t_refi=1000)"
    assert repr(SDRAMPinSignature()) == \
        "SDRAMPinSignature(data_bits=16, addr_bits=13, bank_bits=2)"
    assert ctrl.signature.members["pins"] == wiring.Out(SDRAMPinSignature())
    chip = SDRAMChipModel(ULX3S_SDRAM, CLK)
    assert chip.signature.members["pins"] == wiring.Out(SDRAMPinSignature().flip())
    assert ctrl.cmd_layout.size == 24 + 1 + 7
    assert ctrl.read_latency == 5 and ctrl.init_cycles == 50
    assert SDRAMController(ULX3S_SDRAM, CLK).init_cycles == 20_000
    assert ULX3S_SDRAM.split(0x123456) == (2, 0x123456 >> 11, 0x56)
    assert BANK_HIGH.split(0xC12345) == (3, 0x12345 >> 9, 0x145)
    assert BANK_HIGH.bank_words == 1 << 22
    assert repr(BANK_HIGH) == "SDRAMTiming(t_refi=1500, address_map='bank_row_col')"


def test_cycles():
    assert ULX3S_SDRAM.cycles(CLK) == CYC
    assert (CYC.rp, CYC.rcd, CYC.ras, CYC.rc, CYC.rrd, CYC.wr, CYC.rfc, CYC.refi, CYC.init,
            CYC.mrd, CYC.cl) == (2, 2, 5, 7, 2, 2, 7, 781, 20_000, 2, 3)
    c = ULX3S_SDRAM.cycles(133_000_000)
    assert (c.rp, c.rcd, c.ras, c.rc, c.rrd, c.wr, c.rfc, c.refi) == (3, 3, 6, 9, 2, 2, 9, 1039)
    c = ULX3S_SDRAM.cycles(166_000_000)
    assert (c.rp, c.ras, c.rc, c.refi) == (4, 8, 11, 1296)


@pytest.mark.parametrize("make, message", [
    (lambda: replace(ULX3S_SDRAM, cas_latency=4), "SDRAMTiming cas_latency must be 2 or 3, not 4"),
    (lambda: replace(ULX3S_SDRAM, banks=8), "SDRAMTiming banks must be 2 or 4, not 8"),
    (lambda: replace(ULX3S_SDRAM, row_bits=14),
     "SDRAMTiming row_bits must be an int from 11 to 13, not 14"),
    (lambda: replace(ULX3S_SDRAM, col_bits=11),
     "SDRAMTiming col_bits must be an int from 8 to 10, not 11"),
    (lambda: replace(ULX3S_SDRAM, data_bits=12),
     "SDRAMTiming data_bits must be 8, 16 or 32, not 12"),
    (lambda: replace(ULX3S_SDRAM, t_rcd=0), "SDRAMTiming t_rcd must be a positive number of "
                                             "ns, not 0"),
    (lambda: replace(ULX3S_SDRAM, address_map="col_row_bank"),
     "SDRAMTiming address_map must be 'row_bank_col' or 'bank_row_col', not 'col_row_bank'"),
    (lambda: replace(ULX3S_SDRAM, t_mrd_cycles=0),
     "SDRAMTiming t_mrd_cycles must be an int >= 1, not 0"),
    (lambda: ULX3S_SDRAM.cycles(200e6),
     "SDRAMTiming clock must be at most 166 MHz at CL 3, not 200 MHz"),
    (lambda: replace(ULX3S_SDRAM, cas_latency=2).cycles(133e6),
     "SDRAMTiming clock must be at most 100 MHz at CL 2, not 133 MHz"),
    (lambda: ULX3S_SDRAM.cycles(0), "SDRAMTiming clock must be a positive number of Hz, not 0"),
    (lambda: SDRAMController(ULX3S_SDRAM, CLK, max_burst=0),
     "SDRAMController max_burst must be an int >= 1, not 0"),
    (lambda: SDRAMController(ULX3S_SDRAM, CLK, init_cycles=0),
     "SDRAMController init_cycles must be an int >= 1, not 0"),
    (lambda: SDRAMController("ulx3s", CLK),
     "SDRAMController timing must be an SDRAMTiming, not 'ulx3s'"),
    (lambda: SDRAMController(replace(ULX3S_SDRAM, t_refi=300), CLK),
     "SDRAMController t_refi must be at least 36 cycles at 100 MHz, not 30"),
    (lambda: SDRAMChipModel(ULX3S_SDRAM, CLK, depth_words=3000),
     "SDRAMChipModel depth_words must be a power of two from 2048 to 16777216, not 3000"),
    (lambda: SDRAMChipModel(ULX3S_SDRAM, CLK, init_cycles=-1),
     "SDRAMChipModel init_cycles must be an int >= 1, not -1"),
    (lambda: SDRAMPinSignature(addr_bits=10),
     "SDRAMPinSignature addr_bits must be an int from 11 to 14, not 10"),
])
def test_configuration_errors(make, message):
    with pytest.raises(ValueError) as info:
        make()
    assert str(info.value) == message


def test_timing_type():
    assert isinstance(ULX3S_SDRAM, SDRAMTiming)
    with pytest.raises(Exception):
        ULX3S_SDRAM.t_rp = 10                               # frozen
