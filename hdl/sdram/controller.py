"""The SDRAM controller: bursts of consecutive words in, one READ or WRITE per cycle out, every
pin a register."""

from amaranth.hdl import Array, C, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .timing import SDRAMTiming

__all__ = ["SDRAMPinSignature", "SDRAMController", "mode_register"]


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def mode_register(cas_latency):
    """The LOAD MODE REGISTER word the controller writes on ``A``: burst length 1 (``A2:A0 =
    000``), sequential (``A3 = 0``), CAS latency ``cas_latency`` (``A6:A4``), standard operation
    (``A8:A7 = 00``), programmed burst length for writes (``A9 = 0``, the same as single-location
    at burst length 1), ``A12:A10 = 0``."""
    return cas_latency << 4


class SDRAMPinSignature(wiring.Signature):
    """The pins of a single-data-rate SDRAM chip, seen from the controller.

    The clock is not a member: the chip's clock is the controller's, shifted by a PLL on a
    board. The data bus is split into the controller's output ``dq_o``, its output enable
    ``dq_oe`` and the input ``dq_i``; a board build joins them in a tristate buffer, a test joins
    them to :class:`~stepforge.hdl.sdram.chip_model.SDRAMChipModel`, whose ``pins`` are this
    signature flipped. The command pins are active low and rest high (COMMAND INHIBIT) from
    reset, and so does ``dqm`` (all bytes masked).

    Parameters
    ----------
    data_bits : int, default 16
        Width of ``dq``: 8, 16 or 32 (``dqm`` has a bit for each byte).
    addr_bits : int, default 13
        Width of ``a``: 11 to 14.
    bank_bits : int, default 2
        Width of ``ba``: 1 or 2.

    Members
    -------
    clk_en : ``Out(1)``
        CKE.
    cs_n, ras_n, cas_n, we_n : ``Out(1, init=1)``
        The command.
    ba : ``Out(bank_bits)``
        The bank of an ACTIVATE, READ, WRITE or PRECHARGE.
    a : ``Out(addr_bits)``
        The row of an ACTIVATE, the column of a READ or WRITE, ``A10`` "all banks" of a
        PRECHARGE, the mode of a LOAD MODE REGISTER.
    dqm : ``Out(data_bits // 8, init=all ones)``
        Byte masks (high: the byte is not written, not driven on a read two cycles later).
    dq_o : ``Out(data_bits)``
        Write data, driven onto the bus where ``dq_oe``.
    dq_oe : ``Out(1)``
        The controller drives the bus.
    dq_i : ``In(data_bits)``
        The bus as the chip drives it.
    """

    def __init__(self, *, data_bits=16, addr_bits=13, bank_bits=2):
        if not _is_int(data_bits) or data_bits not in (8, 16, 32):
            raise ValueError(f"SDRAMPinSignature data_bits must be 8, 16 or 32, not "
                             f"{data_bits!r}")
        if not _is_int(addr_bits) or not 11 <= addr_bits <= 14:
            raise ValueError(f"SDRAMPinSignature addr_bits must be an int from 11 to 14, not "
                             f"{addr_bits!r}")
        if not _is_int(bank_bits) or bank_bits not in (1, 2):
            raise ValueError(f"SDRAMPinSignature bank_bits must be 1 or 2, not {bank_bits!r}")
        self.data_bits, self.addr_bits, self.bank_bits = data_bits, addr_bits, bank_bits
        masks = data_bits // 8
        super().__init__({
            "clk_en": Out(1),
            "cs_n": Out(1, init=1), "ras_n": Out(1, init=1), "cas_n": Out(1, init=1),
            "we_n": Out(1, init=1),
            "ba": Out(bank_bits),
            "a": Out(addr_bits),
            "dqm": Out(masks, init=(1 << masks) - 1),
            "dq_o": Out(data_bits),
            "dq_oe": Out(1),
            "dq_i": In(data_bits),
        })

    @classmethod
    def for_timing(cls, timing):
        """The pins of the chip that ``timing`` describes."""
        return cls(data_bits=timing.data_bits, addr_bits=timing.pin_addr_bits,
                   bank_bits=timing.bank_bits)

    def __eq__(self, other):
        return (type(other) is type(self) and (self.data_bits, self.addr_bits, self.bank_bits)
                == (other.data_bits, other.addr_bits, other.bank_bits))

    def __hash__(self):
        return hash((type(self), self.data_bits, self.addr_bits, self.bank_bits))

    def __repr__(self):
        return (f"SDRAMPinSignature(data_bits={self.data_bits}, addr_bits={self.addr_bits}, "
                f"bank_bits={self.bank_bits})")


