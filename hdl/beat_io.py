"""Host streams in memory: read a program's input streams, write its output streams, drain.

A program's host-supplied input streams (``Program.input``) and its stream outputs
(``Program.output``) live in off-chip memory as packed beats: beat ``k`` of a stream occupies
``words_per_beat`` consecutive words from ``base + k * words_per_beat``, its bits split into
little-endian words (word 0 holds the least significant bits of the beat layout).
"""

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .memory import MemoryPort
from .unit import ErrorCode, StatusSignature, raise_error

__all__ = ["words_per_beat", "BeatReader", "BeatWriter", "DiscardUnit"]


def words_per_beat(layout, geometry):
    """Memory words one beat of ``layout`` occupies."""
    return -(-layout.size // geometry.word_bits)


class BeatReader(wiring.Component):
    """Stream packed beats out of memory, from ``base`` up to and including the beat with ``last``.

    One burst of ``words_per_beat`` words per beat; the next burst is asked for as soon as the
    previous beat has been handed on.

    Parameters
    ----------
    layout : amaranth.lib.data.StructLayout
        Beat layout of the stream.
    geometry : MemoryGeometry
    base : int
        Word address of beat 0.

    Members
    -------
    out : ``Out(stream.Signature(layout))``
        The beats.
    mem : ``Out(MemoryPort(geometry, "read", (words_per_beat, 1, 0)))``
        The memory read port.
    status : ``Out(StatusSignature)``
    bytes : ``Out(32)``
        Bytes read so far (the system top subtracts host-stream traffic from tensor traffic).
    """

    def __init__(self, layout, geometry, base):
        self.layout, self.geometry, self.base = layout, geometry, base
        self.wpb = words_per_beat(layout, geometry)
        super().__init__({
            "out": Out(stream.Signature(layout)),
            "mem": Out(MemoryPort(geometry, "read", (self.wpb, 1, 0))),
            "status": Out(StatusSignature),
            "bytes": Out(32),
        })

    def __repr__(self):
        return f"BeatReader({self.layout!r}, {self.geometry!r}, {self.base})"

    def elaborate(self, platform):
        m = Module()
        g, wpb = self.geometry, self.wpb
        word_bits = g.word_bits
        addr = Signal(unsigned(g.addr_bits), init=self.base, name="beat_addr")
        buf = Signal(wpb * word_bits, name="beat_bits")
        filled = Signal(range(wpb + g.lanes + 1), name="words_filled")
        nbytes = Signal(32, name="bytes_read")
        m.d.comb += [self.bytes.eq(nbytes), self.out.payload.eq(buf[:self.layout.size])]

        with m.FSM(name="reader"):
            with m.State("REQ"):
                m.d.comb += [self.mem.req.valid.eq(1), self.mem.req.payload.addr.eq(addr),
                             self.status.busy.eq(1)]
                with m.If(self.mem.req.ready):
                    m.d.sync += filled.eq(0)
                    m.next = "COLLECT"
            with m.State("COLLECT"):
                m.d.comb += [self.status.busy.eq(1), self.status.stall_in.eq(1)]
                with m.If(self.mem.resp.valid):
                    # place the line's words after those already collected
                    for j in range(g.lanes):
                        for k in range(wpb):
                            with m.If((j < self.mem.resp.count) & (filled + j == k)):
                                m.d.sync += buf.word_select(k, word_bits).eq(self.mem.resp.data[j])
                    m.d.sync += [filled.eq(filled + self.mem.resp.count),
                                 nbytes.eq(nbytes + self.mem.resp.count * g.word_bytes)]
                    with m.If(self.mem.resp.last):
                        m.next = "SEND"
            with m.State("SEND"):
                m.d.comb += [self.out.valid.eq(1), self.status.busy.eq(1),
                             self.status.stall_out.eq(~self.out.ready)]
                with m.If(self.out.ready):
                    m.d.sync += addr.eq(addr + wpb)
                    with m.If(self.out.payload.last):
                        m.next = "DONE"
                    with m.Else():
                        m.next = "REQ"
            with m.State("DONE"):
                pass
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
