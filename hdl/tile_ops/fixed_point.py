"""The fixed-point ``exp``/``silu``/``rsqrt`` ALUs: a segment ROM and one lane's interpolation,
bit-exact with :mod:`stepforge.contract.fixedpoint`."""

from amaranth.hdl import Cat, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data
from amaranth.lib.memory import Memory

from ...contract import fixedpoint
from .dsp import pipelined_product
from .tile import _abs_unsigned, clamp, wrap

__all__ = ["segment_rom", "fixed_point_alu", "CUTS"]

#: Pipeline cuts of a pipelined fixed-point ALU (:func:`fixed_point_alu`).
CUTS = 5


def _segments(s):
    """``(base, delta)`` of every segment of a :class:`~stepforge.contract.fixedpoint.QSpec` table,
    in the order the ALU indexes them (``rsqrt``: the odd-exponent half after the even one)."""
    t, k = s.table, s.index_bits
    halves = 2 if s.name == "rsqrt" else 1
    out = []
    for h in range(halves):
        off = h * ((1 << k) + 1)
        out += [(t[off + i], t[off + i + 1] - t[off + i]) for i in range(1 << k)]
    return out


def segment_rom(name, dtype):
    """The segment ROM of the fixed-point ``name`` on ``dtype`` tiles.

    Returns
    -------
    amaranth.lib.memory.Memory
        Rows ``{base: signed, delta: signed}`` (one per segment), no write port; each lane
        adds a ``read_port(domain="comb")``.
    """
    segs = _segments(fixedpoint.spec(name, dtype))
    wb = max(max(abs(b) for b, _ in segs).bit_length() + 1, 2)
    wd = max(max(abs(d) for _, d in segs).bit_length() + 1, 2)
    layout = data.StructLayout({"base": signed(wb), "delta": signed(wd)})
    return Memory(shape=layout, depth=len(segs), init=[{"base": b, "delta": d} for b, d in segs])


def _round_shift(m, v, s_minus_1, width, name):
    """``((v >> (s - 1)) + 1) >> 1`` (round half up by ``s >= 1`` bits); ``s_minus_1`` is an int
    or an unsigned value."""
    r = Signal(signed(width + 1), name=f"{name}_rs")
    m.d.comb += r.eq((v >> s_minus_1) + 1)
    return r >> 1


