"""The top of a board design: the board's pins around the host link and the program's system.

:class:`BoardTop` has one port per pin it uses, named as :meth:`BoardTop.pins` lists them with
the board resource each sits on (:mod:`~stepforge.boards.constraints` turns the list into the
LPF or PCF file). Inside: the design clock (the oscillator, or the ECP5 PLL of
:mod:`~stepforge.boards.pll`), a power-on reset, and the link, a component with ``uart_rx``,
``uart_tx`` and ``leds`` (the host link's ``HostLinkTop`` around the program's
:class:`~stepforge.hdl.system.System`).
"""

from amaranth.hdl import ClockDomain, ClockSignal, Const, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .pll import ecp5_pll
from .sdram_pins import connect_sdram, sdram_ports

__all__ = ["BoardTop", "POR_CYCLES"]

#: Cycles of the design clock that the power-on reset lasts after the clock is stable (the PLL
#: locked): 1,024, 85 us at 12 MHz (the iCE40's block RAMs need 3 us after configuration).
POR_CYCLES = 1024


class BoardTop(wiring.Component):
    """A board's pins around ``link``.

    Parameters
    ----------
    board : stepforge.boards.presets.Board
    link : amaranth.lib.wiring.Component
        Has ``uart_rx: In(1)``, ``uart_tx: Out(1)`` and ``leds: Out(n)``; clocked and reset by
        the ``sync`` domain that this top makes.

    Members
    -------
    clk_in : ``In(1)``
        The board's oscillator.
    uart_rx : ``In(1)``, uart_tx : ``Out(1)``
        The host link's serial lines.
    led0, led1, ... : ``Out(1)``
        The first ``min(len(board.leds), len(link.leds))`` link status bits, on the board's
        LEDs (inverted for an active-low LED).
    sdram_clk, sdram_cke, sdram_cs_n, ..., sdram_a0, ... : ``Out(1)``
        When ``link`` has an ``sdram`` port (tensors in the board's SDRAM): the chip's output
        pins (:func:`~stepforge.boards.sdram_pins.sdram_ports`); its ``dq`` pins are I/O ports
        ``sdram_dq0``, ... of the converted module (``ECP5`` ``BB`` buffers).
    """

    def __init__(self, board, link):
        self.board = board
        self.link = link
        self._leds = board.leds[:len(link.leds)]
        members = {"clk_in": In(1), "uart_rx": In(1), "uart_tx": Out(1)}
        members.update({f"led{i}": Out(1) for i in range(len(self._leds))})
        # (a signature's members raise SignatureError, not KeyError, for a missing name: no
        # ``.get``)
        sdram = link.signature.members["sdram"] if "sdram" in link.signature.members else None
        self._sdram = [] if sdram is None else sdram_ports(sdram.signature)
        members.update({name: Out(1) for name, _, d in self._sdram if d == "o"})
        super().__init__(members)

    def __repr__(self):
        return f"BoardTop({self.board!r}, {self.link!r})"

    def pins(self):
        """``[(port name, PinRef), ...]``: where each port of this top sits on the board."""
        b = self.board
        return ([("clk_in", b.clock), ("uart_rx", b.uart_rx), ("uart_tx", b.uart_tx)]
                + [(f"led{i}", ref) for i, ref in enumerate(self._leds)]
                + [(name, ref) for name, ref, _ in self._sdram])

    def elaborate(self, platform):
        m = Module()
        b = self.board
        if b.pll:
            clk, locked = ecp5_pll(m, self.clk_in, b.oscillator_hz, b.clock_hz)
        else:
            clk, locked = self.clk_in, Const(1)
        m.domains.sync = ClockDomain("sync")
        m.domains.por = ClockDomain("por", reset_less=True)
        m.d.comb += [ClockSignal("sync").eq(clk), ClockSignal("por").eq(clk)]

        # power-on reset: every flip-flop starts at zero on these FPGAs, so count up from zero
        count = Signal(range(POR_CYCLES + 1), name="por_count")
        reset = Signal(init=1, name="por_reset")
        with m.If(~locked):
            m.d.por += count.eq(0)
        with m.Elif(count != POR_CYCLES):
            m.d.por += count.eq(count + 1)
        m.d.por += reset.eq(count != POR_CYCLES)
        m.d.comb += ResetSignal("sync").eq(reset)

        m.submodules.link = link = self.link
        if self._sdram:
            connect_sdram(m, self, link.sdram)
        pin = {ref: b.pin(ref) for _, ref in self.pins()}
        m.d.comb += [link.uart_rx.eq(self.uart_rx ^ pin[b.uart_rx].invert),
                     self.uart_tx.eq(link.uart_tx ^ pin[b.uart_tx].invert)]
        for i, ref in enumerate(self._leds):
            m.d.comb += getattr(self, f"led{i}").eq(link.leds[i] ^ pin[ref].invert)
        return m
