"""The system top: every unit of a program, a FIFO per stream, the memory, counters and a watchdog.

:class:`System` elaborates a :class:`~stepforge.compiler.lower.HardwareGraph`. Before ``start``
every unit and FIFO is held in reset (the memory is not, so the host can fill it through the
``debug`` back door). ``start`` releases them; the run ends when every sink (store, host-stream
writer, discard) is ``done``, when a unit raises its sticky ``error`` (its id and code are
latched), or when the watchdog sees no beat move on any FIFO and no memory line granted for
``watchdog`` cycles (``deadlock``). Counters stop with the run, so the CSRs read afterwards
describe it: total cycles, per-unit busy / input-stalled / output-stalled cycles, per-FIFO
high-water marks and levels, per-PMU block high-water marks, off-chip bytes, beats written per
output stream.

With a ``library`` (:class:`~stepforge.sim.rtl.separate.UnitLibrary`, the Verilog flow) every unit,
FIFO and the memory become instances of separately compiled, cached Verilog modules and only the
top's own logic is converted with it; without one (Amaranth's simulator) they are submodules.

Two targets come from one design (``target``). The **simulation** target (the default) has
everything that exists to test: random stall injection, the watchdog, per-unit busy/stall
counters, per-FIFO level and high-water registers and per-PMU block high-water registers. The
**board** target keeps what a host needs (``start``, ``running``/``done``/``error``, the error's
unit and code, the cycle counter, off-chip byte counters, beats per output stream, and the
memory's word port for loading and reading tensors) and drops the rest, so none of it costs area
or sits on a timing path. The units, and so the cycles, are the same.

``stall_enable`` (simulation target) turns on random back-pressure: every FIFO refuses its input in
about a quarter of the cycles and the memory grants nothing in about a quarter of the cycles, from
a free-running LFSR. Refusing ``ready`` is always legal, so the program's results must not change.
"""

from amaranth.hdl import C, Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .csr import CSRBank
from .fifo import StreamFIFO
from .flags import increment_split
from .memory import DebugSignature, MemoryModel
from .memory.sdram_memory import SDRAMMemory
from .sdram import MACHINE_SDRAM, SDRAMChipModel, SDRAMPinSignature
from .pmu import PMU
from .unit import ErrorCode

__all__ = ["System", "TARGETS", "MEMORY_UNIT"]

#: The SDRAM chip of a ``memory="sdram"`` machine (the ULX3S's, the bank on top of the address).
SDRAM_TIMING = MACHINE_SDRAM
#: The chip the simulation target's model checks the controller against (the same chip; a test
#: gives it stricter timings to see a violation reported).
SDRAM_MODEL_TIMING = MACHINE_SDRAM
#: ``error_unit`` of an error raised by the memory rather than a unit (``SDRAM_TIMING``).
MEMORY_UNIT = 0xFFFF
#: The SDRAM controller's power-up wait in the simulation target (the chip's 200 us would be
#: 20,000 cycles of every Verilator run; the chip model is told the same).
SIM_INIT_CYCLES = 16


def sdram_chip_model(hw, storage, init_cycles=None):
    """The SDRAM chip's model that a simulation of ``hw`` (a ``memory="sdram"`` machine) puts
    behind the controller: :data:`SDRAM_MODEL_TIMING` at the machine's clock, deep enough to
    keep apart every word the program's tensors and host streams occupy
    (:meth:`~stepforge.hdl.sdram.SDRAMChipModel.depth_for_words`: the rows they reach in any
    bank), with ``storage`` as :class:`System`'s and the controller's ``init_cycles``."""
    pieces = hw.geometry.word_bits // SDRAM_TIMING.data_bits    # chip words a memory word
    last = [(base + n) * pieces - 1 for base, n in hw.memory_extents() if n]
    return SDRAMChipModel(SDRAM_MODEL_TIMING, hw.config.clock_hz, init_cycles=init_cycles,
                          depth_words=SDRAMChipModel.depth_for_words(SDRAM_TIMING, last),
                          storage=storage)

#: The build targets of a :class:`System` (module doc).
TARGETS = ("sim", "board")


