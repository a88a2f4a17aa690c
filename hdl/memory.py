"""The off-chip memory system: a multi-channel, word-interleaved memory behind burst ports.

Geometry
--------
The memory is addressed in **words** of ``word_bytes`` bytes. A channel moves
``mem_bytes_per_channel`` bytes per cycle, i.e. ``mem_bytes_per_channel / word_bytes`` words, so the
``mem_channels`` channels together form ``lanes = mem_channels * mem_bytes_per_channel /
word_bytes`` word lanes: one *line* of up to ``lanes`` words moves per cycle, which is the peak
bandwidth ``mem_channels * mem_bytes_per_channel`` bytes per cycle. Word ``w`` lives in lane
``w % lanes`` (channel ``(w % lanes) // (lanes / mem_channels)``), row ``w // lanes``; any ``lanes``
consecutive words sit in distinct lanes, so a line starting at *any* word address is read or
written in one cycle (each lane reads its own row and the line is rotated into order).

``word_bytes`` must divide ``mem_bytes_per_channel``. Its default,
``gcd(mem_bytes_per_channel, tile_cols * bytes(dtype))`` of the :class:`HardwareConfig`, makes one
row of a hardware tile a whole number of words, which is what the off-chip units need (a unit
checks that its tile rows and tensor rows are whole words and raises ``ValueError`` otherwise).
Bytes inside a word are little-endian, so a tile row of ``c`` elements is ``c * bytes(dtype) /
word_bytes`` consecutive words whose concatenation (word 0 in the least significant bits) is
exactly the row's bits in the beat layout (:mod:`stepforge.hdl.beat`).

Ports and protocol
------------------
A client owns one :class:`MemoryPort` (signatures below are seen from the client; the memory
has them flipped). Every request is a **burst**: a word address and a word count.

* Read port ``MemoryPort(geometry, "read")``:

  - ``req``: ``stream.Signature(StructLayout({"addr", "count"}))``, driven by the client. The
    memory accepts one burst per client at a time; ``req.ready`` is high when the client has no
    burst left or its last line is being served this cycle, so back-to-back bursts leave no gap.
    A burst of count 0 is accepted and does nothing.
  - ``resp`` (driven by the memory, no back-pressure): ``valid``, ``count`` (words in this line,
    ``1..lanes``), ``last`` (the burst's last line) and ``data`` (``lanes`` words; words
    ``0..count-1`` hold the burst's next words in address order). A burst of ``n`` words arrives
    as ``ceil(n / lanes)`` lines of ``min(lanes, remaining)`` words, in request order, each line
    ``mem_latency`` cycles after the cycle it was granted. A client must be able to absorb every
    line it asked for (the off-chip units reserve buffer space before they issue a request).

* Write port ``MemoryPort(geometry, "write")``:

  - ``req``: as for reads.
  - ``data``: ``stream.Signature(ArrayLayout(unsigned(8 * word_bytes), lanes))``: the burst's
    words, split into lines exactly as a read of the same burst returns them (line ``k`` holds
    words ``k*lanes .. min((k+1)*lanes, n) - 1`` of the burst in lanes ``0..``). The memory takes
    a line (``data.ready``) in the cycle it writes it; a write is visible to every read granted in
    a later cycle.

Each cycle the arbiter grants **one** line to one client whose burst is active (and, for a write
client, whose ``data`` is valid), round-robin over all read and write clients (read clients first
in the rotation order, then write clients). Reads and writes share the bandwidth, as on a real
channel. ``stall`` (an input) blocks every grant in a cycle: tests drive it at random to model
refresh and contention.

Counters
--------
``bytes_read`` and ``bytes_written`` add ``count * word_bytes`` for every granted line: exactly the
bytes the clients asked for, so an off-chip unit that requests exactly its tiles' rows makes them
equal the symbolic traffic ``cardinality x bytes(tile)``. Back-door and debug-port accesses are
not counted.

Back doors
----------
* ``init`` preloads the contents (little-endian bytes from address 0); in Verilog it becomes the
  memories' ``initial`` blocks, so a Verilated design starts filled.
* The ``debug`` port (:data:`DebugSignature`, seen from the debugger) reads or writes one word per
  cycle with priority over the clients (no client is granted in a cycle with a debug access):
  ``addr`` (word address), ``we`` + ``wdata`` write the word at the clock edge; ``re`` reads it and
  ``rdata`` holds it from the next cycle on (``rvalid`` is high in that one cycle). A cocotb
  testbench fills and dumps tensors through it before and after the run, so Python is not in
  the per-cycle loop of the run itself.
* In Amaranth's simulator, :func:`backdoor_read` / :func:`backdoor_write` access the storage with
  ``ctx.get``/``ctx.set`` in zero cycles.
"""

