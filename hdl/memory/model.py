"""The memory: banked lanes behind a pipelined arbiter, one line per cycle (package doc)."""

from amaranth.hdl import Array, Cat, MemoryData, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..config import HardwareConfig
from ..flags import accumulate_split
from .arbiter import RoundRobin, select_onehot
from .geometry import MemoryGeometry, check_count, index_shape, quiet_on_error
from .lane_ram import LaneRAM, organize
from .lines import LineGenerator, LineLayout, fixed_sel
from .port import DebugSignature, client_ports, client_shapes

__all__ = ["MemoryModel", "PIPELINE_LATENCY"]

#: Cycles from a line's grant to its data on ``resp`` without added delay, for lanes of one
#: block RAM bank: the granted line's register, the lane RAM's read (2,
#: :class:`~stepforge.hdl.memory.lane_ram.LaneOrganization`), the gathered line's register. A
#: lane of several banks adds two, its input stage and its bank multiplexer
#: (:attr:`MemoryModel.pipeline_latency`).
PIPELINE_LATENCY = 4


def _pick(values, index):
    """``values[index]`` for values of one width, as a case statement (padded with the last)."""
    values = list(values)
    if all(v is values[0] for v in values):
        return values[0]
    values += [values[-1]] * ((1 << len(index)) - len(values))
    return Array(values)[index]


def _register(m, values, prefix, flags=("valid", "word_re")):
    """Registers holding ``values`` (a dict of values or views) one cycle later, by name. Only
    the ``flags`` are reset; the rest is data that matters only with a flag (no reset, so the
    flip-flops share their logic tiles' set/reset freely and the reset's fanout stays small)."""
    out = {name: Signal(v.shape(), name=f"{prefix}_{name}", reset_less=name not in flags)
           for name, v in values.items()}
    m.d.sync += [out[name].eq(v) for name, v in values.items()]
    return out


