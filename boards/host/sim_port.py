"""``--port sim``: a board's own design (bridge included) in Verilator behind a serial port.

:class:`SimBoard` lowers a program for a board's :class:`~stepforge.hdl.config.HardwareConfig`,
wraps its board-target :class:`~stepforge.hdl.system.System` in the
:class:`~stepforge.hdl.host_link.HostLinkTop` the board runs (the same design id), builds it with
Verilator in the simulation shell and runs :mod:`stepforge.cocotb_tests.host_link_tb` in a
background thread: that testbench bit-bangs a pseudo-terminal into ``uart_rx`` and samples
``uart_tx`` back. :meth:`SimBoard.open` returns a ``serial.Serial`` on the pseudo-terminal, so the
host driver (:mod:`stepforge.boards.host.driver`) runs unchanged.

What differs from the board: the line runs at ``clock_hz / clocks_per_bit`` (default 4 cycles a
bit, where a board runs e.g. 12 MHz / 1 Mbaud) and the bridge's timeout is ``quiet_bytes`` byte
times instead of 20 ms, both to keep simulation fast; the units are elaborated for no FPGA family
(no ``MULT18X18D`` instances: Verilator has no model of them) and the memory starts zeroed. The
lowered program, its units and so its cycles, and the design id are the board's.
"""

import json
import tempfile
import threading
import time
from pathlib import Path

from amaranth.hdl import Module
from amaranth.lib import wiring

from ...compiler.lower import lower
from ...hdl.host_link import HostLinkTop
from ...hdl.memory import lane_ram_verilog
from ...hdl.sdram import SDRAM_STORAGE_VERILOG
from ...hdl.system import System, sdram_chip_model
from ...sim.rtl import verilator
from ...sim.rtl.separate import UnitLibrary
from ...sim.rtl.shell import shell
from ...contract import host_protocol as hp
from .driver import HostLink, LinkError, open_serial

__all__ = ["SimBoard", "TESTBENCH", "line_rate", "WithSDRAMChip"]

#: The cocotb module that serves the simulated line.
TESTBENCH = "stepforge.cocotb_tests.host_link_tb"


def line_rate(stats, payload=hp.MAX_DATA):
    """``{"WRITE": (frames, ratio), "READ": (frames, ratio)}`` from :meth:`SimBoard.close`'s
    statistics: over the exchanges that carried ``payload`` data bytes, the time the data alone
    takes at the line rate (10 bit times a byte) against the exchanges' time on the line."""
    out = {}
    for cmd, data in ((hp.Command.WRITE, lambda e: e["request_payload"] - 4),
                      (hp.Command.READ, lambda e: e["reply_payload"] - 1)):
        full = [e for e in stats["exchanges"] if e["cmd"] == cmd and data(e) == payload]
        line_ns = sum(data(e) * 10 * stats["bit_ns"] for e in full)
        out[cmd.name] = (len(full), line_ns / sum(e["ns"] for e in full) if full else 0.0)
    return out


class WithSDRAMChip(wiring.Component):
    """A board design whose ``sdram`` pins go to the chip's model (a board with an SDRAM chip,
    in simulation): the design's other ports, under the same names.

    Parameters
    ----------
    top : amaranth.lib.wiring.Component
        Has an ``sdram`` port (:class:`~stepforge.hdl.sdram.SDRAMPinSignature`), e.g. a
        :class:`~stepforge.hdl.host_link.HostLinkTop` of a ``memory="sdram"`` System.
    chip : stepforge.hdl.sdram.SDRAMChipModel
    """

    def __init__(self, top, chip):
        self.top, self.chip = top, chip
        super().__init__({name: member for name, member in top.signature.members.items()
                          if name != "sdram"})

    def __repr__(self):
        return f"WithSDRAMChip({self.top!r}, {self.chip!r})"

    def elaborate(self, platform):
        m = Module()
        m.submodules.design = self.top
        m.submodules.sdram_chip = self.chip
        wiring.connect(m, self.top.sdram, self.chip.pins)
        for name, member in self.signature.members.items():
            outer, inner = getattr(self, name), getattr(self.top, name)
            m.d.comb += (inner.eq(outer) if member.flow == wiring.In else outer.eq(inner))
        return m


