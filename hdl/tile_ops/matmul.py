"""The PCU's datapath pieces: tile values, per-element ALUs and the time-multiplexed node circuits.

A tile function (:class:`~stepforge.compiler.functions.TileFunction`) becomes one circuit per
primitive node of its expression graph (:class:`~stepforge.hdl.pcu.PCU` schedules them). Each
node owns an output register of its tile and computes it over a fixed number of *steps* (clock
cycles), reusing a few arithmetic units:

====================================  ===============================  ===========================
node                                  units                            steps
====================================  ===============================  ===========================
elementwise (add sub mul div maximum  ``lanes`` ALUs                   ``ceil(elements / lanes)``
exp silu rsqrt cast)
``row_sum`` ``row_max`` ``[R, C]``    ``lanes`` ALUs, one row each     ``ceil(R / lanes) * C``
``matmul`` ``mac`` ``[M,K] @ [K,N]``  ``multipliers`` multipliers      ``ceil(M*K*N / multipliers)``
====================================  ===============================  ===========================

In step ``c`` of an elementwise node, lane ``l`` computes element ``c * lanes + l`` (row-major).
A row reduction's lane ``l`` folds row ``g * lanes + l`` one column per step, left to right. A
matmul's multiplier ``u`` computes, in step ``c``, product number ``p = c * U + u`` of the
sequence ordered ``k`` slowest (``p = k * M * N + i * N + j``), or ``i`` slowest when ``a`` has
a dynamic row count (``p = i * K * N + k * N + j``); the products of a step are added to their
outputs' running sums. A node over dynamic rows is built for the bound and needs only the first
:meth:`~_Node.steps_for` ``(rows)`` steps (the PCU skips the rest). Every arithmetic unit wraps like the reference
(:mod:`stepforge.contract.arith`): integer sums are modular, so the hardware's order of additions
gives the same bits as the reference's sequential order.

**Pipelining.** A node is issued its steps (:class:`Issue`: the step, whether it is issued,
whether the beat has data, the pipeline's enable) and, with ``latency`` ``d > 0`` (its
:attr:`~_Node.depth`, chosen by the PCU), writes each step ``d`` pipeline moves later: operands
are registered at the issue, results at the cuts, and every register moves with the one enable
(the PCU's, low while the output waits). Multipliers are :func:`pipelined_product` (a DSP
block's input and output registers; ``MULT18X18D`` instances for an ECP5 platform,
:func:`dsp_family`). A matmul sums the products of an output by a registered adder tree
(``terms``: the most products one output gets in a step) into a running sum whose register is
the only adder in its loop; an output's first step of a beat starts it from the fused operand or
0 (decided by a register of its own, a stage ahead). A ``mac`` that is the PCU's whole
accumulator adds into it and restarts it itself after a resetting beat (one enable, one reset
per register, no multiplexer in the loop); stop-only beats add zero products, so the running
sum's ``nxt`` is the accumulator at every beat's output stage. With ``family="ice40"`` the
32-bit running sums are two 16-bit halves a stage apart (carry registered) and operands and
products pass a fabric register next to the ``SB_MAC16``. Elementwise nodes issued after a
pipelined node read their input-port operands at the sequencer's step and carry them through a
register per lane and move.

The fixed-point ``exp``, ``silu`` and ``rsqrt`` ALUs (:func:`fixed_point_alu`) follow the
integer sequences of :mod:`stepforge.contract.fixedpoint` step for step and read their breakpoints
from :func:`~stepforge.contract.fixedpoint.spec`, held in a ROM (:class:`amaranth.lib.memory.Memory`
with one combinational read port per lane) of ``(base, delta)`` pairs, one per segment.

Pipelined depths (:attr:`_Node.depth`): ``matmul``/``mac`` ``2 + ceil(log2(terms))``, plus one
where products go straight into the running sums on an FPGA family, and on the iCE40 one for the
fabric operand registers and one for the split sum; ``mul`` 2 (iCE40 3); ``div``
``1 + ceil(bits / 2)`` (iCE40 ``1 + bits``); ``exp``/``silu``/``rsqrt`` 4; the others 0.
"""

from amaranth.hdl import (Cat, ClockSignal, Const, Instance, Mux, ResetSignal, Signal, Value,
                          signed, unsigned)
from amaranth.lib import data
from amaranth.lib.memory import Memory

from ...contract import fixedpoint
from ..mux import one_hot_mux

__all__ = ["HTile", "ceil_div", "wrap", "clamp", "lane_op", "fixed_point_alu", "segment_rom",
           "dsp_family", "Issue", "pipelined_product", "ElementwiseNode", "RowReduceNode",
           "MatmulNode"]


