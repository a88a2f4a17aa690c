"""A cycle-accurate model of a single-data-rate SDRAM chip that checks the commands it gets."""

from functools import cached_property

from amaranth.hdl import (Array, Cat, ClockSignal, Instance, MemoryData, Module, Mux, Signal,
                          unsigned)
from amaranth.lib import enum, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import Out

from .controller import SDRAMPinSignature, mode_register
from .timing import SDRAMTiming

__all__ = ["SDRAMViolation", "SDRAMChipModel", "STORAGE_MODULE", "SDRAM_STORAGE_VERILOG"]

#: The Verilog module of a chip model's storage with ``storage="verilog"``.
STORAGE_MODULE = "stepforge_sdram_storage"

#: The Verilog of :data:`STORAGE_MODULE`: ``DEPTH`` words of ``DW`` bits, zeroed at time zero by
#: a loop, a byte-enabled write and a registered read of the old word (as the ``Memory`` of
#: ``storage="amaranth"``). Append it to the Verilog of a design that holds a chip model.
SDRAM_STORAGE_VERILOG = f"""
module {STORAGE_MODULE} #(parameter DEPTH = 2048, parameter AW = 11, parameter DW = 16) (
  input clk,
  input [AW-1:0] addr,
  input [DW-1:0] wdata,
  input [DW/8-1:0] we,
  output reg [DW-1:0] rdata
);
  reg [DW-1:0] mem [0:DEPTH-1];
  integer i, b;
  initial begin
    for (i = 0; i < DEPTH; i = i + 1) mem[i] = {{DW{{1'b0}}}};
    rdata = {{DW{{1'b0}}}};
  end
  always @(posedge clk) begin
    for (b = 0; b < DW / 8; b = b + 1)
      if (we[b]) mem[addr][b*8 +: 8] <= wdata[b*8 +: 8];
    rdata <= mem[addr];
  end
endmodule
"""


class SDRAMViolation(enum.Enum, shape=5):
    """The first rule a command sequence broke (:attr:`SDRAMChipModel.violation_code`). When
    several break in one cycle, the lowest code is kept."""
    #: No rule broken.
    NONE = 0
    #: A command before the end of initialization: any command before ``init_cycles`` cycles,
    #: then anything but PRECHARGE ALL, then anything but PRECHARGE or AUTO REFRESH until two
    #: AUTO REFRESH, then ACTIVATE, READ or WRITE before LOAD MODE REGISTER.
    INIT = 1
    #: ACTIVATE to a bank with an open row.
    ACT_OPEN = 2
    #: READ or WRITE to a bank without an open row.
    BANK_CLOSED = 3
    #: READ or WRITE sooner than tRCD after the bank's ACTIVATE.
    T_RCD = 4
    #: ACTIVATE sooner than tRP after the bank's PRECHARGE, or AUTO REFRESH or LOAD MODE
    #: REGISTER sooner than tRP after any bank's.
    T_RP = 5
    #: PRECHARGE of an open bank sooner than tRAS after its ACTIVATE.
    T_RAS = 6
    #: ACTIVATE sooner than tRC after the bank's ACTIVATE.
    T_RC = 7
    #: ACTIVATE sooner than tRRD after any ACTIVATE.
    T_RRD = 8
    #: PRECHARGE of an open bank sooner than tWR after a WRITE to it.
    T_WR = 9
    #: Any command sooner than tRFC after AUTO REFRESH.
    T_RFC = 10
    #: Any command sooner than tMRD after LOAD MODE REGISTER.
    T_MRD = 11
    #: Nine refresh intervals owed (see :class:`SDRAMChipModel`).
    REFRESH_OVERDUE = 12
    #: LOAD MODE REGISTER with a mode other than :func:`~.controller.mode_register` of the CAS
    #: latency (burst length 1, sequential or interleaved, standard operation).
    MODE = 13
    #: ``dq_oe`` high in a cycle the chip drives read data or turns its outputs off.
    CONTENTION = 14
    #: AUTO REFRESH or LOAD MODE REGISTER with a bank open.
    NOT_IDLE = 15
    #: A command the model does not implement: BURST TERMINATE, READ or WRITE with auto
    #: precharge (``A10`` high).
    UNSUPPORTED = 16
    #: WRITE without ``dq_oe``: the chip would store a floating bus.
    WRITE_UNDRIVEN = 17


