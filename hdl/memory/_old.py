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
has them flipped). Every request is a **burst**: ``rows`` *segments* of ``count`` consecutive
words, segment ``k`` starting at word ``addr + k * stride`` (``rows`` 0 counts as 1, so a plain
1-D burst leaves ``rows`` and ``stride`` at 0). The burst's words are the segments' words in
order. A tile of a row-major tensor is one burst: one segment per tile row, ``stride`` = the
tensor's row length (:class:`TensorPlacement`).

**Lines.** Each grant moves one line, and :meth:`MemoryGeometry.burst_lines` gives the word
counts of a burst's lines (the same rule in Python and in the hardware):

* a segment longer than ``lanes`` words goes out alone, ``lanes`` words per line (the last line
  of the segment holds the rest);
* segments of at most ``lanes`` words are packed whole, as many per line as fit and sit in
  distinct lanes (segments ``0..m-1`` of a line are taken while ``(m+1)`` of them fit in ``lanes``
  words and segment ``m``'s lanes are disjoint from those already taken; at most
  ``max_segments`` per line). Lane conflicts are the model's bank conflicts: the lanes of segment
  ``k`` are those of segment 0 rotated by ``k * stride mod lanes``, so a tensor whose row length
  is a multiple of ``lanes / 2`` words packs two rows per line at best, a row length coprime to
  ``lanes`` packs ``lanes / count``.