def ceil_div(a, b):
    """``ceil(a / b)`` for positive ints."""
    return -(-a // b)


class HTile:
    """A tile of hardware values: ``elems[i][j]`` is element ``[i, j]``, a ``signed(bits)`` value.

    Parameters
    ----------
    dtype : stepforge.compiler.types.DType
        An integer dtype.
    elems : list of list of amaranth.hdl.Value
        Row-major, ``rows x cols``.
    """

    def __init__(self, dtype, elems):
        self.dtype = dtype
        self.elems = [list(r) for r in elems]

    @property
    def rows(self):
        return len(self.elems)

    @property
    def cols(self):
        return len(self.elems[0]) if self.elems else 0

    def at(self, i, j):
        """Element ``[i, j]`` with size-1 dimensions broadcast."""
        return self.elems[0 if self.rows == 1 else i][0 if self.cols == 1 else j]

    def flat(self):
        return [v for r in self.elems for v in r]

    @classmethod
    def signals(cls, dtype, rows, cols, name, init=0):
        """A tile of fresh signals named ``{name}_{i}_{j}`` (reset value ``init``)."""
        return cls(dtype, [[Signal(signed(dtype.bits), name=f"{name}_{i}_{j}", init=init)
                            for j in range(cols)] for i in range(rows)])

    @classmethod
    def const(cls, dtype, value, rows, cols):
        """A tile holding the constant ``value`` everywhere."""
        c = Const(value, signed(dtype.bits))
        return cls(dtype, [[c] * cols for _ in range(rows)])

    def __repr__(self):
        return f"HTile({self.dtype!r}, {self.rows}x{self.cols})"


def wrap(value, bits):
    """``value`` modulo ``2**bits`` as ``signed(bits)`` (two's complement wrap)."""
    return value[:bits].as_signed()


def clamp(value, lo, hi):
    """``value`` clamped to ``[lo, hi]`` (Python ints)."""
    return Mux(value < lo, lo, Mux(value > hi, hi, value))


def _abs_unsigned(value, bits):
    """``|value|`` of a ``signed(bits)`` value as ``unsigned(bits)`` (``|MIN| = 2**(bits-1)``)."""
    return Mux(value < 0, -value, value)[:bits]


def lane_op(m, op, attrs, in_dtype, out_dtype, operands, *, rom=None, name, stage=None):
    """One element of an elementwise primitive, combinationally or (``stage``) pipelined.

    Parameters
    ----------
    m : amaranth.hdl.Module
    op : str
        ``add sub mul div maximum cast exp silu rsqrt``.
    attrs : dict
        The primitive's attributes (``cast``: ``dtype``, ``saturate``).
    in_dtype, out_dtype : DType
        Operand and result dtypes.
    operands : list of amaranth.hdl.Value
        ``signed(in_dtype.bits)`` values.
    rom : amaranth.lib.memory.ReadPort, optional
        The lane's read port of the segment ROM (fixed-point ops).
    name : str
        Prefix of the signals created.
    stage : Stager, optional
        Registers the ALU's values at its pipeline cuts (``div``, ``exp``, ``silu``,
        ``rsqrt``: :func:`lane_depth` cuts); without it the ALU is combinational.

    Returns
    -------
    amaranth.hdl.Value
        ``signed(out_dtype.bits)``, the reference's bits (:mod:`stepforge.contract.arith`).
    """
    bits = out_dtype.bits
    if op == "add":
        return wrap(operands[0] + operands[1], bits)
    if op == "sub":
        return wrap(operands[0] - operands[1], bits)
    if op == "mul":
        return wrap(operands[0] * operands[1], bits)
    if op == "maximum":
        a, b = operands
        return Mux(a > b, a, b)
    if op == "div":
        if stage is not None:
            return _pipelined_divide(operands[0], operands[1], bits, stage)
        return _divide(m, operands[0], operands[1], bits, name)
    if op == "cast":
        x = operands[0]
        if attrs.get("saturate") and out_dtype.bits < in_dtype.bits:
            return wrap(clamp(x, out_dtype.min, out_dtype.max), bits)
        if out_dtype.bits < in_dtype.bits:
            return wrap(x, bits)
        return x
    if op in fixedpoint.NAMES:
        return fixed_point_alu(m, op, in_dtype, operands[0], rom, name=name, stage=stage)
    raise ValueError(f"no elementwise ALU for {op!r}")


class Stager:
    """The pipeline cuts of an ALU: ``stage(value, tag)`` is ``value`` through a register (no
    reset) with the clock enable ``enable``; each call belongs to the cut :attr:`cut` (the ALU
    moves to the next with :meth:`next`). ``per``: a divider's quotient bits per cut."""

    def __init__(self, m, enable, name, per=2, family=None):
        self.m, self.enable, self.name, self.cut, self.per = m, enable, name, 1, per
        self.family = family

    def __call__(self, value, tag):
        value = Value.cast(value)
        reg = Signal(value.shape(), name=f"{self.name}_c{self.cut}_{tag}", reset_less=True)
        with self.m.If(self.enable):
            self.m.d.sync += reg.eq(value)
        return reg

    def next(self):
        self.cut += 1


#: quotient bits per pipeline cut of a divider (the iCE40's carry chains are slow: one)
DIVIDE_BITS_PER_CUT = {None: 2, "ecp5": 2, "ice40": 1}


def lane_depth(op, bits, family=None):
    """Pipeline cuts of a pipelined ALU (0: not pipelined): ``div`` one for the magnitudes and
    one per :data:`DIVIDE_BITS_PER_CUT` quotient bits, the fixed-point ALUs four (the operand;
    the segment's ROM entry and fraction, at the multiplier's inputs; the product; the
    interpolated value before rounding and clamping)."""
    if op == "div":
        return 1 + ceil_div(bits, DIVIDE_BITS_PER_CUT[family])
    if op in fixedpoint.NAMES:
        return 4
    return 0


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


# -- fixed-point nonlinear ALUs ------------------------------------------------------------------

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

    With ``stage`` (a :class:`Stager`) the lane is four pipeline cuts long: the operand is
    registered, then the segment's ROM entry and the fraction (the multiplier's inputs) with what
    the rest needs, then the product, then the interpolated value (before the rounding shift and
    the clamp).

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

    def with_product(values, delta, f):
        """``values`` through the second and third cuts, and the segment's slope times the
        fraction, both registered at the second cut and the product at the third (a DSP
        block's registers: :func:`pipelined_product`); themselves without a stager."""
        if stage is None:
            return values, delta * f
        delta, f = Value.cast(delta), Value.cast(f)
        prod = pipelined_product(m, delta, f, len(delta) + len(f), stage.enable,
                                 f"{stage.name}_mul", stage.family)
        for _ in range(2):
            values = tuple(stage(v, f"v{k}") for k, v in enumerate(values))
            stage.next()
        return values, prod

    def cut(*values):
        """The values through the fourth cut (after the segment's interpolation)."""
        if stage is None:
            return values
        values = tuple(stage(v, f"v{k}") for k, v in enumerate(values))
        stage.next()
        return values

    if stage is not None:
        x = stage(x, "x")
        stage.next()
    if op == "exp":
        Sr = F + s.log2e_bits
        FB, P = s.frac_width, s.precision
        t = Signal(signed(B + s.log2e.bit_length() + 1), name=f"{p}_t")
        n0 = Signal(signed(len(t) - Sr), name=f"{p}_n")
        f0 = Signal(FB, name=f"{p}_f")
        shm1 = Signal(range(P + 2), name=f"{p}_shm1")  # the rounding shift minus one
        m.d.comb += [
            t.eq(x * s.log2e),
            n0.eq(t[Sr:].as_signed()),
            rom.addr.eq(t[Sr - K:Sr]),
            f0.eq(t[Sr - K - FB:Sr - K]),
        ]
        (n, base), prod = with_product((n0, rom.data.base), rom.data.delta, f0)
        y = Signal(signed(P + 3), name=f"{p}_y")
        m.d.comb += y.eq(base + (prod >> FB))
        y, n = cut(y, n)
        with m.If(n < -F - 2):
            m.d.comb += shm1.eq(P + 1)
        with m.Elif(n >= B - 1 - F):
            m.d.comb += shm1.eq(0)
        with m.Else():
            m.d.comb += shm1.eq((P - F - 1) - n)
        rounded = _round_shift(m, y, shm1, P + 3, p)
        with m.If(n >= B - 1 - F):
            m.d.comb += res.eq(s.max)
        with m.Elif(n < -F - 2):
            m.d.comb += res.eq(0)
        with m.Else():
            m.d.comb += res.eq(rounded)
    elif op == "silu":
        S, G = s.frac_width, s.precision
        a0 = Signal(unsigned(B), name=f"{p}_a")
        g_ext = Signal(signed(max(v.bit_length() for v in s.table) + 3), name=f"{p}_gx")
        g = Signal(signed(B + 1), name=f"{p}_g")
        m.d.comb += [
            a0.eq(_abs_unsigned(x, B)),
            rom.addr.eq(a0[S:S + K]),
        ]
        (a, neg, base), prod = with_product((a0, x < 0, rom.data.base), rom.data.delta, a0[:S])
        m.d.comb += g_ext.eq(base + (prod >> S))
        g_ext, a, neg = cut(g_ext, a, neg)
        inside = a < (1 << (S + K))
        m.d.comb += [
            g.eq(Mux(inside, _round_shift(m, g_ext, G - 1, len(g_ext), p), a)),
            res.eq(Mux(neg, g - a, g)),
        ]
    elif op == "rsqrt":
        W, P = s.frac_width, s.precision
        e = Signal(range(B - 1), name=f"{p}_e")
        u = Signal(unsigned(B - 1), name=f"{p}_u")
        f = Signal(W, name=f"{p}_f")
        y = Signal(signed(P + 3), name=f"{p}_y")
        lz = Signal(range(B - 1), name=f"{p}_lz")      # B - 2 - e: the normalising shift
        shm1 = Signal(range(P + B), name=f"{p}_shm1")  # the rounding shift minus one
        for k in range(1, B - 1):  # the highest set bit wins
            with m.If(x[k]):
                m.d.comb += e.eq(k)
        m.d.comb += [
            lz.eq((B - 2) - e),
            u.eq(x[:B - 1] << lz),
            rom.addr.eq(Cat(u[W:W + K], e[0])),
            f.eq(u[:W]),
        ]
        (e1, pos, base), prod = with_product((e, x > 0, rom.data.base), rom.data.delta, f)
        m.d.comb += y.eq(base + (prod >> W))
        y, e1, pos = cut(y, e1, pos)
        m.d.comb += [
            shm1.eq((P - F - F // 2 - 1) + (e1 >> 1)),
            res.eq(Mux(pos, _round_shift(m, y, shm1, P + 3, p), s.max)),
        ]
    else:
        raise ValueError(f"no fixed-point ALU for {op!r}")
    return wrap(clamp(res, s.min, s.max), B)


# -- pipelining ----------------------------------------------------------------------------------

def dsp_family(platform):
    """The device family whose DSP primitives the PCU instantiates.

    ``"ecp5"`` for a platform whose ``family`` is ``"ecp5"`` (Amaranth's ``LatticePlatform``,
    or any object with that attribute): multipliers become ``MULT18X18D`` with their input and
    output registers inside the DSP block (Yosys infers ``MULT18X18D`` but never moves registers
    into it). ``None`` otherwise: generic Verilog, the registers next to the ``*`` (which
    ``synth_ice40 -dsp`` packs into ``SB_MAC16``, and which simulation uses).
    """
    return "ecp5" if getattr(platform, "family", None) == "ecp5" else None


class Issue:
    """When a node works: the step it issues and whether it is issued, and the pipeline enable.

    Parameters
    ----------
    step : amaranth.hdl.Value
        The PCU sequencer's step as the node sees it.
    valid : amaranth.hdl.Value
        The step is issued; it takes effect in a cycle where ``enable`` is high.
    data : amaranth.hdl.Value
        The step belongs to a data beat (a stop-only beat issues step 0 and no data).
    enable : amaranth.hdl.Value
        The pipeline moves: the clock enable of every pipeline register.
    family : str or None
        :func:`dsp_family` of the platform.
    reset : amaranth.hdl.Value, default 0
        The step is the last of a beat after which the accumulator restarts (Accum and Scan:
        a stop ``s >= b``).
    steps : int, optional
        How many steps there are (the PCU's ``ii``): a test that the step is one of them all is
        left out.
    onehot : amaranth.hdl.Value, optional
        ``steps`` bits, bit ``step`` set: multiplexers select with it (AND-OR, no decoder).
    """

    def __init__(self, step, valid, data, enable, family=None, reset=0, steps=None, onehot=None):
        self.step, self.valid, self.data = step, valid, data
        self.enable, self.family, self.reset, self.steps = enable, family, reset, steps
        self.onehot = onehot

    def select(self, m, out, choices):
        """Drive ``out`` with ``choices[step]`` (a dict of step to value; 0 in the other steps):
        an AND-OR multiplexer of the one-hot step when there is one."""
        if self.onehot is None:
            with m.Switch(self.step):
                for c, v in choices.items():
                    with m.Case(c):
                        m.d.comb += out.eq(v)
            return
        width = len(Value.cast(out))
        values = []
        for v in choices.values():
            v = Value.cast(v)
            fill = v[-1] if v.shape().signed else Const(0, 1)
            values.append(v[:width] if len(v) >= width else Cat(v, fill.replicate(width - len(v))))
        m.d.comb += out.eq(one_hot_mux(Cat(*(self.onehot[c] for c in choices)), values))
    def later(self, m, n, name):
        """The same issue ``n`` moves of the pipeline later: ``step``, ``valid``, ``data`` and
        ``reset`` through ``n`` registers (``valid`` resets to 0, the others have no reset)."""
        step, valid, data, reset, onehot = self.step, self.valid, self.data, self.reset, self.onehot
        for k in range(1, n + 1):
            s = Signal(Value.cast(step).shape(), name=f"{name}_step{k}", reset_less=True)
            v = Signal(name=f"{name}_valid{k}")
            d = Signal(name=f"{name}_data{k}", reset_less=True)
            r = Signal(name=f"{name}_reset{k}", reset_less=True)
            with m.If(self.enable):
                m.d.sync += [s.eq(step), v.eq(valid), d.eq(data), r.eq(reset)]
            if onehot is not None:
                h = Signal(len(onehot), name=f"{name}_onehot{k}", reset_less=True)
                with m.If(self.enable):
                    m.d.sync += h.eq(onehot)
                onehot = h
            step, valid, data, reset = s, v, d, r
        return Issue(step, valid, data, self.enable, self.family, reset, self.steps, onehot)

    def has(self, steps):
        """The step is one of ``steps``."""
        steps = sorted(steps)
        if self.steps is not None and steps == list(range(self.steps)):
            return Const(1)
        if steps == list(range(steps[0], steps[-1] + 1)):
            return (self.step >= steps[0]) & (self.step <= steps[-1])
        return Cat(*(self.step == c for c in steps)).any()

    def active(self, steps):
        """The step is issued (or written) now and is one of ``steps``."""
        return self.enable & self.valid & self.has(steps)


def pipelined_product(m, a, b, width, enable, name, family=None, operand_regs=1, product_regs=1,
                      zero=None):
    """``a * b`` wrapped to ``signed(width)``, ``operand_regs + product_regs`` pipeline moves
    after ``a`` and ``b``.

    Both operands are registered, then the product: a DSP block's input and output registers.
    With ``operand_regs=2`` the operands pass one more register first, and with
    ``product_regs=2`` the product one more after (in the fabric, next to the logic that
    selects the operands or adds the products: the iCE40's DSP blocks are far from it). All
    registers have the clock enable ``enable`` and no reset. On ECP5 (``family="ecp5"``,
    operands of at most 18 bits) the multiplier is a ``MULT18X18D`` with its registers inside
    it. With ``zero`` the first register of ``a`` takes 0 where ``zero`` is high (its
    synchronous reset), so the product is 0.

    Returns
    -------
    amaranth.hdl.Value
        ``signed(width)``.
    """
    a, b = Value.cast(a), Value.cast(b)
    for k in range(operand_regs - 1):
        ra = Signal(a.shape(), name=f"{name}_ra{k}", reset_less=True)
        rb = Signal(b.shape(), name=f"{name}_rb{k}", reset_less=True)
        with m.If(enable):
            m.d.sync += [ra.eq(a if zero is None else Mux(zero, 0, a)), rb.eq(b)]
        a, b, zero = ra, rb, None
    if family == "ecp5" and max(len(a), len(b)) <= 18 and width <= 36:
        p = _mult18x18d(m, a, b, width, enable, name, zero)
    else:
        ra = Signal(a.shape(), name=f"{name}_ra", reset_less=True)
        rb = Signal(b.shape(), name=f"{name}_rb", reset_less=True)
        p = Signal(signed(width), name=f"{name}_p", reset_less=True)
        with m.If(enable):
            m.d.sync += [ra.eq(a if zero is None else Mux(zero, 0, a)), rb.eq(b), p.eq(ra * rb)]
    for k in range(product_regs - 1):
        rp = Signal(signed(width), name=f"{name}_rp{k}", reset_less=True)
        with m.If(enable):
            m.d.sync += rp.eq(p)
        p = rp
    return p


def _mult18x18d(m, a, b, width, enable, name, zero=None):
    """An ECP5 ``MULT18X18D``, signed, input registers A and B and the output register on
    ``CLK0``/``CE0`` (no pipeline register, not on the global set/reset); with ``zero`` the A
    register's synchronous reset is ``RST1 = zero & enable``, the others have none."""
    ax = Signal(signed(18), name=f"{name}_ax")
    bx = Signal(signed(18), name=f"{name}_bx")
    p = Signal(36, name=f"{name}_p36")
    m.d.comb += [ax.eq(a), bx.eq(b)]
    regs = {}
    for r in ("INPUTA", "INPUTB", "INPUTC", "PIPELINE", "OUTPUT"):
        regs[f"p_REG_{r}_CLK"] = "CLK0" if r in ("INPUTA", "INPUTB", "OUTPUT") else "NONE"
        regs[f"p_REG_{r}_CE"] = "CE0"
        regs[f"p_REG_{r}_RST"] = "RST1" if r == "INPUTA" else "RST0"
    ports = {}
    for k in range(18):
        ports[f"i_A{k}"], ports[f"i_B{k}"], ports[f"i_C{k}"] = ax[k], bx[k], Const(0, 1)
    for k in range(36):
        ports[f"o_P{k}"] = p[k]
    for k in range(4):
        ports[f"i_CLK{k}"] = ClockSignal() if k == 0 else Const(0, 1)
        ports[f"i_CE{k}"] = enable if k == 0 else Const(0, 1)
        ports[f"i_RST{k}"] = (zero & enable) if k == 1 and zero is not None else Const(0, 1)
    m.submodules[f"{name}_dsp"] = Instance(
        "MULT18X18D", **regs, p_GSR="DISABLED", p_RESETMODE="SYNC", p_SOURCEB_MODE="B_SHIFT",
        p_MULT_BYPASS="DISABLED", p_CAS_MATCH_REG="FALSE", p_HIGHSPEED_CLK="NONE",
        i_SIGNEDA=Const(1, 1), i_SIGNEDB=Const(1, 1), i_SOURCEA=Const(0, 1), i_SOURCEB=Const(0, 1),
        **ports)
    out = Signal(signed(width), name=f"{name}_p")
    m.d.comb += out.eq(p[:width])
    return out


# -- node circuits -------------------------------------------------------------------------------

def _operand_regs(family):
    """Registers on a multiplier's operands: two on the iCE40 (one in the fabric, one in the
    ``SB_MAC16``), else one."""
    return 2 if family == "ice40" else 1


class _Node:
    early_inputs = False

    """What the node circuits share: the output register, its next value and the step window.

    A node is *active* in steps ``start .. start + steps - 1``. ``nxt`` is the register's value
    after the step being written (the register where the node writes nothing this step); the
    node clocks ``reg <= nxt`` when a step of a data beat is written and the pipeline moves.
    Consumers that run later read ``reg``; the last node of a sequence is read through ``nxt``
    in its final step.

    A node with ``latency`` ``d > 0`` writes a step ``d`` pipeline moves after issuing it: it
    reads its operands at the issue and registers them (and partial results) on the way.
    :attr:`depth` is the latency the node has when pipelined (0: never pipelined); the PCU
    chooses each node's ``latency`` (0 or ``depth``).
    """

    steps = 1
    dynamic = False
    depth = 0
    latency = 0

    def steps_for(self, rows):
        """Steps needed when only the first ``rows`` rows are valid (at least 1); ``steps`` for
        a node whose rows are static."""
        if not self.dynamic:
            return self.steps
        return max(1, min(self.steps, self._row_steps(rows)))

    def _alloc(self, dtype, rows, cols, name, keep_reg=True, reg=None):
        if reg is not None:
            self.reg = reg
        else:
            self.reg = HTile.signals(dtype, rows, cols, f"{name}_r") if keep_reg else None
        self.nxt = HTile.signals(dtype, rows, cols, f"{name}_n")

    def _default(self, m):
        """``nxt = reg`` unless a step writes it (later statements override)."""
        if self.reg is not None:
            m.d.comb += [n.eq(r) for n, r in zip(self.nxt.flat(), self.reg.flat())]

    def _write(self, m, at, *, data_only=True):
        """``reg <= nxt`` in the node's steps of data beats (``data_only``; else of every beat),
        at the write stage ``at`` (an :class:`Issue`)."""
        if self.reg is None:
            return
        active = at.active(range(self.start, self.start + self.steps))
        if data_only:
            active = active & at.data
        with m.If(active):
            m.d.sync += [r.eq(n) for r, n in zip(self.reg.flat(), self.nxt.flat())]

    def _write_stage(self, m, issue):
        return issue.later(m, self.latency, self.name) if self.latency else issue


class ElementwiseNode(_Node):
    """An elementwise primitive on ``lanes`` ALUs, ``ceil(elements / lanes)`` steps.

    Pipelined, ``mul`` lanes are :func:`pipelined_product` (:attr:`depth` 2, 3 for
    ``family="ice40"``), ``div`` a restoring divider and ``exp``/``silu``/``rsqrt`` the
    fixed-point ALUs in three cuts (:func:`lane_depth`); the other primitives are one adder
    or less and never pipelined.

    Parameters
    ----------
    op : str
        ``add sub mul div maximum cast exp silu rsqrt``.
    attrs : dict
        The primitive's attributes.
    in_dtype, out_dtype : DType
    rows, cols : int
        The result's shape (operands broadcast to it).
    lanes : int
    name : str
        Prefix of the node's signals.
    dynamic : bool, default False
        ``rows`` is the bound of a dynamic row count (see :meth:`steps_for`).
    family : {None, "ecp5", "ice40"}, optional
        As for :class:`MatmulNode`.
    """

    def __init__(self, op, attrs, in_dtype, out_dtype, rows, cols, lanes, name, *, dynamic=False,
                 family=None):
        self.op, self.attrs = op, attrs
        self.in_dtype, self.out_dtype = in_dtype, out_dtype
        self.rows, self.cols, self.name = rows, cols, name
        self.lanes = min(lanes, rows * cols)
        self.steps = ceil_div(rows * cols, self.lanes)
        self.dynamic = dynamic
        self.operand_regs = _operand_regs(family)
        self.family = family
        if op == "mul":
            self.depth = self.operand_regs + 1
        else:
            self.depth = lane_depth(op, out_dtype.bits, family)

    def _row_steps(self, rows):
        return ceil_div(rows * self.cols, self.lanes)

    #: operands from the input ports may be read early (:meth:`elaborate`'s ``early``)
    early_inputs = True

    def elaborate(self, m, issue, operands, *, start, keep_reg=True, early=None):
        """Build the node: ``operands`` are HTiles (or ints for constants), read when a step is
        issued (``issue``, an :class:`Issue`); ``start`` is its first step. Returns ``nxt``
        (an HTile). ``early``, ``(issue0, delay, flags)``: the operands ``k`` with
        ``flags[k]`` (the input ports, which a beat holds only until its last step) are read
        at the sequencer's issue ``issue0`` and carried through ``delay`` registers per lane to
        this node's issue, ``delay`` pipeline moves later."""
        self.start = start
        self._alloc(self.out_dtype, self.rows, self.cols, self.name, keep_reg)
        self._default(m)
        rom = None
        if self.op in fixedpoint.NAMES:
            rom = segment_rom(self.op, self.in_dtype)
            m.submodules[f"{self.name}_rom"] = rom
        operand_tiles = [HTile.const(self.in_dtype, v, 1, 1) if isinstance(v, int) else v
                         for v in operands]
        lane_in, lane_out = [], []
        for lane in range(self.lanes):
            ins = [Signal(signed(self.in_dtype.bits), name=f"{self.name}_l{lane}_x{k}")
                   for k in range(len(operand_tiles))]
            name = f"{self.name}_l{lane}"
            if self.latency and self.op == "mul":
                y = pipelined_product(m, ins[0], ins[1], self.out_dtype.bits, issue.enable,
                                      name, issue.family, self.operand_regs)
            elif self.latency:
                stage = Stager(m, issue.enable, name, DIVIDE_BITS_PER_CUT[self.family],
                               issue.family)
                y = lane_op(m, self.op, self.attrs, self.in_dtype, self.out_dtype, ins,
                            rom=rom.read_port(domain="comb") if rom is not None else None,
                            name=name, stage=stage)
                assert stage.cut == self.latency + 1, (self.op, stage.cut, self.latency)
            else:
                y = lane_op(m, self.op, self.attrs, self.in_dtype, self.out_dtype, ins,
                            rom=rom.read_port(domain="comb") if rom is not None else None,
                            name=name)
            out = Signal(signed(self.out_dtype.bits), name=f"{name}_y")
            m.d.comb += out.eq(y)
            lane_in.append(ins)
            lane_out.append(out)
        at = self._write_stage(m, issue)
        flags = [False] * len(operand_tiles) if early is None else list(early[2])
        now = [k for k, f in enumerate(flags) if not f]
        soon = [k for k, f in enumerate(flags) if f]
        lane_early = [[None] * len(operand_tiles) for _ in range(self.lanes)]
        for lane in range(self.lanes):
            for k in soon:  # read at the sequencer's issue, delayed to this node's
                v = Signal(signed(self.in_dtype.bits), name=f"{self.name}_l{lane}_e{k}")
                lane_early[lane][k] = v
                for d in range(early[1]):
                    r = Signal(signed(self.in_dtype.bits), name=f"{self.name}_l{lane}_e{k}_{d}",
                               reset_less=True)
                    with m.If(issue.enable):
                        m.d.sync += r.eq(v)
                    v = r
                m.d.comb += lane_in[lane][k].eq(v)
        for stage, assign, ks in ((issue, "in", now), (early and early[0], "in", soon),
                                  (at, "out", None)):
            if assign == "in" and not ks:
                continue
            with m.Switch(stage.step):
                for c in range(self.steps):
                    with m.Case(start + c):
                        for lane in range(self.lanes):
                            e = c * self.lanes + lane
                            if e >= self.rows * self.cols:
                                break
                            i, j = divmod(e, self.cols)
                            if assign == "out":
                                m.d.comb += self.nxt.elems[i][j].eq(lane_out[lane])
                                continue
                            dst = lane_in[lane] if stage is issue else lane_early[lane]
                            m.d.comb += [dst[k].eq(operand_tiles[k].at(i, j)) for k in ks]
        self._write(m, at)
        return self.nxt


class RowReduceNode(_Node):
    """``row_sum``/``row_max`` of an ``[R, C]`` tile: lane ``l`` folds rows ``l, l + lanes, ...``
    one column per step, ``ceil(R / lanes) * C`` steps (never pipelined: a fold step reads the
    previous one's result).

    Parameters
    ----------
    op : str
        ``"row_sum"`` or ``"row_max"``.
    dtype : DType
    rows, cols : int
        The operand's shape.
    lanes : int
    name : str
    dynamic : bool, default False
        ``rows`` is the bound of a dynamic row count (see :meth:`steps_for`).
    """

    def __init__(self, op, dtype, rows, cols, lanes, name, *, dynamic=False):
        self.op, self.dtype, self.rows, self.cols, self.name = op, dtype, rows, cols, name
        self.lanes = min(lanes, rows)
        self.steps = ceil_div(rows, self.lanes) * cols
        self.dynamic = dynamic

    def _row_steps(self, rows):
        return ceil_div(rows, self.lanes) * self.cols

    def elaborate(self, m, issue, operands, *, start, keep_reg=True):
        self.start = start
        self._alloc(self.dtype, self.rows, 1, self.name, keep_reg)
        self._default(m)
        (x,) = operands
        bits = self.dtype.bits
        lane_acc, lane_x, lane_out = [], [], []
        for lane in range(self.lanes):
            acc = Signal(signed(bits), name=f"{self.name}_l{lane}_acc")
            xv = Signal(signed(bits), name=f"{self.name}_l{lane}_x")
            out = Signal(signed(bits), name=f"{self.name}_l{lane}_y")
            fold = wrap(acc + xv, bits) if self.op == "row_sum" else Mux(xv > acc, xv, acc)
            m.d.comb += out.eq(fold)
            lane_acc.append(acc)
            lane_x.append(xv)
            lane_out.append(out)
        src = self.reg
        with m.Switch(issue.step):
            for c in range(self.steps):
                g, j = divmod(c, self.cols)
                with m.Case(start + c):
                    for lane in range(self.lanes):
                        i = g * self.lanes + lane
                        if i >= self.rows:
                            break
                        if j == 0:  # the row's first column starts the fold
                            m.d.comb += self.nxt.elems[i][0].eq(x.at(i, 0))
                        else:
                            m.d.comb += [lane_acc[lane].eq(src.elems[i][0]), lane_x[lane].eq(x.at(i, j)),
                                         self.nxt.elems[i][0].eq(lane_out[lane])]
        self._write(m, issue)
        return self.nxt


class MatmulNode(_Node):
    """``a @ b`` / ``a @ b.T`` (``matmul``) or ``acc + a @ b`` (``mac``) on ``multipliers``
    multipliers, ``ceil(M*K*N / multipliers)`` steps, summing modulo ``2**bits(out)``.

    The products of a step that go to one output are summed by an adder tree and added to the
    output's running sum. Pipelined (:attr:`depth` ``2 + ceil(log2(terms))``, ``terms`` the
    most products one output gets in a step), the multipliers are :func:`pipelined_product`
    (operands and products registered: DSP blocks), every level of the tree is registered, and
    the running sum is the only adder in its register's loop. With ``split`` (``h`` bits), a
    pipelined running sum wider than ``h`` bits is two registers: the low ``h`` bits add in one
    stage, the high bits with the low half's carry in the next (one more stage, carry chains of
    ``h`` bits: for slow carries, the iCE40's). A ``mac`` that is the PCU's whole accumulator
    (``acc_init``) keeps it in the node's register and restarts it itself (the PCU's
    accumulator exists once).

    Parameters
    ----------
    in_dtype, out_dtype : DType
        Operand and result dtypes.
    m_, k, n : int
        ``a`` is ``[m_, k]``, the result ``[m_, n]``.
    transpose_b : bool
        ``b`` is stored ``[n, k]``.
    fused_acc : bool
        ``mac``: the sums start from the first operand (an ``[m_, n]`` tile).
    multipliers : int
    name : str
    dynamic : bool, default False
        ``m_`` is the bound of ``a``'s dynamic row count: the products are ordered row by row
        (``i`` slowest, ``p = i * K * N + k * N + j``), so the rows below the count take the
        first ``ceil(rows * K * N / multipliers)`` steps (:meth:`steps_for`).
    family : {None, "ecp5", "ice40"}, optional
        ``"ice40"``: a running sum wider than 16 bits is split into 16-bit halves, and the
        multipliers' operands pass a fabric register before the ``SB_MAC16``. Either family:
        products that are not summed by a tree pass a fabric register on their way to the
        running sums.
    """

    def __init__(self, in_dtype, out_dtype, m_, k, n, transpose_b, fused_acc, multipliers, name,
                 *, dynamic=False, family=None):
        self.in_dtype, self.out_dtype = in_dtype, out_dtype
        self.m, self.k, self.n = m_, k, n
        self.transpose_b, self.fused_acc, self.name = transpose_b, fused_acc, name
        self.products = m_ * k * n
        self.multipliers = min(multipliers, self.products)
        self.steps = ceil_div(self.products, self.multipliers)
        self.dynamic = dynamic
        self.split = 16 if family == "ice40" and out_dtype.bits > 16 else None
        self.operand_regs = _operand_regs(family)
        # plan[c] = {output: [(multiplier, k), ...]}: the products of step c
        self.plan = []
        for c in range(self.steps):
            contrib = {}
            for u in range(self.multipliers):
                p = c * self.multipliers + u
                if p >= self.products:
                    break
                kk, o = self._product(p)
                contrib.setdefault(o, []).append((u, kk))
            self.plan.append(contrib)
        terms = max(len(units) for contrib in self.plan for units in contrib.values())
        self.levels = (terms - 1).bit_length()
        # on an FPGA a product that goes straight into a running sum passes a fabric register
        # too (the DSP blocks' outputs are far from the adders)
        self.product_regs = 2 if family is not None and self.levels == 0 else 1
        self.depth = self.operand_regs + self.product_regs + self.levels + (self.split is not None)

    @property
    def late_reads(self):
        """When a ``mac`` reads its accumulator operand, in pipeline moves after issuing a step:
        its low half a stage before its high half when split."""
        if self.latency and self.split is not None:
            return (self.latency - 1, self.latency)
        return (self.latency,)

    def _row_steps(self, rows):
        return ceil_div(rows * self.k * self.n, self.multipliers)

    def _product(self, p):
        """``(k, output index)`` of product number ``p`` in the node's order."""
        M, K, N = self.m, self.k, self.n
        if self.dynamic:
            i, r = divmod(p, K * N)
            kk, j = divmod(r, N)
            return kk, i * N + j
        return divmod(p, M * N)

    def elaborate(self, m, issue, operands, *, start, keep_reg=True, acc_init=None):
        """As :meth:`ElementwiseNode.elaborate`. With ``acc_init`` (``mac`` only; a tile of
        constants) the node's register is the PCU's accumulator: every sum adds to it, it
        restarts from ``acc_init`` after a step whose ``reset`` is set (and on the domain's
        reset), and a stop-only beat adds zero products (its ``a`` operands are zero), so that
        ``nxt`` is the accumulator at every beat's output stage. The accumulator operand is then
        not read."""
        self.start = start
        self._flags = {}
        M, N, U = self.m, self.n, self.multipliers
        merged = acc_init is not None
        piped = self.latency > 0
        h = self.split if piped else None
        # a merged accumulator every output of which adds in every step can add zero in every
        # cycle the pipeline moves (its ``a`` operands are zero when no data step is issued), so
        # its registers need no other enable
        self._always = merged and all(o in contrib for contrib in self.plan for o in range(M * N))
        issued = issue.data & (issue.active(range(start, start + self.steps)) if self._always
                               else 1)
        if self.fused_acc:
            acc, a, b = operands
        else:
            (a, b), acc = operands, None
        W = self.out_dtype.bits
        pw = min(2 * self.in_dtype.bits, W)
        ma = [Signal(signed(self.in_dtype.bits), name=f"{self.name}_m{u}_a") for u in range(U)]
        mb = [Signal(signed(self.in_dtype.bits), name=f"{self.name}_m{u}_b") for u in range(U)]
        choose_a, choose_b = [{} for _ in range(U)], [{} for _ in range(U)]
        for c, contrib in enumerate(self.plan):
            for o, units in contrib.items():
                i, j = divmod(o, N)
                for u, kk in units:
                    choose_a[u][start + c] = a.at(i, kk)
                    choose_b[u][start + c] = b.at(j, kk) if self.transpose_b else b.at(kk, j)
        for u in range(U):
            issue.select(m, ma[u], choose_a[u])
            issue.select(m, mb[u], choose_b[u])
        # a merged accumulator adds zero products when no data step is issued: ``a`` is zero
        zero = ~issued if merged else None
        stages = [issue]  # the issue, then one stage per pipeline register
        if piped:
            for k in range(1, self.latency + 1):
                stages.append(stages[-1].later(m, 1, f"{self.name}_d{k}"))
            prod = [pipelined_product(m, ma[u], mb[u], pw, issue.enable, f"{self.name}_m{u}",
                                      issue.family, self.operand_regs, self.product_regs, zero)
                    for u in range(U)]
            at = stages[self.operand_regs + self.product_regs]
        else:
            prod = []
            for u in range(U):
                p = Signal(signed(pw), name=f"{self.name}_m{u}_p")
                m.d.comb += p.eq((ma[u] if zero is None else Mux(zero, 0, ma[u])) * mb[u])
                prod.append(p)
            at = issue
        terms = self._terms(m, at, prod, pw)
        for level in range(self.levels):
            terms = {o: self._tree_level(m, ts, W, f"{self.name}_o{o}_t{level}", piped,
                                         issue.enable) for o, ts in terms.items()}
        if h is None:
            self._sum(m, stages, terms, acc, acc_init, keep_reg)
        else:
            self._split_sum(m, stages, terms, acc, acc_init, h)
        return self.nxt

    def _init(self, acc_init, i, j):
        return acc_init.elems[i][j].value

    def _start_value(self, acc, i, j):
        """What an output's sum starts from in a beat (not merged): the fused operand, or 0."""
        return acc.at(i, j) if acc is not None else Const(0, signed(self.out_dtype.bits))

    def _sum(self, m, stages, terms, acc, acc_init, keep_reg):
        """One adder per output: the running sum (or at the output's first step of a beat its
        start) plus the step's products, written at the last stage."""
        M, N, W = self.m, self.n, self.out_dtype.bits
        merged = acc_init is not None
        if merged:
            self.reg = HTile(self.out_dtype, [
                [Signal(signed(W), name=f"acc_{i}_{j}", init=self._init(acc_init, i, j),
                        reset_less=True) for j in range(N)] for i in range(M)])
            self.nxt = HTile.signals(self.out_dtype, M, N, f"{self.name}_n")
        else:
            self._alloc(self.out_dtype, M, N, self.name, keep_reg or self.steps > 1)
        self._default(m)
        at = stages[-1]
        for o in range(M * N):
            i, j = divmod(o, N)
            active = [self.start + c for c, contrib in enumerate(self.plan) if o in contrib]
            if merged:
                base = self.reg.elems[i][j]
            elif len(active) == 1:
                base = self._start_value(acc, i, j)
            else:
                base = Mux(self._fresh(m, stages, active[0], f"{self.name}_f{o}"),
                           self._start_value(acc, i, j), self.reg.elems[i][j])
            (total,) = terms[o]
            total_o = Signal(signed(W), name=f"{self.name}_s{o}")
            m.d.comb += total_o.eq(base + total)
            if len(active) == self.steps or self.reg is None:
                m.d.comb += self.nxt.elems[i][j].eq(total_o)
            else:  # the output holds in the steps that do not add to it
                with m.Switch(at.step):
                    with m.Case(*active):
                        m.d.comb += self.nxt.elems[i][j].eq(total_o)
        steps = range(self.start, self.start + self.steps)
        last = len(stages) - 1
        if merged:
            self._acc_write(m, stages, last, steps, [
                                (self.reg.elems[i][j], self.nxt.elems[i][j],
                                 self._init(acc_init, i, j)) for i in range(M) for j in range(N)])
        elif self.reg is not None:
            with m.If(at.enable & self._writes(m, stages, last, steps, data=True)):
                m.d.sync += [r.eq(n) for r, n in zip(self.reg.flat(), self.nxt.flat())]

    def _flag(self, m, stages, k, fn, name):
        """``fn(stages[k])`` as a register of its own, set from the stage before (so an enable
        that uses it is one gate after the pipeline's enable); ``fn(stages[0])`` for ``k = 0``."""
        if k == 0:
            return fn(stages[0])
        flag = Signal(name=f"{self.name}_{name}_{k}")
        with m.If(stages[k - 1].enable):
            m.d.sync += flag.eq(fn(stages[k - 1]))
        return flag

    def _writes(self, m, stages, k, steps, data=False):
        """Stage ``k`` holds an issued step among ``steps`` (of a data beat, with ``data``)."""
        key = (k, tuple(steps), data)
        if key not in self._flags:
            self._flags[key] = self._flag(
                m, stages, k, lambda st: st.valid & st.has(steps) & (st.data if data else 1),
                f"w{len(self._flags)}")
        return self._flags[key]

    def _restarts(self, m, stages, k):
        """Stage ``k`` holds a beat's last step after which the accumulator restarts."""
        key = (k, "restart")
        if key not in self._flags:
            self._flags[key] = self._flag(m, stages, k, lambda st: st.valid & st.reset, "restart")
        return self._flags[key]

    def _acc_write(self, m, stages, k, steps, regs, *, restart_at=None):
        """Write ``(register, value, init)`` triples of a merged accumulator at stage ``k`` when
        it holds one of ``steps``; restart them from init when stage ``restart_at`` (default
        ``k``) holds a beat's last step after which the accumulator restarts, and on the
        domain's reset. One enable and one reset per register, each a gate after the pipeline's
        enable: when every output adds in every step the registers take their value whenever
        the pipeline moves, else when a register of its own (write or restart) says so."""
        restart_at = k if restart_at is None else restart_at
        restart = self._restarts(m, stages, restart_at)
        if self._always and restart_at == k:
            enable = stages[k].enable
        else:
            key = (k, restart_at, tuple(steps), "wr")
            if key not in self._flags:
                flag = Signal(name=f"{self.name}_wr{len(self._flags)}")
                w, r = stages[k - 1], stages[restart_at - 1]
                with m.If(w.enable):
                    m.d.sync += flag.eq(w.valid & w.has(steps) | r.valid & r.reset)
                self._flags[key] = flag
            enable = stages[k].enable & self._flags[key]
        with m.If(enable | ResetSignal()):
            m.d.sync += [r.eq(v) for r, v, _ in regs]
            with m.If(restart | ResetSignal()):
                m.d.sync += [r.eq(i) for r, _, i in regs]

    def _split_sum(self, m, stages, terms, acc, acc_init, h):
        """The running sums as low and high halves: the low ``h`` bits at the stage before the
        last, the high bits (plus the low half's carry, registered) at the last."""
        M, N, W = self.m, self.n, self.out_dtype.bits
        merged = acc_init is not None
        lo_at, hi_at = stages[-2], stages[-1]
        lo_k, hi_k = len(stages) - 2, len(stages) - 1
        lo_regs, hi_regs = [], []
        self.nxt = HTile.signals(self.out_dtype, M, N, f"{self.name}_n")
        for o in range(M * N):
            i, j = divmod(o, N)
            init = self._init(acc_init, i, j) if merged else 0
            name = f"acc_{i}_{j}" if merged else f"{self.name}_r_{i}_{j}"
            lo = Signal(h, name=f"{name}_lo", init=init & ((1 << h) - 1), reset_less=merged)
            hi = Signal(signed(W - h), name=f"{name}_hi", init=init >> h, reset_less=merged)
            lo_regs.append(lo)
            hi_regs.append(hi)
        self.reg = HTile(self.out_dtype, [[Cat(lo_regs[i * N + j], hi_regs[i * N + j]).as_signed()
                                           for j in range(N)] for i in range(M)])
        self._default(m)
        for o in range(M * N):
            i, j = divmod(o, N)
            lo, hi = lo_regs[o], hi_regs[o]
            active = [self.start + c for c, contrib in enumerate(self.plan) if o in contrib]
            (total,) = terms[o]
            tv = Value.cast(total)
            if merged:
                init = self._init(acc_init, i, j)
                init_lo, init_hi = init & ((1 << h) - 1), init >> h
                lo_base, hi_base = lo, hi
            else:
                sv = Value.cast(self._start_value(acc, i, j))
                sv = Cat(sv, sv[-1].replicate(W - len(sv))) if len(sv) < W else sv
                lo_base = Mux(self._fresh(m, stages[:-1], active[0], f"{self.name}_f{o}"),
                              sv[:h], lo)
                hi_base = Mux(self._fresh(m, stages, active[0], f"{self.name}_g{o}"),
                              sv[h:].as_signed(), hi)
            lo_sum = Signal(h + 1, name=f"{self.name}_s{o}_lo")
            m.d.comb += lo_sum.eq(lo_base + tv[:h])
            carry = Signal(name=f"{self.name}_s{o}_c", reset_less=True)
            top = tv[h:].as_signed() if len(tv) > h else tv[-1:].as_signed()
            upper = Signal(top.shape(), name=f"{self.name}_s{o}_t", reset_less=True)
            hi_sum = Signal(signed(W - h), name=f"{self.name}_s{o}_hi")
            m.d.comb += hi_sum.eq(hi_base + upper + carry)
            with m.If(lo_at.enable):
                m.d.sync += [carry.eq(lo_sum[h]), upper.eq(top)]
            if merged:
                self._acc_write(m, stages, hi_k, active, [(hi, hi_sum, init_hi)])
                # the restart comes with the beat's last step; the next beat's first step may
                # write the low half in the same cycle as that step's high half, unless the
                # output does not add in its first step
                if active[0] > self.start:  # the low half restarts with the high half
                    self._acc_write(m, stages, lo_k, active, [(lo, lo_sum[:h], init_lo)],
                                    restart_at=hi_k)
                else:  # it restarts a stage earlier, and a copy keeps the beat's low half
                    self._acc_write(m, stages, lo_k, active, [(lo, lo_sum[:h], init_lo)])
                    held = Signal(h, name=f"{self.name}_s{o}_held", reset_less=True)
                    with m.If(lo_at.enable):
                        m.d.sync += held.eq(lo_sum[:h])
                        if not self._always:
                            with m.If(~self._writes(m, stages, lo_k, active)):
                                m.d.sync += held.eq(lo)
                    lo = held
            else:
                with m.If(lo_at.enable & self._writes(m, stages, lo_k, active, data=True)):
                    m.d.sync += lo.eq(lo_sum[:h])
                with m.If(hi_at.enable & self._writes(m, stages, hi_k, active, data=True)):
                    m.d.sync += hi.eq(hi_sum)
            if len(active) == self.steps:
                m.d.comb += self.nxt.elems[i][j].eq(Cat(lo, hi_sum))
            else:  # the output holds in the steps that do not add to it
                m.d.comb += self.nxt.elems[i][j].eq(Cat(lo, hi))
                with m.Switch(hi_at.step):
                    with m.Case(*active):
                        m.d.comb += self.nxt.elems[i][j].eq(Cat(lo, hi_sum))

    def _fresh(self, m, stages, first, name):
        """Whether the sum being written at the last of ``stages`` starts afresh: it is at step
        ``first``. Pipelined, it is a register of its own (per output, so each drives one sum's
        bits), set from the stage before."""
        if len(stages) == 1:
            return stages[0].step == first
        prev = stages[-2]
        fresh = Signal(name=name)
        with m.If(prev.enable):
            m.d.sync += fresh.eq(prev.step == first)
        return fresh

    def _terms(self, m, at, prod, pw):
        """Each output's tree inputs: a product, or a multiplexer of the products the output gets
        in the step at ``at`` (0 where it gets fewer)."""
        terms = {}
        for o in range(self.m * self.n):
            active = [c for c, contrib in enumerate(self.plan) if o in contrib]
            count = max(len(self.plan[c][o]) for c in active)
            ts = []
            for q in range(count):
                units = {c: self.plan[c][o][q][0] for c in active if q < len(self.plan[c][o])}
                if len(units) == len(active) and len(set(units.values())) == 1:
                    ts.append(prod[units[active[0]]])
                    continue
                t = Signal(signed(pw), name=f"{self.name}_o{o}_x{q}")
                with m.Switch(at.step):
                    for c, u in units.items():
                        with m.Case(self.start + c):
                            m.d.comb += t.eq(prod[u])
                ts.append(t)
            terms[o] = ts
        return terms

    @staticmethod
    def _tree_level(m, ts, W, name, piped, enable):
        """One level of an adder tree: pairs summed (registered when ``piped``)."""
        out = []
        for q in range(0, len(ts), 2):
            pair = ts[q:q + 2]
            width = min(max(len(Value.cast(t)) for t in pair) + (len(pair) - 1), W)
            s = Signal(signed(width), name=f"{name}_{q // 2}", reset_less=piped)
            value = pair[0] + pair[1] if len(pair) == 2 else pair[0]
            if piped:
                with m.If(enable):
                    m.d.sync += s.eq(value)
            else:
                m.d.comb += s.eq(value)
            out.append(s)
        return out
