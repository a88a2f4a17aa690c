"""``matmul`` and ``mac`` on ``multipliers`` multipliers (:class:`MatmulNode`): adder trees and
running sums, pipelined, optionally split into halves, or the PCU's accumulator itself."""

from amaranth.hdl import Cat, Const, Mux, ResetSignal, Signal, Value, signed

from .dsp import _operand_regs, pipelined_product
from .node import _Node
from .tile import HTile, ceil_div

__all__ = ["MatmulNode"]


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

    def accumulator_bits(self, beats, init):
        """The bits of a running sum that starts at ``init`` and adds the products of at most
        ``beats`` beats (``k`` to each output in a beat), at most the result's width.

        Every such sum lies in ``[init + beats * k * pmin, init + beats * k * pmax]`` (``pmin``,
        ``pmax``: the extreme products of two operands), so a register of this many bits holds
        it exactly and its sign extension is the result's wrapping sum. Operands whose product
        the result's width truncates get the full width.
        """
        W, dt = self.out_dtype.bits, self.in_dtype
        if 2 * dt.bits > W:
            return W
        n = beats * self.k
        lo, hi = init + n * dt.min * dt.max, init + n * dt.min * dt.min
        return min(W, max(_signed_bits(lo), _signed_bits(hi)))

    def elaborate(self, m, issue, operands, *, start, keep_reg=True, acc_init=None,
                  acc_bits=None):
        """As :meth:`ElementwiseNode.elaborate`. With ``acc_init`` (``mac`` only; a tile of
        constants) the node's register is the PCU's accumulator: every sum adds to it, it
        restarts from ``acc_init`` after a step whose ``reset`` is set (and on the domain's
        reset, a cycle late: :meth:`_held_reset`), and a stop-only beat adds zero products (its ``a`` operands are zero), so that
        ``nxt`` is the accumulator at every beat's output stage. The accumulator operand is then
        not read. ``acc_bits`` (with ``acc_init``; :meth:`accumulator_bits`): the accumulator
        and its adders keep that many bits, sign-extended into ``nxt``."""
        self.start = start
        self.acc_bits = acc_bits if acc_init is not None and acc_bits is not None \
            else self.out_dtype.bits
        self._flags = {}
        self._reset = None
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
        M, N = self.m, self.n
        merged = acc_init is not None
        A = self.acc_bits
        if merged:
            self.reg = HTile(self.out_dtype, [
                [Signal(signed(A), name=f"acc_{i}_{j}", init=self._init(acc_init, i, j),
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
            # (``A`` is below the result's width only for a merged accumulator: its sums fit
            # ``A`` bits, sign-extended into ``nxt``)
            total_o = Signal(signed(A), name=f"{self.name}_s{o}")
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
        ``k``) holds a beat's last step after which the accumulator restarts, and while the
        domain's reset is (a cycle late, :meth:`_held_reset`). One enable and one reset per register, each a gate after the pipeline's
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
        held = self._held_reset(m)
        with m.If(enable | held):
            m.d.sync += [r.eq(v) for r, v, _ in regs]
            with m.If(restart | held):
                m.d.sync += [r.eq(i) for r, _, i in regs]

    def _held_reset(self, m):
        """The domain's reset a cycle late, in a register of the node's own: the accumulator
        restarts while it is high. The unit's reset is the System's hold until ``start``, one
        flip-flop fanned out to every unit, and through the accumulators' enables it was the
        worst ECP5 GEMV path at 200 MHz (48 inputs, 5.5 ns over 4 cells). A beat's sum reaches
        the accumulator two cycles after the reset falls at the earliest (its operands come
        through a FIFO and the issue stage), so the late copy loses nothing."""
        if self._reset is None:
            self._reset = Signal(name=f"{self.name}_reset_held", init=1, reset_less=True)
            m.d.sync += self._reset.eq(ResetSignal())
        return self._reset

    def _split_sum(self, m, stages, terms, acc, acc_init, h):
        """The running sums as low and high halves: the low ``h`` bits at the stage before the
        last, the high bits (plus the low half's carry, registered) at the last."""
        M, N = self.m, self.n
        merged = acc_init is not None
        # a merged accumulator of ``acc_bits`` at most ``h`` keeps a high half of one bit
        W = max(self.acc_bits, h + 1)
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
            # (signed: a narrowed accumulator sign-extends into ``nxt``)
            if len(active) == self.steps:
                m.d.comb += self.nxt.elems[i][j].eq(Cat(lo, hi_sum).as_signed())
            else:  # the output holds in the steps that do not add to it
                m.d.comb += self.nxt.elems[i][j].eq(Cat(lo, hi).as_signed())
                with m.Switch(hi_at.step):
                    with m.Case(*active):
                        m.d.comb += self.nxt.elems[i][j].eq(Cat(lo, hi_sum).as_signed())

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


def _signed_bits(v):
    """Bits of the two's complement of ``v``."""
    return (v if v >= 0 else ~v).bit_length() + 1