class SDRAMController(wiring.Component):
    """A single-data-rate SDRAM controller for bursts of consecutive words, one word per cycle
    within a row.

    A command asks for ``length`` consecutive words from word address ``addr`` (the address
    map of :class:`~stepforge.hdl.sdram.timing.SDRAMTiming`: column lowest, then bank, then
    row). The controller cuts the burst at row ends itself and walks it as *segments*, one row
    each: it opens the segment's row (PRECHARGE of another open row of that bank, ACTIVATE),
    then issues one READ or WRITE of burst length 1 per cycle to consecutive columns, so a
    segment streams one word per cycle once its row is open. Rows stay open (one open row per
    bank) until another row of the bank or a refresh needs the bank; consecutive rows of a
    stream are in different banks.

    Schedule (cycles of the clock, ``tX`` the timing in cycles, see ``docs/sdram.md``):

    * power-up: ``init_cycles`` of NOPs, PRECHARGE ALL, two AUTO REFRESH, LOAD MODE REGISTER
      (:func:`mode_register`), ``t_mrd`` more cycles, then ``init_done``;
    * a command is taken in ``IDLE``, or with the last word of the burst before it (no idle
      cycle between back-to-back commands); one whose row is open in its bank streams at once
      (every bank's open row is compared with the command as it is taken); otherwise a cycle
      compares the segment's row with the bank's open row (``PLAN``), then PRECHARGE (after
      tRAS since its ACTIVATE and tWR since the last WRITE), ACTIVATE (after tRP, tRC, tRRD,
      tRFC) and the READs or WRITEs (after tRCD);
    * a WRITE takes its word from ``wdata`` in the cycle the controller decides it; a missing
      word holds the segment for that cycle;
    * a WRITE comes at least ``CL + 2`` cycles after the last READ: the chip drives the bus
      ``CL`` cycles after a READ and the next cycle is left free for its outputs to turn off
      (tHZ); a READ may follow a WRITE at once. ``dqm`` is not used for turnaround (all bytes
      enabled after initialization);
    * refresh: a counter asks for an AUTO REFRESH every ``t_refi`` cycles (rounded down) from
      the end of initialization. The request is served before the next command is taken, or
      in a segment before its next word: PRECHARGE ALL (after tRAS and tWR), AUTO REFRESH
      (after tRP), then the burst goes on from the word it had reached (its row opened again).
      A PRECHARGE or ACTIVATE already under way finishes first, so a refresh is on the pins
      at most ``2 * (tRAS + tRP) + 4`` cycles after its request, never a whole interval late.

    Every pin output is a register (an I/O register on a board), and ``dq_i`` passes one
    register before it is used. A READ decided in cycle ``t`` is on the pins in ``t + 1``, its
    word on ``dq_i`` in ``t + 1 + CL`` and on ``rdata`` in ``t + 2 + CL``: a shift register of
    ``CL + 2`` flags follows the reads (:attr:`read_latency`).

    Parameters
    ----------
    timing : SDRAMTiming
    clk_hz : float
        The clock (:meth:`SDRAMTiming.cycles` checks it).
    max_burst : int, default 256
        The longest ``length`` of a command.
    init_cycles : int, optional
        Cycles of NOPs after reset before the first command; by default ``timing``'s
        ``t_init`` (200 us). Tests use a few dozen, and tell the chip model the same.

    Members
    -------
    cmd : ``In(stream.Signature(cmd_layout))``
        ``addr`` (``timing.addr_bits``), ``write`` (1), ``length`` (``range(max_burst + 1)``;
        a command of length 0 is taken and does nothing). Taken between bursts: ``ready`` is
        high in ``IDLE`` and with a burst's last word (not while a refresh is due).
    wdata : ``In(stream.Signature(timing.data_bits))``
        The words of the write bursts, in order. ``ready`` is high in the cycles a WRITE may be
        issued (it does not depend on ``valid``); the word is taken with its WRITE.
    rdata : ``Out(stream.Signature(timing.data_bits, always_ready=True))``
        The words of the read bursts, in order, :attr:`read_latency` cycles after their READ
        was decided. There is no back-pressure: the requester reserves room for a read burst
        before it sends the command.
    init_done : ``Out(1)``
        Initialization is over (high from the cycle ``cmd`` can first be taken).
    pins : ``Out(SDRAMPinSignature.for_timing(timing))``
        The chip.

    Raises
    ------
    ValueError
        ``timing`` is not an :class:`SDRAMTiming`, ``clk_hz`` is out of range, ``max_burst`` or
        ``init_cycles`` is not a positive int, or the refresh interval is too short to serve a
        refresh and move a burst on in between (``t_refi`` under ``2 * (tRAS + tWR + tRP +
        tRFC + tRCD)`` cycles).
    """

    def __init__(self, timing, clk_hz, *, max_burst=256, init_cycles=None):
        if not isinstance(timing, SDRAMTiming):
            raise ValueError(f"SDRAMController timing must be an SDRAMTiming, not {timing!r}")
        cycles = timing.cycles(clk_hz)
        if not _is_int(max_burst) or max_burst < 1:
            raise ValueError(f"SDRAMController max_burst must be an int >= 1, not {max_burst!r}")
        if init_cycles is not None and (not _is_int(init_cycles) or init_cycles < 1):
            raise ValueError(f"SDRAMController init_cycles must be an int >= 1, not "
                             f"{init_cycles!r}")
        least = 2 * (cycles.ras + cycles.wr + cycles.rp + cycles.rfc + cycles.rcd)
        if cycles.refi < least:
            raise ValueError(f"SDRAMController t_refi must be at least {least} cycles at "
                             f"{clk_hz / 1e6:g} MHz, not {cycles.refi}")
        self._timing, self._clk_hz, self._max_burst = timing, clk_hz, max_burst
        self._init_cycles = init_cycles
        self._cycles = cycles
        self.cmd_layout = data.StructLayout({"addr": unsigned(timing.addr_bits),
                                             "write": unsigned(1),
                                             "length": range(max_burst + 1)})
        super().__init__({
            "cmd": In(stream.Signature(self.cmd_layout)),
            "wdata": In(stream.Signature(unsigned(timing.data_bits))),
            "rdata": Out(stream.Signature(unsigned(timing.data_bits), always_ready=True)),
            "init_done": Out(1),
            "pins": Out(SDRAMPinSignature.for_timing(timing)),
        })

    @property
    def timing(self):
        """The chip's :class:`SDRAMTiming`."""
        return self._timing

    @property
    def cycles(self):
        """The timings in cycles (:class:`~stepforge.hdl.sdram.timing.SDRAMCycles`)."""
        return self._cycles

    @property
    def init_cycles(self):
        """Cycles of NOPs after reset before the first command."""
        return self._cycles.init if self._init_cycles is None else self._init_cycles

    @property
    def read_latency(self):
        """Cycles from the decision of a READ to its word on ``rdata``: the pin register, the
        CAS latency, the input register."""
        return self._cycles.cl + 2

    def __repr__(self):
        init = "" if self._init_cycles is None else f", init_cycles={self._init_cycles}"
        return (f"SDRAMController({self._timing!r}, {self._clk_hz!r}, "
                f"max_burst={self._max_burst}{init})")

    def elaborate(self, platform):
        m = Module()
        t, cyc, pins = self._timing, self._cycles, self.pins
        cb, nb = t.col_bits, t.banks

        # -- the burst being walked: its next word's address and the words left
        addr = Signal(t.addr_bits, name="burst_addr")
        remaining = Signal(range(self._max_burst + 1), name="burst_remaining")
        writing = Signal(name="burst_write")
        col, bank, row = t.fields(addr)
        open_rows = [Signal(t.row_bits, name=f"open_row{b}") for b in range(nb)]
        open_banks = Signal(nb, name="open_banks")

        # -- what is issued this cycle (decided here, on the pins next cycle)
        issue_act = Signal(name="issue_act")
        issue_pre = Signal(name="issue_pre")
        issue_pre_all = Signal(name="issue_pre_all")
        issue_read = Signal(name="issue_read")
        issue_write = Signal(name="issue_write")
        issue_ref = Signal(name="issue_ref")
        issue_mrs = Signal(name="issue_mrs")

        # -- timers: "the gap since the last X is long enough", down-counters loaded with the
        # gap - 1 when X is decided, so the next command may be decided ``gap`` cycles later
        def timer(name, gap, load):
            if gap <= 1:
                return C(1, 1)
            count = Signal(range(gap), name=name)
            with m.If(load):
                m.d.sync += count.eq(gap - 1)
            with m.Elif(count != 0):
                m.d.sync += count.eq(count - 1)
            ok = Signal(name=f"{name}_ok")
            m.d.comb += ok.eq(count == 0)
            return ok

        act_here = [issue_act & (bank == b) for b in range(nb)]
        pre_here = [(issue_pre & (bank == b)) | issue_pre_all for b in range(nb)]
        rcd_ok = Array(timer(f"rcd{b}", cyc.rcd, act_here[b]) for b in range(nb))
        ras_ok = Array(timer(f"ras{b}", cyc.ras, act_here[b]) for b in range(nb))
        rc_ok = Array(timer(f"rc{b}", cyc.rc, act_here[b]) for b in range(nb))
        rp_ok = Array(timer(f"rp{b}", cyc.rp, pre_here[b]) for b in range(nb))
        rrd_ok = timer("rrd", cyc.rrd, issue_act)
        wr_ok = timer("wr", cyc.wr, issue_write)
        turn_ok = timer("read_to_write", cyc.cl + 2, issue_read)
        rfc_ok = timer("rfc", cyc.rfc, issue_ref)
        mrd_ok = timer("mrd", cyc.mrd, issue_mrs)
        all_ras_ok = Cat(*ras_ok).all()
        all_rp_ok = Cat(*rp_ok).all()

        # -- the pins: a NOP unless a command is issued; every one a register
        def command(ras_n, cas_n, we_n):
            m.d.sync += [pins.cs_n.eq(0), pins.ras_n.eq(ras_n), pins.cas_n.eq(cas_n),
                         pins.we_n.eq(we_n)]

        m.d.sync += pins.clk_en.eq(1)
        command(1, 1, 1)
        m.d.sync += pins.dq_oe.eq(0)
        # the write data's register takes ``wdata`` in every cycle (the chip reads it only with a
        # WRITE): no enable from the command decision on its 16 bits (the decision into this
        # register was a worst path of SwiGLU's build, 10.1 ns)
        m.d.sync += pins.dq_o.eq(self.wdata.payload)
        with m.If(issue_act):
            command(0, 1, 1)
            m.d.sync += [pins.ba.eq(bank), pins.a.eq(row)]
        with m.If(issue_pre | issue_pre_all):
            command(0, 1, 0)
            m.d.sync += [pins.ba.eq(bank), pins.a.eq(Mux(issue_pre_all, 1 << 10, 0))]
        with m.If(issue_read | issue_write):
            command(1, 0, Mux(issue_write, 0, 1))
            m.d.sync += [pins.ba.eq(bank), pins.a.eq(col)]
        with m.If(issue_write):
            m.d.sync += pins.dq_oe.eq(1)
        with m.If(issue_ref):
            command(0, 0, 1)
        with m.If(issue_mrs):
            command(0, 0, 0)
            m.d.sync += [pins.ba.eq(0), pins.a.eq(mode_register(cyc.cl))]

        # -- the read data: the input register, and the flags that follow the READs
        dq_in = Signal(t.data_bits, name="dq_in")
        read_pipe = Signal(self.read_latency, name="read_pipe")
        m.d.sync += [dq_in.eq(pins.dq_i), read_pipe.eq(Cat(issue_read, read_pipe[:-1]))]
        m.d.comb += [self.rdata.payload.eq(dq_in), self.rdata.valid.eq(read_pipe[-1])]

        # -- refresh requests, every ``refi`` cycles from the end of initialization
        refresh_count = Signal(range(cyc.refi), name="refresh_count", init=cyc.refi - 1)
        refresh_due = Signal(name="refresh_due")
        with m.If(self.init_done):
            with m.If(refresh_count == 0):
                m.d.sync += refresh_count.eq(cyc.refi - 1)
            with m.Else():
                m.d.sync += refresh_count.eq(refresh_count - 1)
        with m.If(self.init_done & (refresh_count == 0)):
            m.d.sync += refresh_due.eq(1)
        with m.Elif(issue_ref):
            m.d.sync += refresh_due.eq(0)

        # the count reaches 0 in cycle ``wait``, PRECHARGE ALL is decided in the next and is
        # on the pins in cycle ``wait + 2 = init_cycles``
        wait = max(self.init_cycles - 2, 0)
        init_count = Signal(range(wait + 1), name="init_count", init=wait)
        init_refreshes = Signal(name="init_refreshes")
        bank_open = open_banks.bit_select(bank, 1)
        row_hit = Signal(name="row_hit")
        m.d.comb += row_hit.eq(Array(open_rows)[bank] == row)

        # the command on ``cmd`` falls in a bank's open row: every bank's row compared at
        # once, then the command's bank picks one (the multiplexer of rows in front of one
        # comparator was 9 cells into the state, a worst path of the SwiGLU board build)
        _, cmd_bank, cmd_row = t.fields(self.cmd.payload.addr)
        bank_hits = Signal(nb, name="cmd_bank_hits")
        cmd_hit = Signal(name="cmd_row_hit")
        m.d.comb += [bank_hits.eq(Cat(*(open_banks[b] & (open_rows[b] == cmd_row)
                                        for b in range(nb)))),
                     cmd_hit.eq(bank_hits.bit_select(cmd_bank, 1))]

        def step():
            """The segment's word is issued: move to the next, end the burst or the row. The
            burst's last word takes the next command in the same cycle when one waits (no IDLE
            cycle between back-to-back commands)."""
            m.d.sync += [addr.eq(addr + 1), remaining.eq(remaining - 1)]
            with m.If(remaining == 1):
                m.d.comb += self.cmd.ready.eq(~refresh_due)
                with m.If(self.cmd.valid & ~refresh_due):
                    take()
                with m.Else():
                    m.next = "IDLE"
            with m.Elif(col == (1 << cb) - 1):
                m.next = "PLAN"

        def take():
            """Load the command on ``cmd`` (accepted this cycle)."""
            m.d.sync += [addr.eq(self.cmd.payload.addr), remaining.eq(self.cmd.payload.length),
                         writing.eq(self.cmd.payload.write)]
            with m.If(self.cmd.payload.length == 0):
                m.next = "IDLE"
            with m.Elif(cmd_hit):         # its row is open: no PLAN cycle
                m.next = "STREAM"
            with m.Else():
                m.next = "PLAN"

        with m.FSM(name="state"):
            with m.State("INIT_WAIT"):
                with m.If(init_count == 0):
                    m.next = "INIT_PRECHARGE"
                with m.Else():
                    m.d.sync += init_count.eq(init_count - 1)
            with m.State("INIT_PRECHARGE"):
                m.d.comb += issue_pre_all.eq(1)
                m.next = "INIT_REFRESH"
            with m.State("INIT_REFRESH"):
                with m.If(all_rp_ok & rfc_ok):
                    m.d.comb += issue_ref.eq(1)
                    m.d.sync += init_refreshes.eq(1)
                    with m.If(init_refreshes):
                        m.next = "INIT_MODE"
            with m.State("INIT_MODE"):
                with m.If(rfc_ok):
                    m.d.comb += issue_mrs.eq(1)
                    m.next = "INIT_MRD"
            with m.State("INIT_MRD"):
                with m.If(mrd_ok):
                    m.d.sync += [self.init_done.eq(1), pins.dqm.eq(0)]
                    m.next = "IDLE"
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(~refresh_due)
                with m.If(refresh_due):
                    m.next = "REFRESH_PRECHARGE"
                with m.Elif(self.cmd.valid):
                    take()
            with m.State("PLAN"):
                with m.If(refresh_due):
                    m.next = "REFRESH_PRECHARGE"
                with m.Elif(bank_open & row_hit):
                    m.next = "STREAM"
                with m.Elif(bank_open):
                    m.next = "PRECHARGE"
                with m.Else():
                    m.next = "ACTIVATE"
            with m.State("PRECHARGE"):
                with m.If(ras_ok[bank] & wr_ok):
                    m.d.comb += issue_pre.eq(1)
                    m.next = "ACTIVATE"
            with m.State("ACTIVATE"):
                with m.If(rp_ok[bank] & rc_ok[bank] & rrd_ok & rfc_ok):
                    m.d.comb += issue_act.eq(1)
                    m.next = "STREAM"
            with m.State("STREAM"):
                rw_ok = Signal(name="rw_ok")
                m.d.comb += [rw_ok.eq(rcd_ok[bank] & ~refresh_due),
                             self.wdata.ready.eq(rw_ok & writing & turn_ok)]
                with m.If(refresh_due):
                    m.next = "REFRESH_PRECHARGE"
                with m.Elif(rw_ok & ~writing):
                    m.d.comb += issue_read.eq(1)
                    step()
                with m.Elif(self.wdata.ready & self.wdata.valid):
                    m.d.comb += issue_write.eq(1)
                    step()
            with m.State("REFRESH_PRECHARGE"):
                with m.If(all_ras_ok & wr_ok):
                    m.d.comb += issue_pre_all.eq(1)
                    m.next = "REFRESH"
            with m.State("REFRESH"):
                with m.If(all_rp_ok & rfc_ok):
                    m.d.comb += issue_ref.eq(1)
                    with m.If(remaining != 0):
                        m.next = "PLAN"
                    with m.Else():
                        m.next = "IDLE"

        # -- the open rows
        for b in range(nb):
            with m.If(act_here[b]):
                m.d.sync += [open_banks[b].eq(1), open_rows[b].eq(row)]
            with m.Elif(pre_here[b]):
                m.d.sync += open_banks[b].eq(0)
        return m