class SimBoard:
    """A Verilated HostLinkTop behind a pseudo-terminal (module doc).

    Parameters
    ----------
    program : stepforge.compiler.graph.Program
    config : HardwareConfig
        The board's (its ``clock_hz`` is the clock the design is told it runs at).
    clocks_per_bit : int, default 4
    quiet_bytes : int, default 16
        The bridge's timeout in byte times.
    workdir : path-like, optional
    progress : callable, optional

    Attributes
    ----------
    hw, system, top
        The lowered program, its System and the HostLinkTop.
    baud : int
    stats : dict or None
        The testbench's log of exchanges (after :meth:`close`).
    """

    def __init__(self, program, config, *, clocks_per_bit=4, quiet_bytes=16, workdir=None,
                 progress=None, run_chunk_cycles=2000):
        self.say = progress or (lambda msg: None)
        self.clocks_per_bit = clocks_per_bit
        self.baud = config.clock_hz // clocks_per_bit
        self.quiet_cycles = quiet_bytes * 10 * clocks_per_bit
        self.run_chunk_cycles = run_chunk_cycles
        self.work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="stepforge-sim-board-"))
        self.work.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        self.say("lowering and converting the board's design (HostLinkTop) to Verilog")
        self.hw = lower(program, config)
        library = UnitLibrary()
        self.system = System(self.hw, storage="verilog", library=library, target="board")
        self.top = HostLinkTop(self.system, clock_hz=config.clock_hz, baud=self.baud,
                               timeout=self.quiet_cycles)
        design = self.top
        if config.memory == "sdram":     # the board's SDRAM chip, as its model
            design = WithSDRAMChip(self.top, sdram_chip_model(self.hw, "verilog"))
        text = library.convert(design, "top") + lane_ram_verilog(
            zero_init=True, family=config.family)
        if config.memory == "sdram":
            text += SDRAM_STORAGE_VERILOG
        self.compile_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.shell = shell(text)
        self.say(f"building with Verilator ({len(text.splitlines())} lines of Verilog)")
        self.build_dir = verilator.build(text + self.shell.verilog, self.shell.name,
                                         build_args=self.shell.build_args,
                                         control=self.shell.control)
        self.build_seconds = time.perf_counter() - t0
        self.stats = None
        self._thread = None
        self._error = None
        self._port = None

    def __repr__(self):
        return f"SimBoard({self.hw.program.name!r}, baud={self.baud})"

    @property
    def csr_map(self):
        return self.system.csr_map

    def _job(self):
        return {"pty": str(self.work / "pty"), "stop": str(self.work / "stop"),
                "stats": str(self.work / "stats.json"), "period_ns": self.shell.period_ns,
                "clocks_per_bit": self.clocks_per_bit, "quiet_cycles": self.quiet_cycles,
                "run_chunk_cycles": self.run_chunk_cycles}

    def start(self, timeout=120.0):
        """Start the simulation; return the pseudo-terminal's path once it is served."""
        job = self._job()
        for key in ("pty", "stop", "stats"):
            Path(job[key]).unlink(missing_ok=True)
        (self.work / "job.json").write_text(json.dumps(job))

        def simulate():
            try:
                self.result = verilator.run(
                    self.build_dir, self.shell.name, TESTBENCH, test_dir=self.work,
                    extra_env={"STEPFORGE_HOSTLINK": str(self.work / "job.json"),
                               "COCOTB_LOG_LEVEL": "WARNING"})
            except Exception as exc:     # reported by start() or close() in the caller's thread
                self._error = exc

        self._thread = threading.Thread(target=simulate, name="stepforge-sim-board", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        pty = Path(job["pty"])
        while not pty.exists():
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise LinkError(f"the simulated board did not start ({self._error or 'timeout'});"
                                f" see {self.work}")
            time.sleep(0.02)
        return pty.read_text().strip()

    def open(self, **kw):
        """Start the simulation and open its serial port (``serial.Serial``)."""
        path = self.start()
        self._port = open_serial(path, self.baud)
        return self._port

    def link(self, *, retries=4, port=None):
        """A :class:`~stepforge.boards.host.driver.HostLink` on the simulated line. Simulated
        bits are slow in wall time: a byte takes a few milliseconds, more on a loaded machine."""
        return HostLink(port or self._port or self.open(), self.baud, retries=retries,
                        timeout=5.0, byte_seconds=0.02)

    def close(self):
        """Stop the simulation; return the testbench's statistics."""
        if self._port is not None:
            self._port.close()
            self._port = None
        if self._thread is not None:
            (self.work / "stop").write_text("")
            self._thread.join(timeout=120)
            self._thread = None
            stats = self.work / "stats.json"
            self.stats = json.loads(stats.read_text()) if stats.exists() else None
        if self._error is not None:
            raise LinkError(f"the simulated board failed: {self._error}")
        return self.stats

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