def fixed_point_alu(m, op, dtype, x, rom, *, name, stage=None):
    """One lane of the fixed-point ``exp``/``silu``/``rsqrt`` (``contract/fixedpoint.py``, bit exact).

    With ``stage`` (a :class:`Stager`) the lane is five pipeline cuts long (:data:`CUTS`): the
    operand is registered (``silu``: with its magnitude), then the segment's ROM entry and the
    fraction (the multiplier's inputs) with what the rest needs, then the product, then the
    interpolated value, then the rounded value (before the sign's correction or the range's
    selection). What the rounding shift and the range's selection need is worked out from the
    operand's registers a cut after it, beside the multiplier, so no comparison or subtraction
    of them follows the interpolation: after the fourth cut one rounding adder (``exp``,
    ``rsqrt``: behind its shifter), after the fifth a subtraction (``silu``) or a multiplexer.
    The contract's final clamp is built only for a side the contract's value ever crosses
    (:func:`~stepforge.contract.fixedpoint.unclamped_range`: none today).

    Parameters
    ----------
    m : amaranth.hdl.Module
    op : str
        ``"exp"``, ``"silu"`` or ``"rsqrt"``.
    dtype : DType
        ``int8`` or ``int16``.
    x : amaranth.hdl.Value
        ``signed(dtype.bits)`` operand.
    rom : amaranth.lib.memory.ReadPort
        A combinational read port of :func:`segment_rom` ``(op, dtype)``.
    name : str
        Prefix of the signals created.
    stage : Stager, optional

    Returns
    -------
    amaranth.hdl.Value
        ``signed(dtype.bits)``.
    """
    p = name
    s = fixedpoint.spec(op, dtype)
    B, F, K = s.bits, s.frac_bits, s.index_bits
    res = Signal(signed(B + 2), name=f"{p}_res")

    def with_product(values, delta, f, derive=None):
        """``values`` through the second and third cuts, and the segment's slope times the
        fraction, both registered at the second cut and the product at the third (a DSP
        block's registers: :func:`pipelined_product`); themselves without a stager.
        ``derive(values)``, applied after the second cut, adds the values the later cuts need
        (from registers, beside the multiplier)."""
        derive = derive or (lambda v: v)
        if stage is None:
            return derive(values), delta * f
        delta, f = Value.cast(delta), Value.cast(f)
        prod = pipelined_product(m, delta, f, len(delta) + len(f), stage.enable,
                                 f"{stage.name}_mul", stage.family)
        values = tuple(stage(v, f"v{k}") for k, v in enumerate(values))
        stage.next()
        values = derive(values)
        values = tuple(stage(v, f"v{k}") for k, v in enumerate(values))
        stage.next()
        return values, prod

    def cut(*values):
        """The values through the next cut (the fourth: after the segment's interpolation; the
        fifth: after the rounding)."""
        if stage is None:
            return values
        values = tuple(stage(v, f"v{k}") for k, v in enumerate(values))
        stage.next()
        return values

    a_cut1 = None
    if stage is not None:
        if op == "silu":
            # ``|x|`` (a carry chain) is worked out before the first cut, beside ``x``: behind
            # it, it was followed by the segment ROM into the multiplier's operand register
            # (10.7 ns on the ECP5, SwiGLU I=256)
            a_cut1 = stage(_abs_unsigned(x, B), "a")
        x = stage(x, "x")
        stage.next()
    if op == "exp":
        Sr = F + s.log2e_bits
        FB, P = s.frac_width, s.precision
        t = Signal(signed(B + s.log2e.bit_length() + 1), name=f"{p}_t")
        n0 = Signal(signed(len(t) - Sr), name=f"{p}_n")
        f0 = Signal(FB, name=f"{p}_f")
        m.d.comb += [
            t.eq(x * s.log2e),
            n0.eq(t[Sr:].as_signed()),
            rom.addr.eq(t[Sr - K:Sr]),
            f0.eq(t[Sr - K - FB:Sr - K]),
        ]

        def ranges(values):
            """The integer part ``n``: above the range, below it, the rounding shift minus one."""
            n, base = values
            over = Signal(name=f"{p}_over")
            under = Signal(name=f"{p}_under")
            shm1 = Signal(range(P + 2), name=f"{p}_shm1")  # the rounding shift minus one
            m.d.comb += [over.eq(n >= B - 1 - F), under.eq(n < -F - 2)]
            with m.If(under):
                m.d.comb += shm1.eq(P + 1)
            with m.Elif(over):
                m.d.comb += shm1.eq(0)
            with m.Else():
                m.d.comb += shm1.eq((P - F - 1) - n)
            return base, over, under, shm1

        (base, over, under, shm1), prod = with_product((n0, rom.data.base), rom.data.delta, f0,
                                                       ranges)
        y = Signal(signed(P + 3), name=f"{p}_y")
        m.d.comb += y.eq(base + (prod >> FB))
        y, over, under, shm1 = cut(y, over, under, shm1)
        rounded, over, under = cut(_round_shift(m, y, shm1, P + 3, p), over, under)
        with m.If(over):
            m.d.comb += res.eq(s.max)
        with m.Elif(under):
            m.d.comb += res.eq(0)
        with m.Else():
            m.d.comb += res.eq(rounded)
    elif op == "silu":
        S, G = s.frac_width, s.precision
        a0 = Signal(unsigned(B), name=f"{p}_a")
        g_ext = Signal(signed(max(v.bit_length() for v in s.table) + 3), name=f"{p}_gx")
        m.d.comb += [
            a0.eq(_abs_unsigned(x, B) if a_cut1 is None else a_cut1),
            rom.addr.eq(a0[S:S + K]),
        ]

        def inside(values):
            """Whether ``|x|`` lies in the table's range (else ``silu(|x|) = |x|``)."""
            a, neg, base = values
            return a, neg, base, a < (1 << (S + K))

        (a, neg, base, within), prod = with_product((a0, x < 0, rom.data.base), rom.data.delta,
                                                    a0[:S], inside)
        m.d.comb += g_ext.eq(base + (prod >> S))
        g_ext, a, neg, within = cut(g_ext, a, neg, within)
        g = Signal(signed(B + 1), name=f"{p}_g")
        m.d.comb += g.eq(Mux(within, _round_shift(m, g_ext, G - 1, len(g_ext), p), a))
        g, a, neg = cut(g, a, neg)
        m.d.comb += res.eq(Mux(neg, g - a, g))      # silu(-a) = silu(a) - a
    elif op == "rsqrt":
        W, P = s.frac_width, s.precision
        e = Signal(range(B - 1), name=f"{p}_e")
        u = Signal(unsigned(B - 1), name=f"{p}_u")
        f = Signal(W, name=f"{p}_f")
        y = Signal(signed(P + 3), name=f"{p}_y")
        lz = Signal(range(B - 1), name=f"{p}_lz")      # B - 2 - e: the normalising shift
        for k in range(1, B - 1):  # the highest set bit wins
            with m.If(x[k]):
                m.d.comb += e.eq(k)
        m.d.comb += [
            lz.eq((B - 2) - e),
            u.eq(x[:B - 1] << lz),
            rom.addr.eq(Cat(u[W:W + K], e[0])),
            f.eq(u[:W]),
        ]

        def shift(values):
            """The rounding shift minus one, from the exponent."""
            e1, pos, base = values
            shm1 = Signal(range(P + B), name=f"{p}_shm1")
            m.d.comb += shm1.eq((P - F - F // 2 - 1) + (e1 >> 1))
            return pos, base, shm1

        (pos, base, shm1), prod = with_product((e, x > 0, rom.data.base), rom.data.delta, f,
                                               shift)
        m.d.comb += y.eq(base + (prod >> W))
        y, pos, shm1 = cut(y, pos, shm1)
        rounded, pos = cut(_round_shift(m, y, shm1, P + 3, p), pos)
        m.d.comb += res.eq(Mux(pos, rounded, s.max))
    else:
        raise ValueError(f"no fixed-point ALU for {op!r}")
    # the contract's final clamp, on the sides the contract ever reaches (none, for every table
    # today: :func:`~stepforge.contract.fixedpoint.unclamped_range`)
    lo, hi = fixedpoint.unclamped_range(op, dtype)
    if lo < s.min or hi > s.max:
        res = clamp(res, s.min, s.max)
    return wrap(res, B)
