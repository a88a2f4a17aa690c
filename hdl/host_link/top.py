"""The host link's top: a System behind a UART bridge, with only pins as ports."""

import json
import zlib

from amaranth.hdl import Cat, ClockDomain, ClockSignal, DomainRenamer, Fragment, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...contract import host_protocol as hp
from .bridge import HostBridge
from .uart import UartRx, UartTx, baud_divisor

__all__ = ["HostLinkTop", "design_id"]


def design_id(hw):
    """A 32-bit identity of a lowered program (CRC-32 of its manifest: memory map, units,
    FIFOs, configuration), reported by ``INFO`` so a host never loads a program into a board
    that runs another."""
    text = json.dumps(hw.manifest(), sort_keys=True, default=str)
    return zlib.crc32(text.encode())


_design_id_of = design_id    # HostLinkTop's parameter of the same name hides the function


class HostLinkTop(wiring.Component):
    """A :class:`~stepforge.hdl.system.System` with a UART host link: a board's whole design.

    The UART receiver holds each byte until the
    :class:`~stepforge.hdl.host_link.bridge.HostBridge` takes it (the bridge takes a frame's
    bytes at once; the host waits for each reply, so only a host that gave up waiting sends
    into a busy bridge, and a byte that is not taken before the next one arrives counts as
    lost, like a framing error). The bridge drives the System's word port, CSR port and
    ``start`` and answers through the UART transmitter
    (:mod:`stepforge.contract.host_protocol`). ``leds`` shows the System's state from a
    register. The System runs in a clock domain ``system`` on the same clock, reset with the
    design and by the bridge's ``RESET`` (so a board runs a program again without a new
    bitstream).

    Parameters
    ----------
    system : stepforge.hdl.system.System
        Usually ``target="board"``; a simulation-target System has its stall and watchdog
        inputs tied off.
    clock_hz : int
        The clock's frequency.
    baud : int
        The line rate; ``clock_hz / baud`` rounds to the bit time in cycles
        (:func:`~stepforge.hdl.host_link.uart.baud_divisor`: at least 4, within 2 %).
    design_id : int, optional
        Reported by ``INFO`` (default :func:`design_id` of ``system.hw``).
    timeout : int, optional
        Cycles of silence that end a frame (default 20 ms, at least two byte times; the
        bridge rounds it up to a power of two).
    max_data : int, optional
        Bytes of words per ``WRITE``/``READ`` (default
        :data:`~stepforge.contract.host_protocol.MAX_DATA`, rounded down to whole words).

    Members
    -------
    uart_rx : ``In(1, init=1)``
        From the host (the FTDI's TXD).
    uart_tx : ``Out(1, init=1)``
        To the host (the FTDI's RXD).
    leds : ``Out(4)``
        ``running``, ``done``, ``error``, ``deadlock``.
    sdram : ``Out(SDRAMPinSignature)``
        A System with its tensors in SDRAM (board target): the chip's pins.
    """

    def __init__(self, system, *, clock_hz, baud, design_id=None, timeout=None,
                 max_data=hp.MAX_DATA):
        self.system = system
        self.clock_hz, self.baud = clock_hz, baud
        self.divisor = baud_divisor(clock_hz, baud)
        self.timeout = timeout if timeout is not None else max(clock_hz // 50, 20 * self.divisor)
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, int) or self.timeout < 1:
            raise ValueError(f"HostLinkTop timeout must be an int >= 1, not {timeout!r}")
        self.design_id = design_id if design_id is not None else _design_id_of(system.hw)
        wb = system.hw.geometry.word_bytes
        self.max_data = max(wb, max_data // wb * wb)
        members = {"uart_rx": In(1, init=1), "uart_tx": Out(1, init=1), "leds": Out(4)}
        if "sdram" in system.signature.members:
            members["sdram"] = Out(system.signature.members["sdram"].signature)
        super().__init__(members)

    def __repr__(self):
        return (f"HostLinkTop({self.system!r}, clock_hz={self.clock_hz}, baud={self.baud}, "
                f"design_id={self.design_id}, timeout={self.timeout}, max_data={self.max_data})")

    @property
    def info(self):
        """What the bridge answers to ``INFO``."""
        g = self.system.hw.geometry
        return hp.Info(hp.VERSION, g.word_bytes, g.addr_bits, self.max_data, self.design_id,
                       self.clock_hz, self.baud)

    def elaborate(self, platform):
        m = Module()
        sysm = self.system
        # elaborated here, first, for its CSR map (the bridge's STATUS reads three CSRs); it
        # runs in a domain of its own on the same clock, whose reset the bridge's RESET adds to
        # the design's
        m.domains.system = system_domain = ClockDomain("system", local=True)
        m.submodules.system = DomainRenamer({"sync": "system"})(Fragment.get(sysm, platform))
        csrs = sysm.csr_map
        if sysm.target == "sim":
            m.d.comb += [sysm.stall_enable.eq(0), sysm.watchdog.eq(0)]

        m.submodules.uart_rx = rx = UartRx(self.divisor)
        m.submodules.uart_tx = tx = UartTx(self.divisor)
        m.submodules.bridge = bridge = HostBridge(
            sysm.hw.geometry, status_csrs=(csrs["cycles"], csrs["error_unit"], csrs["error_code"]),
            timeout=self.timeout, design_id=self.design_id, clock_hz=self.clock_hz,
            baud=self.baud, max_data=self.max_data,
            word_ready="debug_ready" in sysm.signature.members)

        # the System's reset is one flip-flop (high through the design's reset, then a cycle
        # after the bridge's RESET): its fan-out to every unit starts at a register, not at the
        # OR of the two (a board build's worst path at 100 MHz, 16.9 ns over four cells)
        system_reset = Signal(init=1, name="system_reset")
        m.d.sync += system_reset.eq(bridge.system_reset)
        wiring.connect(m, rx.o, bridge.rx)
        m.d.comb += [
            rx.rx.eq(self.uart_rx),
            bridge.rx_error.eq(rx.framing_error | rx.overrun),
            self.uart_tx.eq(tx.tx),
            system_domain.clk.eq(ClockSignal("sync")),
            system_domain.rst.eq(system_reset),
            sysm.start.eq(bridge.start),
            sysm.csr_addr.eq(bridge.csr_addr),
            bridge.csr_rdata.eq(sysm.csr_rdata),
            bridge.running.eq(sysm.running),
            bridge.done.eq(sysm.done),
            bridge.error.eq(sysm.error),
            bridge.deadlock.eq(sysm.deadlock),
        ]
        wiring.connect(m, bridge.tx, tx.i)
        wiring.connect(m, bridge.debug, sysm.debug)
        if bridge.word_ready:
            m.d.comb += bridge.debug_ready.eq(sysm.debug_ready)
        if "sdram" in self.signature.members:
            wiring.connect(m, sysm.sdram, wiring.flipped(self.sdram))
        leds = Signal(4, name="leds_reg")
        m.d.sync += leds.eq(Cat(sysm.running, sysm.done, sysm.error, sysm.deadlock))
        m.d.comb += self.leds.eq(leds)
        return m
