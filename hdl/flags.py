"""Registered flags of counters: the comparison is made on the count, not on its next value."""

from amaranth.hdl import Mux, Signal

__all__ = ["below_after", "increment_split"]


def below_after(count, limit, inc, dec):
    """Whether ``count + inc - dec < limit``, as a value to register.

    The three comparisons of ``count`` with ``limit - 1``, ``limit`` and ``limit + 1`` depend on
    the count register alone; ``inc`` and ``dec`` (one bit each, usually late handshakes) only
    choose one of them, so a flag such as "a place is free" can be a register without the
    counter's adder on the handshake's path into it.

    Parameters
    ----------
    count : amaranth.hdl.Value
        The counter (a register).
    limit : int
    inc, dec : amaranth.hdl.Value
        One-bit increment and decrement of this cycle.
    """
    return Mux(inc & ~dec, count < limit - 1, Mux(~inc & dec, count < limit + 1, count < limit))


def increment_split(m, counter, enable, *, low_bits=16):
    """Add ``enable`` (one bit) to the wide register ``counter`` as two short carry chains.

    The low ``low_bits`` count as usual; the high bits step in the cycle the low half wraps,
    told by a register that holds "the low half is all ones" (set from the low half's own
    comparisons, as :func:`below_after` does), so no carry runs the whole width in one cycle
    (a 32-bit cycle counter was a 33-cell, 19 ns iCE40 path). ``counter`` holds the exact
    count after every clock edge.

    Parameters
    ----------
    m : amaranth.hdl.Module
    counter : amaranth.hdl.Signal
        The counter (a register of ``m``'s sync domain, reset to 0).
    enable : amaranth.hdl.Value
        Count this cycle.
    low_bits : int, default 16
    """
    if len(counter) <= low_bits:
        with m.If(enable):
            m.d.sync += counter.eq(counter + 1)
        return
    low, high = counter[:low_bits], counter[low_bits:]
    ones = (1 << low_bits) - 1
    low_full = Signal(name=f"{counter.name}_low_full")
    with m.If(enable):
        m.d.sync += [low.eq(low + 1), low_full.eq(low == ones - 1)]
        with m.If(low_full):
            m.d.sync += high.eq(high + 1)
