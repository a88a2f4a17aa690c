"""A UART receiver and transmitter (8 data bits, no parity, one stop bit, LSB first)."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["MIN_DIVISOR", "baud_divisor", "UartRx", "UartTx"]

#: The fewest clock cycles per bit the receiver samples correctly (it checks the start bit half
#: a bit after the falling edge, behind a two-register synchronizer).
MIN_DIVISOR = 4


def baud_divisor(clock_hz, baud, *, tolerance=0.02):
    """Clock cycles per bit for ``baud`` at ``clock_hz``: the nearest integer.

    Raises
    ------
    ValueError
        The divisor is below :data:`MIN_DIVISOR`, or the baud rate it gives is more than
        ``tolerance`` (2 %) off ``baud`` (a UART frame tolerates about 4 % in all).
    """
    for name, value in (("clock_hz", clock_hz), ("baud", baud)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"UART {name} must be a positive int, not {value!r}")
    divisor = (clock_hz + baud // 2) // baud
    if divisor < MIN_DIVISOR:
        raise ValueError(f"UART baud must be at most clock_hz / {MIN_DIVISOR} "
                         f"({clock_hz // MIN_DIVISOR}), not {baud}")
    error = abs(clock_hz / divisor - baud) / baud
    if error > tolerance:
        raise ValueError(f"UART baud {baud} at {clock_hz} Hz is {error:.1%} off with divisor "
                         f"{divisor}; it must be within {tolerance:.0%}")
    return divisor


def _check_divisor(who, divisor):
    if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor < MIN_DIVISOR:
        raise ValueError(f"{who} divisor must be an int >= {MIN_DIVISOR}, not {divisor!r}")


class UartRx(wiring.Component):
    """A UART receiver that samples each bit in its middle and holds the byte until taken.

    ``rx`` passes a two-register synchronizer (idle high). A falling edge starts a byte; half a
    bit later the start bit must still be low, or it was a glitch and the receiver waits for the
    next edge. The 8 data bits are then sampled every ``divisor`` cycles, LSB first, into a
    shift register, and the stop bit after them: high, the byte is offered on ``o`` from that
    register (``o.valid`` stays high until ``o.ready``); low, the byte is dropped,
    ``framing_error`` pulses and the receiver waits for the line to go high again (a break holds
    it low). A byte still offered when the next byte's first data bit is sampled (one and a
    half bit times after that byte's start edge, at least two bit times after the offer) is
    lost: ``overrun`` pulses and the offer ends. The receiver is back to idle in the middle of
    the stop bit, so back-to-back bytes are received at the full line rate. ``o.valid``,
    ``framing_error`` and ``overrun`` come from registers.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit (``>= MIN_DIVISOR``; :func:`baud_divisor`).

    Members
    -------
    rx : ``In(1, init=1)``
        The line.
    o : ``Out(stream.Signature(8))``
        Received bytes.
    framing_error : ``Out(1)``
        Pulses for a byte whose stop bit was low.
    overrun : ``Out(1)``
        Pulses for a byte not taken in time.
    """

    def __init__(self, divisor):
        _check_divisor("UartRx", divisor)
        self.divisor = divisor
        super().__init__({
            "rx": In(1, init=1),
            "o": Out(stream.Signature(8)),
            "framing_error": Out(1),
            "overrun": Out(1),
        })

    def __repr__(self):
        return f"UartRx({self.divisor})"

    def elaborate(self, platform):
        m = Module()
        line = Signal(init=1, name="rx_line")
        m.submodules.sync_rx = FFSynchronizer(self.rx, line, init=1)
        count = Signal(range(self.divisor), name="rx_count")
        bits = Signal(range(8), name="rx_bits")
        shreg = Signal(8, name="rx_shreg")
        valid = Signal(name="rx_valid")
        ferr = Signal(name="rx_framing_error")
        overrun = Signal(name="rx_overrun")
        m.d.sync += [ferr.eq(0), overrun.eq(0)]
        m.d.comb += [self.o.payload.eq(shreg), self.o.valid.eq(valid),
                     self.framing_error.eq(ferr), self.overrun.eq(overrun)]
        with m.If(self.o.ready):
            m.d.sync += valid.eq(0)
        tick = count == 0
        with m.If(~tick):
            m.d.sync += count.eq(count - 1)
        with m.FSM(name="rx_fsm"):
            with m.State("IDLE"):
                with m.If(~line):
                    m.d.sync += count.eq(self.divisor // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(tick):
                    with m.If(line):
                        m.next = "IDLE"             # a glitch, not a start bit
                    with m.Else():
                        m.d.sync += [count.eq(self.divisor - 1), bits.eq(0)]
                        m.next = "DATA"
            with m.State("DATA"):
                with m.If(tick):
                    m.d.sync += [shreg.eq(Cat(shreg[1:], line)), bits.eq(bits + 1),
                                 count.eq(self.divisor - 1)]
                    with m.If((bits == 0) & valid & ~self.o.ready):
                        m.d.sync += [overrun.eq(1), valid.eq(0)]
                    with m.If(bits == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(tick):
                    with m.If(line):
                        m.d.sync += valid.eq(1)
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += ferr.eq(1)
                        m.next = "BREAK"
            with m.State("BREAK"):
                with m.If(line):
                    m.next = "IDLE"
        return m


class UartTx(wiring.Component):
    """A UART transmitter.

    A byte accepted on ``i`` goes out as a start bit, 8 data bits LSB first and a stop bit, each
    ``divisor`` cycles long, from a register. ``i.ready`` is high when the transmitter is idle and
    in the last cycle of a stop bit, so a byte offered in time follows the previous one with no
    idle time: ``10 * divisor`` cycles per byte, the full line rate.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit (``>= MIN_DIVISOR``; :func:`baud_divisor`).

    Members
    -------
    i : ``In(stream.Signature(8))``
        Bytes to send.
    tx : ``Out(1, init=1)``
        The line (idle high).
    busy : ``Out(1)``
        A byte is on the line.
    """

    def __init__(self, divisor):
        _check_divisor("UartTx", divisor)
        self.divisor = divisor
        super().__init__({
            "i": In(stream.Signature(8)),
            "tx": Out(1, init=1),
            "busy": Out(1),
        })

    def __repr__(self):
        return f"UartTx({self.divisor})"

    def elaborate(self, platform):
        m = Module()
        line = Signal(init=1, name="tx_line")
        busy = Signal(name="tx_busy")
        count = Signal(range(self.divisor), name="tx_count")
        left = Signal(range(10), name="tx_bits_left")   # bits after the one on the line
        shreg = Signal(9, name="tx_shreg")
        last = Signal(name="tx_last_cycle")
        m.d.comb += [
            last.eq((left == 0) & (count == 0)),
            self.i.ready.eq(~busy | last),
            self.tx.eq(line),
            self.busy.eq(busy),
        ]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [line.eq(0), shreg.eq(Cat(self.i.payload, 1)), left.eq(9),
                         count.eq(self.divisor - 1), busy.eq(1)]
        with m.Elif(busy):
            with m.If(count == 0):
                with m.If(left == 0):
                    m.d.sync += busy.eq(0)
                with m.Else():
                    m.d.sync += [line.eq(shreg[0]), shreg.eq(shreg[1:]), left.eq(left - 1),
                                 count.eq(self.divisor - 1)]
            with m.Else():
                m.d.sync += count.eq(count - 1)
        return m
