"""Integer division of one lane: a combinational divider, or a restoring one in pipeline cuts."""

from amaranth.hdl import Cat, Const, Mux, Signal, unsigned

from .tile import _abs_unsigned, wrap

__all__ = ["DIVIDE_BITS_PER_CUT"]


#: quotient bits per pipeline cut of a divider (the iCE40's carry chains are slow: one)
DIVIDE_BITS_PER_CUT = {None: 2, "ecp5": 2, "ice40": 1}


def _pipelined_divide(a, b, bits, stage):
    """:func:`_divide` as a restoring division: a cut after the magnitudes, then one remainder
    subtraction (``bits + 1`` wide) per quotient bit and a cut after every ``stage.per``."""
    qa = stage(_abs_unsigned(a, bits), "qa")
    qb = stage(_abs_unsigned(b, bits), "qb")
    neg = stage(a[-1] ^ b[-1], "neg")
    zero = stage(b == 0, "bz")
    stage.next()
    rem, quo = Const(0, bits), qa  # quo: the dividend's bits not yet used, then the quotient
    for k in range(bits):
        r = Cat(quo[bits - 1], rem)                       # (rem << 1) | the next dividend bit
        ge = r >= qb
        rem = Mux(ge, r - qb, r)[:bits]
        quo = Cat(ge, quo[:bits - 1])
        if (k + 1) % stage.per == 0 or k == bits - 1:
            rem, quo = stage(rem, f"rem{k}"), stage(quo, f"quo{k}")
            qb, neg, zero = stage(qb, f"qb{k}"), stage(neg, f"neg{k}"), stage(zero, f"bz{k}")
            stage.next()
    return wrap(Mux(zero, -1, Mux(neg, -quo, quo)), bits)


def _divide(m, a, b, bits, name):
    """Integer division truncating toward zero; ``x / 0 = -1``; ``MIN / -1 = MIN`` (wraps)."""
    qa = Signal(unsigned(bits), name=f"{name}_qa")
    qb = Signal(unsigned(bits), name=f"{name}_qb")
    q = Signal(unsigned(bits), name=f"{name}_q")
    m.d.comb += [qa.eq(_abs_unsigned(a, bits)), qb.eq(_abs_unsigned(b, bits)), q.eq(qa // qb)]
    neg = a[-1] ^ b[-1]
    return wrap(Mux(b == 0, -1, Mux(neg, -q, q)), bits)
