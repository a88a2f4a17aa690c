"""The host link's bridge: frames in from the UART, memory, CSR and start out, replies back."""

from contextlib import contextmanager

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ...contract import host_protocol as hp
from ..memory import DebugSignature
from ..ram_attrs import NO_COLLISION

__all__ = ["HostBridge", "crc16_step", "CRC_PRESET"]


def crc16_step(crc, byte):
    """The CRC-16/CCITT-FALSE register after ``byte`` (an Amaranth expression, 8 XOR stages)."""
    c = crc
    for i in range(7, -1, -1):
        feedback = c[15] ^ byte[i]
        c = (c << 1)[:16] ^ Mux(feedback, hp.CRC_POLY, 0)
    return c


def _crc_preset():
    for x in range(1 << 16):
        if hp.crc16_update(x, hp.SYNC) == hp.CRC_INIT:
            return x
    raise AssertionError("no CRC preset")     # the CRC step is a bijection: never reached


#: The CRC register's value before a frame's ``SYNC``: the step over ``SYNC`` takes it to
#: :data:`~stepforge.contract.host_protocol.CRC_INIT`, so every byte of a frame, ``SYNC``
#: included, goes through the CRC and the register has one reset value (0xBB0C).
CRC_PRESET = _crc_preset()


class HostBridge(wiring.Component):
    """Executes the frames of :mod:`stepforge.contract.host_protocol` on a System's ports.

    Bytes arrive on ``rx``, one per cycle at most. A frame is parsed as it comes, into the
    registers that execute it: the address (or first CSR) straight into the word cursor that
    drives ``debug.addr`` and ``csr_addr``, the count straight into the item counter, a
    ``WRITE``'s data bytes into a byte buffer of ``max_data`` bytes (one block RAM, addressed
    by the payload byte counter). The length is checked against the command when it arrives.
    Nothing is done before the frame's last byte has arrived and its CRC, command, length and
    arguments are checked (two cycles, from registers). Then:

    * ``WRITE``: the buffered bytes are assembled into words in the reply shift register and
      written through ``debug``, one word every ``2 * word_bytes + 1`` cycles;
    * ``READ``: one word at a time is read through ``debug`` (its data arrives with
      ``rvalid``) and sent, so the reply leaves at the line rate;
    * ``CSR``: one register per 4 bytes sent, through ``csr_addr``/``csr_rdata`` (one cycle);
    * ``START``: ``start`` pulses for one cycle (once; later ones answer ``STARTED``);
    * ``RESET``: ``system_reset`` pulses for one cycle and ``START`` is allowed again;
    * ``STATUS``: ``running``/``done``/``error``/``deadlock``/started, then the three CSRs from
      ``status_csrs`` (cycles, error unit, error code) as a ``CSR`` read sends them (the cursor
      and the item counter start every frame at the first status CSR and 3);
    * ``INFO``: constants.

    A frame whose bytes stop for ``timeout`` cycles (rounded up to a power of two: the quiet
    counter's carry out is the timeout) is answered ``TIMEOUT``; after any other
    error the bridge discards bytes until ``timeout`` quiet cycles and then replies (protocol
    doc). A byte lost to ``rx_error`` (a framing error or an overrun of the UART) inside a frame
    makes it ``FRAMING``. Reply bytes leave through a one-byte register; the one CRC register
    covers the bytes the bridge takes and the reply bytes the transmitter takes, and the CRC is
    sent as the register's high byte twice (after the step over its high byte, the register's
    high byte is its former low byte). All outputs to the System come from registers.

    Parameters
    ----------
    geometry : stepforge.hdl.memory.MemoryGeometry
        The memory behind ``debug`` (word size, a power of two; address width; size).
    status_csrs : (int, int, int)
        CSR addresses of the cycle counter, the error unit and the error code (consecutive).
    timeout : int
        Cycles of silence that end a frame (``>= 1``).
    design_id, clock_hz, baud : int
        Reported by ``INFO`` (32 bits each).
    max_data : int, default 512
        Bytes of words in one ``WRITE``/``READ`` (a multiple of the word size).
    word_ready : bool, default False
        The word port has a ``debug_ready`` (an SDRAM memory,
        :class:`~stepforge.hdl.memory.sdram_memory.SDRAMMemory`): each word is offered only in a
        cycle where it is high (a ``WRITE`` then takes a cycle more per word).

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
    debug_ready : ``In(1)``
        With ``word_ready`` only: the word port takes an access in this cycle.
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
                 max_data=hp.MAX_DATA, word_ready=False):
        wb = geometry.word_bytes
        if wb & (wb - 1):
            raise ValueError(f"HostBridge needs a memory word of a power-of-two bytes, not {wb}")
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
        self.word_ready = bool(word_ready)
        super().__init__({**({"debug_ready": In(1)} if word_ready else {}),
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
                f"baud={self.baud}, max_data={self.max_data}"
                + (", word_ready=True)" if self.word_ready else ")"))

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
        wb_log = wb.bit_length() - 1
        max_words = self.max_data // wb
        max_csrs = self.max_data // 4
        max_len = hp.max_len(self.max_data)
        S = hp.Status
        C = hp.Command
        info = self.info.pack()

        # ---- the control: one flip-flop per state (one-hot), HUNT after reset. The states
        # drive the control signals below (combinational, 0 unless set); each register of the
        # datapath is written in one place from them.
        names = ["HUNT", "CMD", "SEQ", "LEN0", "LEN1", "PAYLOAD", "CRC0", "CRC1", "VERIFY",
                 "CHECK", "DRAIN", "WRITE_FETCH", "WRITE_SHIFT", "WRITE_STORE", "REPLY_HEADER",
                 "REPLY_INFO", "REPLY_FLAGS", "REPLY_DATA", "REPLY_WORD", "REPLY_CSR_WAIT",
                 "REPLY_CSR", "REPLY_CRC", "REPLY_END"]
        names += ["WRITE_READY"] if self.word_ready else []
        st = {n: Signal(init=n == "HUNT", name=f"state_{n.lower()}") for n in names}
        current = []

        @contextmanager
        def state(name):
            current.append(name)
            with m.If(st[name]):
                yield
            current.pop()

        def goto(name):
            m.d.sync += [st[current[-1]].eq(0), st[name].eq(1)]

        # ---- the WRITE buffer: the data bytes of a frame, at their payload offset - 4
        m.submodules.buffer = buf = memory.Memory(shape=8, depth=self.max_data, init=[],
                                                  attrs=NO_COLLISION)
        wport = buf.write_port()
        rport = buf.read_port()

        # ---- the frame being received
        cmd = Signal(8, name="frame_cmd")
        seq = Signal(8, name="frame_seq")
        is_ = {c: Signal(name=f"is_{c.name.lower()}") for c in C}
        known = Signal(name="frame_known_cmd")
        left = Signal(range(max_len + 1), name="frame_left")      # payload bytes to come
        # payload offset - 4: the 4 argument bytes are -4..-1 (the sign bit set), a WRITE's
        # data bytes 0..max_data - 1, its buffer address; after the payload, the data bytes
        pos = Signal(range(-4, self.max_data + 1), name="frame_pos")
        lost = Signal(name="frame_lost_byte")
        len_ok = Signal(name="check_length_ok")
        # the word address (READ, WRITE) or CSR address (CSR, STATUS), and the words or CSRs
        # to move; bits of the 32-bit address or the 16-bit count above them set a flag
        cursor = Signal(max(g.addr_bits, 16), name="cursor")
        items = Signal(range(max(max_words, max_csrs, 3) + 1), name="items")
        addr_over = Signal(name="frame_addr_over")
        count_over = Signal(name="frame_count_over")
        # the checks: registers, computed while the CRC's bytes arrive and in VERIFY
        end = Signal(len(cursor) + 1, name="check_end")
        count_ok = Signal(name="check_count_ok")
        range_ok = Signal(name="check_range_ok")
        crc_bad = Signal(name="check_crc_bad")
        status = Signal(4, name="reply_status")
        started = Signal(name="started")

        # ---- the timeout: counts up from 0 after each byte, to 2**k >= timeout
        qk = (self.timeout - 1).bit_length()
        quiet = Signal(qk + 1, name="quiet")
        timed_out = quiet[qk]

        # ---- execution and the reply
        rd = Signal(range(self.max_data + 1), name="write_read_index")
        wbyte = Signal(max(1, wb_log), name="write_byte")
        sr_bits = max(g.word_bits, 32)
        sr = Signal(sr_bits, name="shift")          # reply words and CSRs out, WRITE words in
        sr_left = Signal(range(max(wb, 4) + 1), name="shift_bytes")
        hdr = Signal(range(8), name="reply_index")  # header bytes, then the two CRC bytes
        tidx = Signal(range(len(info)), name="reply_info_index")
        rlen = Signal(range(max(self.max_data, 4 * max_csrs) + 2), name="reply_len")
        crc = Signal(16, init=CRC_PRESET, name="crc")

        # registered outputs to the System: the cursor is the address
        d_we = Signal(name="debug_we")
        d_re = Signal(name="debug_re")
        start = Signal(name="start_pulse")
        sys_rst = Signal(name="system_reset_pulse")
        m.d.comb += [self.debug.addr.eq(cursor), self.debug.wdata.eq(sr[sr_bits - g.word_bits:]),
                     self.debug.we.eq(d_we), self.debug.re.eq(d_re),
                     self.csr_addr.eq(cursor[:16]), self.start.eq(start),
                     self.system_reset.eq(sys_rst), self.busy.eq(~st["HUNT"])]

        byte = self.rx.payload
        # a byte is taken in a state that takes bytes when it is valid (``rx.ready`` is those
        # states), so the datapath's conditions do not wait for ``rx.ready``
        take = self.rx.valid

        # reply bytes leave through a register (out -> tx), refilled while the UART sends
        out = stream.Signature(8).create(path=("reply",))
        tx_valid = Signal(name="tx_valid_reg")
        tx_byte = Signal(8, name="tx_byte_reg")
        tx_take = Signal(name="tx_take")
        m.d.comb += [self.tx.valid.eq(tx_valid), self.tx.payload.eq(tx_byte),
                     tx_take.eq(tx_valid & self.tx.ready),
                     out.ready.eq(~tx_valid | self.tx.ready)]
        with m.If(out.ready):
            m.d.sync += [tx_valid.eq(out.valid), tx_byte.eq(out.payload)]
        sent = Signal(name="reply_sent")
        m.d.comb += sent.eq(out.valid & out.ready)

        # ---- control signals
        frame_start = Signal(name="frame_start")     # SYNC taken in HUNT
        crc_update = Signal(name="crc_update")
        crc_preset = Signal(name="crc_preset")
        set_status = Signal(name="set_status")
        new_status = Signal(4, name="new_status")
        sr_shift = Signal(name="shift_shift")
        sr_word = Signal(name="shift_load_word")
        sr_csr = Signal(name="shift_load_csr")

        # ---- the datapath
        with m.If(take):                       # offered, taken or not: not quiet
            m.d.sync += quiet.eq(0)
        with m.Elif(~timed_out):
            m.d.sync += quiet.eq(quiet + 1)

        with m.If(frame_start):
            m.d.sync += lost.eq(0)
        with m.If(self.rx_error):
            m.d.sync += lost.eq(1)

        # the CRC: every byte taken in a frame (from SYNC) and every reply byte the UART takes;
        # held at its preset between frames and before a reply
        with m.If(crc_preset):
            m.d.sync += crc.eq(CRC_PRESET)
        with m.Elif(crc_update):
            m.d.sync += crc.eq(crc16_step(crc, Mux(tx_take, tx_byte, byte)))

        with m.If(set_status):
            m.d.sync += status.eq(new_status)

        # the header's fields
        with m.If(frame_start):
            m.d.sync += [cmd.eq(0), seq.eq(0)]
        with m.If(st["CMD"] & take):
            m.d.sync += [cmd.eq(byte), known.eq(0)]
            for c in C:
                with m.If(byte == c):
                    m.d.sync += known.eq(1)
            m.d.sync += [is_[c].eq(byte == c) for c in C]
        with m.If(st["SEQ"] & take):
            m.d.sync += seq.eq(byte)
        n = Cat(left[:8], byte)                  # LEN in LEN1
        with m.If(st["LEN0"] & take):
            m.d.sync += left.eq(byte)
        with m.If(st["LEN1"] & take):
            low = n[:wb_log] == 4 % wb if wb_log else Const(1)
            m.d.sync += [left[8:].eq(byte),
                         len_ok.eq(Mux(is_[C.WRITE], (n >= 4 + wb) & low,
                                   Mux(is_[C.READ], n == 6,
                                   Mux(is_[C.CSR], n == 4, n == 0))))]

        # the payload: arguments into the cursor and the item counter, WRITE data into the
        # buffer
        pay = st["PAYLOAD"] & take
        with m.If(pay):
            m.d.sync += [left.eq(left - 1), pos.eq(pos + 1)]
        with m.If(frame_start):
            m.d.sync += pos.eq(-4)
        arg = pos[-1]                              # the first 4 payload bytes
        k = pos[:2]

        def place(reg, offset, over):
            """The byte's bits at bit ``offset`` of ``reg``; bits past its width set ``over``."""
            nbits = max(0, min(8, len(reg) - offset))
            if nbits:
                m.d.sync += reg[offset:offset + nbits].eq(byte[:nbits])
            if nbits < 8:
                with m.If(byte[nbits:] != 0):
                    m.d.sync += over.eq(1)

        with m.If(frame_start):
            # every frame starts with the cursor at the status CSRs (STATUS reads them)
            m.d.sync += [cursor.eq(self.status_csrs[0]), addr_over.eq(0)]
        with m.Elif(pay & arg & (k == 0)):
            place(cursor, 0, addr_over)
        with m.Elif(pay & arg & (k == 1)):
            place(cursor, 8, addr_over)
        with m.Elif(pay & arg & (k == 2) & ~is_[C.CSR]):
            place(cursor, 16, addr_over)
        with m.Elif(pay & arg & (k == 3) & ~is_[C.CSR]):
            place(cursor, 24, addr_over)
        with m.Elif(st["WRITE_STORE"] | sr_word | sr_csr):
            m.d.sync += cursor.eq(cursor + 1)

        with m.If(frame_start):
            m.d.sync += [items.eq(3), count_over.eq(0)]
        with m.Elif(pay & ((arg & (k == 2) & is_[C.CSR]) | (is_[C.READ] & (pos == 0)))):
            place(items, 0, count_over)
        with m.Elif(pay & ((arg & (k == 3) & is_[C.CSR]) | (is_[C.READ] & (pos == 1)))):
            place(items, 8, count_over)
        with m.Elif(sr_word | sr_csr):
            m.d.sync += items.eq(items - 1)

        m.d.comb += [wport.addr.eq(pos), wport.data.eq(byte),
                     wport.en.eq(pay & is_[C.WRITE] & ~arg)]

        # the checks, a pipeline from the argument registers (final from CRC0 on; VERIFY reads
        # the last stage two cycles later)
        m.d.sync += [
            end.eq(cursor + Mux(is_[C.WRITE], pos[wb_log:], items)),
            count_ok.eq((items != 0) & ~count_over & Mux(
                is_[C.READ], items <= max_words, Mux(is_[C.CSR], items <= max_csrs, 1))),
            range_ok.eq(~addr_over & (end <= g.size_words)),
        ]

        # WRITE execution: buffer bytes into the top of the shift register
        m.d.comb += rport.addr.eq(rd)
        with m.If(frame_start):
            m.d.sync += [rd.eq(0), wbyte.eq(0)]
        with m.If(st["WRITE_FETCH"]):
            m.d.sync += rd.eq(rd + 1)
        with m.If(st["WRITE_SHIFT"]):
            m.d.sync += wbyte.eq(wbyte + 1)
        ready = self.debug_ready if self.word_ready else 1
        store = (st["WRITE_READY"] & ready if self.word_ready
                 else st["WRITE_SHIFT"] & (wbyte == wb - 1))
        m.d.sync += [d_we.eq(store), d_re.eq(0), start.eq(0), sys_rst.eq(0)]

        with m.If(sr_word):
            m.d.sync += [sr[:g.word_bits].eq(self.debug.rdata), sr_left.eq(wb)]
        with m.Elif(sr_csr):
            m.d.sync += [sr[:32].eq(self.csr_rdata), sr_left.eq(4)]
        with m.Elif(sr_shift):
            m.d.sync += sr.eq(Cat(sr[8:], rport.data))
            with m.If(st["REPLY_DATA"]):
                m.d.sync += sr_left.eq(sr_left - 1)

        # the reply's counters
        with m.If(frame_start):
            m.d.sync += [hdr.eq(0), tidx.eq(0)]
        with m.If((st["REPLY_HEADER"] | st["REPLY_CRC"]) & sent):
            m.d.sync += hdr.eq(hdr + 1)
        with m.If(st["REPLY_INFO"] & sent):
            m.d.sync += tidx.eq(tidx + 1)
        ok = status == S.OK
        m.d.sync += rlen.eq(Mux(~ok, 1,
                            Mux(is_[C.INFO], 1 + len(info),
                            Mux(is_[C.STATUS], 1 + hp.STATUS_BYTES,
                            Mux(is_[C.READ], ((items << wb_log) | 1) if wb_log else items + 1,
                            Mux(is_[C.CSR], Cat(Const(1, 2), items), 1))))))

        flags = Cat(self.running, self.done, self.error, self.deadlock, started)

        def offer(index, values):
            """Offer byte ``values[index]`` of a sequence to the transmitter."""
            m.d.comb += out.valid.eq(1)
            with m.Switch(index):
                for i, value in enumerate(values):
                    with m.Case(i):
                        m.d.comb += out.payload.eq(value)

        def refuse(code):
            m.d.comb += [set_status.eq(1), new_status.eq(code)]
            goto("DRAIN")

        def receive(name, action):
            """A state that takes one byte of the frame (or times out)."""
            with state(name):
                m.d.comb += [self.rx.ready.eq(1), crc_update.eq(take)]
                with m.If(take):
                    action()
                with m.Elif(timed_out):
                    refuse(Mux(lost, S.FRAMING, S.TIMEOUT))

        # ---- the states
        with state("HUNT"):
            m.d.comb += self.rx.ready.eq(1)
            with m.If(take & (byte == hp.SYNC)):
                m.d.comb += [crc_update.eq(1), frame_start.eq(1)]
                goto("CMD")
            with m.Else():
                m.d.comb += crc_preset.eq(1)

        receive("CMD", lambda: goto("SEQ"))
        receive("SEQ", lambda: goto("LEN0"))
        receive("LEN0", lambda: goto("LEN1"))

        def take_len1():
            with m.If(n > max_len):
                refuse(S.LENGTH)
            with m.Elif(n == 0):
                goto("CRC0")
            with m.Else():
                goto("PAYLOAD")
        receive("LEN1", take_len1)

        def take_payload():
            with m.If(left == 1):
                goto("CRC0")
        receive("PAYLOAD", take_payload)
        receive("CRC0", lambda: goto("CRC1"))
        receive("CRC1", lambda: goto("VERIFY"))

        with state("VERIFY"):
            m.d.comb += [crc_preset.eq(1), set_status.eq(1)]
            m.d.sync += crc_bad.eq(crc != 0)
            rw = is_[C.READ] | is_[C.WRITE]
            with m.If(~known):
                m.d.comb += new_status.eq(S.COMMAND)
            with m.Elif(~len_ok):
                m.d.comb += new_status.eq(S.LENGTH)
            with m.Elif(~count_ok | (rw & ~range_ok)):
                m.d.comb += new_status.eq(S.RANGE)
            with m.Elif(rw & self.running):
                m.d.comb += new_status.eq(S.BUSY)
            with m.Elif(is_[C.START] & started):
                m.d.comb += new_status.eq(S.STARTED)
            with m.Else():
                m.d.comb += new_status.eq(S.OK)
            goto("CHECK")

        with state("CHECK"):
            m.d.comb += crc_preset.eq(1)
            with m.If(lost):
                refuse(S.FRAMING)
            with m.Elif(crc_bad):
                refuse(S.CRC)
            with m.Elif(~ok):
                goto("DRAIN")
            with m.Elif(is_[C.WRITE]):
                goto("WRITE_FETCH")
            with m.Else():
                with m.If(is_[C.START]):
                    m.d.sync += [start.eq(1), started.eq(1)]
                with m.If(is_[C.RESET]):
                    m.d.sync += [sys_rst.eq(1), started.eq(0)]
                goto("REPLY_HEADER")

        with state("DRAIN"):
            m.d.comb += [self.rx.ready.eq(1), crc_preset.eq(1)]
            with m.If(~take & timed_out):
                goto("REPLY_HEADER")

        # WRITE: each data byte from the buffer into the top of the shift register; a whole
        # word is written at the cursor
        with state("WRITE_FETCH"):
            m.d.comb += crc_preset.eq(1)
            goto("WRITE_SHIFT")
        with state("WRITE_SHIFT"):
            m.d.comb += [crc_preset.eq(1), sr_shift.eq(1)]
            with m.If(wbyte == wb - 1):
                goto("WRITE_READY" if self.word_ready else "WRITE_STORE")
            with m.Else():
                goto("WRITE_FETCH")
        if self.word_ready:
            with state("WRITE_READY"):    # the word waits for the port
                m.d.comb += crc_preset.eq(1)
                with m.If(ready):
                    goto("WRITE_STORE")
        with state("WRITE_STORE"):        # debug.we is high in this cycle
            m.d.comb += crc_preset.eq(1)
            with m.If(rd == pos):
                goto("REPLY_HEADER")
            with m.Else():
                goto("WRITE_FETCH")

        with state("REPLY_HEADER"):
            m.d.comb += crc_update.eq(tx_take)
            offer(hdr, [hp.SYNC, cmd | hp.REPLY, seq, rlen[:8], rlen[8:], status])
            with m.If(sent & (hdr == 5)):
                with m.If(~ok):
                    goto("REPLY_CRC")
                with m.Elif(is_[C.INFO]):
                    goto("REPLY_INFO")
                with m.Elif(is_[C.STATUS]):
                    goto("REPLY_FLAGS")
                with m.Elif(is_[C.READ] | is_[C.CSR]):
                    goto("REPLY_DATA")
                with m.Else():
                    goto("REPLY_CRC")
        with state("REPLY_INFO"):
            m.d.comb += crc_update.eq(tx_take)
            offer(tidx, info)
            with m.If(sent & (tidx == len(info) - 1)):
                goto("REPLY_CRC")
        with state("REPLY_FLAGS"):
            m.d.comb += [crc_update.eq(tx_take), out.valid.eq(1), out.payload.eq(flags)]
            with m.If(sent):
                goto("REPLY_DATA")
        with state("REPLY_DATA"):
            m.d.comb += crc_update.eq(tx_take)
            with m.If(sr_left != 0):
                m.d.comb += [out.valid.eq(1), out.payload.eq(sr[:8]), sr_shift.eq(sent)]
            with m.Elif(items != 0):
                with m.If(is_[C.READ]):
                    with m.If(ready):
                        m.d.sync += d_re.eq(1)
                        goto("REPLY_WORD")
                with m.Else():
                    goto("REPLY_CSR_WAIT")
            with m.Else():
                goto("REPLY_CRC")
        with state("REPLY_WORD"):
            m.d.comb += [crc_update.eq(tx_take), sr_word.eq(self.debug.rvalid)]
            with m.If(self.debug.rvalid):
                goto("REPLY_DATA")
        with state("REPLY_CSR_WAIT"):
            m.d.comb += crc_update.eq(tx_take)
            goto("REPLY_CSR")
        with state("REPLY_CSR"):
            m.d.comb += [crc_update.eq(tx_take), sr_csr.eq(1)]
            goto("REPLY_DATA")
        with state("REPLY_CRC"):
            # the CRC's high byte, twice, each once the byte before it has gone through the
            # CRC (the transmit register is empty)
            m.d.comb += crc_update.eq(tx_take)
            with m.If(~tx_valid):
                m.d.comb += [out.valid.eq(1), out.payload.eq(crc[8:])]
                with m.If(hdr[0]):             # 6 after the header, then 7
                    goto("REPLY_END")
        with state("REPLY_END"):
            m.d.comb += crc_update.eq(tx_take)
            with m.If(~tx_valid):
                goto("HUNT")
        return m