class System(wiring.Component):
    """One program as one synthesizable design (module doc).

    Parameters
    ----------
    hw : stepforge.compiler.lower.HardwareGraph
    storage : {"amaranth", "verilog"}
        The memory's storage (:class:`~stepforge.hdl.memory.MemoryModel`): ``"verilog"`` for
        Verilator builds (append :data:`~stepforge.hdl.memory.LANE_RAM_VERILOG` to the Verilog),
        ``"amaranth"`` for Amaranth's simulator. With ``memory="sdram"`` (simulation target)
        it is the SDRAM chip model's (append
        :data:`~stepforge.hdl.sdram.SDRAM_STORAGE_VERILOG` for ``"verilog"``).
    library : stepforge.sim.rtl.separate.UnitLibrary, optional
        Instantiate the units, FIFOs and memory as the library's separately compiled modules
        (their components are elaborated by the library) instead of as submodules.
    target : {"sim", "board"}, default "sim"
        The simulation target, or the board target without test-only logic (module doc).

    Members
    -------
    start : ``In(1)``
        Pulse (or hold) to start the run.
    stall_enable : ``In(1)``
        Simulation target only: random back-pressure on every FIFO input and on the memory.
    watchdog : ``In(32)``
        Simulation target only: cycles without progress that count as a deadlock (0 disables
        the watchdog).
    debug : ``In(DebugSignature(geometry))``
        The memory's word port (the host loads and reads tensors through it).
    debug_ready : ``Out(1)``
        With ``memory="sdram"`` only: the word port takes an access in this cycle
        (:class:`~stepforge.hdl.memory.sdram_memory.SDRAMMemory`; the host waits for it before
        each access).
    sdram : ``Out(SDRAMPinSignature)``
        With ``memory="sdram"``, board target only: the SDRAM chip's pins (the simulation
        target holds the chip's model, :class:`~stepforge.hdl.sdram.SDRAMChipModel`).
    csr_addr : ``In(16)``, csr_rdata : ``Out(32)``
        Read a CSR (one cycle of latency); :attr:`csr_map` gives the addresses.
    running, done, error, deadlock : ``Out(1)``
    """

    def __init__(self, hw, *, storage="amaranth", library=None, target="sim"):
        self.hw = hw
        self.storage = storage
        self.library = library
        self.target = target
        if target not in TARGETS:
            raise ValueError(f"System target must be one of {', '.join(map(repr, TARGETS))}, "
                             f"not {target!r}")
        g = hw.geometry
        members = {"start": In(1)}
        if target == "sim":
            members.update({"stall_enable": In(1), "watchdog": In(32)})
        members["debug"] = In(DebugSignature(g))
        if hw.config.memory == "sdram":
            members["debug_ready"] = Out(1)
            if target == "board":
                members["sdram"] = Out(SDRAMPinSignature.for_timing(SDRAM_TIMING))
        members.update({
            "csr_addr": In(16),
            "csr_rdata": Out(32),
            "running": Out(1),
            "done": Out(1),
            "error": Out(1),
            "deadlock": Out(1),
        })
        super().__init__(members)
        self._csr_names = None
        self._fifo_ports = {}     # edge id -> (FIFO input, FIFO output), for simulation probes
        self._memory = None
        self._beats_written = {}  # output stream name -> its writer's beat counter

    def __repr__(self):
        target = "" if self.target == "sim" else f", target={self.target!r}"
        return f"System({self.hw.program.name!r}{target})"

    @property
    def csr_map(self):
        """``{name: address}`` of every CSR (available after elaboration)."""
        if self._csr_names is None:
            raise RuntimeError("the CSR map is known once the system has been elaborated")
        return self._csr_names

    def _add(self, m, name, component, hold=None):
        """Add a unit, FIFO or the memory (held in reset while ``hold`` is high, if given)."""
        if self.library is not None:
            m.submodules[name] = self.library.instance(component, reset=hold)
        else:
            m.submodules[name] = component if hold is None else ResetInserter(hold)(component)

    def elaborate(self, platform):
        m = Module()
        hw = self.hw
        sim = self.target == "sim"
        reads = [(u, p) for u in hw.units for p, kind in u.memory if kind == "read"]
        writes = [(u, p) for u in hw.units for p, kind in u.memory if kind == "write"]

        def bursts(clients):
            return [getattr(u.component, p).signature.shape for u, p in clients]

        chip = None                  # the SDRAM chip's model (simulation target)
        ports = {"read_ports": bursts(reads) or ([] if writes else [(1, 1, 0)]),
                 "write_ports": bursts(writes), "word_bytes": hw.geometry.word_bytes}
        if hw.config.memory == "sdram":
            mem = SDRAMMemory(hw.config, hw.memory_bytes, timing=SDRAM_TIMING,
                              init_cycles=SIM_INIT_CYCLES if sim else None, **ports)
            self._add(m, "memory", mem)
            m.d.comb += self.debug_ready.eq(mem.debug_ready)
            if sim:
                chip = sdram_chip_model(hw, self.storage, SIM_INIT_CYCLES)
                self._add(m, "sdram_chip", chip)
                wiring.connect(m, mem.sdram, chip.pins)
            else:
                wiring.connect(m, mem.sdram, wiring.flipped(self.sdram))
        else:
            mem = MemoryModel(hw.config, hw.memory_bytes, storage=self.storage, **ports)
            self._add(m, "memory", mem)
        wiring.connect(m, wiring.flipped(self.debug), mem.debug)
        self._memory = mem

        started = Signal(name="started")
        running = Signal(name="running")
        done = Signal(name="done_flag")
        error = Signal(name="error_flag")
        deadlock = Signal(name="deadlock_flag")
        with m.If(self.start & ~started):
            m.d.sync += [started.eq(1), running.eq(1)]
        m.d.comb += [self.running.eq(running), self.done.eq(done), self.error.eq(error),
                     self.deadlock.eq(deadlock)]
        hold = ~started

        if sim:
            # free-running LFSR for the stall test mode
            lfsr = Signal(32, init=0xACE1_2468, name="lfsr")
            m.d.sync += lfsr.eq(Cat(lfsr[1:], lfsr[0] ^ lfsr[1] ^ lfsr[21] ^ lfsr[31]))
            m.d.comb += mem.stall.eq(self.stall_enable & lfsr[0] & lfsr[1])

        comps = {}
        for u in hw.units:
            comps[u.name] = u.component
            if not u.shared:
                self._add(m, f"u{u.uid}_{u.name}", u.component, hold)
        owners = [u for u in hw.units if not u.shared]
        for (u, p), port in zip(reads, mem.read if reads else []):
            _connect_memory(m, getattr(u.component, p), port, started)
        # (a write client offers a burst only with a beat of its input stream, which is empty
        # while the units are held: no gate on its request, the store's deepest path)
        for (u, p), port in zip(writes, mem.write if writes else []):
            _connect_memory(m, getattr(u.component, p), port, C(1, 1))

        moves = []      # a beat or a memory line moved: the watchdog's progress
        fifos = []
        for e in hw.edges:
            # deep FIFOs (sized for reconvergent forks) and wide ones on a device short of logic
            # go to block RAM (``EdgeInstance.buffered``, ``fifo_storage``)
            fifo = StreamFIFO(e.layout, e.depth, buffered=e.buffered, block_ram=e.block_ram,
                              counters=sim)
            self._add(m, f"f{e.eid}_{e.name.replace('.', '_')}", fifo, hold)
            fifos.append(fifo)
            self._fifo_ports[e.eid] = (fifo.i, fifo.o)
            src = hw.unit(e.src[0]).port(e.src[1])
            dst = hw.unit(e.dst[0]).port(e.dst[1])
            stall = Signal(name=f"f{e.eid}_stall")
            if sim:
                bits = [(e.eid * 7 + k) % 32 for k in (2, 3)]
                m.d.comb += stall.eq(self.stall_enable & lfsr[bits[0]] & lfsr[bits[1]])
            m.d.comb += [
                fifo.i.payload.eq(src.payload),
                fifo.i.valid.eq(src.valid & ~stall),
                src.ready.eq(fifo.i.ready & ~stall),
            ]
            wiring.connect(m, fifo.o, dst)
            moves += [src.valid & src.ready, fifo.o.valid & fifo.o.ready]

        sinks = [comps[u.name].done for u in hw.units if u.sink]
        all_done = Signal(name="all_sinks_done")
        m.d.comb += all_done.eq(Cat(*sinks).all() if sinks else 1)

        any_error = Signal(name="any_error")
        # the SDRAM chip's model (simulation target) flags a broken timing rule as an error of
        # the memory: a design that would fail on the chip does not pass in simulation.
        # The units' sticky flags wait a cycle in registers: the OR over every unit was three
        # LUT levels in front of the run's state (the worst iCE40 CSR paths); the run stops
        # one cycle after the first error, naming the unit and code as before.
        errors = Signal(len(owners) + 1, name="unit_errors")
        chip_violation = chip.violation if chip is not None else C(0, 1)
        m.d.sync += errors.eq(Cat(*[u.component.status.error for u in owners], chip_violation))
        m.d.comb += any_error.eq(errors.any())
        error_unit = Signal(16, name="error_unit")
        error_code = Signal(8, name="error_code")
        cycles = Signal(32, name="cycles")
        if sim:
            # the watchdog: cycles of the run without progress
            bytes_prev = Signal(48, name="bytes_prev")
            progress = Signal(name="progress")
            idle = Signal(32, name="idle_cycles")
            m.d.sync += bytes_prev.eq(mem.bytes_read + mem.bytes_written)
            m.d.comb += progress.eq(Cat(*moves, bytes_prev != mem.bytes_read + mem.bytes_written)
                                    .any())
            with m.If(running):
                m.d.sync += idle.eq(Mux(progress, 0, idle + 1))

        increment_split(m, cycles, running)
        with m.If(running):
            with m.If(any_error):
                m.d.sync += [error.eq(1), running.eq(0)]
                with m.If(errors[-1]):       # (a unit's error below wins over the memory's)
                    m.d.sync += [error_unit.eq(MEMORY_UNIT),
                                 error_code.eq(ErrorCode.SDRAM_TIMING)]
                # (the lowest unit id wins among simultaneous errors)
                for u, flag in reversed(list(zip(owners, errors))):
                    with m.If(flag):
                        m.d.sync += [error_unit.eq(u.uid), error_code.eq(comps[u.name].status.code)]
            with m.Elif(all_done):
                m.d.sync += [done.eq(1), running.eq(0)]
            if sim:
                with m.Elif((self.watchdog != 0) & (idle >= self.watchdog)):
                    m.d.sync += [deadlock.eq(1), running.eq(0)]

        # CSRs
        m.submodules.csr = csr = CSRBank(1 << 16)
        csr.add("status", Cat(running, done, error, deadlock))
        csr.add("cycles", cycles)
        csr.add("error_unit", error_unit)
        csr.add("error_code", error_code)
        if chip is not None:
            csr.add("sdram.violation", chip.violation_code)
        csr.add("bytes_read", mem.bytes_read[:32])
        csr.add("bytes_written", mem.bytes_written[:32])
        host_read = [comps[u.name].bytes for u in hw.units if u.node.op == "Input"]
        host_written = [comps[u.name].bytes for u in hw.units if u.node.op == "Output"]
        csr.add("host_bytes_read", sum(host_read)[:32] if host_read else 0)
        csr.add("host_bytes_written", sum(host_written)[:32] if host_written else 0)
        for u in owners:
            st = comps[u.name].status
            if sim:
                for what in ("busy", "stall_in", "stall_out"):
                    counter = Signal(32, name=f"u{u.uid}_{what}_cycles")
                    with m.If(running & getattr(st, what)):
                        m.d.sync += counter.eq(counter + 1)
                    csr.add(f"unit.{u.name}.{what}", counter)
                csr.add(f"unit.{u.name}.state", Cat(st.busy, st.stall_in, st.stall_out, st.error))
                if isinstance(comps[u.name], PMU):
                    # the most blocks its buffers held at once (its allocator's high-water mark)
                    pmu = comps[u.name]
                    used = Signal(range(pmu.blocks + 1), name=f"u{u.uid}_blocks_used")
                    peak = Signal(range(pmu.blocks + 1), name=f"u{u.uid}_blocks_high_water")
                    m.d.comb += used.eq(pmu.blocks - pmu.free_blocks)
                    with m.If(running & (used > peak)):
                        m.d.sync += peak.eq(used)
                    csr.add(f"pmu.{u.name}.blocks_high_water", peak)
            if u.node.op == "Output":
                csr.add(f"output.{u.name}.beats", comps[u.name].beats)
                self._beats_written[u.name] = comps[u.name].beats
        for e, fifo in zip(hw.edges if sim else [], fifos):
            csr.add(f"fifo.{e.name}.high_water", fifo.high_water)
            csr.add(f"fifo.{e.name}.level", fifo.level)
        self._csr_names = csr.names
        m.d.comb += [csr.addr.eq(self.csr_addr), self.csr_rdata.eq(csr.rdata)]
        return m


def _connect_memory(m, client, port, enable):
    """Connect a unit's memory port to the memory's, passing bursts only while ``enable``.

    The memory is not held in reset before ``start`` (the host fills it through the back door),
    but the units are, and a unit in reset still drives its combinational outputs: a
    BeatReader's first state offers its first burst. Without the gate the memory takes that
    burst (and, once the back door is idle, serves it) while the unit cannot see it, and the
    unit asks again after reset: the line arrives twice and the stream's beats shift by one.
    """
    m.d.comb += [
        port.req.payload.eq(client.req.payload),
        port.req.valid.eq(client.req.valid & enable),
        client.req.ready.eq(port.req.ready & enable),
    ]
    for name in ("resp", "data"):
        if name in client.signature.members:
            wiring.connect(m, getattr(client, name), getattr(port, name))