class SDRAMChipModel(wiring.Component):
    """A single-data-rate SDRAM chip at burst length 1, in Amaranth, checking every command.

    The model samples the pins at each clock edge like the chip (a command counts where
    ``clk_en`` is high and ``cs_n`` low), keeps the banks' open rows and stores the words in a
    :class:`~amaranth.lib.memory.Memory`. A READ on the pins in cycle ``p`` has its word on
    ``dq_i`` in cycle ``p + CL`` (the chip's data is valid at the ``CL``-th edge after the one
    that took the command) and ``dq_i`` is 0 in every other cycle. A WRITE stores ``dq_o`` in
    the bytes whose ``dqm`` bit is low; ``dqm`` is not modelled on reads. Everything is
    registers and a memory: it simulates in Amaranth and converts to Verilog.

    It checks the rules of :class:`SDRAMViolation` with counters of the cycles since each
    bank's last ACTIVATE, PRECHARGE (of an open row: a PRECHARGE of an idle bank is a NOP) and
    WRITE, and since the last ACTIVATE, AUTO REFRESH and LOAD MODE REGISTER. ``violation`` goes
    high in the cycle after the first broken rule and stays high; ``violation_code`` keeps
    that rule. The model goes on after a violation (doing what the command says), so a test
    may read on.

    **Refresh rule.** From the initializing LOAD MODE REGISTER the model owes one refresh
    every ``t_refi`` cycles (rounded down) and pays one with every AUTO REFRESH; up to 8
    refreshes may be paid in advance. When 9 are owed (no AUTO REFRESH for 9 intervals, or a
    controller that falls behind on average) the rule breaks: the chip's 8192 refreshes in
    64 ms, with at most 8 postponed, as DDR chips state it.

    **Bus.** The chip drives ``dq`` in the cycle of read data and, for tHZ, into the next one;
    ``dq_oe`` in either of them is contention. A controller must therefore leave a cycle free
    between the last read word and the first write word (WRITE ``CL + 2`` cycles after READ).

    **Small memories.** ``depth_words`` (a power of two) holds fewer words than the chip: the
    word at address ``row | bank | col`` (the map of
    :class:`~stepforge.hdl.sdram.timing.SDRAMTiming`) is stored at that address modulo
    ``depth_words``, so the high row bits are dropped and rows ``r`` and ``r + depth_words /
    (banks * cols)`` share storage. Tests keep their addresses below ``depth_words``.

    Parameters
    ----------
    timing : SDRAMTiming
    clk_hz : float
    init_cycles : int, optional
        Cycles after reset before the first command; by default ``timing``'s ``t_init``.
        Give the controller's ``init_cycles``.
    depth_words : int, optional
        Words stored (see above): a power of two from ``banks << col_bits`` to the chip's size
        (the default).
    storage : {"amaranth", "verilog"}, default "amaranth"
        ``"amaranth"``: a :class:`~amaranth.lib.memory.Memory` whose words a testbench reaches
        through :attr:`data`. ``"verilog"`` (Verilator builds): an instance of
        :data:`SDRAM_STORAGE_VERILOG`'s module, zeroed by a loop (Amaranth writes every initial
        word of a memory into its Verilog: megabytes of text for a chip of a few megawords);
        append that text to the design's Verilog.

    Members
    -------
    pins : ``Out(SDRAMPinSignature.for_timing(timing).flip())``
        The chip's pins: it takes the command, address and ``dq_o``, ``dq_oe``, and drives
        ``dq_i``.
    violation : ``Out(1)``
        Sticky: a rule has been broken.
    violation_code : ``Out(SDRAMViolation)``
        The first rule broken (``NONE`` before).

    Raises
    ------
    ValueError
        ``timing`` is not an :class:`SDRAMTiming`, ``clk_hz`` is out of range,
        ``init_cycles`` is not an int >= 1, or ``depth_words`` is not a power of two in range.
    """

    def __init__(self, timing, clk_hz, *, init_cycles=None, depth_words=None,
                 storage="amaranth"):
        if not isinstance(timing, SDRAMTiming):
            raise ValueError(f"SDRAMChipModel timing must be an SDRAMTiming, not {timing!r}")
        cycles = timing.cycles(clk_hz)
        if init_cycles is not None and (not isinstance(init_cycles, int)
                                        or isinstance(init_cycles, bool) or init_cycles < 1):
            raise ValueError(f"SDRAMChipModel init_cycles must be an int >= 1, not "
                             f"{init_cycles!r}")
        least = timing.banks << timing.col_bits
        if depth_words is not None and (not isinstance(depth_words, int)
                                        or isinstance(depth_words, bool)
                                        or depth_words & (depth_words - 1)
                                        or not least <= depth_words <= timing.words):
            raise ValueError(f"SDRAMChipModel depth_words must be a power of two from {least} "
                             f"to {timing.words}, not {depth_words!r}")
        if storage not in ("amaranth", "verilog"):
            raise ValueError(f"SDRAMChipModel storage must be 'amaranth' or 'verilog', not "
                             f"{storage!r}")
        self.storage = storage
        self._timing, self._clk_hz, self._cycles = timing, clk_hz, cycles
        self._init_cycles, self._depth_words = init_cycles, depth_words
        super().__init__({
            "pins": Out(SDRAMPinSignature.for_timing(timing).flip()),
            "violation": Out(1),
            "violation_code": Out(SDRAMViolation),
        })

    @property
    def init_cycles(self):
        """Cycles after reset before the first command."""
        return self._cycles.init if self._init_cycles is None else self._init_cycles

    @property
    def depth_words(self):
        """Words stored."""
        return self._timing.words if self._depth_words is None else self._depth_words

    @staticmethod
    def depth_for_words(timing, words):
        """The least ``depth_words`` that stores apart every word address up to each of
        ``words`` in its bank (addresses as ``timing``'s map cuts them): the model keeps a
        word at ``column | bank | row`` (low bits first), so the rows the addresses reach
        decide; a power of two, at least a row of every bank."""
        rows = max((timing.split(w)[1] for w in words), default=0) + 1
        return max(1 << ((rows << (timing.bank_bits + timing.col_bits)) - 1).bit_length(),
                   timing.banks << timing.col_bits)

    def __repr__(self):
        init = "" if self._init_cycles is None else f", init_cycles={self._init_cycles}"
        depth = "" if self._depth_words is None else f", depth_words={self._depth_words}"
        storage = "" if self.storage == "amaranth" else f", storage={self.storage!r}"
        return f"SDRAMChipModel({self._timing!r}, {self._clk_hz!r}{init}{depth}{storage})"

    @cached_property
    def data(self):
        """The stored words (``MemoryData``, ``storage="amaranth"`` only): a testbench reads and
        writes them with ``ctx.get(chip.data[i])`` / ``ctx.set(chip.data[i], value)``."""
        if self.storage != "amaranth":
            raise AttributeError("SDRAMChipModel.data exists only with storage='amaranth'")
        return MemoryData(shape=unsigned(self._timing.data_bits), depth=self.depth_words,
                          init=[])

    def elaborate(self, platform):
        m = Module()
        t, cyc, p = self._timing, self._cycles, self.pins
        nb = t.banks

        # -- the command
        valid = p.clk_en & ~p.cs_n
        is_act = Signal(name="cmd_activate")
        is_read = Signal(name="cmd_read")
        is_write = Signal(name="cmd_write")
        is_pre = Signal(name="cmd_precharge")
        is_ref = Signal(name="cmd_refresh")
        is_mrs = Signal(name="cmd_mode")
        is_bst = Signal(name="cmd_burst_stop")
        any_cmd = Signal(name="cmd_any")
        code = Cat(p.we_n, p.cas_n, p.ras_n)
        m.d.comb += [
            is_act.eq(valid & (code == 0b011)), is_read.eq(valid & (code == 0b101)),
            is_write.eq(valid & (code == 0b100)), is_pre.eq(valid & (code == 0b010)),
            is_ref.eq(valid & (code == 0b001)), is_mrs.eq(valid & (code == 0b000)),
            is_bst.eq(valid & (code == 0b110)), any_cmd.eq(valid & (code != 0b111)),
        ]
        bank = p.ba
        all_banks = p.a[10]

        # -- cycles since events, saturating (a counter is 1 in the cycle after its event)
        def since(name, limit, event):
            count = Signal(range(limit + 1), name=f"since_{name}", init=limit)
            with m.If(event):
                m.d.sync += count.eq(1)
            with m.Elif(count != limit):
                m.d.sync += count.eq(count + 1)
            return count

        open_banks = Signal(nb, name="open_banks")
        rows = [Signal(t.row_bits, name=f"open_row{b}") for b in range(nb)]
        here = [bank == b for b in range(nb)]
        closing = [is_pre & (all_banks | here[b]) & open_banks[b] for b in range(nb)]
        act_limit = max(cyc.rcd, cyc.ras, cyc.rc)
        since_act = [since(f"act{b}", act_limit, is_act & here[b]) for b in range(nb)]
        since_pre = [since(f"pre{b}", cyc.rp, closing[b]) for b in range(nb)]
        since_wr = [since(f"write{b}", cyc.wr, is_write & here[b]) for b in range(nb)]
        since_any_act = since("act", cyc.rrd, is_act)
        since_ref = since("refresh", cyc.rfc, is_ref)
        since_mrs = since("mode", cyc.mrd, is_mrs)
        bank_open = open_banks.bit_select(bank, 1)

        # -- initialization: the wait, then PRECHARGE ALL (stage 1), two AUTO REFRESH (stage
        # 3), LOAD MODE REGISTER (stage 4: ready)
        waited = Signal(range(self.init_cycles + 1), name="init_waited")
        with m.If(waited != self.init_cycles):
            m.d.sync += waited.eq(waited + 1)
        stage = Signal(range(5), name="init_stage")
        with m.If(any_cmd & (waited == self.init_cycles)):
            with m.If((stage == 0) & is_pre & all_banks):
                m.d.sync += stage.eq(1)
            with m.If(((stage == 1) | (stage == 2)) & is_ref):
                m.d.sync += stage.eq(stage + 1)
            with m.If((stage == 3) & is_mrs):
                m.d.sync += stage.eq(4)
        init_bad = any_cmd & ((waited != self.init_cycles)
                              | ((stage == 0) & ~(is_pre & all_banks))
                              | ((stage < 3) & is_mrs)
                              | ((stage < 4) & (is_act | is_read | is_write)))

        # -- refresh debt: one owed every ``refi`` cycles from the end of initialization
        tick_count = Signal(range(cyc.refi), name="refresh_tick_count")
        tick = Signal(name="refresh_tick")
        owed = Signal(range(-8, 10), name="refreshes_owed")
        m.d.comb += tick.eq((stage == 4) & (tick_count == cyc.refi - 1))
        with m.If(stage == 4):
            m.d.sync += tick_count.eq(Mux(tick, 0, tick_count + 1))
        with m.If(tick & ~is_ref):
            m.d.sync += owed.eq(owed + 1)
        with m.Elif(is_ref & ~tick & (stage == 4) & (owed != -8)):
            m.d.sync += owed.eq(owed - 1)

        # -- the words
        depth = self.depth_words
        word = Cat(p.a[:t.col_bits], bank, Array(rows)[bank])[:(depth - 1).bit_length()]
        stored = Signal(t.data_bits, name="stored_word")
        if self.storage == "amaranth":
            mem = m.submodules.mem = Memory(data=self.data)
            wr = mem.write_port(granularity=8)
            rd = mem.read_port(domain="sync")
            m.d.comb += [wr.addr.eq(word), wr.data.eq(p.dq_o),
                         wr.en.eq(Mux(is_write, ~p.dqm, 0)), rd.addr.eq(word), rd.en.eq(1),
                         stored.eq(rd.data)]
        else:
            m.submodules.mem = Instance(
                STORAGE_MODULE, p_DEPTH=depth, p_AW=len(word), p_DW=t.data_bits,
                i_clk=ClockSignal(), i_addr=word, i_wdata=p.dq_o,
                i_we=Mux(is_write, ~p.dqm, 0), o_rdata=stored)
        # ``reads[k]``: a READ was on the pins k + 1 cycles ago; its word is on the bus at
        # k = CL - 1, and the outputs turn off at k = CL
        reads = Signal(cyc.cl + 1, name="reads")
        m.d.sync += reads.eq(Cat(is_read, reads[:-1]))
        out = stored
        for k in range(cyc.cl - 1):
            delayed = Signal(t.data_bits, name=f"read_word{k + 1}")
            m.d.sync += delayed.eq(out)
            out = delayed
        m.d.comb += p.dq_i.eq(Mux(reads[cyc.cl - 1], out, 0))

        # -- the state of the banks
        for b in range(nb):
            with m.If(is_act & here[b]):
                m.d.sync += [open_banks[b].eq(1), rows[b].eq(p.a[:t.row_bits])]
            with m.Elif(closing[b]):
                m.d.sync += open_banks[b].eq(0)

        # -- the rules, lowest code first
        V = SDRAMViolation
        rw = is_read | is_write
        # the controller's word, but for the burst type (A3) and the write burst mode (A9),
        # which do not matter at burst length 1
        mode = ((p.a & ~((1 << 3) | (1 << 9))) == mode_register(cyc.cl)) & (p.ba == 0)
        rules = [
            (V.INIT, init_bad),
            (V.ACT_OPEN, is_act & bank_open),
            (V.BANK_CLOSED, rw & ~bank_open),
            (V.T_RCD, rw & (Array(since_act)[bank] < cyc.rcd)),
            (V.T_RP, (is_act & (Array(since_pre)[bank] < cyc.rp))
             | ((is_ref | is_mrs) & Cat(*(s < cyc.rp for s in since_pre)).any())),
            (V.T_RAS, Cat(*(closing[b] & (since_act[b] < cyc.ras)
                            for b in range(nb))).any()),
            (V.T_RC, is_act & (Array(since_act)[bank] < cyc.rc)),
            (V.T_RRD, is_act & (since_any_act < cyc.rrd)),
            (V.T_WR, Cat(*(closing[b] & (since_wr[b] < cyc.wr) for b in range(nb))).any()),
            (V.T_RFC, any_cmd & (since_ref < cyc.rfc)),
            (V.T_MRD, any_cmd & (since_mrs < cyc.mrd)),
            (V.REFRESH_OVERDUE, owed == 9),
            (V.MODE, is_mrs & ~mode),
            (V.CONTENTION, p.dq_oe & (reads[cyc.cl - 1] | reads[cyc.cl])),
            (V.NOT_IDLE, (is_ref | is_mrs) & open_banks.any()),
            (V.UNSUPPORTED, is_bst | (rw & all_banks)),
            (V.WRITE_UNDRIVEN, is_write & ~p.dq_oe),
        ]
        with m.If(~self.violation):
            for i, (value, broken) in enumerate(rules):
                with (m.If if i == 0 else m.Elif)(broken):
                    m.d.sync += [self.violation.eq(1), self.violation_code.eq(value)]
        return m
