"""The memory system's burst ports served from an SDRAM chip, for tensors too large for block RAM.

:class:`SDRAMMemory` has the client ports of :class:`~stepforge.hdl.memory.MemoryModel` (the
same :class:`~stepforge.hdl.memory.MemoryPort` signatures, lines cut by the same rule,
:meth:`~stepforge.hdl.memory.MemoryGeometry.burst_lines`), so an off-chip unit cannot tell which
of the two holds its tensor, except by time: a line's latency is not fixed but follows the
chip's rows, banks and refreshes. The clients never relied on a fixed latency (they reserve room
for what they ask and take a response when ``resp.valid`` says so); what stays is the order: a
read client's lines arrive in the order of its requests.

How a burst moves: the clients' requests wait in two-entry queues; a round-robin grant takes one
whole burst at a time, and a sequencer gives the SDRAM controller one command per segment
(``count`` words at ``addr + k * stride``: one add per segment, no multiplier). The 16-bit words
the chip returns are packed into the response line in order; a write client's lines are
unpacked into the chip's words in order. Which word ends a line follows from counters compared
with the port's constants (its ``count``, its ``rows`` and how many segments share a line).
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..config import HardwareConfig
from ..fifo import StreamFIFO
from ..flags import accumulate_split
from ..sdram import SDRAMController, SDRAMPinSignature, SDRAMTiming
from .arbiter import RoundRobin, select_onehot
from .geometry import MemoryGeometry, check_count, index_shape, quiet_on_error
from .port import DebugSignature, client_ports, client_shapes

__all__ = ["SDRAMMemory"]


def _const_of(values, index):
    """``values[index]`` for a list of ints (a constant when they are all equal)."""
    values = list(values)
    if all(v == values[0] for v in values):
        return Const(values[0])
    return Array(Const(v, max(1, max(values).bit_length())) for v in values)[index]


class SDRAMMemory(wiring.Component):
    """Burst ports (as :class:`~stepforge.hdl.memory.MemoryModel`'s) served by an SDRAM chip.

    Parameters
    ----------
    config : HardwareConfig
        Shapes the ports' geometry (:meth:`MemoryGeometry.from_config`); its ``clock_hz`` is the
        controller's clock unless ``clk_hz`` says otherwise.
    size_bytes : int
        Capacity the ports address (rounded up to whole words); at most the chip's.
    timing : SDRAMTiming
        The chip (:data:`~stepforge.hdl.sdram.ULX3S_SDRAM` on the ULX3S).
    read_ports, write_ports : sequence of tuple
        As :class:`MemoryModel`'s (a ``start_lane`` entry is accepted and ignored: the words
        are packed in order whatever lane they start in).
    clk_hz : int, optional
        The clock the controller's cycle counts are computed for.
    init_cycles : int, optional
        The controller's power-up wait (simulation shortens it).
    word_bytes, count_bits, max_segments, counter_bits
        As :class:`MemoryModel`'s.

    Members
    -------
    read0, ..., write0, ... : ``In(MemoryPort(geometry, kind, burst))``
        The clients, as :class:`MemoryModel`'s (also the lists :attr:`read` and :attr:`write`);
        a read client's lines come in the order of its requests, after no fixed latency.
    debug : ``In(DebugSignature(geometry))``
        The word port (the host loads and reads tensors through it): an access offered while
        ``debug_ready`` is high is taken; its read answers with ``rvalid`` when the chip has
        returned the word (no fixed latency).
    debug_ready : ``Out(1)``
        The word port takes an access this cycle (no access is waiting).
    debug_overrun : ``Out(1)``
        Sticky: an access was offered while ``debug_ready`` was low (and was not taken).
    stall : ``In(1)``
        No burst is granted in a cycle where it is high.
    bytes_read, bytes_written : ``Out(counter_bits)``
        Bytes of the granted bursts (counted from the cycle after the grant, the high bits a
        cycle later still: :func:`~stepforge.hdl.flags.accumulate_split`).
    ready : ``Out(1)``
        The chip is initialized (bursts are served only then; requests wait).
    sdram : ``Out(SDRAMPinSignature.for_timing(timing))``
        The chip's pins.
    """

    @quiet_on_error
    def __init__(self, config, size_bytes, *, timing, read_ports=(), write_ports=(),
                 clk_hz=None, init_cycles=None, word_bytes=None, count_bits=16, max_segments=8,
                 counter_bits=48):
        if not isinstance(config, HardwareConfig):
            raise TypeError(f"SDRAMMemory config must be a HardwareConfig, not {config!r}")
        if not isinstance(timing, SDRAMTiming):
            raise TypeError(f"SDRAMMemory timing must be an SDRAMTiming, not {timing!r}")
        self.config, self.timing = config, timing
        self.clk_hz = config.clock_hz if clk_hz is None else clk_hz
        self.init_cycles = init_cycles
        self.geometry = g = MemoryGeometry.from_config(config, size_bytes, word_bytes=word_bytes,
                                                       count_bits=count_bits,
                                                       max_segments=max_segments)
        chip_bits = timing.data_bits
        pieces = g.word_bits // chip_bits
        if g.word_bits % chip_bits or pieces & (pieces - 1):
            raise ValueError(f"SDRAMMemory needs memory words of a power-of-two number of "
                             f"{chip_bits}-bit SDRAM words, not {g.word_bytes}-byte words")
        capacity = timing.words * chip_bits // 8
        if g.size_bytes > capacity:
            raise ValueError(f"SDRAMMemory of {g.size_bytes} bytes exceeds the chip's "
                             f"{capacity} bytes")
        self._size_bytes = size_bytes
        self.read_ports, self.write_ports, members = client_ports(
            "SDRAMMemory", g, read_ports, write_ports)
        self.counter_bits = check_count("SDRAMMemory counter_bits", counter_bits)
        members.update({"debug": In(DebugSignature(g)), "debug_ready": Out(1),
                        "debug_overrun": Out(1),
                        "stall": In(1), "bytes_read": Out(counter_bits),
                        "bytes_written": Out(counter_bits), "ready": Out(1),
                        "sdram": Out(SDRAMPinSignature.for_timing(timing))})
        super().__init__(members)
        self.read = [getattr(self, f"read{i}") for i in range(len(self.read_ports))]
        self.write = [getattr(self, f"write{i}") for i in range(len(self.write_ports))]

    @classmethod
    def for_clients(cls, config, size_bytes, clients, **kwargs):
        """An SDRAM memory with a port for each of ``clients`` (as
        :meth:`MemoryModel.for_clients`)."""
        return cls(config, size_bytes, **client_shapes(clients), **kwargs)

    @property
    def pieces(self):
        """SDRAM words in one memory word."""
        return self.geometry.word_bits // self.timing.data_bits

    def __repr__(self):
        return (f"SDRAMMemory({self.config!r}, {self._size_bytes}, timing={self.timing!r}, "
                f"read_ports={list(self.read_ports)!r}, write_ports={list(self.write_ports)!r}, "
                f"clk_hz={self.clk_hz}, init_cycles={self.init_cycles}, "
                f"word_bytes={self.geometry.word_bytes}, count_bits={self.geometry.count_bits}, "
                f"max_segments={self.geometry.max_segments}, counter_bits={self.counter_bits})")

    def _cut(self, shapes):
        """Per-client constants of the line rule: ``(count, rows, stride, per_line)`` where
        ``per_line`` is 0 for a segment longer than a line (cut every ``lanes`` words) and the
        segments one line takes otherwise."""
        g = self.geometry
        return [(c, r, s, 0 if c > g.lanes else g.segments_per_line(c, s))
                for c, r, s, *_ in shapes]

    def _line_counter(self, m, prefix, cut, client, step):
        """Counters that follow a burst word by word; returns ``(index, end_of_line,
        end_of_burst)``: the word's index in its line and whether it ends its line and its
        burst, for the word that ``step`` moves in this cycle (``client`` picks the constants)."""
        g = self.geometry
        counts = [c for c, _, _, _ in cut]
        rows = [r for _, r, _, _ in cut]
        per = [p for _, _, _, p in cut]
        word = Signal(range(max(max(counts), 2)), name=f"{prefix}_seg_word")
        seg = Signal(range(max(max(rows), 2)), name=f"{prefix}_seg")
        in_line = Signal(range(max(g.lanes, 2)), name=f"{prefix}_line_word")
        seg_in_line = Signal(range(max(g.lanes, 2)), name=f"{prefix}_line_seg")
        seg_end = Signal(name=f"{prefix}_seg_end")
        burst_end = Signal(name=f"{prefix}_burst_end")
        line_end = Signal(name=f"{prefix}_line_end")
        long = _const_of([int(p == 0) for p in per], client)
        m.d.comb += [
            seg_end.eq(word == _const_of([c - 1 for c in counts], client)),
            burst_end.eq(seg_end & (seg == _const_of([r - 1 for r in rows], client))),
            line_end.eq(Mux(long, seg_end | (in_line == g.lanes - 1),
                            seg_end & ((seg_in_line == _const_of([max(p, 1) - 1 for p in per],
                                                                  client)) | burst_end))),
        ]
        with m.If(step):
            m.d.sync += [word.eq(Mux(seg_end, 0, word + 1)),
                         in_line.eq(Mux(line_end, 0, in_line + 1))]
            with m.If(seg_end):
                m.d.sync += [seg.eq(Mux(burst_end, 0, seg + 1)),
                             seg_in_line.eq(Mux(line_end, 0, seg_in_line + 1))]
        return in_line, line_end, burst_end

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        L, P = g.lanes, self.pieces
        cw = self.timing.data_bits               # bits of one chip word
        pb = P.bit_length() - 1
        word = (1, 1, 0)                     # the word port's accesses: one-word bursts
        rshapes = self.read_ports + (word,)
        wshapes = self.write_ports + (word,)
        nr, nw = len(rshapes), len(wshapes)
        n = nr + nw
        shapes = rshapes + wshapes
        max_len = max(c for c, _, _, *_ in shapes) * P

        m.submodules.controller = ctl = SDRAMController(self.timing, self.clk_hz,
                                                        max_burst=max_len,
                                                        init_cycles=self.init_cycles)
        wiring.connect(m, ctl.pins, wiring.flipped(self.sdram))
        m.d.comb += self.ready.eq(ctl.init_done)

        # -- the word port: one access held in registers until its burst is granted ------------
        dbg = self.debug
        w_pending = Signal(name="word_pending")
        w_write = Signal(name="word_write")
        w_addr = Signal.like(dbg.addr, name="word_addr")
        w_data = Signal.like(dbg.wdata, name="word_wdata")
        w_data_valid = Signal(name="word_wdata_valid")
        offered = Signal(name="word_offered")
        busy = Signal(name="word_busy")        # an access waits, or a write's word is not taken
        m.d.comb += [offered.eq(dbg.we | dbg.re), busy.eq(w_pending | w_data_valid),
                     self.debug_ready.eq(~busy)]
        with m.If(offered & busy):
            m.d.sync += self.debug_overrun.eq(1)
        with m.Elif(offered):
            m.d.sync += [w_pending.eq(1), w_write.eq(dbg.we), w_addr.eq(dbg.addr),
                         w_data.eq(dbg.wdata), w_data_valid.eq(dbg.we)]

        # -- requests: a two-entry queue per client; one burst granted at a time ----------------
        valids, addrs, pops = [], [], []
        for c, port in enumerate(self.read + self.write):
            m.submodules[f"req{c}"] = q = StreamFIFO(unsigned(g.addr_bits), 2, counters=False,
                                                     split=True)
            m.d.comb += [q.i.payload.eq(port.req.payload.addr), q.i.valid.eq(port.req.valid),
                         port.req.ready.eq(q.i.ready)]
            valids.append(q.o.valid)
            addrs.append(q.o.payload)
            pops.append(q.o.ready)
        nu = len(self.read)
        valids.insert(nu, w_pending & ~w_write)         # the word port's read client
        valids.append(w_pending & w_write)              # and its write client
        addrs.insert(nu, w_addr)
        addrs.append(w_addr)
        word_pop_r, word_pop_w = Signal(name="word_read_granted"), Signal(name="word_write_granted")
        pops.insert(nu, word_pop_r)
        pops.append(word_pop_w)
        with m.If(word_pop_r | word_pop_w):
            m.d.sync += w_pending.eq(0)

        # the read bursts whose words are still to come, and the write bursts whose lines are
        # still to be unpacked, by client, in grant order
        m.submodules.reads_due = reads_due = StreamFIFO(index_shape(nr), 4, counters=False)
        m.submodules.writes_due = writes_due = StreamFIFO(index_shape(nw), 2, counters=False)
        m.submodules.arbiter = arb = RoundRobin(n)
        active = Signal(name="seq_active")
        m.d.comb += arb.enable.eq(ctl.init_done & ~active & ~self.stall & reads_due.i.ready
                                  & writes_due.i.ready)
        for c in range(n):
            m.d.comb += [arb.requests[c].eq(valids[c]), pops[c].eq(arb.onehot[c])]
        m.d.comb += [reads_due.i.valid.eq(arb.grant & (arb.index < nr)),
                     reads_due.i.payload.eq(arb.index),
                     writes_due.i.valid.eq(arb.grant & (arb.index >= nr)),
                     writes_due.i.payload.eq(arb.index - nr)]

        # -- the sequencer: one controller command per segment ----------------------------------
        client = Signal(index_shape(n), name="seq_client")
        seg_addr = Signal(g.addr_bits, name="seq_addr")
        seg_left = Signal(range(max(r for _, r, _, *_ in shapes) + 1), name="seq_segments_left")
        head_addr = Signal(g.addr_bits, name="seq_head_addr")
        m.d.comb += head_addr.eq(select_onehot(addrs, arb.choice))   # (loaded on a grant)
        with m.If(arb.grant):
            m.d.sync += [active.eq(1), client.eq(arb.index), seg_addr.eq(head_addr),
                         seg_left.eq(_const_of([r - 1 for _, r, _, *_ in shapes], arb.index))]
        # the byte counters add a granted burst's bytes a cycle later, from registers (the
        # grant into a 48-bit carry chain was the worst path of SwiGLU's build, 10.7 ns); the
        # word port's accesses are not counted
        moved = Signal(range(max(c * r for c, r, _, *_ in shapes) * g.word_bytes + 1),
                       name="granted_bytes")
        count_read = Signal(name="count_read")
        count_write = Signal(name="count_write")
        m.d.sync += [moved.eq(_const_of([c * r * g.word_bytes for c, r, _, *_ in shapes],
                                        arb.index)),
                     count_read.eq(arb.grant & (arb.index < nu)),
                     count_write.eq(arb.grant & (arb.index >= nr) & (arb.index < n - 1))]
        accumulate_split(m, self.bytes_read, moved, count_read)
        accumulate_split(m, self.bytes_written, moved, count_write)
        m.d.comb += [ctl.cmd.valid.eq(active),
                     ctl.cmd.payload.addr.eq(seg_addr << pb),
                     ctl.cmd.payload.write.eq(client >= nr),
                     ctl.cmd.payload.length.eq(_const_of([c * P for c, *_ in shapes], client))]
        with m.If(ctl.cmd.valid & ctl.cmd.ready):
            m.d.sync += [seg_addr.eq(seg_addr + _const_of([s for _, _, s, *_ in shapes], client)),
                         seg_left.eq(seg_left - 1)]
            with m.If(seg_left == 0):
                m.d.sync += active.eq(0)

        # -- reads: the chip's words packed into response lines, in order -----------------------
        rclient = reads_due.o.payload
        piece = Signal(range(max(P, 2)), name="rd_piece")
        word_done = Signal(name="rd_word_done")
        m.d.comb += word_done.eq(ctl.rdata.valid & (piece == P - 1))
        with m.If(ctl.rdata.valid):
            m.d.sync += piece.eq(Mux(piece == P - 1, 0, piece + 1))
        index, line_end, burst_end = self._line_counter(m, "rd", self._cut(rshapes), rclient,
                                                        word_done)
        line = Signal(g.line_layout, name="rd_line")
        for i in range(L):
            for p in range(P):
                with m.If(ctl.rdata.valid & (index == i) & (piece == p)):
                    m.d.sync += line[i][p * cw:(p + 1) * cw].eq(
                        ctl.rdata.payload)
        out_valid = Signal(nr, name="rd_resp_valid")
        out_count = Signal(range(L + 1), name="rd_resp_count")
        out_last = Signal(name="rd_resp_last")
        m.d.sync += out_valid.eq(0)
        with m.If(word_done & line_end):
            m.d.sync += [out_valid.eq(1 << rclient), out_count.eq(index + 1),
                         out_last.eq(burst_end)]
        m.d.comb += reads_due.o.ready.eq(word_done & burst_end)
        for c, port in enumerate(self.read):
            m.d.comb += [port.resp.valid.eq(out_valid[c]), port.resp.count.eq(out_count),
                         port.resp.last.eq(out_last), port.resp.data.eq(line)]
        m.d.comb += [dbg.rvalid.eq(out_valid[nu]), dbg.rdata.eq(line[0])]

        # -- writes: each line unpacked into the chip's words, in order -------------------------
        wclient = writes_due.o.payload
        held = Signal(g.line_layout, name="wr_line")
        full = Signal(name="wr_full")
        piece = Signal(range(max(P, 2)), name="wr_piece")
        take = Signal(name="wr_take")
        word_done = Signal(name="wr_word_done")
        m.d.comb += [take.eq(ctl.wdata.valid & ctl.wdata.ready),
                     word_done.eq(take & (piece == P - 1))]
        index, line_end, burst_end = self._line_counter(m, "wr", self._cut(wshapes), wclient,
                                                        word_done)
        m.d.comb += [ctl.wdata.valid.eq(full),
                     ctl.wdata.payload.eq(
                         held.as_value().word_select(Cat(piece[:pb], index) if pb else index,
                                                     cw))]
        with m.If(take):
            m.d.sync += piece.eq(Mux(piece == P - 1, 0, piece + 1))
        with m.If(word_done & line_end):
            m.d.sync += full.eq(0)
        m.d.comb += writes_due.o.ready.eq(word_done & burst_end)
        sources = [(p.data.valid, p.data.payload.as_value(), p.data.ready) for p in self.write]
        word_taken = Signal(name="word_wdata_taken")
        sources.append((w_data_valid, w_data, word_taken))
        with m.If(word_taken):
            m.d.sync += w_data_valid.eq(0)
        # the head burst's client, one-hot: its line is chosen by an AND-OR, not a chain of
        # enables by client (a worst path of the SwiGLU board build, 10.5 ns)
        open_ = Signal(name="wr_open")
        chosen = Signal(len(sources), name="wr_client_onehot")
        line_valid = Signal(name="wr_line_valid")
        line = Signal.like(held, name="wr_line_in")
        m.d.comb += [open_.eq(writes_due.o.valid & ~full),
                     chosen.eq(Cat(*(wclient == c for c in range(len(sources))))),
                     line_valid.eq(Cat(*(v & chosen[c] for c, (v, _, _) in enumerate(sources)))
                                   .any())]
        for c, (valid, payload, ready) in enumerate(sources):
            m.d.comb += ready.eq(open_ & chosen[c])
        m.d.comb += line.eq(select_onehot([p for _, p, _ in sources], chosen))
        with m.If(open_ & line_valid):
            m.d.sync += [held.eq(line), full.eq(1)]
        return m