* Read port ``MemoryPort(geometry, "read")``:

  - ``req``: ``stream.Signature(geometry.request_layout)`` with ``addr``, ``count``, ``rows``,
    ``stride``, driven by the client. The memory holds one burst per client; ``req.ready`` is
    high when the client has no burst left or its last line is being served this cycle, so
    back-to-back bursts leave no gap. A burst with ``count`` 0 is accepted and does nothing.
  - ``resp`` (driven by the memory, no back-pressure): ``valid``, ``count`` (words in this line,
    ``1..lanes``), ``last`` (the burst's last line) and ``data`` (``lanes`` words; words
    ``0..count-1`` are the burst's next words in order). Lines arrive in request order, each
    ``mem_latency`` cycles after the cycle it was granted. A client must be able to absorb every
    line it asked for (the off-chip units reserve buffer space before they issue a request).

* Write port ``MemoryPort(geometry, "write")``:

  - ``req``: as for reads.
  - ``data``: ``stream.Signature(ArrayLayout(unsigned(8 * word_bytes), lanes))``: the burst's
    words, cut into lines exactly as a read of the same burst returns them (line ``k`` holds the
    next ``burst_lines(...)[k]`` words of the burst in lanes ``0..``). The memory takes a line
    (``data.ready``) in the cycle it writes it; a write is visible to every read granted in a
    later cycle.

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
import operator
from dataclasses import dataclass
from functools import reduce
from types import SimpleNamespace

import numpy as np
from amaranth.hdl import (Array, Cat, ClockSignal, Const, Instance, MemoryData, Module, Mux, Shape,
                          Signal, Value, unsigned)
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .config import HardwareConfig

__all__ = ["LANE_RAM_VERILOG", "MemoryGeometry", "MemoryPort", "ResponseSignature", "DebugSignature", "MemoryModel",
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
    """``values[index]`` for unsigned ``values`` of one width, as a case statement of word-wide
    arms (an :class:`~amaranth.hdl.Array` lookup). The table is padded with its last value to
    every value of ``index``, so every index selects a defined value.

    A ``Cat(values).word_select(index, width)`` would be one cell, but Verilator turns it into a
    variable shift of the whole concatenation into a wide temporary (``VL_SHIFTR_WWI``) on every
    evaluation; the case statement becomes a tree of word-wide selects.
    """
    values = [Value.cast(v) for v in values]
    width = len(values[0])
    if any(len(v) != width or v.shape().signed for v in values):
        raise TypeError("_pick takes unsigned values of one width")
    values += [values[-1]] * ((1 << len(Value.cast(index))) - len(values))
    return Array(values)[index]


def _segment_planes(m, masks, width, name):
    """The segment that holds each of ``width`` positions, as bit-planes: ``masks[k - 1]`` is
    segment ``k``'s positions (``k >= 1``; disjoint), and position ``j``'s segment number is
    ``Cat(plane[j] for plane in planes)``, 0 where no mask holds it."""
    planes = []
    for b in range(Shape.cast(index_shape(len(masks) + 1)).width):
        plane = Signal(width, name=f"{name}_bit{b}")
        m.d.comb += plane.eq(reduce(operator.or_, (mask for k, mask in enumerate(masks, 1)
                                                   if k >> b & 1), Const(0, width)))
        planes.append(plane)
    return planes


#: The storage of one lane for ``storage="verilog"``: a plain simple-dual-port RAM that starts at
#: zero, read old-data-first (not transparent), as :class:`amaranth.lib.memory.Memory` behaves.
#: Amaranth writes every initial word of a ``lib.memory`` into its Verilog, so a memory of
#: hundreds of kilobytes would make a Verilog file (and a Verilator build) of hundreds of
#: thousands of lines; this module keeps it to a loop. Append it to the design's Verilog.
LANE_RAM_VERILOG = """
module stepforge_lane_ram #(parameter WIDTH = 64, parameter DEPTH = 16, parameter AW = 4,
                            parameter SYNC = 1) (
  input clk,
  input [AW-1:0] raddr, output [WIDTH-1:0] rdata,
  input [AW-1:0] waddr, input [WIDTH-1:0] wdata, input we);
  reg [WIDTH-1:0] mem [0:DEPTH-1];
  reg [WIDTH-1:0] rdata_q;
  integer i;
  initial begin
    for (i = 0; i < DEPTH; i = i + 1) mem[i] = {WIDTH{1'b0}};
    rdata_q = {WIDTH{1'b0}};
  end
  always @(posedge clk) begin
    if (we) mem[waddr] <= wdata;
    rdata_q <= mem[raddr];
  end
  assign rdata = SYNC ? rdata_q : mem[raddr];
endmodule
"""


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
        Width of a request's ``count`` and ``rows``: at most ``2**count_bits - 1`` words per
        segment and segments per burst.
    max_segments : int, default 8
        At most this many segments share a line (the hardware compares every lane with this
        many segments; the effective limit is ``min(lanes, max_segments)``).
    """

    word_bytes: int
    channels: int
    bytes_per_channel: int
    latency: int
    size_words: int
    count_bits: int = 16
    max_segments: int = 8

    def __post_init__(self):
        _pos_int("MemoryGeometry.word_bytes", self.word_bytes)
        _pos_int("MemoryGeometry.channels", self.channels)
        _pos_int("MemoryGeometry.bytes_per_channel", self.bytes_per_channel)
        _pos_int("MemoryGeometry.latency", self.latency, 0)
        _pos_int("MemoryGeometry.size_words", self.size_words)
        _pos_int("MemoryGeometry.count_bits", self.count_bits)
        _pos_int("MemoryGeometry.max_segments", self.max_segments)
        if self.bytes_per_channel % self.word_bytes:
            raise ValueError(f"MemoryGeometry: word_bytes {self.word_bytes} does not divide "
                             f"bytes_per_channel {self.bytes_per_channel}")

    @classmethod
    def from_config(cls, config, size_bytes, *, word_bytes=None, count_bits=16, max_segments=8):
        """The geometry of a memory of ``size_bytes`` for ``config``.

        Parameters
        ----------
        config : HardwareConfig
        size_bytes : int
            Capacity, rounded up to whole words.
        word_bytes : int, optional
            Default ``gcd(config.mem_bytes_per_channel, config.tile_cols * bytes(config.dtype))``.
        count_bits, max_segments : int
            See the class.

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
                   size_words=-(-size_bytes // word_bytes), count_bits=count_bits,
                   max_segments=max_segments)

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
        """``StructLayout({"addr", "count", "rows", "stride"})`` of a burst (module doc)."""
        return data.StructLayout({"addr": unsigned(self.addr_bits),
                                  "count": unsigned(self.count_bits),
                                  "rows": unsigned(self.count_bits),
                                  "stride": unsigned(self.addr_bits)})

    @property
    def pack_limit(self):
        """Segments that may share a line: ``min(lanes, max_segments)``."""
        return min(self.lanes, self.max_segments)

    def segments_per_line(self, count, stride):
        """How many whole segments of ``count`` words, ``stride`` apart, one line can take."""
        L = self.lanes
        if count > L or count == 0:
            return 1
        taken = set(range(count))            # lanes relative to segment 0's first word
        m = 1
        for k in range(1, self.pack_limit):
            if (k + 1) * count > L:
                break
            lanes = {(k * stride + o) % L for o in range(count)}
            if lanes & taken:
                break
            taken |= lanes
            m += 1
        return m

    def burst_lines(self, count, rows=1, stride=0):
        """Word counts of the lines of a burst (module doc); ``[]`` when ``count`` is 0."""
        rows = max(rows, 1)
        L = self.lanes
        if count == 0:
            return []
        if count > L:
            return [min(L, count - i) for _ in range(rows) for i in range(0, count, L)]
        m = self.segments_per_line(count, stride)
        return [min(m, rows - r) * count for r in range(0, rows, m)]

    @property
    def line_layout(self):
        """``ArrayLayout(unsigned(8 * word_bytes), lanes)``: one line of words."""
        return data.ArrayLayout(unsigned(self.word_bits), self.lanes)

    def lines(self, count, rows=1, stride=0):
        """Lines (cycles of the memory) that a burst takes."""
        return len(self.burst_lines(count, rows, stride))

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
    granted. Each lane chooses among ``pack_limit`` segments of the granted burst and each word of
    the response line among the ``lanes`` lanes, so the datapath grows as ``lanes x pack_limit``
    and ``lanes ** 2``: a simulation model first (on a board the same port fronts block RAM).
    A burst must lie inside the memory (the off-chip units check their tensors when they are
    built); words past the end wrap around.

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
    count_bits, max_segments : int
        See :class:`MemoryGeometry`.
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
    def __init__(self, config, size_bytes, init=None, *, storage="amaranth", read_ports=1, write_ports=1,
                 word_bytes=None, count_bits=16, max_segments=8, counter_bits=48):
        self.config = config
        self.geometry = g = MemoryGeometry.from_config(config, size_bytes, word_bytes=word_bytes,
                                                       count_bits=count_bits,
                                                       max_segments=max_segments)
        self._size_bytes = size_bytes
        if storage not in ("amaranth", "verilog"):
            raise ValueError(f"MemoryModel storage must be 'amaranth' or 'verilog', not {storage!r}")
        if storage == "verilog" and init:
            raise ValueError("MemoryModel: storage='verilog' starts at zero; fill it through the "
                             "debug port instead of init")
        self.storage = storage
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
        # without init the storage starts at zero: no per-word initial values (they would make the
        # Verilog, and its conversion time, grow with the memory's size)
        lane_init = (self.lane_words(self._init_bytes) if self._init_bytes
                     else [[] for _ in range(g.lanes)])
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

    def _verilog_lane(self, m, j, lat):
        """Lane ``j`` as an instance of :data:`LANE_RAM_VERILOG` (``storage="verilog"``)."""
        g = self.geometry
        aw = max(1, ceil_log2(g.rows))
        rd = SimpleNamespace(addr=Signal(aw, name=f"lane{j}_raddr"),
                             data=Signal(g.word_bits, name=f"lane{j}_rdata"))
        wr = SimpleNamespace(addr=Signal(aw, name=f"lane{j}_waddr"),
                             data=Signal(g.word_bits, name=f"lane{j}_wdata"),
                             en=Signal(name=f"lane{j}_we"))
        m.submodules[f"lane{j}"] = Instance(
            "stepforge_lane_ram", p_WIDTH=g.word_bits, p_DEPTH=g.rows, p_AW=aw,
            p_SYNC=int(lat >= 1), i_clk=ClockSignal(), i_raddr=rd.addr, o_rdata=rd.data,
            i_waddr=wr.addr, i_wdata=wr.data, i_we=wr.en)
        return rd, wr

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
                f"max_segments={self.geometry.max_segments}, counter_bits={self.counter_bits})")

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        L, W, K = g.lanes, g.word_bytes, g.pack_limit
        lat = g.latency
        A = g.addr_bits
        row_shape = unsigned(max(1, ceil_log2(g.rows + 1)))
        nr, nw = self.read_ports, self.write_ports
        clients = [self.read[i] for i in range(nr)] + [self.write[i] for i in range(nw)]
        n = len(clients)

        # Per-client burst state: the current segment's first word and the words of it done,
        # the segment length, the segments left (>= 1 while active) and the stride.
        active = [Signal(name=f"c{c}_active") for c in range(n)]
        seg = [Signal(A, name=f"c{c}_seg") for c in range(n)]
        off = [Signal(g.count_bits, name=f"c{c}_off") for c in range(n)]
        size = [Signal(g.count_bits, name=f"c{c}_count") for c in range(n)]
        segs = [Signal(g.count_bits, name=f"c{c}_segs") for c in range(n)]
        stride = [Signal(A, name=f"c{c}_stride") for c in range(n)]

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

        # The granted burst's line: segment 0 from its current word, then whole segments.
        g_seg = Signal(A, name="g_seg")
        g_off = Signal(g.count_bits, name="g_off")
        g_size = Signal(g.count_bits, name="g_size")
        g_segs = Signal(g.count_bits, name="g_segs")
        g_stride = Signal(A, name="g_stride")
        g_left = Signal(g.count_bits, name="g_left")
        seg_done = Signal(name="g_seg_done")
        c0 = Signal(range(L + 1), name="g_first")
        m.d.comb += [
            g_seg.eq(_pick(seg, grant_to)), g_off.eq(_pick(off, grant_to)),
            g_size.eq(_pick(size, grant_to)), g_segs.eq(_pick(segs, grant_to)),
            g_stride.eq(_pick(stride, grant_to)),
            g_left.eq(g_size - g_off),
            seg_done.eq(g_left <= L),
            c0.eq(Mux(seg_done, g_left, L)),
        ]
        starts = [Signal(A, name="g_start0")] + [Signal(A, name=f"g_start{k}") for k in range(1, K)]
        m.d.comb += starts[0].eq(g_seg + g_off)
        for k in range(1, K):
            m.d.comb += starts[k].eq(g_seg + k * g_stride)
        seg_lane = [Signal(index_shape(L), name=f"g_lane{k}") for k in range(K)]
        seg_row = [Signal(row_shape, name=f"g_row{k}") for k in range(K)]
        for k in range(K):
            m.d.comb += [seg_lane[k].eq(starts[k] % L), seg_row[k].eq(starts[k] // L)]

        # Lanes each segment would use (a mask: segment k's `n` words from its start lane on,
        # wrapping around the line), and the conflict-free prefix of segments taken.
        use, lows = [], []
        for k in range(K):
            n_k = c0 if k == 0 else g_size
            words = Signal(range(L + 1), name=f"g_words{k}")
            low = Signal(L, name=f"g_low{k}")
            u = Signal(L, name=f"g_use{k}")
            m.d.comb += [words.eq(Mux(n_k >= L, L, n_k)),
                         low.eq((Const(1, 1) << words) - 1),
                         u.eq((Cat(low, low) << seg_lane[k])[L:2 * L])]
            use.append(u)
            lows.append(low)
        taken = [Const(1)]
        occupied = use[0]
        for k in range(1, K):
            t = Signal(name=f"g_take{k}")
            m.d.comb += t.eq(taken[-1] & seg_done & (g_segs > k) & ((k + 1) * g_size <= L)
                             & ((use[k] & occupied) == 0))
            occ = Signal(L, name=f"g_occupied{k}")
            m.d.comb += occ.eq(occupied | Mux(t, use[k], 0))
            taken.append(t)
            occupied = occ
        extra = Signal(range(K), name="g_extra")               # whole segments after segment 0
        g_count = Signal(range(L + 1), name="g_count")
        g_adv = Signal(A, name="g_advance")                     # to the next segment's start
        m.d.comb += [
            extra.eq(sum(taken[1:]) if K > 1 else 0),
            g_count.eq(c0 + sum(Mux(taken[k], g_size, 0) for k in range(1, K))),
            g_adv.eq(sum(Mux(taken[k], g_stride, 0) for k in range(K))),
        ]
        g_write = Signal(name="g_write")
        g_last = Signal(name="g_last")
        m.d.comb += [g_write.eq(grant & (grant_to >= nr)),
                     g_last.eq(seg_done & (g_segs == 1 + extra))]

        # What each lane does: its row, whether it moves a word, and that word's line position.
        # A lane belongs to the taken segment that uses it (taken segments use disjoint lanes),
        # else to segment 0; `owner` holds that segment's number, one bit-plane per mask.
        pos_bits = Shape.cast(index_shape(L)).width
        own = [Signal(L, name=f"g_own{k}") for k in range(1, K)]
        m.d.comb += [own[k - 1].eq(Mux(taken[k], use[k], 0)) for k in range(1, K)]
        owner = _segment_planes(m, own, L, "g_owner")
        lane_use = Signal(L, name="lane_use")
        m.d.comb += lane_use.eq(Mux(grant, occupied, 0))
        # the line position of segment k's first word, and the rotation that maps its lanes to
        # line positions: a word of segment k in lane j sits at position (j - rot[k]) mod L, and
        # position i of segment k comes from lane (i + rot[k]) mod L (the positions of a taken
        # segment stay below L, so the rotation needs no carry into base)
        base = [Signal(pos_bits, name=f"g_base{k}") for k in range(K)]
        m.d.comb += [base[k].eq(k * g_size) for k in range(1, K)]
        rot = [Signal(index_shape(L), name=f"g_rot{k}") for k in range(K)]
        m.d.comb += rot[0].eq(seg_lane[0])
        m.d.comb += [rot[k].eq(Mux(seg_lane[k] >= base[k], seg_lane[k] - base[k],
                                   seg_lane[k] + L - base[k])) for k in range(1, K)]
        lane_pos = [Signal(index_shape(L), name=f"lane{j}_pos") for j in range(L)]
        lane_row = [Signal(row_shape, name=f"lane{j}_row") for j in range(L)]
        for j in range(L):
            k_j = Signal(index_shape(K), name=f"lane{j}_segment")       # the segment it serves
            start = Signal(index_shape(L), name=f"lane{j}_start")      # that segment's start lane
            here = Signal(name=f"lane{j}_here")                         # in the start lane's row
            row = Signal(row_shape, name=f"lane{j}_seg_row")            # the start lane's row
            lane_rot = Signal(index_shape(L), name=f"lane{j}_rot")      # that segment's rotation
            m.d.comb += [k_j.eq(Cat(*(plane[j] for plane in owner))),
                         start.eq(_pick(seg_lane, k_j)),
                         here.eq(start <= j if j < L - 1 else 1),     # start <= L - 1 always
                         row.eq(_pick(seg_row, k_j)),
                         lane_rot.eq(_pick(rot, k_j)),
                         lane_pos[j].eq(Mux(j >= lane_rot, j - lane_rot, j + L - lane_rot)
                                        if j < L - 1 else j - lane_rot),      # rot <= L - 1
                         lane_row[j].eq(Mux(here, row, row + 1))]

        for c, port in enumerate(clients):
            mine = Signal(name=f"c{c}_granted")
            m.d.comb += mine.eq(grant & (grant_to == c))
            m.d.comb += port.req.ready.eq(~active[c] | (mine & g_last))
            if c >= nr:
                m.d.comb += port.data.ready.eq(mine)
            with m.If(mine):
                with m.If(seg_done):
                    m.d.sync += [off[c].eq(0), seg[c].eq(seg[c] + g_adv),
                                 segs[c].eq(segs[c] - 1 - extra)]
                    with m.If(g_last):
                        m.d.sync += active[c].eq(0)
                with m.Else():
                    m.d.sync += off[c].eq(off[c] + L)
            with m.If(port.req.valid & port.req.ready):
                r = port.req.payload
                m.d.sync += [
                    active[c].eq(r.count != 0),
                    seg[c].eq(r.addr), off[c].eq(0), size[c].eq(r.count),
                    segs[c].eq(Mux(r.rows == 0, 1, r.rows)), stride[c].eq(r.stride),
                ]

        # Debug port decode.
        dbg_row = Signal(row_shape, name="dbg_row")
        dbg_lane = Signal(index_shape(L), name="dbg_lane")
        m.d.comb += [dbg_row.eq(self.debug.addr // L), dbg_lane.eq(self.debug.addr % L)]

        # Storage lanes.
        wline = [Signal(g.word_bits, name=f"wline{i}") for i in range(L)]
        if nw:
            # the granted write client's line (a chain of word-wide multiplexers: a line is too
            # wide for _pick); an index past the last client picks the last one
            wsel = Signal(index_shape(nw), name="wsel")
            sel_line = Signal(g.line_layout, name="wsel_line")
            picked = self.write[nw - 1].data.payload.as_value()
            for i in reversed(range(nw - 1)):
                picked = Mux(wsel == i, self.write[i].data.payload.as_value(), picked)
            m.d.comb += [wsel.eq(grant_to - nr), sel_line.eq(picked)]
            for i in range(L):
                m.d.comb += wline[i].eq(sel_line[i])
        rdata = []
        for j in range(L):
            if self.storage == "verilog":
                rd, wr = self._verilog_lane(m, j, lat)
            else:
                m.submodules[f"lane{j}"] = mem = Memory(self.lane_data[j])
                wr = mem.write_port()
                rd = mem.read_port(domain="sync" if lat >= 1 else "comb")
            with m.If(debug_access):
                m.d.comb += [rd.addr.eq(dbg_row), wr.addr.eq(dbg_row),
                             wr.data.eq(self.debug.wdata),
                             wr.en.eq(self.debug.we & (dbg_lane == j))]
            with m.Else():
                m.d.comb += [rd.addr.eq(lane_row[j]), wr.addr.eq(lane_row[j]),
                             wr.data.eq(_pick(wline, lane_pos[j])),
                             wr.en.eq(lane_use[j] & g_write)]
            rdata.append(rd.data)

        # Read response pipeline: metadata (and, after the storage, the gathered line).
        def meta(name):
            return {"valid": Signal(name=f"{name}_valid"),
                    "client": Signal(index_shape(n), name=f"{name}_client"),
                    "count": Signal(range(L + 1), name=f"{name}_count"),
                    "last": Signal(name=f"{name}_last"),
                    "words": Signal(L, name=f"{name}_words"),
                    "src": Signal(data.ArrayLayout(index_shape(L), L), name=f"{name}_src")}

        # Where each word of the granted line comes from, decided at the grant (narrow logic, so
        # the gather after the storage is one word-wide select per word): the line's words are
        # positions 0..g_count-1; segment k >= 1 holds positions base[k]..base[k]+g_size-1 (its
        # mask, `low` shifted to base[k]), segment 0 the positions below base[1]; position i of
        # segment k comes from lane (i + rot[k]) mod L.
        wown = [Signal(L, name=f"g_word_own{k}") for k in range(1, K)]
        m.d.comb += [wown[k - 1].eq(Mux(taken[k], lows[k] << base[k], 0)) for k in range(1, K)]
        word_owner = _segment_planes(m, wown, L, "g_word_owner")
        m0 = meta("grant")
        m.d.comb += [m0["valid"].eq(grant & ~g_write), m0["client"].eq(grant_to),
                     m0["count"].eq(g_count), m0["last"].eq(g_last),
                     m0["words"].eq(Mux(grant, (Const(1, 1) << g_count) - 1, 0))]
        for i in range(L):
            k_i = Signal(index_shape(K), name=f"g_word{i}_segment")
            r_i = Signal(index_shape(L), name=f"g_word{i}_rot")
            m.d.comb += [k_i.eq(Cat(*(plane[i] for plane in word_owner))),
                         r_i.eq(_pick(rot, k_i)),
                         m0["src"][i].eq(Mux(r_i >= L - i, r_i - (L - i), r_i + i)
                                         if i else r_i)]
        cur = m0
        if lat >= 1:
            nxt = meta("s1")
            m.d.sync += [nxt[k].eq(cur[k]) for k in cur]
            cur = nxt
        # Gather: word i of the line is lane src[i]'s word (zero past the line's words).
        line = Signal(g.line_layout, name="resp_line0")
        m.d.comb += [line[i].eq(Mux(cur["words"][i], _pick(rdata, cur["src"][i]), 0))
                     for i in range(L)]
        for s in range(2, lat + 1):
            nxt = meta(f"s{s}")
            nline = Signal(g.line_layout, name=f"resp_line{s - 1}")
            m.d.sync += [nxt[k].eq(cur[k]) for k in cur if k not in ("words", "src")]
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
    """Where a 2-D row-major tensor lives in memory, and the burst that moves one of its tiles.

    The tensor starts at word address ``base``; element ``(r, c)`` is at byte
    ``base * word_bytes + (r * cols + c) * bytes(dtype)``. Its ``tr x tc`` tiles are numbered
    row-major over the tile grid (linear tile index ``k = i * (cols / tc) + j``, as in
    :mod:`stepforge.compiler.ops.offchip`). A tile moves as **one burst**: ``tr`` segments of
    ``tc * bytes(dtype)`` bytes (one per tile row), a tensor row apart, or a single segment of the
    whole tile when its rows are contiguous (the tile spans the full tensor width, ``tc == cols``).
    Either way exactly ``bytes(tile)`` bytes move per tile; :attr:`tile_lines` lists the words of
    each line of that burst (the memory's cycles per tile when it serves this client alone).

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
    pitch : int, optional
        Words from one tensor row to the next (default: the row's own words). A padded pitch
        with ``pitch % lanes == tile row words`` puts the rows of a tile in distinct memory lanes,
        so a tile moves in one line instead of one line per row (the lowering chooses it).

    Raises
    ------
    ValueError
        The tile does not divide the tensor, a tile row is not a whole number of words, or the
        tensor does not fit the memory.
    """

    def __init__(self, geometry, dtype, shape, tile, base=0, pitch=None):
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
        natural = cols * nb // geometry.word_bytes
        if pitch is not None and (isinstance(pitch, bool) or not isinstance(pitch, int)
                                  or pitch < natural):
            raise ValueError(f"the pitch of a tensor row must be an int >= its {natural} words, "
                             f"not {pitch!r}")
        #: Words from one tensor row to the next in memory (the row's words, plus padding).
        self.pitch = natural if pitch is None else pitch
        self.tensor_row_words = self.pitch
        self.grid = (rows // tr, cols // tc)
        self.contiguous = tc == cols and self.pitch == natural
        self.tile_words = tr * self.row_words
        #: The burst of one tile: segment length, segments, stride (words).
        if self.contiguous:
            self.burst_words, self.burst_rows, self.burst_stride = self.tile_words, 1, 0
        else:
            self.burst_words, self.burst_rows, self.burst_stride = (self.row_words, tr,
                                                                    self.tensor_row_words)
        #: Word counts of the lines of one tile's burst.
        self.tile_lines = geometry.burst_lines(self.burst_words, self.burst_rows,
                                               self.burst_stride)
        #: Address step between horizontally / vertically adjacent tiles.
        self.col_step = self.row_words
        self.row_step = tr * self.tensor_row_words
        self.words = rows * self.pitch
        if self.base + self.words > geometry.size_words:
            raise ValueError(f"tensor {self.shape} of {dtype!r} ({self.words} words at {self.base}) "
                             f"does not fit the memory's {geometry.size_words} words")
        if max(self.burst_words, self.burst_rows) >= 1 << geometry.count_bits:
            raise ValueError(f"a burst of {self.burst_rows} x {self.burst_words} words does not "
                             f"fit count_bits={geometry.count_bits}")

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

    def burst(self, k):
        """The request ``(addr, count, rows, stride)`` that moves tile ``k``."""
        return (self.tile_addr(k), self.burst_words, self.burst_rows, self.burst_stride)

    def request(self, m, port, addr):
        """Drive ``port.req.payload`` (comb) with the burst of the tile at word ``addr``."""
        p = port.req.payload
        m.d.comb += [p.addr.eq(addr), p.count.eq(self.burst_words), p.rows.eq(self.burst_rows),
                     p.stride.eq(self.burst_stride)]

    def __repr__(self):
        base = f", base={self.base}" if self.base else ""
        natural = self.shape[1] * self.dtype.nbytes // self.geometry.word_bytes
        pitch = f", pitch={self.pitch}" if self.pitch != natural else ""
        return (f"TensorPlacement({self.geometry!r}, {self.dtype!r}, {self.shape}, {self.tile}"
                f"{base}{pitch})")


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
