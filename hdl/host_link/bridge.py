"""The host link's bridge: frames in from the UART, memory, CSR and start out, replies back."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ...contract import host_protocol as hp
from ..memory import DebugSignature, times_const

__all__ = ["HostBridge", "crc16_step"]


def crc16_step(crc, byte):
    """The CRC-16/CCITT-FALSE register after ``byte`` (an Amaranth expression, 8 XOR stages)."""
    c = crc
    for i in range(7, -1, -1):
        feedback = c[15] ^ byte[i]
        c = (c << 1)[:16] ^ Mux(feedback, hp.CRC_POLY, 0)
    return c


class HostBridge(wiring.Component):
    """Executes the frames of :mod:`stepforge.contract.host_protocol` on a System's ports.

    Bytes arrive on ``rx``, one per cycle at most. A frame is parsed as it comes; a ``WRITE``'s
    words go to a buffer of ``max_data`` bytes (one block RAM), and nothing is done before the
    frame's last byte has arrived and its CRC, command, length and arguments are checked. Then:

    * ``WRITE``: the buffered words go to the memory through ``debug``, one every other cycle;
    * ``READ``: one word at a time is read through ``debug`` (its data arrives with ``rvalid``)
      and sent while the next is fetched, so the reply leaves at the line rate;
    * ``CSR``: one register per 4 bytes sent, through ``csr_addr``/``csr_rdata`` (one cycle);
    * ``START``: ``start`` pulses for one cycle (once; later ones answer ``STARTED``);
    * ``RESET``: ``system_reset`` pulses for one cycle and ``START`` is allowed again;
    * ``STATUS``: ``running``/``done``/``error``/``deadlock``/started, then the three CSRs from
      ``status_csrs`` (cycles, error unit, error code) as a ``CSR`` read sends them;
    * ``INFO``: constants.

    A frame whose bytes stop for ``timeout`` cycles is answered ``TIMEOUT``; after any other
    error the bridge discards bytes until ``timeout`` quiet cycles and then replies (protocol
    doc). A byte lost to ``rx_error`` (a framing error of the UART) inside a frame makes it
    ``FRAMING``. The reply is sent on ``tx`` with its CRC computed on the way out.

    Parameters
    ----------
    geometry : stepforge.hdl.memory.MemoryGeometry
        The memory behind ``debug`` (word size, address width, size).
    status_csrs : (int, int, int)
        CSR addresses of the cycle counter, the error unit and the error code (consecutive).
    timeout : int
        Cycles of silence that end a frame (``>= 1``).
    design_id, clock_hz, baud : int
        Reported by ``INFO`` (32 bits each).
    max_data : int, default 512
        Bytes of words in one ``WRITE``/``READ`` (a multiple of the word size).

    Members
    -------
    rx : ``In(stream.Signature(8))``
        Received bytes.
    rx_error : ``In(1)``
        A byte was lost (UART framing error or overrun).
    tx : ``Out(stream.Signature(8))``
        Reply bytes.
    debug : ``Out(DebugSignature(geometry))``
        The memory's word port.
    csr_addr : ``Out(16)``, csr_rdata : ``In(32)``
        The System's CSR port.
    start : ``Out(1)``
    system_reset : ``Out(1)``
        Reset the System (not the bridge) for a cycle.
    running, done, error, deadlock : ``In(1)``
        The System's state.
    busy : ``Out(1)``
        A frame is being received, executed or answered.
    """

    def __init__(self, geometry, *, status_csrs, timeout, design_id=0, clock_hz=0, baud=0,
                 max_data=hp.MAX_DATA):
        wb = geometry.word_bytes
        if isinstance(max_data, bool) or not isinstance(max_data, int) or max_data < wb \
                or max_data % wb or max_data > 0xFFFF - 8:
            raise ValueError(f"HostBridge max_data must be a multiple of the word size {wb} "
                             f"in {wb}..65527, not {max_data!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1:
            raise ValueError(f"HostBridge timeout must be an int >= 1, not {timeout!r}")
        first = tuple(status_csrs)[0] if len(tuple(status_csrs)) == 3 else None
        if first is None or tuple(status_csrs) != (first, first + 1, first + 2):
            raise ValueError(f"HostBridge status_csrs must be 3 consecutive CSR addresses, "
                             f"not {status_csrs!r}")
        self.geometry = geometry
        self.status_csrs = tuple(status_csrs)
        self.timeout = timeout
        self.design_id, self.clock_hz, self.baud = design_id, clock_hz, baud
        self.max_data = max_data
        super().__init__({
            "rx": In(stream.Signature(8)),
            "rx_error": In(1),
            "tx": Out(stream.Signature(8)),
            "debug": Out(DebugSignature(geometry)),
            "csr_addr": Out(16),
            "csr_rdata": In(32),
            "start": Out(1),
            "system_reset": Out(1),
            "running": In(1),
            "done": In(1),
            "error": In(1),
            "deadlock": In(1),
            "busy": Out(1),
        })

    def __repr__(self):
        return (f"HostBridge({self.geometry!r}, status_csrs={self.status_csrs!r}, "
                f"timeout={self.timeout}, design_id={self.design_id}, clock_hz={self.clock_hz}, "
                f"baud={self.baud}, max_data={self.max_data})")

    @property
    def info(self):
        """The :class:`~stepforge.contract.host_protocol.Info` that ``INFO`` reports."""
        g = self.geometry
        return hp.Info(hp.VERSION, g.word_bytes, g.addr_bits, self.max_data, self.design_id,
                       self.clock_hz, self.baud)

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        wb = g.word_bytes
        max_words = self.max_data // wb
        max_len = hp.max_len(self.max_data)
        S = hp.Status
        C = hp.Command
        size_bits = max(1, g.size_words.bit_length())   # an in-range address fits in these

        m.submodules.buffer = buf = memory.Memory(shape=g.word_bits, depth=max_words, init=[])
        wport = buf.write_port()
        rport = buf.read_port()

        # ---- the frame being received
        cmd = Signal(8, name="frame_cmd")
        seq = Signal(8, name="frame_seq")
        length = Signal(range(max_len + 1), name="frame_len")   # longer frames are drained
        got = Signal(range(max_len + 1), name="frame_got")      # payload bytes received
        arg = Signal(48, name="frame_arg")            # the first 6 payload bytes, LSB first
        # one CRC register for both directions: a frame is received, then answered
        crc = Signal(16, init=hp.CRC_INIT, name="crc")
        wacc = Signal(g.word_bits, name="write_word")  # a WRITE word being assembled
        wbyte = Signal(range(max(2, wb)), name="write_byte")
        nwords = Signal(range(max_words + 1), name="write_words")
        lost = Signal(name="frame_lost_byte")
        status = Signal(8, name="reply_status")
        quiet = Signal(range(self.timeout + 1), name="quiet_cycles")
        started = Signal(name="started")
        # the command, decoded when it arrives
        is_ = {c: Signal(name=f"is_{c.name.lower()}") for c in C}

        addr = Signal(32, name="arg_addr")
        count = Signal(16, name="arg_count")
        csr_first = Signal(16, name="arg_csr_first")
        csr_count = Signal(16, name="arg_csr_count")
        m.d.comb += [addr.eq(arg[:32]), count.eq(arg[32:48]), csr_first.eq(arg[:16]),
                     csr_count.eq(arg[16:32])]
        byte = self.rx.payload
        take = Signal(name="rx_take")
        m.d.comb += take.eq(self.rx.valid & self.rx.ready)

        # the checks, computed while the CRC's two bytes arrive, so that the decision after
        # the last byte reads registers only
        len_ok = Signal(name="check_length_ok")
        count_ok = Signal(name="check_count_ok")
        addr_hi_zero = Signal(name="check_addr_high_zero")
        end = Signal(size_bits + 1, name="check_end")
        range_ok = Signal(name="check_range_ok")
        reply_len = Signal(range(self.max_data + 2), name="check_reply_len")   # with status

        # ---- the reply
        hdr = Signal(range(8), name="reply_header_index")
        sr_bits = max(g.word_bits, 32)
        sr = Signal(sr_bits, name="reply_shift")
        sr_left = Signal(range(sr_bits // 8 + 1), name="reply_shift_bytes")
        items = Signal(range(max(max_words, self.max_data // 4) + 1),
                       name="reply_items")            # words or CSRs still to fetch
        total = Signal(range(self.max_data + 2), name="reply_total")   # status byte and data
        cursor = Signal(max(g.addr_bits, 16), name="reply_cursor")   # next word or CSR
        flags_r = Signal(5, name="status_flags")
        tidx = Signal(range(hp.INFO_BYTES), name="reply_table_index")
        widx = Signal(range(max_words + 1), name="exec_index")

        # registered outputs to the System
        d_addr = Signal(g.addr_bits, name="debug_addr")
        d_wdata = Signal(g.word_bits, name="debug_wdata")
        d_we = Signal(name="debug_we")
        d_re = Signal(name="debug_re")
        csr_a = Signal(16, name="csr_addr_reg")
        start = Signal(name="start_pulse")
        sys_rst = Signal(name="system_reset_pulse")
        m.d.sync += [d_we.eq(0), d_re.eq(0), start.eq(0), sys_rst.eq(0)]
        m.d.comb += self.system_reset.eq(sys_rst)
        m.d.comb += [self.debug.addr.eq(d_addr), self.debug.wdata.eq(d_wdata),
                     self.debug.we.eq(d_we), self.debug.re.eq(d_re), self.csr_addr.eq(csr_a),
                     self.start.eq(start)]

        # reply bytes leave through a register (out -> tx), refilled while the UART sends
        out = stream.Signature(8).create(path=("reply",))
        tx_valid = Signal(name="tx_valid_reg")
        tx_byte = Signal(8, name="tx_byte_reg")
        m.d.comb += [self.tx.valid.eq(tx_valid), self.tx.payload.eq(tx_byte),
                     out.ready.eq(~tx_valid | self.tx.ready)]
        with m.If(out.ready):
            m.d.sync += [tx_valid.eq(out.valid), tx_byte.eq(out.payload)]
        sent = Signal(name="reply_sent")
        m.d.comb += sent.eq(out.valid & out.ready)

        # input timeout: cycles since the last byte (while a frame is open or being drained)
        with m.If(take):
            m.d.sync += quiet.eq(0)
        with m.Elif(quiet != self.timeout):
            m.d.sync += quiet.eq(quiet + 1)
        timed_out = quiet == self.timeout

        with m.If(self.rx_error):
            m.d.sync += lost.eq(1)

        # every byte taken or sent goes through the CRC (the states below restart it)
        with m.If(take | sent):
            m.d.sync += crc.eq(crc16_step(crc, Mux(sent, out.payload, byte)))

        info = self.info.pack()
        flags = Cat(self.running, self.done, self.error, self.deadlock, started)

        def reply(code, nbytes=1, items_=0):
            """Send the reply: ``nbytes`` of payload (the status byte and the data)."""
            m.d.sync += [status.eq(code), total.eq(nbytes), items.eq(items_), hdr.eq(0),
                         sr_left.eq(0), tidx.eq(0)]
            m.next = "REPLY_HEADER"

        def offer(index, values):
            """Offer byte ``values[index]`` of a constant sequence to the transmitter."""
            m.d.comb += out.valid.eq(1)
            with m.Switch(index):
                for i, value in enumerate(values):
                    with m.Case(i):
                        m.d.comb += out.payload.eq(value)

        def receive(state, nxt, action=None, every=()):
            """A state that takes one byte of the frame (or times out); ``every``: statements
            for every cycle in the state."""
            with m.State(state):
                m.d.sync += every
                m.d.comb += self.rx.ready.eq(1)
                with m.If(take):
                    if action is not None:
                        action()
                    else:
                        m.next = nxt
                with m.Elif(timed_out):
                    reply(Mux(lost, S.FRAMING, S.TIMEOUT))

        m.d.comb += self.busy.eq(1)
        with m.FSM(name="bridge_fsm"):
            with m.State("HUNT"):
                m.d.comb += [self.rx.ready.eq(1), self.busy.eq(0)]
                with m.If(take & (byte == hp.SYNC)):
                    m.d.sync += [crc.eq(hp.CRC_INIT), lost.eq(0), got.eq(0), wbyte.eq(0),
                                 nwords.eq(0), arg.eq(0)]
                    m.next = "CMD"

            def take_cmd():
                m.d.sync += [cmd.eq(byte)] + [is_[c].eq(byte == c) for c in C]
                m.next = "SEQ"
            receive("CMD", "SEQ", take_cmd)

            def take_seq():
                m.d.sync += seq.eq(byte)
                m.next = "LEN0"
            receive("SEQ", "LEN0", take_seq)

            def take_len0():
                m.d.sync += length[:8].eq(byte)
                m.next = "LEN1"
            receive("LEN0", "LEN1", take_len0)

            def take_len1():
                n = Cat(length[:8], byte)
                m.d.sync += length[8:].eq(byte)
                with m.If(n > max_len):
                    m.d.sync += status.eq(S.LENGTH)
                    m.next = "DRAIN"
                with m.Elif(n == 0):
                    m.next = "CRC0"
                with m.Else():
                    m.next = "PAYLOAD"
            receive("LEN1", "PAYLOAD", take_len1)

            def take_payload():
                m.d.sync += got.eq(got + 1)
                with m.Switch(got):
                    for i in range(6):
                        with m.Case(i):
                            m.d.sync += arg[8 * i:8 * i + 8].eq(byte)
                with m.If(is_[C.WRITE] & (got >= 4)):
                    word = Cat(wacc[8:], byte)
                    m.d.sync += wacc.eq(word)
                    with m.If(wbyte == wb - 1):
                        m.d.sync += [wbyte.eq(0), nwords.eq(nwords + 1)]
                        m.d.comb += [wport.addr.eq(nwords), wport.data.eq(word),
                                     wport.en.eq(1)]
                    with m.Else():
                        m.d.sync += wbyte.eq(wbyte + 1)
                with m.If(got + 1 == length):
                    m.next = "CRC0"
            receive("PAYLOAD", "CRC0", take_payload)

            # the arguments are complete from here on
            receive("CRC0", "CRC1", every=[
                len_ok.eq(Mux(is_[C.WRITE], (length >= 4 + wb) & (wbyte == 0),
                          Mux(is_[C.READ], length == 6,
                          Mux(is_[C.CSR], length == 4, length == 0)))),
                count_ok.eq(Mux(is_[C.READ], (count != 0) & (count <= max_words),
                            Mux(is_[C.CSR], (csr_count != 0)
                                & (csr_count <= self.max_data // 4), 1))),
                addr_hi_zero.eq(addr[size_bits:] == 0),
                end.eq(addr[:size_bits] + Mux(is_[C.WRITE], nwords, count)),
                reply_len.eq(Mux(is_[C.CSR], csr_count << 2, times_const(count, wb)) + 1),
            ])
            receive("CRC1", "CHECK", every=[range_ok.eq(addr_hi_zero & (end <= g.size_words))])

            with m.State("CHECK"):
                def refuse(code):
                    m.d.sync += status.eq(code)
                    m.next = "DRAIN"
                with m.If(lost):
                    refuse(S.FRAMING)
                with m.Elif(crc != 0):
                    refuse(S.CRC)
                with m.Elif(~Cat(*is_.values()).any()):
                    refuse(S.COMMAND)
                with m.Elif(~len_ok):
                    refuse(S.LENGTH)
                with m.Elif(~count_ok | ((is_[C.READ] | is_[C.WRITE]) & ~range_ok)):
                    refuse(S.RANGE)
                with m.Elif((is_[C.READ] | is_[C.WRITE]) & self.running):
                    refuse(S.BUSY)
                with m.Elif(is_[C.START] & started):
                    refuse(S.STARTED)
                with m.Elif(is_[C.INFO]):
                    reply(S.OK, 1 + len(info))
                with m.Elif(is_[C.WRITE]):
                    m.d.sync += widx.eq(0)
                    m.next = "WRITE_FETCH"
                with m.Elif(is_[C.READ]):
                    m.d.sync += cursor.eq(addr)
                    reply(S.OK, reply_len, count)
                with m.Elif(is_[C.CSR]):
                    m.d.sync += cursor.eq(csr_first)
                    reply(S.OK, reply_len, csr_count)
                with m.Elif(is_[C.START]):
                    m.d.sync += [start.eq(1), started.eq(1)]
                    reply(S.OK)
                with m.Elif(is_[C.RESET]):
                    m.d.sync += [sys_rst.eq(1), started.eq(0)]
                    reply(S.OK)
                with m.Else():     # STATUS: the flags, then three CSRs
                    m.d.sync += [cursor.eq(self.status_csrs[0]), flags_r.eq(flags)]
                    reply(S.OK, 1 + hp.STATUS_BYTES, 3)
            with m.State("DRAIN"):
                m.d.comb += self.rx.ready.eq(1)
                with m.If(~take & timed_out):
                    reply(status)
            with m.State("WRITE_FETCH"):
                m.d.comb += rport.addr.eq(widx)
                m.next = "WRITE_STORE"
            with m.State("WRITE_STORE"):
                m.d.sync += [d_addr.eq(addr + widx), d_wdata.eq(rport.data), d_we.eq(1),
                             widx.eq(widx + 1)]
                with m.If(widx + 1 == nwords):
                    reply(S.OK)
                with m.Else():
                    m.next = "WRITE_FETCH"
            with m.State("REPLY_HEADER"):
                head = [hp.SYNC, cmd | hp.REPLY, seq, total[:8], total[8:], status]
                offer(hdr, head)
                with m.If(sent):
                    m.d.sync += hdr.eq(hdr + 1)
                    with m.If(hdr == 0):
                        m.d.sync += crc.eq(hp.CRC_INIT)   # the CRC starts after SYNC
                    with m.If(hdr == len(head) - 1):
                        with m.If(status != S.OK):
                            m.d.sync += hdr.eq(0)
                            m.next = "REPLY_CRC"
                        with m.Elif(is_[C.INFO]):
                            m.next = "REPLY_TABLE"
                        with m.Elif(is_[C.STATUS]):
                            m.next = "REPLY_FLAGS"
                        with m.Else():
                            m.next = "REPLY_DATA"
            with m.State("REPLY_TABLE"):
                # INFO's constants, byte by byte
                offer(tidx, info)
                with m.If(sent):
                    m.d.sync += tidx.eq(tidx + 1)
                    with m.If(tidx == len(info) - 1):
                        m.d.sync += hdr.eq(0)
                        m.next = "REPLY_CRC"
            with m.State("REPLY_FLAGS"):
                m.d.comb += [out.valid.eq(1), out.payload.eq(flags_r)]
                with m.If(sent):
                    m.next = "REPLY_DATA"
            with m.State("REPLY_DATA"):
                with m.If(sr_left != 0):
                    m.d.comb += [out.valid.eq(1), out.payload.eq(sr[:8])]
                    with m.If(sent):
                        m.d.sync += [sr.eq(sr >> 8), sr_left.eq(sr_left - 1)]
                with m.Elif(items != 0):
                    with m.If(is_[C.READ]):
                        m.d.sync += [d_addr.eq(cursor), d_re.eq(1)]
                        m.next = "REPLY_WORD"
                    with m.Else():
                        m.d.sync += csr_a.eq(cursor)
                        m.next = "REPLY_CSR_WAIT"
                    m.d.sync += [cursor.eq(cursor + 1), items.eq(items - 1)]
                with m.Else():
                    m.d.sync += hdr.eq(0)
                    m.next = "REPLY_CRC"
            with m.State("REPLY_WORD"):
                with m.If(self.debug.rvalid):
                    m.d.sync += [sr.eq(self.debug.rdata), sr_left.eq(wb)]
                    m.next = "REPLY_DATA"
            with m.State("REPLY_CSR_WAIT"):
                m.next = "REPLY_CSR"
            with m.State("REPLY_CSR"):
                m.d.sync += [sr.eq(self.csr_rdata), sr_left.eq(4)]
                m.next = "REPLY_DATA"
            with m.State("REPLY_CRC"):
                m.d.comb += [out.valid.eq(1),
                             out.payload.eq(Mux(hdr == 0, crc[8:], crc[:8]))]
                with m.If(sent):
                    with m.If(hdr == 0):
                        m.d.sync += [hdr.eq(1), crc.eq(crc)]   # hold: the CRC is being sent
                    with m.Else():
                        m.next = "HUNT"
        return m