class MemoryModel(wiring.Component):
    """A banked, pipelined memory with one burst port per client (package doc).

    Parameters
    ----------
    config : HardwareConfig
        ``mem_channels``, ``mem_bytes_per_channel`` and ``mem_latency`` shape the memory;
        ``mem_latency`` must be at least :attr:`pipeline_latency`.
    size_bytes : int
        Capacity (rounded up to whole words).
    init : bytes-like or sequence of int, optional
        Initial contents from byte address 0 (missing bytes are zero).
    storage : {"amaranth", "verilog"}
        See :class:`~stepforge.hdl.memory.lane_ram.LaneRAM`.
    read_ports, write_ports : sequence of (int, int, int) or (int, int, int, int)
        The burst shape ``(count, rows, stride)`` of each read and each write client, with the
        lane of its requests' first word appended when the client knows it
        (:attr:`MemoryPort.shape`).
    word_bytes : int, optional
        See :meth:`MemoryGeometry.from_config`.
    count_bits, max_segments : int
        See :class:`MemoryGeometry`.
    counter_bits : int, default 48
        Width of ``bytes_read`` and ``bytes_written`` (they wrap).

    Members
    -------
    read0, read1, ... : ``In(MemoryPort(geometry, "read", burst))``
        Read clients (also the list :attr:`read`).
    write0, write1, ... : ``In(MemoryPort(geometry, "write", burst))``
        Write clients (also the list :attr:`write`).
    debug : ``In(DebugSignature(geometry))``
        The word port (host access and the simulation's preload), :attr:`word_latency` cycles.
    stall : ``In(1)``
        No line is granted in a cycle where it is high (simulation: random contention).
    bytes_read, bytes_written : ``Out(counter_bits)``
        Bytes moved by granted client lines since reset (exact from two cycles after a
        line's grant: :func:`~stepforge.hdl.flags.accumulate_split`).
    """

    @quiet_on_error
    def __init__(self, config, size_bytes, init=None, *, storage="amaranth", read_ports=(),
                 write_ports=(), word_bytes=None, count_bits=16, max_segments=8, counter_bits=48):
        if not isinstance(config, HardwareConfig):
            raise TypeError(f"MemoryModel config must be a HardwareConfig, not {config!r}")
        self.config = config
        self.geometry = g = MemoryGeometry.from_config(config, size_bytes, word_bytes=word_bytes,
                                                       count_bits=count_bits,
                                                       max_segments=max_segments)
        g.lane_bits    # a power of two, or a ValueError naming the lanes
        #: How each lane is cut into block RAMs (:func:`~stepforge.hdl.memory.lane_ram.organize`).
        self.organization = organize(config.family, g.word_bits, g.rows)
        #: The least ``mem_latency`` this memory can have.
        self.pipeline_latency = 2 + self.organization.latency
        if g.latency < self.pipeline_latency:
            raise ValueError(f"MemoryModel latency must be >= {self.pipeline_latency} (its "
                             f"pipeline, with lanes of {self.organization.banks} block RAM "
                             f"bank(s)), not {g.latency}")
        self._size_bytes = size_bytes
        if storage not in ("amaranth", "verilog"):
            raise ValueError(f"MemoryModel storage must be 'amaranth' or 'verilog', not {storage!r}")
        if storage == "verilog" and init:
            raise ValueError("MemoryModel: storage='verilog' starts at zero; fill it through the "
                             "debug port instead of init")
        self.storage = storage
        self.read_ports, self.write_ports, members = client_ports(
            "MemoryModel", g, read_ports, write_ports)
        self.counter_bits = check_count("MemoryModel counter_bits", counter_bits)
        self._init_bytes = self._check_init(init, g)
        members.update({
            "debug": In(DebugSignature(g)),
            "stall": In(1),
            "bytes_read": Out(counter_bits),
            "bytes_written": Out(counter_bits),
        })
        super().__init__(members)
        #: The read and the write client ports, in order.
        self.read = [getattr(self, f"read{i}") for i in range(len(self.read_ports))]
        self.write = [getattr(self, f"write{i}") for i in range(len(self.write_ports))]
        # without init the storage starts at zero: no per-word initial values (they would make the
        # Verilog, and its conversion time, grow with the memory's size)
        lane_init = (self.lane_words(self._init_bytes) if self._init_bytes
                     else [[] for _ in range(g.lanes)])
        #: The storage of each lane (``MemoryData``, shared by every elaboration): the simulator's
        #: back door (:func:`backdoor_read`, :func:`backdoor_write`) reaches the words through it.
        self.lane_data = [MemoryData(shape=unsigned(g.word_bits), depth=g.rows, init=lane_init[j])
                          for j in range(g.lanes)]

    @classmethod
    def for_clients(cls, config, size_bytes, clients, init=None, **kwargs):
        """A memory with a port for each of ``clients``, in order (read and write ports apart).

        ``clients`` are components with a ``mem`` port of :class:`MemoryPort` (the off-chip
        units, host-stream readers and writers) or :class:`MemoryPort` signatures;
        ``kwargs`` go to the constructor.
        """
        return cls(config, size_bytes, init, **client_shapes(clients), **kwargs)

    #: Register stages of a word port access in front of the arbiter (stage W).
    word_stages = 1

    @property
    def word_latency(self):
        """Cycles from a word port read to its ``rdata``: a line's latency and the access's
        own register stage (:attr:`word_stages`) in front of the arbiter."""
        return self.geometry.latency + self.word_stages

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
                f"storage={self.storage!r}, read_ports={list(self.read_ports)!r}, "
                f"write_ports={list(self.write_ports)!r}, word_bytes={self.geometry.word_bytes}, "
                f"count_bits={self.geometry.count_bits}, "
                f"max_segments={self.geometry.max_segments}, counter_bits={self.counter_bits})")

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        L, W = g.lanes, g.word_bytes
        nr = len(self.read)
        clients = self.read + self.write
        n = len(clients)
        line_layout = LineLayout(g)

        # -- lines of each client's bursts, and the arbiter --------------------------------------
        gens = []
        for c, port in enumerate(clients):
            m.submodules[f"lines{c}"] = gen = LineGenerator(port.signature.flip())
            wiring.connect(m, wiring.flipped(port.req), gen.req)
            gens.append(gen)
        m.submodules.arbiter = arb = RoundRobin(n)
        # -- stage W: a word port access waits a cycle in registers, so the cycle it takes from
        # the clients is told by a register (the port's ``we``/``re`` were two LUT levels of the
        # grant into stage S, the worst iCE40 memory path)
        dbg = self.debug
        w_we = Signal(name="w_word_we")
        w_re = Signal(name="w_word_re")
        w_access = Signal(name="w_word_access")
        w_addr = Signal.like(dbg.addr, name="w_word_addr", reset_less=True)
        w_wdata = Signal.like(dbg.wdata, name="w_word_wdata", reset_less=True)
        m.d.sync += [w_we.eq(dbg.we), w_re.eq(dbg.re & ~dbg.we), w_access.eq(dbg.we | dbg.re),
                     w_addr.eq(dbg.addr), w_wdata.eq(dbg.wdata)]
        m.d.comb += arb.enable.eq(~self.stall & ~w_access)
        for c, (port, gen) in enumerate(zip(clients, gens)):
            ok = gen.line.valid if c < nr else gen.line.valid & port.data.valid
            granted = Signal(name=f"c{c}_granted")
            m.d.comb += [arb.requests[c].eq(ok), granted.eq(arb.onehot[c]),
                         gen.line.ready.eq(granted)]
            if c >= nr:
                m.d.comb += port.data.ready.eq(granted)

        # -- stage S: the granted line (or a word port access) -----------------------------------
        s_valid = Signal(name="s_valid")
        s_write = Signal(name="s_write")
        # (what goes with ``s_valid`` or a word access is data: no reset)
        s_client = Signal(index_shape(n), name="s_client", reset_less=True)
        s_line = Signal(line_layout, name="s_line", reset_less=True)
        s_data = Signal(g.line_layout, name="s_wdata", reset_less=True)
        s_dbg_we = Signal(name="s_word_we")
        s_dbg_re = Signal(name="s_word_re")
        s_dbg_lane = Signal(index_shape(L), name="s_word_lane", reset_less=True)
        s_dbg_row = Signal(len(s_line.rows[0]), name="s_word_row", reset_less=True)
        s_dbg_word = Signal(g.word_bits, name="s_word_wdata", reset_less=True)
        m.d.sync += [s_valid.eq(arb.grant), s_write.eq(arb.index >= nr), s_client.eq(arb.index),
                     # (the line steers by the choice: ``s_line`` matters only with ``s_valid``)
                     s_line.eq(select_onehot([gen.line.payload.as_value() for gen in gens],
                                             arb.choice)),
                     s_dbg_we.eq(w_we), s_dbg_re.eq(w_re),
                     s_dbg_lane.eq(w_addr[:g.lane_bits] if g.lane_bits else 0),
                     s_dbg_row.eq(w_addr[g.lane_bits:]), s_dbg_word.eq(w_wdata)]
        # A client whose lines always route word k to the same lane (a fixed ``sel``,
        # :func:`~stepforge.hdl.memory.lines.fixed_sel`) needs no crossbar: when every write
        # client has one, ``s_wdata`` holds the words already in lane order and each lane takes
        # its own word (one multiplexer by client instead of one by ``sel`` in every lane).
        ports = [gen.port for gen in gens]
        wsel = [fixed_sel(port) for port in ports[nr:]]
        wfixed = bool(self.write) and all(sel is not None for sel in wsel)
        if self.write:
            wgrant = arb.choice[nr:]          # (``s_wdata`` matters only with ``s_valid``)
            if wfixed:
                m.d.sync += [s_data[j].eq(select_onehot([p.data.payload[sel[j]] for p, sel
                                                         in zip(self.write, wsel)], wgrant))
                             for j in range(L)]
            else:
                m.d.sync += s_data.eq(select_onehot([p.data.payload.as_value()
                                                     for p in self.write], wgrant))

        rdata = []
        for j in range(L):
            m.submodules[f"lane{j}"] = ram = LaneRAM(self.lane_data[j], self.storage, self.config.family)
            word_j = s_dbg_lane == j
            m.d.comb += [
                ram.addr.eq(Mux(s_dbg_we | s_dbg_re, s_dbg_row, s_line.rows[j])),
                ram.we.eq((s_valid & s_write & s_line.use[j]) | (s_dbg_we & word_j)),
                ram.wdata.eq(Mux(s_dbg_we, s_dbg_word,
                                 s_data[j] if wfixed else _pick([s_data[i] for i in range(L)],
                                                                s_line.sel[j]))),
            ]
            rdata.append(ram.rdata)

        moved = Signal(range(L * W + 1), name="s_bytes")
        m.d.comb += moved.eq(s_line.count * W)
        # (two short carry chains: the high bits take the low half's carry a cycle later)
        accumulate_split(m, self.bytes_read, moved, s_valid & ~s_write)
        accumulate_split(m, self.bytes_written, moved, s_valid & s_write)

        # -- stage M: the lanes' words arrive; gather the response line --------------------------
        # the granted line's description follows its words through the lane RAMs
        meta = {"valid": s_valid & ~s_write, "client": s_client, "count": s_line.count,
                "last": s_line.last, "sel": s_line.sel, "word_re": s_dbg_re,
                "word_lane": s_dbg_lane}
        for k in range(self.organization.latency):
            meta = _register(m, meta, f"m{k}")
        m_valid, m_client, m_count, m_last = (meta[k] for k in ("valid", "client", "count", "last"))
        m_sel, m_dbg_re, m_dbg_lane = meta["sel"], meta["word_re"], meta["word_lane"]
        gathered = Signal(g.line_layout, name="m_line")
        # words past ``count`` are whatever lane their ``sel`` names: clients read only
        # ``count`` words, so no masking logic (128 LUT4 for 4 lanes of 32 bits on ECP5); when
        # every read client has a fixed ``sel``, word i comes from a lane chosen by the client
        rsel = [fixed_sel(port) for port in ports[:nr]]
        if rsel and all(sel is not None for sel in rsel):
            m.d.comb += [gathered[i].eq(_pick([rdata[sel[i]] for sel in rsel], m_client))
                         for i in range(L)]
        else:
            m.d.comb += [gathered[i].eq(_pick(rdata, m_sel[i])) for i in range(L)]

        # -- stage R (and the added latency): the response ---------------------------------------
        m_word = Signal(g.word_bits, name="m_word")
        m.d.comb += m_word.eq(_pick(rdata, m_dbg_lane))

        # the response's valid is decoded for each read client before stage R's register, so a
        # client's ``resp.valid`` is a flip-flop (the client index's comparison behind the
        # register was the first LUT of the loads' tile-buffer writes: SwiGLU I=256's worst
        # paths on the ECP5 after the PMU's, 9.3-9.6 ns)
        resp_valid = Signal(max(nr, 1), name="m_resp_valid")
        m.d.comb += resp_valid.eq(Cat(*(m_valid & (m_client == c) for c in range(nr))))
        r = _register(m, {"valid": resp_valid, "count": m_count, "last": m_last,
                          "line": gathered, "word_re": m_dbg_re, "word": m_word}, "r0")
        for k in range(1, g.latency - self.pipeline_latency + 1):
            r = _register(m, r, f"r{k}")
        for c, port in enumerate(self.read):
            m.d.comb += [port.resp.valid.eq(r["valid"][c]),
                         port.resp.count.eq(r["count"]), port.resp.last.eq(r["last"]),
                         port.resp.data.eq(r["line"])]
        m.d.comb += [dbg.rdata.eq(r["word"]), dbg.rvalid.eq(r["word_re"])]
        return m
