"""Registered flags of counters: the comparison is made on the count, not on its next value."""

from amaranth.hdl import C, Cat, Mux, Signal

__all__ = ["below_after", "count_step", "increment_split", "accumulate_split", "trailing_count",
           "thermometer_count"]


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
    def below(bound):               # (no comparison with 0: an unsigned count never is below)
        return count < bound if bound > 0 else C(0, 1)
    return Mux(inc & ~dec, below(limit - 1), Mux(~inc & dec, below(limit + 1), below(limit)))


def count_step(count, inc, dec):
    """``count + inc - dec`` as a value to register, with ``inc`` and ``dec`` last.

    ``count + 1`` and ``count - 1`` depend on the count register alone; the one-bit ``inc`` and
    ``dec`` (usually late handshakes) only choose between them and ``count``, so they reach the
    register through a multiplexer instead of an adder's carry (a load unit's slot counts were
    five LUT levels from its output's move on a UP5K). The count must not wrap.

    Parameters
    ----------
    count : amaranth.hdl.Signal
        The counter (a register).
    inc, dec : amaranth.hdl.Value
        One-bit increment and decrement of this cycle.
    """
    width = len(count)
    up = (count + 1)[:width]
    down = (count - 1)[:width]
    return Mux(inc == dec, count, Mux(inc, up, down))


def accumulate_split(m, counter, amount, enable, *, low_bits=16):
    """Add ``amount`` to the wide register ``counter`` when ``enable``, as two short carry chains.

    The low ``low_bits`` add ``amount``; their carry out waits in a register and steps the high
    bits in the next cycle, so no carry runs the whole width in one cycle (the memory's 48-bit
    byte counters were 32-cell ECP5 paths at 200 MHz). ``counter`` is exact one cycle after the
    last addition (the high bits follow a wrap of the low half a cycle late): a statistic, not
    a value to decide on in the same cycle.

    Parameters
    ----------
    m : amaranth.hdl.Module
    counter : amaranth.hdl.Signal
        The counter (a register of ``m``'s sync domain, reset to 0).
    amount : amaranth.hdl.Value
        What to add, narrower than ``low_bits``.
    enable : amaranth.hdl.Value
    low_bits : int, default 16
    """
    if len(counter) <= low_bits:
        with m.If(enable):
            m.d.sync += counter.eq(counter + amount)
        return
    low, high = counter[:low_bits], counter[low_bits:]
    total = Signal(low_bits + 1, name=f"{counter.name}_low_next")
    carry = Signal(name=f"{counter.name}_carry")
    m.d.comb += total.eq(low + amount)
    m.d.sync += carry.eq(enable & total[low_bits])
    with m.If(enable):
        m.d.sync += low.eq(total[:low_bits])
    with m.If(carry):
        m.d.sync += high.eq(high + 1)


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


def trailing_count(flags):
    """How many of the last flags of ``flags`` are all set (0 to ``len(flags)``), as a value.

    A walk's stop is the number of its innermost dimensions at their last index; with
    ``flags`` the walk's "at its last index" registers, outermost first, this is that stop. The
    trailing ANDs form a thermometer code, so "exactly k set" is one AND of two of them and each
    bit of the count an OR of those: LUTs of the flags (a sum of the trailing ANDs became a carry
    chain, the worst iCE40 GEMM load path).

    Parameters
    ----------
    flags : sequence of amaranth.hdl.Value
        One-bit flags, outermost first.
    """
    n = len(flags)
    return thermometer_count([Cat(*flags[n - k:]).all() for k in range(1, n + 1)])


def thermometer_count(trail):
    """The number of set flags of a thermometer code, as a value: ``trail[k - 1]`` says that
    (at least) ``k`` are set, so ``trail[k - 1]`` implies every ``trail[j]`` before it. "Exactly
    ``k``" is one AND of two of them, and each bit of the count an OR of those (LUTs of the
    flags, not an adder).

    Parameters
    ----------
    trail : sequence of amaranth.hdl.Value
        One-bit flags, ``trail[k - 1]``: ``k`` or more are set.
    """
    n = len(trail)
    if n == 0:
        return C(0, 1)
    exactly = [trail[k - 1] & ~trail[k] if k < n else trail[n - 1] for k in range(1, n + 1)]
    return Cat(*(Cat(*[e for k, e in enumerate(exactly, 1) if (k >> bit) & 1]).any()
                 for bit in range(n.bit_length())))
