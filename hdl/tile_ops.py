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
(:mod:`stepforge.sim.arith`): integer sums are modular, so the hardware's order of additions
gives the same bits as the reference's sequential order.

The fixed-point ``exp``, ``silu`` and ``rsqrt`` ALUs (:func:`fixed_point_alu`) follow the
integer sequences of :mod:`stepforge.sim.fixedpoint` step for step and read their breakpoints
from :func:`~stepforge.sim.fixedpoint.spec`, held in a ROM (:class:`amaranth.lib.memory.Memory`
with one combinational read port per lane) of ``(base, delta)`` pairs, one per segment.
"""

from amaranth.hdl import Cat, Const, Mux, Signal, signed, unsigned
from amaranth.lib import data
from amaranth.lib.memory import Memory

from ..sim import fixedpoint

__all__ = ["HTile", "ceil_div", "wrap", "clamp", "lane_op", "fixed_point_alu", "segment_rom",
           "ElementwiseNode", "RowReduceNode", "MatmulNode"]


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


def lane_op(m, op, attrs, in_dtype, out_dtype, operands, *, rom=None, name):
    """One element of an elementwise primitive, combinationally.

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

    Returns
    -------
    amaranth.hdl.Value
        ``signed(out_dtype.bits)``, the reference's bits (:mod:`stepforge.sim.arith`).
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
        return _divide(m, operands[0], operands[1], bits, name)
    if op == "cast":
        x = operands[0]
        if attrs.get("saturate") and out_dtype.bits < in_dtype.bits:
            return wrap(clamp(x, out_dtype.min, out_dtype.max), bits)
        if out_dtype.bits < in_dtype.bits:
            return wrap(x, bits)
        return x
    if op in fixedpoint.NAMES:
        return fixed_point_alu(m, op, in_dtype, operands[0], rom, name=name)
    raise ValueError(f"no elementwise ALU for {op!r}")


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
    """``(base, delta)`` of every segment of a :class:`~stepforge.sim.fixedpoint.QSpec` table,
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


def fixed_point_alu(m, op, dtype, x, rom, *, name):
    """One lane of the fixed-point ``exp``/``silu``/``rsqrt`` (``sim/fixedpoint.py``, bit exact).

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

    Returns
    -------
    amaranth.hdl.Value
        ``signed(dtype.bits)``.
    """
    p = name
    s = fixedpoint.spec(op, dtype)
    B, F, K = s.bits, s.frac_bits, s.index_bits
    res = Signal(signed(B + 2), name=f"{p}_res")
    if op == "exp":
        Sr = F + s.log2e_bits
        FB, P = s.frac_width, s.precision
        t = Signal(signed(B + s.log2e.bit_length() + 1), name=f"{p}_t")
        n = Signal(signed(len(t) - Sr), name=f"{p}_n")
        f = Signal(FB, name=f"{p}_f")
        y = Signal(signed(P + 3), name=f"{p}_y")
        shm1 = Signal(range(P + 2), name=f"{p}_shm1")  # the rounding shift minus one
        m.d.comb += [
            t.eq(x * s.log2e),
            n.eq(t[Sr:].as_signed()),
            rom.addr.eq(t[Sr - K:Sr]),
            f.eq(t[Sr - K - FB:Sr - K]),
            y.eq(rom.data.base + ((rom.data.delta * f) >> FB)),
        ]
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
        a = Signal(unsigned(B), name=f"{p}_a")
        f = Signal(S, name=f"{p}_f")
        g_ext = Signal(signed(max(v.bit_length() for v in s.table) + 3), name=f"{p}_gx")
        g = Signal(signed(B + 1), name=f"{p}_g")
        inside = a < (1 << (S + K))
        m.d.comb += [
            a.eq(_abs_unsigned(x, B)),
            rom.addr.eq(a[S:S + K]),
            f.eq(a[:S]),
            g_ext.eq(rom.data.base + ((rom.data.delta * f) >> S)),
            g.eq(Mux(inside, _round_shift(m, g_ext, G - 1, len(g_ext), p), a)),
            res.eq(Mux(x < 0, g - a, g)),
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
            y.eq(rom.data.base + ((rom.data.delta * f) >> W)),
            shm1.eq((P - F - F // 2 - 1) + (e >> 1)),
            res.eq(Mux(x > 0, _round_shift(m, y, shm1, P + 3, p), s.max)),
        ]
    else:
        raise ValueError(f"no fixed-point ALU for {op!r}")
    return wrap(clamp(res, s.min, s.max), B)


# -- node circuits -------------------------------------------------------------------------------

class _Node:
    """What the node circuits share: the output register, its next value and the step window.

    A node is *active* in steps ``start .. start + steps - 1``. ``nxt`` is the register's value
    after the current step (the register where the node writes nothing this step); the PCU
    clocks ``reg <= nxt`` when the sequence advances. Consumers that run later read ``reg``; the
    last node of a sequence is read through ``nxt`` in its final step.
    """

    steps = 1
    dynamic = False

    def steps_for(self, rows):
        """Steps needed when only the first ``rows`` rows are valid (at least 1); ``steps`` for
        a node whose rows are static."""
        if not self.dynamic:
            return self.steps
        return max(1, min(self.steps, self._row_steps(rows)))

    def _alloc(self, dtype, rows, cols, name, keep_reg=True):
        self.reg = HTile.signals(dtype, rows, cols, f"{name}_r") if keep_reg else None
        self.nxt = HTile.signals(dtype, rows, cols, f"{name}_n")

    def _default(self, m):
        """``nxt = reg`` unless a step writes it (later statements override)."""
        if self.reg is not None:
            m.d.comb += [n.eq(r) for n, r in zip(self.nxt.flat(), self.reg.flat())]

    def clock(self, m, step, advance):
        """``reg <= nxt`` on the node's steps when ``advance`` is high."""
        if self.reg is None:
            return
        active = (step >= self.start) & (step < self.start + self.steps)
        with m.If(advance & active):
            m.d.sync += [r.eq(n) for r, n in zip(self.reg.flat(), self.nxt.flat())]


