"""Registered flags of counters: the comparison is made on the count, not on its next value."""

from amaranth.hdl import Mux

__all__ = ["below_after"]


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
