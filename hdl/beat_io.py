"""Host streams in memory: read a program's input streams, write its output streams, drain.

A program's host-supplied input streams (``Program.input``) and its stream outputs
(``Program.output``) live in off-chip memory as packed beats: beat ``k`` of a stream occupies
``words_per_beat`` consecutive words from ``base + k * words_per_beat``, its bits split into
little-endian words (word 0 holds the least significant bits of the beat layout).
"""

from amaranth.hdl import Cat, Module, Signal, Value, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .fifo import StreamFIFO
from .memory import MemoryPort, quiet_on_error
from .unit import ErrorCode, StatusSignature, raise_error

__all__ = ["words_per_beat", "BeatReader", "BeatWriter", "DiscardUnit"]


def words_per_beat(layout, geometry):
    """Memory words one beat of ``layout`` occupies."""
    return -(-layout.size // geometry.word_bits)


class BeatReader(wiring.Component):
    """Stream packed beats out of memory, from ``base`` up to and including the beat with ``last``.

    Pipelined: the reader asks for beat ``k + 1``'s burst while earlier bursts are still on
    their way back, so in steady state it delivers one beat per cycle when a beat is one memory
    line (one beat per ``ceil(words_per_beat / lanes)`` cycles otherwise: the memory moves one
    line per cycle), whenever the memory grants its lines and ``out`` is ready. The lines of
    a burst are collected in a shift register (the burst's last line completes the beat) and the
    beat enters a :class:`~stepforge.hdl.fifo.StreamFIFO` of ``depth`` beats, whose head register
    drives ``out``.

    **Credits.** The memory's responses cannot be held back, so every requested beat must have
    room when it arrives: a beat holds a credit from its request until it leaves on ``out`` (or
    is dropped, below), and a request goes out only while fewer than ``depth`` beats hold one.
    One credit goes round in ``mem_latency + ceil(words/lanes) + 3`` cycles (2 from the request
    to the first grant, ``mem_latency`` to the line, one into the FIFO, one to leave it), so the
    default ``depth`` is that many lines' worth of beats: enough for the full rate.

    **The end of the stream.** A reader does not know how many beats the stream has; the beat
    whose ``last`` is set ends it. Requests made before that beat arrived are **speculative**:
    their beats are read and dropped (not delivered). They stay inside the stream's own region:
    at most ``depth - 1`` beats past the last one and never at or past beat ``max_beats`` (the
    room the lowering reserves for the stream, ``2 * cardinality + 2`` beats, so they can fault
    nothing and change nothing: reads have no side effect). ``bytes`` counts every burst the
    reader read, the dropped ones too, because it is what the memory counted for the reader: the
    system top subtracts it from the memory's ``bytes_read`` to give the tensors' traffic, which
    must match the symbolic metrics exactly. ``beats`` counts the delivered beats; the delivered
    bytes are ``beats * words_per_beat * word_bytes``.

    Every output but ``status.stall_out`` (a statistic) is a register or a function of registers
    only (``req.valid`` compares the credit and request counters with constants); the address path is a counter stepping by
    ``words_per_beat`` (an adder, no multiplier), the beat assembly a shift register of lines.

    Parameters
    ----------
    layout : amaranth.lib.data.StructLayout
        Beat layout of the stream (with a ``last`` field).
    geometry : MemoryGeometry
    base : int
        Word address of beat 0.
    max_beats : int, optional
        Beats reserved for the stream: no request goes to beat ``max_beats`` or beyond, and a
        stream whose beat ``max_beats - 1`` arrives without ``last`` raises ``OVER_BOUND``.
        ``None``: no bound (speculative reads may then run up to ``depth - 1`` beats past the
        stream's end).
    depth : int, optional
        Beats in flight and queued at most (the output FIFO's depth); default above.

    Members
    -------
    out : ``Out(stream.Signature(layout))``
        The beats.
    mem : ``Out(MemoryPort(geometry, "read", (words_per_beat, 1, 0)))``
        The memory read port.
    status : ``Out(StatusSignature)``
        ``busy`` until the last beat has left and every speculative burst has come back,
        ``stall_in`` while no beat waits on ``out`` before the last one arrived (waiting for
        memory), ``stall_out`` while a beat waits on ``out`` that is not ready.
    bytes : ``Out(32)``
        Bytes read from memory so far (delivered and dropped beats), counted as each burst's
        last line arrives.
    beats : ``Out(32)``
        Beats delivered on ``out`` so far.

    Raises
    ------
    ValueError
        ``max_beats`` or ``depth`` is not an int ``>= 1``; ``layout`` has no ``last`` field.
    """

    @quiet_on_error
    def __init__(self, layout, geometry, base, max_beats=None, *, depth=None):
        self.layout, self.geometry, self.base = layout, geometry, base
        self.wpb = words_per_beat(layout, geometry)
        self.nlines = -(-self.wpb // geometry.lanes)
        self.max_beats, self.depth = max_beats, depth
        for name, value in (("max_beats", max_beats), ("depth", depth)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ValueError(f"BeatReader {name} must be None or an int >= 1, not {value!r}")
        try:
            layout["last"]
        except (KeyError, TypeError):
            raise ValueError(f"BeatReader layout must have a 'last' field, not {layout!r}") from None
        if depth is None:
            self.depth = self.default_depth(geometry, self.nlines)
        super().__init__({
            "out": Out(stream.Signature(layout)),
            "mem": Out(MemoryPort(geometry, "read", (self.wpb, 1, 0))),
            "status": Out(StatusSignature),
            "bytes": Out(32),
            "beats": Out(32),
        })

    @staticmethod
    def default_depth(geometry, nlines):
        """Beats a credit's round trip (``mem_latency + nlines + 3`` cycles) holds at the full
        rate of one beat per ``nlines`` cycles."""
        return -(-(geometry.latency + nlines + 3) // nlines)

    def __repr__(self):
        return (f"BeatReader({self.layout!r}, {self.geometry!r}, {self.base}, "
                f"max_beats={self.max_beats}, depth={self.depth})")

    def elaborate(self, platform):
        m = Module()
        g, wpb, nlines, depth = self.geometry, self.wpb, self.nlines, self.depth
        line_bits = g.lanes * g.word_bits
        resp = self.mem.resp
        m.submodules.queue = queue = StreamFIFO(self.layout, depth, counters=False)

        addr = Signal(unsigned(g.addr_bits), init=self.base, name="beat_addr")
        credits = Signal(range(depth + 1), name="beats_held")   # requested, not yet gone
        ended = Signal(name="saw_last")
        nbytes = Signal(32, name="bytes_read")
        nbeats = Signal(32, name="beats_sent")
        # the lines of a burst before its last, shifted in from the top: after the burst's
        # nlines - 1 first lines, line 0 sits at the bottom
        tail = Value.cast(resp.data)[:(wpb - (nlines - 1) * g.lanes) * g.word_bits]
        if nlines > 1:
            lines = Signal((nlines - 1) * line_bits, name="beat_lines")
            beat = Cat(lines, tail)
            with m.If(resp.valid):
                m.d.sync += lines.eq(Cat(lines[line_bits:], Value.cast(resp.data)))
        else:
            beat = tail
        arrive = Signal(name="beat_arrives")      # a burst's last line: its beat is complete
        push, drop, pop, issue = (Signal(name=n) for n in ("push", "drop", "pop", "issue"))
        last_bit = self.layout["last"].offset

        room = credits != depth
        if self.max_beats is not None:
            requested = Signal(range(self.max_beats + 1), name="beats_requested")
            more = requested != self.max_beats
            with m.If(issue):
                m.d.sync += requested.eq(requested + 1)
            over = Signal(name="over_bound")
            m.d.comb += over.eq(~more & ~ended & (credits == 0))
            raise_error(m, self.status, ErrorCode.OVER_BOUND, over)
        else:
            more = 1

        m.d.comb += [
            self.mem.req.valid.eq(~ended & room & more & ~self.status.error),
            self.mem.req.payload.addr.eq(addr),
            issue.eq(self.mem.req.valid & self.mem.req.ready),
            arrive.eq(resp.valid & resp.last),
            push.eq(arrive & ~ended),
            drop.eq(arrive & ended),
            queue.i.valid.eq(push),
            queue.i.payload.eq(beat[:self.layout.size]),
            self.out.valid.eq(queue.o.valid),
            self.out.payload.eq(queue.o.payload),
            queue.o.ready.eq(self.out.ready),
            pop.eq(queue.o.valid & self.out.ready),
            self.bytes.eq(nbytes),
            self.beats.eq(nbeats),
            self.status.busy.eq(~ended | (credits != 0)),
            self.status.stall_in.eq(~ended & ~queue.o.valid),
            self.status.stall_out.eq(queue.o.valid & ~self.out.ready),
        ]
        m.d.sync += credits.eq(credits + issue - pop - drop)
        with m.If(issue):
            m.d.sync += addr.eq(addr + wpb)
        with m.If(arrive):
            m.d.sync += nbytes.eq(nbytes + wpb * g.word_bytes)
        with m.If(push & beat[last_bit]):
            m.d.sync += ended.eq(1)
        with m.If(pop):
            m.d.sync += nbeats.eq(nbeats + 1)
        return m


class BeatWriter(wiring.Component):
    """Write the beats of a stream to memory as packed words from ``base``; count them.

    Parameters
    ----------
    layout : amaranth.lib.data.StructLayout
    geometry : MemoryGeometry
    base : int
        Word address of beat 0.
    max_beats : int
        Room reserved for the stream; a longer stream raises ``OVER_BOUND``.

    Members
    -------
    in0 : ``In(stream.Signature(layout))``
    mem : ``Out(MemoryPort(geometry, "write", (words_per_beat, 1, 0)))``
    status : ``Out(StatusSignature)``
    beats : ``Out(32)``
        Beats written so far.
    done : ``Out(1)``
        The beat with ``last`` has been written.
    bytes : ``Out(32)``
        Bytes written so far.
    """

    def __init__(self, layout, geometry, base, max_beats):
        self.layout, self.geometry, self.base, self.max_beats = layout, geometry, base, max_beats
        self.wpb = words_per_beat(layout, geometry)
        super().__init__({
            "in0": In(stream.Signature(layout)),
            "mem": Out(MemoryPort(geometry, "write", (self.wpb, 1, 0))),
            "status": Out(StatusSignature),
            "beats": Out(32),
            "done": Out(1),
            "bytes": Out(32),
        })

    def __repr__(self):
        return f"BeatWriter({self.layout!r}, {self.geometry!r}, {self.base}, {self.max_beats})"

    def elaborate(self, platform):
        m = Module()
        g, wpb = self.geometry, self.wpb
        lanes, word_bits = g.lanes, g.word_bits
        nlines = -(-wpb // lanes)
        addr = Signal(unsigned(g.addr_bits), init=self.base, name="beat_addr")
        buf = Signal(nlines * lanes * word_bits, name="beat_bits")
        line = Signal(range(nlines + 1), name="line")
        is_last = Signal(name="beat_last")
        count = Signal(32, name="beat_count")
        nbytes = Signal(32, name="bytes_written")
        done = Signal(name="written_last")
        m.d.comb += [self.beats.eq(count), self.done.eq(done), self.bytes.eq(nbytes)]
        over = Signal(name="over_bound")
        raise_error(m, self.status, ErrorCode.OVER_BOUND, over)

        with m.FSM(name="writer"):
            with m.State("TAKE"):
                m.d.comb += [self.in0.ready.eq(~done & ~self.status.error),
                             self.status.stall_in.eq(~self.in0.valid & ~done)]
                with m.If(self.in0.valid & self.in0.ready):
                    with m.If(count >= self.max_beats):
                        m.d.comb += over.eq(1)
                    with m.Else():
                        m.d.sync += [buf.eq(self.in0.payload.as_value()),
                                     is_last.eq(self.in0.payload.last), line.eq(0)]
                        m.next = "REQ"
            with m.State("REQ"):
                m.d.comb += [self.mem.req.valid.eq(1), self.mem.req.payload.addr.eq(addr),
                             self.status.busy.eq(1)]
                with m.If(self.mem.req.ready):
                    m.next = "DATA"
            with m.State("DATA"):
                m.d.comb += [self.mem.data.valid.eq(1), self.status.busy.eq(1)]
                with m.Switch(line):
                    for k in range(nlines):
                        with m.Case(k):
                            m.d.comb += self.mem.data.payload.as_value().eq(
                                buf[k * lanes * word_bits:(k + 1) * lanes * word_bits])
                with m.If(self.mem.data.ready):
                    m.d.sync += line.eq(line + 1)
                    with m.If(line == nlines - 1):
                        m.d.sync += [addr.eq(addr + wpb), count.eq(count + 1),
                                     nbytes.eq(nbytes + wpb * g.word_bytes)]
                        with m.If(is_last):
                            m.d.sync += done.eq(1)
                        m.next = "TAKE"
        return m


class DiscardUnit(wiring.Component):
    """Drain a stream that nothing reads; ``done`` once its last beat went by.

    Members
    -------
    in0 : ``In(stream.Signature(layout))``
    status : ``Out(StatusSignature)``
    done : ``Out(1)``
    """

    def __init__(self, layout):
        self.layout = layout
        super().__init__({"in0": In(stream.Signature(layout)), "status": Out(StatusSignature),
                          "done": Out(1)})

    def __repr__(self):
        return f"DiscardUnit({self.layout!r})"

    def elaborate(self, platform):
        m = Module()
        done = Signal(name="saw_last")
        m.d.comb += [self.in0.ready.eq(1), self.done.eq(done), self.status.stall_in.eq(~done & ~self.in0.valid)]
        with m.If(self.in0.valid & self.in0.payload.last):
            m.d.sync += done.eq(1)
        return m