import math
from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Array, MemoryData, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .config import HardwareConfig

__all__ = ["MemoryGeometry", "MemoryPort", "ResponseSignature", "DebugSignature", "MemoryModel",
           "TensorPlacement", "array_to_bytes", "array_from_bytes", "backdoor_read", "backdoor_write"]


def quiet_on_error(init):
    """Decorate a unit's ``__init__``: a unit whose construction fails is not reported later as
    "created but never used" (Amaranth's check would call ``repr`` on a half-built object)."""
    def wrapper(self, *args, **kwargs):
        try:
            init(self, *args, **kwargs)
        except Exception:
            self._MustUse__silence = True
            raise
    wrapper.__doc__, wrapper.__name__, wrapper.__wrapped__ = init.__doc__, init.__name__, init
    return wrapper


def index_shape(n):
    """The shape of an index into ``n`` things: ``range(n)``, but at least one bit wide (a
    zero-width signal draws Verilator's ASCRANGE warning)."""
    return range(max(n, 2))


def _pick(values, index):
    """``values[index]`` as a multiplexer, the table padded to every value of ``index`` (so the
    Verilog case statement is complete)."""
    values = list(values)
    width = Value.cast(index).shape().width
    values += [values[-1]] * ((1 << width) - len(values))
    return Array(values)[index]