class ElementwiseNode(_Node):
    """An elementwise primitive on ``lanes`` ALUs, ``ceil(elements / lanes)`` steps.

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
    """

    def __init__(self, op, attrs, in_dtype, out_dtype, rows, cols, lanes, name, *, dynamic=False):
        self.op, self.attrs = op, attrs
        self.in_dtype, self.out_dtype = in_dtype, out_dtype
        self.rows, self.cols, self.name = rows, cols, name
        self.lanes = min(lanes, rows * cols)
        self.steps = ceil_div(rows * cols, self.lanes)
        self.dynamic = dynamic

    def _row_steps(self, rows):
        return ceil_div(rows * self.cols, self.lanes)

    def elaborate(self, m, step, operands, *, start, keep_reg=True):
        """Build the node: ``operands`` are HTiles (or ints for constants), ``start`` its first
        step. Returns ``nxt`` (an HTile)."""
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
            port = rom.read_port(domain="comb") if rom is not None else None
            out = Signal(signed(self.out_dtype.bits), name=f"{self.name}_l{lane}_y")
            m.d.comb += out.eq(lane_op(m, self.op, self.attrs, self.in_dtype, self.out_dtype, ins,
                                       rom=port, name=f"{self.name}_l{lane}"))
            lane_in.append(ins)
            lane_out.append(out)
        with m.Switch(step):
            for c in range(self.steps):
                with m.Case(start + c):
                    for lane in range(self.lanes):
                        e = c * self.lanes + lane
                        if e >= self.rows * self.cols:
                            break
                        i, j = divmod(e, self.cols)
                        m.d.comb += [x.eq(t.at(i, j)) for x, t in zip(lane_in[lane], operand_tiles)]
                        m.d.comb += self.nxt.elems[i][j].eq(lane_out[lane])
        return self.nxt


class RowReduceNode(_Node):
    """``row_sum``/``row_max`` of an ``[R, C]`` tile: lane ``l`` folds rows ``l, l + lanes, ...``
    one column per step, ``ceil(R / lanes) * C`` steps.

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

    def elaborate(self, m, step, operands, *, start, keep_reg=True):
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
        src = self.reg if self.reg is not None else None
        with m.Switch(step):
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
        return self.nxt


class MatmulNode(_Node):
    """``a @ b`` / ``a @ b.T`` (``matmul``) or ``acc + a @ b`` (``mac``) on ``multipliers``
    multipliers, ``ceil(M*K*N / multipliers)`` steps, summing modulo ``2**bits(out)``.

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
    """

    def __init__(self, in_dtype, out_dtype, m_, k, n, transpose_b, fused_acc, multipliers, name,
                 *, dynamic=False):
        self.in_dtype, self.out_dtype = in_dtype, out_dtype
        self.m, self.k, self.n = m_, k, n
        self.transpose_b, self.fused_acc, self.name = transpose_b, fused_acc, name
        self.products = m_ * k * n
        self.multipliers = min(multipliers, self.products)
        self.steps = ceil_div(self.products, self.multipliers)
        self.dynamic = dynamic

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

    def elaborate(self, m, step, operands, *, start, keep_reg=True):
        self.start = start
        M, N, U = self.m, self.n, self.multipliers
        self._alloc(self.out_dtype, M, N, self.name, keep_reg or self.steps > 1)
        self._default(m)
        if self.fused_acc:
            acc, a, b = operands
        else:
            (a, b), acc = operands, None
        W = self.out_dtype.bits
        pw = min(2 * self.in_dtype.bits, W)
        ma, mb, prod = [], [], []
        for u in range(U):
            x = Signal(signed(self.in_dtype.bits), name=f"{self.name}_m{u}_a")
            y = Signal(signed(self.in_dtype.bits), name=f"{self.name}_m{u}_b")
            p = Signal(signed(pw), name=f"{self.name}_m{u}_p")
            m.d.comb += p.eq(x * y)
            ma.append(x)
            mb.append(y)
            prod.append(p)
        first = {}
        plan = []
        for c in range(self.steps):
            contrib = {}
            for u in range(U):
                p = c * U + u
                if p >= self.products:
                    break
                kk, o = self._product(p)
                contrib.setdefault(o, []).append((u, kk))
                first.setdefault(o, c)
            plan.append(contrib)
        with m.Switch(step):
            for c, contrib in enumerate(plan):
                with m.Case(start + c):
                    for o, units in contrib.items():
                        i, j = divmod(o, N)
                        for u, kk in units:
                            bv = b.at(j, kk) if self.transpose_b else b.at(kk, j)
                            m.d.comb += [ma[u].eq(a.at(i, kk)), mb[u].eq(bv)]
                        if first[o] == c:
                            base = acc.at(i, j) if acc is not None else Const(0, signed(W))
                        else:
                            base = self.reg.elems[i][j]
                        total = base
                        for u, _ in units:
                            total = total + prod[u]
                        m.d.comb += self.nxt.elems[i][j].eq(wrap(total, W))
        return self.nxt
