"""An AND-OR multiplexer: the value whose one-hot select bit is set."""

from functools import reduce

from amaranth.hdl import Value

__all__ = ["one_hot_mux"]


def one_hot_mux(select, values):
    """``values[j]`` for the one bit ``select[j]`` that is set, 0 when none is.

    Each value is gated by its select bit and the results are ORed: one AND and one OR per bit
    and input, no priority chain, no decoder (the routers' selects are one-hot already). With more
    than one bit set the result is the OR of those values.

    Parameters
    ----------
    select : Value
        ``len(values)`` bits, at most one of them set.
    values : sequence of Value
        Unsigned values of one width.
    """
    values = [Value.cast(v) for v in values]
    width = len(values[0])
    if len(Value.cast(select)) != len(values) or any(len(v) != width for v in values):
        raise TypeError(f"one_hot_mux needs one select bit per value and values of one width, "
                        f"got {len(Value.cast(select))} bits for widths {[len(v) for v in values]}")
    return reduce(lambda acc, v: acc | v,
                  (v & select[j].replicate(width) for j, v in enumerate(values)))