def _pos_int(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, not {value!r}")
    return value


@dataclass(frozen=True)
class MemoryGeometry:
    """Shape of a :class:`MemoryModel` and of its ports (see the module doc).

    Parameters
    ----------
    word_bytes : int
        Bytes of one addressable word; divides ``bytes_per_channel``.
    channels : int
        Memory channels.
    bytes_per_channel : int
        Bytes one channel moves per cycle.
    latency : int
        Cycles from a line's grant to its data on ``resp`` (``>= 0``).
    size_words : int
        Capacity in words (``>= 1``).
    count_bits : int, default 16
        Width of a request's ``count``: the longest burst is ``2**count_bits - 1`` words.
    """

    word_bytes: int
    channels: int
    bytes_per_channel: int
    latency: int
    size_words: int
    count_bits: int = 16

    def __post_init__(self):
        _pos_int("MemoryGeometry.word_bytes", self.word_bytes)
        _pos_int("MemoryGeometry.channels", self.channels)
        _pos_int("MemoryGeometry.bytes_per_channel", self.bytes_per_channel)
        _pos_int("MemoryGeometry.latency", self.latency, 0)
        _pos_int("MemoryGeometry.size_words", self.size_words)
        _pos_int("MemoryGeometry.count_bits", self.count_bits)
        if self.bytes_per_channel % self.word_bytes:
            raise ValueError(f"MemoryGeometry: word_bytes {self.word_bytes} does not divide "
                             f"bytes_per_channel {self.bytes_per_channel}")

    @classmethod
    def from_config(cls, config, size_bytes, *, word_bytes=None, count_bits=16):
        """The geometry of a memory of ``size_bytes`` for ``config``.

        Parameters
        ----------
        config : HardwareConfig
        size_bytes : int
            Capacity, rounded up to whole words.
        word_bytes : int, optional
            Default ``gcd(config.mem_bytes_per_channel, config.tile_cols * bytes(config.dtype))``.
        count_bits : int, default 16

        Returns
        -------
        MemoryGeometry
        """
        if not isinstance(config, HardwareConfig):
            raise TypeError(f"expected a HardwareConfig, not {config!r}")
        _pos_int("size_bytes", size_bytes)
        if word_bytes is None:
            word_bytes = math.gcd(config.mem_bytes_per_channel,
                                  config.tile_cols * config.dtype.nbytes)
        _pos_int("word_bytes", word_bytes)
        return cls(word_bytes=word_bytes, channels=config.mem_channels,
                   bytes_per_channel=config.mem_bytes_per_channel, latency=config.mem_latency,
                   size_words=-(-size_bytes // word_bytes), count_bits=count_bits)

    @property
    def word_bits(self):
        return 8 * self.word_bytes

    @property
    def lanes(self):
        """Words moved per cycle at peak (one line)."""
        return self.channels * self.bytes_per_channel // self.word_bytes

    @property
    def line_bytes(self):
        """Peak bytes per cycle, ``channels * bytes_per_channel``."""
        return self.channels * self.bytes_per_channel

    @property
    def rows(self):
        """Depth of each lane's storage."""
        return -(-self.size_words // self.lanes)

    @property
    def addr_bits(self):
        """Width of a word address."""
        return max(1, ceil_log2(self.rows * self.lanes))

    @property
    def size_bytes(self):
        return self.size_words * self.word_bytes

    @property
    def request_layout(self):
        """``StructLayout({"addr": word address, "count": words})``."""
        return data.StructLayout({"addr": unsigned(self.addr_bits),
                                  "count": unsigned(self.count_bits)})

    @property
    def line_layout(self):
        """``ArrayLayout(unsigned(8 * word_bytes), lanes)``: one line of words."""
        return data.ArrayLayout(unsigned(self.word_bits), self.lanes)

    def lines(self, count):
        """Lines (cycles of the memory) that a burst of ``count`` words takes."""
        return -(-count // self.lanes)

    def words(self, nbytes, what="a transfer"):
        """``nbytes`` in words; ``ValueError`` unless it is a whole number of words."""
        if nbytes % self.word_bytes:
            raise ValueError(f"{what} of {nbytes} bytes is not a whole number of "
                             f"{self.word_bytes}-byte memory words")
        return nbytes // self.word_bytes


def ResponseSignature(geometry):
    """Read response lines, seen from the memory (all members ``Out``)."""
    return wiring.Signature({
        "valid": Out(1),
        "count": Out(range(geometry.lanes + 1)),
        "last": Out(1),
        "data": Out(geometry.line_layout),
    })


def DebugSignature(geometry):
    """The back-door port, seen from the debugger (see the module doc)."""
    return wiring.Signature({
        "addr": Out(unsigned(geometry.addr_bits)),
        "we": Out(1),
        "wdata": Out(unsigned(geometry.word_bits)),
        "re": Out(1),
        "rdata": In(unsigned(geometry.word_bits)),
        "rvalid": In(1),
    })


class MemoryPort(wiring.Signature):
    """A client's port on a :class:`MemoryModel`, seen from the client.

    Parameters
    ----------
    geometry : MemoryGeometry
    kind : {"read", "write"}

    Members
    -------
    req : ``Out(stream.Signature(geometry.request_layout))``
        Bursts (word address, word count).
    resp : ``In(ResponseSignature(geometry))``
        Read ports only: the burst's lines.
    data : ``Out(stream.Signature(geometry.line_layout))``
        Write ports only: the burst's lines.
    """

    def __init__(self, geometry, kind):
        if not isinstance(geometry, MemoryGeometry):
            raise TypeError(f"expected a MemoryGeometry, not {geometry!r}")
        if kind not in ("read", "write"):
            raise ValueError(f"a MemoryPort is 'read' or 'write', not {kind!r}")
        self.geometry, self.kind = geometry, kind
        members = {"req": Out(stream.Signature(geometry.request_layout))}
        if kind == "read":
            members["resp"] = In(ResponseSignature(geometry))
        else:
            members["data"] = Out(stream.Signature(geometry.line_layout))
        super().__init__(members)

    def __eq__(self, other):
        return (type(other) is MemoryPort and other.kind == self.kind
                and other.geometry == self.geometry)

    def __hash__(self):
        return hash((MemoryPort, self.kind, self.geometry))

    def __repr__(self):
        return f"MemoryPort({self.geometry!r}, {self.kind!r})"


class MemoryModel(wiring.Component):
    """A multi-channel off-chip memory with round-robin burst ports (module doc).

    Storage is one :class:`amaranth.lib.memory.Memory` of ``geometry.rows`` words per lane, with
    one read and one write port each (simple dual port: block RAM on an FPGA). With
    ``mem_latency >= 1`` the read port is synchronous and ``mem_latency - 1`` register stages
    follow it; with ``mem_latency = 0`` it is asynchronous and a line arrives in the cycle it is
    granted.

    Parameters
    ----------
    config : HardwareConfig
        ``mem_channels``, ``mem_bytes_per_channel`` and ``mem_latency`` shape the memory.
    size_bytes : int
        Capacity (rounded up to whole words).
    init : bytes-like or sequence of int, optional
        Initial contents from byte address 0 (missing bytes are zero).
    read_ports, write_ports : int, default 1
        Number of read and write clients (``>= 0``).
    word_bytes : int, optional
        See :meth:`MemoryGeometry.from_config`.
    count_bits : int, default 16
        Width of a burst's word count.
    counter_bits : int, default 48
        Width of ``bytes_read`` and ``bytes_written`` (they wrap).

    Members
    -------
    read : ``In(MemoryPort(geometry, "read")).array(read_ports)``
        Read clients (absent when ``read_ports`` is 0).
    write : ``In(MemoryPort(geometry, "write")).array(write_ports)``
        Write clients (absent when ``write_ports`` is 0).
    debug : ``In(DebugSignature(geometry))``
        The back-door word port.
    stall : ``In(1)``
        No line is granted in a cycle where it is high.
    bytes_read, bytes_written : ``Out(counter_bits)``
        Bytes moved by granted lines since reset.
    """

    @quiet_on_error
    def __init__(self, config, size_bytes, init=None, *, read_ports=1, write_ports=1,
                 word_bytes=None, count_bits=16, counter_bits=48):
        self.config = config
        self.geometry = g = MemoryGeometry.from_config(config, size_bytes, word_bytes=word_bytes,
                                                       count_bits=count_bits)
        self._size_bytes = size_bytes
        self.read_ports = _pos_int("read_ports", read_ports, 0)
        self.write_ports = _pos_int("write_ports", write_ports, 0)
        if read_ports + write_ports == 0:
            raise ValueError("a MemoryModel needs at least one read or write port")
        self.counter_bits = _pos_int("counter_bits", counter_bits)
        self._init_bytes = self._check_init(init, g)
        members = {}
        if read_ports:
            members["read"] = In(MemoryPort(g, "read")).array(read_ports)
        if write_ports:
            members["write"] = In(MemoryPort(g, "write")).array(write_ports)
        members.update({
            "debug": In(DebugSignature(g)),
            "stall": In(1),
            "bytes_read": Out(counter_bits),
            "bytes_written": Out(counter_bits),
        })
        super().__init__(members)
        lane_init = self.lane_words(self._init_bytes)
        #: The storage of each lane (``MemoryData``, shared by every elaboration): the simulator's
        #: back door (:func:`backdoor_read`, :func:`backdoor_write`) reaches the words through it.
        self.lane_data = [MemoryData(shape=unsigned(g.word_bits), depth=g.rows, init=lane_init[j])
                          for j in range(g.lanes)]

    @staticmethod
    def _check_init(init, g):
        if init is None:
            return b""
        buf = bytes(bytearray(init))
        if len(buf) > g.size_bytes:
            raise ValueError(f"MemoryModel init holds {len(buf)} bytes, more than the memory's "
                             f"{g.size_bytes}")
        return buf

    def lane_words(self, buf):
        """``buf`` (bytes from address 0) as per-lane lists of word values (the storage image)."""
        g = self.geometry
        buf = bytes(buf) + bytes(g.rows * g.lanes * g.word_bytes - len(buf))
        words = [int.from_bytes(buf[w * g.word_bytes:(w + 1) * g.word_bytes], "little")
                 for w in range(g.rows * g.lanes)]
        return [words[j::g.lanes] for j in range(g.lanes)]

    def __repr__(self):
        extra = "" if not self._init_bytes else f", init=<{len(self._init_bytes)} bytes>"
        return (f"MemoryModel({self.config!r}, {self._size_bytes}{extra}, "
                f"read_ports={self.read_ports}, write_ports={self.write_ports}, "
                f"word_bytes={self.geometry.word_bytes}, count_bits={self.geometry.count_bits}, "
                f"counter_bits={self.counter_bits})")

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        L, W = g.lanes, g.word_bytes
        lat = g.latency
        row_shape = unsigned(max(1, ceil_log2(g.rows + 1)))
        nr, nw = self.read_ports, self.write_ports
        clients = [self.read[i] for i in range(nr)] + [self.write[i] for i in range(nw)]
        n = len(clients)

        # Per-client burst state: the next line's row and start lane, and the words left.
        active = [Signal(name=f"c{c}_active") for c in range(n)]
        row = [Signal(row_shape, name=f"c{c}_row") for c in range(n)]
        lane = [Signal(index_shape(L), name=f"c{c}_lane") for c in range(n)]
        left = [Signal(g.count_bits, name=f"c{c}_left") for c in range(n)]

        # Arbitration: round robin over the eligible clients, one line per cycle.
        eligible = Signal(n, name="eligible")
        for c, port in enumerate(clients):
            ok = active[c] if c < nr else active[c] & port.data.valid
            m.d.comb += eligible[c].eq(ok)
        debug_access = Signal(name="debug_access")
        m.d.comb += debug_access.eq(self.debug.we | self.debug.re)
        grant = Signal(name="grant")
        grant_to = Signal(index_shape(n), name="grant_to")
        last_grant = Signal(index_shape(n), init=n - 1, name="last_grant")
        with m.If(~self.stall & ~debug_access):
            with m.Switch(last_grant):
                for p in range(n):
                    with (m.Case(p) if p < n - 1 else m.Default()):
                        order = [(p + k) % n for k in range(1, n + 1)]
                        with m.If(eligible[order[0]]):
                            m.d.comb += [grant.eq(1), grant_to.eq(order[0])]
                        for c in order[1:]:
                            with m.Elif(eligible[c]):
                                m.d.comb += [grant.eq(1), grant_to.eq(c)]
        with m.If(grant):
            m.d.sync += last_grant.eq(grant_to)

        g_row = Signal(row_shape, name="g_row")
        g_lane = Signal(index_shape(L), name="g_lane")
        g_left = Signal(g.count_bits, name="g_left")
        g_count = Signal(range(L + 1), name="g_count")
        g_write = Signal(name="g_write")
        g_last = Signal(name="g_last")
        m.d.comb += [
            g_row.eq(_pick(row, grant_to)),
            g_lane.eq(_pick(lane, grant_to)),
            g_left.eq(_pick(left, grant_to)),
            g_write.eq(grant & (grant_to >= nr)),
            g_last.eq(g_left <= L),
            g_count.eq(Mux(g_last, g_left, L)),
        ]

        for c, port in enumerate(clients):
            mine = Signal(name=f"c{c}_granted")
            m.d.comb += mine.eq(grant & (grant_to == c))
            finishing = mine & g_last
            m.d.comb += port.req.ready.eq(~active[c] | finishing)
            if c >= nr:
                m.d.comb += port.data.ready.eq(mine)
            with m.If(mine):
                m.d.sync += [row[c].eq(row[c] + 1), left[c].eq(left[c] - g_count)]
                with m.If(g_last):
                    m.d.sync += active[c].eq(0)
            with m.If(port.req.valid & port.req.ready):
                addr, count = port.req.payload.addr, port.req.payload.count
                m.d.sync += [
                    active[c].eq(count != 0),
                    row[c].eq(addr // L),
                    lane[c].eq(addr % L),
                    left[c].eq(count),
                ]

        # Debug port decode.
        dbg_row = Signal(row_shape, name="dbg_row")
        dbg_lane = Signal(index_shape(L), name="dbg_lane")
        m.d.comb += [dbg_row.eq(self.debug.addr // L), dbg_lane.eq(self.debug.addr % L)]

        # Lanes.
        wline = [Signal(g.word_bits, name=f"wline{i}") for i in range(L)]
        if nw:
            wsel = Signal(index_shape(nw), name="wsel")
            sel_line = Signal(g.line_layout, name="wsel_line")
            m.d.comb += [wsel.eq(grant_to - nr),
                         sel_line.eq(_pick([self.write[i].data.payload.as_value()
                                            for i in range(nw)], wsel))]
            for i in range(L):
                m.d.comb += wline[i].eq(sel_line[i])
        read_data = []
        for j in range(L):
            m.submodules[f"lane{j}"] = mem = Memory(self.lane_data[j])
            wr = mem.write_port()
            rd = mem.read_port(domain="sync" if lat >= 1 else "comb")
            idx = Signal(index_shape(L), name=f"lane{j}_idx")   # position of lane j's word in the line
            here = (g_lane <= j) if j < L - 1 else 1            # lane j holds a word of row g_row
            lrow = Signal(row_shape, name=f"lane{j}_row")
            use = Signal(name=f"lane{j}_use")
            m.d.comb += [
                idx.eq(Mux(here, j - g_lane, j + L - g_lane)),
                lrow.eq(Mux(here, g_row, g_row + 1)),
                use.eq(grant & (idx < g_count)),
            ]
            with m.If(debug_access):
                m.d.comb += [rd.addr.eq(dbg_row), wr.addr.eq(dbg_row),
                             wr.data.eq(self.debug.wdata),
                             wr.en.eq(self.debug.we & (dbg_lane == j))]
            with m.Else():
                m.d.comb += [rd.addr.eq(lrow), wr.addr.eq(lrow), wr.data.eq(_pick(wline, idx)),
                             wr.en.eq(use & g_write)]
            read_data.append(rd.data)
        rdata = read_data

        # Read response pipeline: metadata (and, after the storage, the rotated line).
        def meta(name):
            return {"valid": Signal(name=f"{name}_valid"),
                    "client": Signal(index_shape(n), name=f"{name}_client"),
                    "lane": Signal(index_shape(L), name=f"{name}_lane"),
                    "count": Signal(range(L + 1), name=f"{name}_count"),
                    "last": Signal(name=f"{name}_last")}

        m0 = meta("grant")
        m.d.comb += [m0["valid"].eq(grant & ~g_write), m0["client"].eq(grant_to),
                     m0["lane"].eq(g_lane), m0["count"].eq(g_count), m0["last"].eq(g_last)]
        cur = m0
        if lat >= 1:
            nxt = meta("s1")
            m.d.sync += [nxt[k].eq(cur[k]) for k in cur]
            cur = nxt
        line = Signal(g.line_layout, name="resp_line0")
        for i in range(L):
            pos = Signal(index_shape(L), name=f"resp_pos{i}")
            wrap = (cur["lane"] + i >= L) if i else 0
            m.d.comb += [pos.eq(Mux(wrap, cur["lane"] + i - L, cur["lane"] + i)),
                         line[i].eq(_pick(rdata, pos))]
        for s in range(2, lat + 1):
            nxt = meta(f"s{s}")
            nline = Signal(g.line_layout, name=f"resp_line{s - 1}")
            m.d.sync += [nxt[k].eq(cur[k]) for k in cur]
            m.d.sync += nline.eq(line)
            cur, line = nxt, nline
        for r in range(nr):
            resp = self.read[r].resp
            m.d.comb += [resp.valid.eq(cur["valid"] & (cur["client"] == r)),
                         resp.count.eq(cur["count"]), resp.last.eq(cur["last"]),
                         resp.data.eq(line)]

        # Debug read: the addressed word, from the cycle after `re` on.
        dbg_pending = Signal(name="dbg_pending")
        dbg_lane_q = Signal(index_shape(L), name="dbg_lane_q")
        dbg_word = Signal(g.word_bits, name="dbg_word")
        m.d.sync += dbg_pending.eq(self.debug.re)
        with m.If(self.debug.re):
            m.d.sync += dbg_lane_q.eq(dbg_lane)
        if lat >= 1:
            m.d.comb += dbg_word.eq(_pick(rdata, dbg_lane_q))
            dbg_hold = Signal(g.word_bits, name="dbg_hold")
            with m.If(dbg_pending):
                m.d.sync += dbg_hold.eq(dbg_word)
            m.d.comb += self.debug.rdata.eq(Mux(dbg_pending, dbg_word, dbg_hold))
        else:
            with m.If(self.debug.re):
                m.d.sync += dbg_word.eq(_pick(rdata, dbg_lane))
            m.d.comb += self.debug.rdata.eq(dbg_word)
        m.d.comb += self.debug.rvalid.eq(dbg_pending)

        # Traffic counters.
        moved = Signal(range(L * W + 1), name="moved_bytes")
        m.d.comb += moved.eq(g_count * W)
        with m.If(grant & ~g_write):
            m.d.sync += self.bytes_read.eq(self.bytes_read + moved)
        with m.If(grant & g_write):
            m.d.sync += self.bytes_written.eq(self.bytes_written + moved)
        return m


class TensorPlacement:
    """Where a 2-D row-major tensor lives in memory, and the bursts that move one of its tiles.

    The tensor starts at word address ``base``; element ``(r, c)`` is at byte
    ``base * word_bytes + (r * cols + c) * bytes(dtype)``. Its ``tr x tc`` tiles are numbered
    row-major over the tile grid (linear tile index ``k = i * (cols / tc) + j``, as in
    :mod:`stepforge.compiler.ops.offchip`). A tile is moved as **one burst per tile row**
    (``tr`` bursts of ``tc * bytes(dtype)`` bytes, ``stride`` tensor-row words apart), or as **one
    burst** of the whole tile when its rows are contiguous, i.e. the tile spans the full tensor
    width (``tc == cols``). Either way exactly ``bytes(tile)`` bytes move per tile.

    Parameters
    ----------
    geometry : MemoryGeometry
    dtype : stepforge.compiler.types.DType
    shape : (int, int)
        Tensor rows and columns.
    tile : (int, int)
        Tile rows and columns; they divide ``shape``.
    base : int, default 0
        Word address of element ``(0, 0)``.

    Raises
    ------
    ValueError
        The tile does not divide the tensor, a tile row is not a whole number of words, or the
        tensor does not fit the memory.
    """

    def __init__(self, geometry, dtype, shape, tile, base=0):
        if not isinstance(geometry, MemoryGeometry):
            raise TypeError(f"expected a MemoryGeometry, not {geometry!r}")
        self.geometry, self.dtype = geometry, dtype
        if len(tuple(shape)) != 2 or len(tuple(tile)) != 2:
            raise ValueError(f"a tensor placement needs a 2-D shape and tile, not {shape!r}, {tile!r}")
        self.shape = tuple(_pos_int("a tensor dimension", d) for d in shape)
        self.tile = tuple(_pos_int("a tile dimension", d) for d in tile)
        self.base = _pos_int("base", base, 0)
        (rows, cols), (tr, tc) = self.shape, self.tile
        if rows % tr or cols % tc:
            raise ValueError(f"tile {self.tile} does not divide tensor {self.shape}")
        nb = dtype.nbytes
        #: Words of one tile row and of one tensor row.
        self.row_words = geometry.words(tc * nb, f"a tile row ({tc} x {dtype!r})")
        self.tensor_row_words = cols * nb // geometry.word_bytes
        self.grid = (rows // tr, cols // tc)
        self.contiguous = tc == cols
        self.tile_words = tr * self.row_words
        #: Word count and number of the bursts of one tile; words between their starts.
        self.burst_words = self.tile_words if self.contiguous else self.row_words
        self.bursts_per_tile = 1 if self.contiguous else tr
        self.burst_stride = self.tensor_row_words
        #: Address step between horizontally / vertically adjacent tiles.
        self.col_step = self.row_words
        self.row_step = tr * self.tensor_row_words
        self.words = rows * self.tensor_row_words
        if self.base + self.words > geometry.size_words:
            raise ValueError(f"tensor {self.shape} of {dtype!r} ({self.words} words at {self.base}) "
                             f"does not fit the memory's {geometry.size_words} words")
        if self.burst_words >= 1 << geometry.count_bits:
            raise ValueError(f"a burst of {self.burst_words} words does not fit "
                             f"count_bits={geometry.count_bits}")

    @property
    def ntiles(self):
        return self.grid[0] * self.grid[1]

    @property
    def tile_bytes(self):
        return self.tile[0] * self.tile[1] * self.dtype.nbytes

    def tile_addr(self, k):
        """Word address of the first word of tile ``k``."""
        i, j = divmod(k, self.grid[1])
        return self.base + i * self.row_step + j * self.col_step

    def address_of(self, index):
        """The word address of tile ``index`` as an Amaranth expression.

        ``index`` is a :class:`~amaranth.hdl.Value` holding a linear tile index below
        :attr:`ntiles` (the caller checks the range); the quotient and remainder by the tile-grid
        width are constant divisions.
        """
        k = Value.cast(index)
        k = k[:max(1, ceil_log2(self.ntiles))]
        gc = self.grid[1]
        return self.base + (k // gc) * self.row_step + (k % gc) * self.col_step

    def bursts(self, k):
        """The ``(addr, count)`` bursts that move tile ``k``, in order."""
        a = self.tile_addr(k)
        return [(a + r * self.burst_stride, self.burst_words) for r in range(self.bursts_per_tile)]

    def __repr__(self):
        base = f", base={self.base}" if self.base else ""
        return (f"TensorPlacement({self.geometry!r}, {self.dtype!r}, {self.shape}, {self.tile}"
                f"{base})")


# -- host-side helpers -----------------------------------------------------------------------

def array_to_bytes(array, dtype):
    """The little-endian bytes of a 2-D array of ``dtype`` (row-major), as stored in memory.

    Parameters
    ----------
    array : array_like
        Values of ``dtype`` (floats are moved bit for bit).
    dtype : stepforge.compiler.types.DType

    Returns
    -------
    bytes
    """
    a = np.ascontiguousarray(np.asarray(array).astype(dtype.np, copy=False))
    return a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


def array_from_bytes(buf, shape, dtype):
    """The 2-D array of ``dtype`` and ``shape`` stored in the little-endian bytes ``buf``."""
    nbytes = shape[0] * shape[1] * dtype.nbytes
    raw = np.frombuffer(bytes(buf[:nbytes]), dtype=dtype.np.newbyteorder("<"))
    return raw.astype(dtype.np).reshape(shape)


def backdoor_write(ctx, model, word_addr, buf):
    """Write the bytes ``buf`` at ``word_addr`` of ``model`` in Amaranth's simulator, in zero time.

    ``ctx`` is a testbench context; ``len(buf)`` must be a whole number of words.
    """
    g = model.geometry
    nwords = g.words(len(buf), "a back-door write")
    if word_addr + nwords > g.rows * g.lanes:
        raise ValueError(f"a back-door write of {nwords} words at {word_addr} leaves the memory")
    for k in range(nwords):
        w = word_addr + k
        value = int.from_bytes(buf[k * g.word_bytes:(k + 1) * g.word_bytes], "little")
        ctx.set(model.lane_data[w % g.lanes][w // g.lanes], value)


def backdoor_read(ctx, model, word_addr, nwords):
    """``nwords`` words from ``word_addr`` of ``model`` in Amaranth's simulator, as bytes."""
    g = model.geometry
    if word_addr + nwords > g.rows * g.lanes:
        raise ValueError(f"a back-door read of {nwords} words at {word_addr} leaves the memory")
    out = bytearray()
    for k in range(nwords):
        w = word_addr + k
        out += int(ctx.get(model.lane_data[w % g.lanes][w // g.lanes])).to_bytes(
            g.word_bytes, "little")
    return bytes(out)
