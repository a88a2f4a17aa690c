"""The PCU: Map, Accum and Scan of a tile function as a time-multiplexed integer datapath."""

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...compiler import functions as F
from ...compiler.types import Tile, Tuple
from ...contract.beat import beat_layout, beat_signature, element_layout
from ..tile_ops import Issue, dsp_family
from ..unit import ErrorCode, StatusSignature, check_int, raise_error
from .assign import _Assign
from .checks import MODES, _check_hw_type, _check_rows, _check_static, _is_dynamic, _tiles
from .datapath import _Datapath
from .plan import _Plan
from .retile import _Retile

__all__ = ["PCU"]


class PCU(_Plan, _Datapath, _Assign, _Retile, wiring.Component):
    """A pattern compute unit: Map, Accum or Scan of a tile function (semantics section 4).

    The function's expression graph becomes one circuit per primitive
    (:mod:`stepforge.hdl.tile_ops`): elementwise primitives on ``lanes`` ALUs, row reductions
    one column per step on ``lanes`` ALUs, ``matmul``/``mac`` on ``multipliers`` multipliers.
    ``acc + matmul(a, w)`` (with the matmul used only there) is recognised and fused into ``mac``,
    so the products go straight into the accumulator (the paper's Zip + Map + Accum).

    **Timing.** The primitives of one beat run one after another, each over its fixed number of
    steps, so a data beat takes ``ii = sum of the primitives' steps`` cycles (at least 1): for a
    single primitive, ``ceil(elements / lanes)`` (elementwise), ``ceil(rows / lanes) * cols``
    (row_sum, row_max), ``ceil(M*K*N / multipliers)`` (matmul, mac) or 1 (retile_row,
    retile_col, and functions without arithmetic). Input beats are read in place and taken in a
    sequence's last step, so a fully fed PCU takes a new data beat every ``ii`` cycles and a
    stop-only beat every cycle.

    **Pipelines.** A primitive may be pipelined (:mod:`stepforge.hdl.tile_ops`): ``matmul`` and
    ``mac`` (registered operands and products, i.e. DSP blocks, registered adder-tree levels,
    the running sum the only adder in its loop), ``mul``, ``div`` and the fixed-point ALUs. A
    pipelined primitive writes a step's result ``latency`` cycles after issuing it, and the
    primitives after it issue their steps that much later; beats overlap, so ``ii`` stays. Each
    primitive is pipelined only where every read still sees its beat's value (a register before
    the next beat overwrites it, an input port before the beat is taken, the accumulator after
    the previous beat's update); elementwise primitives read the input ports at the sequencer's
    step and carry the values along. The result reaches the output register :attr:`latency`
    cycles after the beat's last step: the first result appears ``ii + latency`` cycles after
    its beat arrives, N beats take ``(N - 1) * ii + 2 + latency`` cycles. ``acc + a @ w`` whose
    accumulator is used only there adds into the accumulator registers themselves (held once).
    The output register has a spare behind it (a skid buffer): when the output register is full
    and the output stage has a result, the result waits in the spare, and the whole pipeline
    waits (one enable) while the spare is full. The enable is a register, ``out.valid`` comes
    from a register, and ``out.ready`` reaches only the output register and the spare (no path
    into the pipeline or to the inputs' ``ready``, which depends on their ``valid`` only).
    An Accum whose results are at least two input beats apart (``emit_spacing >= 2``, e.g. a
    fold over static inner dimensions) and that is pipelined needs no spare: its enable is a
    register set one cycle ahead, low exactly when the output register will be full and the
    output stage will hold a result, so a result never meets a full output register; with
    results two beats apart and a consumer that takes a beat the cycle after it is offered, no
    cycle is lost (a 512-bit spare and its multiplexer less for a 4x4 int32 GEMM tile).
    ``family`` shapes the datapath for a device (below); elaborated for a platform whose
    ``family`` is ``"ecp5"`` the multipliers are ``MULT18X18D`` with their registers inside
    (:func:`~stepforge.hdl.tile_ops.dsp_family`), with the same cycles.

    **Dynamic rows.** Input tiles may have a dynamic (bounded) row count when the function is
    *row-independent*: every value with dynamic rows has the inputs' one row count (inputs with
    two different row symbols are refused), elementwise primitives combine it with tiles of the
    same rows or with broadcast ``[1, C]`` rows and constants, row reductions keep it, and a
    matmul's right operand is static (``a @ w``, ``a @ w.T``: only ``a`` has dynamic rows).
    Columns are always static. The datapath is built for the bound; a primitive over dynamic rows
    runs only the steps of the rows below the beat's count (``ceil(rows * C / lanes)``,
    ``ceil(rows / lanes) * C``, ``ceil(rows * K * N / multipliers)``, at least 1: the matmul
    orders its products row by row), so a beat costs :meth:`cycles` ``(rows)``, not ``ii``.
    The output tile carries the count and zeros beyond it (the wire encoding). Lock-step inputs
    whose counts differ raise ``ROW_MISMATCH``. ``retile_col`` over dynamic-row tiles keeps the
    row count of a fibre's first element (a later element with another count raises
    ``ROW_MISMATCH``); ``retile_row`` stacks each element's actual rows.

    **Modes.**

    * ``"map"``: one output beat per input beat: ``fn(x)`` (or ``fn(x0, x1, ...)`` over several
      ports, taken in lock step, or over the fields of one port's ``Tuple``) with the beat's stop
      and ``last``.
    * ``"accum"``: ``acc = fn(acc, x...)`` on every element; a beat with stop ``s >= b`` emits the
      accumulator (stop ``s - b`` when ``s > b``, none when ``s = b``) and resets it to ``init``;
      a stop-only beat accumulates nothing (an empty level-``b`` fibre emits ``init``). A beat that
      emits nothing but ends the stream sends a bare ``Done``.
    * ``"scan"``: like accum, but every data beat emits the new state with the input's stop and
      stop-only beats pass through; the state resets after a stop ``s >= b``.

    With ``retile_row``/``retile_col`` as ``fn`` the accumulator is a growing tile: the elements'
    rows (columns) are stacked into a register of the output's bound (rows beyond the count are
    zero, as the wire encoding wants). An element that would grow it past the bound raises
    ``OVER_BOUND``.

    **Errors.** Lock-step inputs whose ``has_data``, ``stop`` or ``last`` differ raise
    ``STOP_MISMATCH`` in the first cycle every input offers its disagreeing beat: if that cycle
    is the beats' last step and the pipeline moves (the output is not back-pressured), they are
    taken as any beat is (the check is not on the handshake path) and produce nothing; else
    they stay in their FIFOs. The unit stops from the next cycle on (no input is taken, no
    output is produced). Dynamic row counts that differ raise
    ``ROW_MISMATCH`` and an ``OVER_BOUND`` element is refused: the unit stops before taking
    that beat.

    Integer arithmetic is bit-exact with :mod:`stepforge.contract.arith` (wrapping, int32 matmul
    sums, truncating division, the fixed-point ``exp``/``silu``/``rsqrt`` of
    :mod:`stepforge.contract.fixedpoint`).

    Parameters
    ----------
    fn : TileFunction or callable
        The tile function (a Python callable is traced).
    in_types : ElemType or sequence of ElemType
        Element type of each input port (``in0``, ``in1``, ...); integer tiles (static columns,
        static or dynamic rows) or a ``Tuple`` of them.
    rank : int
        Rank of the input streams.
    mode : str, default ``"map"``
        ``"map"``, ``"accum"`` or ``"scan"``.
    init : Init, optional
        Accum/Scan: the accumulator's initial value (anything
        :func:`~stepforge.compiler.functions.as_init` accepts; ``None`` for retiling).
    b : int, optional
        Accum (``1 <= b <= rank``) and Scan (``1 <= b <= rank + 1``, default 1).
    out_type : Tile, optional
        Retiling Accum/Scan: the grown tile's type (dynamic rows need ``row_bound``). Default: a
        ``retile_row`` accumulator of dynamic rows bounded by ``row_bound``.
    lanes : int, default 4
        ALUs of elementwise and row primitives.
    multipliers : int, default 16
        Multipliers of matmul/mac.
    family : {None, "ecp5", "ice40"}, optional
        The FPGA family the datapath is shaped for (``HardwareConfig.family``): ``"ice40"``
        splits a pipelined running sum wider than 16 bits into two 16-bit halves added a stage
        apart (the iCE40's carry chains are slow; one more cycle of :attr:`latency`). The
        same in simulation and on the board, so both take the same cycles.
    row_bound : int or Mapping, optional
        Bound of a dynamic tile row count (see :func:`~stepforge.hdl.beat.element_layout`).
    emit_spacing : int, default 1
        Accum: the fewest input beats from one emitted result to the next that the input stream
        guarantees (the lowering: the product of the static dimensions folded); from 2 on, a
        pipelined Accum has no output spare (**Timing**). Any stream is still computed
        correctly: closer results only cost a cycle each.
    fold_bound : int, optional
        Accum: the most data beats one result folds, when the input stream guarantees it (the
        lowering: the product of the static dimensions folded). A ``mac`` that adds into the
        accumulator itself then keeps only the bits its sums can reach from ``init`` in that
        many beats (:meth:`~stepforge.hdl.tile_ops.MatmulNode.accumulator_bits`: 22 of 32 for
        an int8 GEMM over K = 64), sign-extended into the result: the same values with fewer
        adder bits and flip-flops. Default: the result's full width.
    src_loc_at : int, default 0
        As for :class:`~amaranth.lib.wiring.Component`.

    Members
    -------
    in0, in1, ... : ``In(beat_signature(in_types[k], rank))``
        Input beats.
    out : ``Out(beat_signature(out_type, rank - b if mode == "accum" else rank))``
        Output beats.
    status : ``Out(StatusSignature)``
        ``busy`` while an input is offered or a result is in the pipeline or waits;
        ``stall_in`` while an input has no beat, until the stream's last beat is taken; raises
        ``STOP_MISMATCH``, ``ROW_MISMATCH`` and ``OVER_BOUND``.

    Attributes
    ----------
    ii : int
        Cycles per data beat when fully fed (with dynamic rows: at the bound).
    latency : int
        Pipeline cycles between a beat's last step and its result in the output register (0:
        the next cycle, as without pipelines).
    dyn_rows : sympy.Expr or None
        The inputs' dynamic row count.
    dyn_bound : int or None
        Its bound.
    out_type : ElemType
        The output element type.
    out_rank : int
        The output stream's rank.

    Raises
    ------
    ValueError
        A float dtype, a non-tile element, a dynamic column count, a function that is not
        row-independent over dynamic rows, a bad mode, rank or ``b``, a retiling function inside
        a larger function, or a result that is not the accumulator's type.
    """

    def __init__(self, fn, in_types, rank, *, mode="map", init=None, b=None, out_type=None,
                 lanes=4, multipliers=16, family=None, row_bound=None, emit_spacing=1,
                 fold_bound=None, src_loc_at=0):
        self.fn = F.as_function(fn)
        if mode not in MODES:
            raise ValueError(f"PCU mode must be one of {MODES}, not {mode!r}")
        if isinstance(in_types, (Tile, Tuple)):
            in_types = (in_types,)
        self.in_types = tuple(in_types)
        if not self.in_types:
            raise ValueError("PCU needs at least one input type")
        check_int("PCU", "rank", rank, 0)
        for name, v in (("lanes", lanes), ("multipliers", multipliers)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"PCU {name} must be an int >= 1, not {v!r}")
        self.mode, self.rank, self.lanes, self.multipliers = mode, rank, lanes, multipliers
        if family not in (None, "ecp5", "ice40"):
            raise ValueError(f"PCU family must be one of None, 'ecp5', 'ice40', not {family!r}")
        self.family = family
        self.row_bound = row_bound
        self.emit_spacing = check_int("PCU", "emit_spacing", emit_spacing, 1)
        if fold_bound is not None:
            if mode != "accum":
                raise ValueError(f"PCU fold_bound is for mode 'accum', not {mode!r}")
            check_int("PCU", "fold_bound", fold_bound, 0)
        self.fold_bound = fold_bound
        for k, t in enumerate(self.in_types):
            _check_hw_type(t, f"input in{k}")
            _check_rows(t, f"input in{k}")
        dyn = {}
        for k, t in enumerate(self.in_types):
            for x in _tiles(t):
                if _is_dynamic(x):
                    dyn.setdefault(x.rows, f"in{k} {x!r}")
        if len(dyn) > 1:
            raise ValueError(f"PCU: inputs with different dynamic row counts ({', '.join(dyn.values())}); "
                             f"a row-independent function needs one row count")
        self.dyn_rows = next(iter(dyn), None)
        self.dyn_bound = None
        if self.dyn_rows is not None:
            first = next(x for t in self.in_types for x in _tiles(t) if _is_dynamic(x))
            self.dyn_bound = element_layout(first, row_bound=row_bound).members["data"].length

        fold = mode != "map"
        if fold:
            hi = rank if mode == "accum" else rank + 1
            if b is None and mode == "scan":
                b = 1
            if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= hi:
                raise ValueError(f"PCU {mode} needs b in 1..{hi} for a rank-{rank} stream, got {b!r}")
            if mode == "accum" and rank < 1:
                raise ValueError("PCU accum needs a stream of rank >= 1")
        elif b is not None or init is not None:
            raise ValueError("PCU map takes neither init nor b")
        self.b = b

        n_lead = 1 if fold else 0
        elem = self.in_types[0] if len(self.in_types) == 1 else Tuple(*self.in_types)
        n = self.fn.arity - n_lead
        if len(self.in_types) == 1 and isinstance(elem, Tuple) and n == len(elem.elems) and n > 1:
            self.unpack, self._stream_args = True, list(elem.elems)
        elif n == len(self.in_types):
            self.unpack, self._stream_args = len(self.in_types) > 1, list(self.in_types)
        else:
            raise ValueError(f"PCU: {self.fn!r} takes {self.fn.arity} arguments; {mode} over "
                             f"{len(self.in_types)} input(s) of {list(self.in_types)!r} gives "
                             f"{n_lead + len(self.in_types)}")

        self.retile = self.fn.accum
        if self.retile is not None:
            self._setup_retile(init, elem, out_type)
        else:
            if any(e.op in ("retile_row", "retile_col") for e in self.fn.expressions()):
                raise ValueError(f"PCU: {self.fn!r}: retile_row/retile_col is implemented only as "
                                 f"the whole function of an Accum or Scan")
            if fold:
                self.init = F.as_init(init, elem, self.fn)
                _check_hw_type(self.init.type, "the accumulator")
                _check_static(self.init.type, "the accumulator")
                self._arg_types = [self.init.type] + self._stream_args
            else:
                self.init = None
                self._arg_types = list(self._stream_args)
            res = self.fn.infer(*self._arg_types)
            if fold and res != self.init.type:
                raise ValueError(f"PCU: {self.fn!r} returns {res!r} for an accumulator of "
                                 f"{self.init.type!r}")
            _check_hw_type(res, "the result")
            self.out_type = res
            self._plan()

        self.out_rank = out_rank = rank - b if mode == "accum" else rank
        members = {f"in{k}": In(beat_signature(t, rank, row_bound=row_bound))
                   for k, t in enumerate(self.in_types)}
        members["out"] = Out(beat_signature(self.out_type, out_rank, row_bound=row_bound))
        members["status"] = Out(StatusSignature)
        super().__init__(members, src_loc_at=src_loc_at + 1)

    def __repr__(self):
        extra = ""
        if self.mode != "map":
            extra = f", mode={self.mode!r}, init={self.init!r}, b={self.b}"
        return (f"PCU({self.fn!r}, {list(self.in_types)!r}, {self.rank}{extra}, lanes={self.lanes}, "
                f"multipliers={self.multipliers}"
                f"{'' if self.family is None else f', family={self.family!r}'}"
                f"{'' if self.emit_spacing == 1 else f', emit_spacing={self.emit_spacing}'}"
                f"{'' if self.fold_bound is None else f', fold_bound={self.fold_bound}'})")

    @property
    def skid(self):
        """Whether the output register has a spare (**Timing**)."""
        return not (self.mode == "accum" and self.emit_spacing >= 2 and self.latency >= 1)

    def cycles(self, rows=None):
        """Cycles a fully fed PCU spends on one data beat whose dynamic tiles have ``rows`` rows
        (``ii`` when ``rows`` is ``None`` or nothing is dynamic)."""
        if rows is None or not self._nodes:
            return self.ii
        return max(sum(n.steps_for(rows) for n in self._nodes.values()), 1)

    def elaborate(self, platform):
        m = Module()
        family = dsp_family(platform)
        ports = [getattr(self, f"in{k}") for k in range(len(self.in_types))]
        o = self.out
        p0 = ports[0].payload
        hd, s, last = p0.has_data, p0.stop, p0.last

        all_valid = Signal(name="all_valid")
        any_valid = Signal(name="any_valid")
        mismatch = Signal(name="mismatch")
        differ = 0
        for p in ports[1:]:
            q = p.payload
            differ = differ | (q.has_data != hd) | (q.stop != s) | (q.last != last)
        m.d.comb += [
            all_valid.eq(Cat(*[p.valid for p in ports]).all()),
            any_valid.eq(Cat(*[p.valid for p in ports]).any()),
            mismatch.eq(all_valid & differ),
        ]
        raise_error(m, self.status, ErrorCode.STOP_MISMATCH, mismatch)

        step = Signal(range(max(self.ii, 2)), name="step")
        final = Signal(name="final")
        emit = Signal(name="emit")
        run = Signal(name="run")
        advance = Signal(name="advance")
        finish = Signal(name="finish")
        pipe_en = Signal(name="pipe_en")
        out_valid = Signal(name="out_valid")
        out_buf = Signal(beat_layout(self.out_type, self.out_rank, row_bound=self.row_bound),
                         name="out_buf", reset_less=True)
        over = Signal(name="over_bound")
        row_bad = Signal(name="row_mismatch")
        stream_args, counts = self._port_values()
        self._count = None
        if counts:
            self._count = Signal(range(self.dyn_bound + 1), name="rows")
            m.d.comb += self._count.eq(counts[0])
        raise_error(m, self.status, ErrorCode.ROW_MISMATCH, all_valid & ~mismatch & row_bad)

        if self.mode == "accum":
            m.d.comb += emit.eq((s >= self.b) | last)
        else:
            m.d.comb += emit.eq(1)
        timed = [self._nodes[id(e)] for e in self._order if id(e) in self._nodes]
        ends = [self._node_end(m, node) for node in timed]
        # a static last step is a bit of ``step_onehot`` (a register), not a comparison: ``final``
        # gates the inputs' ``ready`` (the PCU's join into the FIFOs' heads, an iCE40 worst path)
        step_onehot = Signal(self.ii, name="step_onehot", init=1)
        end = ends[-1] if ends else 0
        at_end = step_onehot[end] if isinstance(end, int) else step == end
        m.d.comb += [
            final.eq(at_end | ~hd),
            run.eq(all_valid & ~mismatch & ~over & ~row_bad & ~self.status.error),
            advance.eq(run & pipe_en),
            finish.eq(advance & final),
            o.valid.eq(out_valid),
            o.payload.eq(out_buf),
        ]
        # the inputs are taken at a beat's last step without waiting for the lock-step check:
        # a beat whose inputs disagree is taken (it produces nothing) and raises the error, which
        # stops the unit from the next cycle on, so ``ready`` is a few gates from the FIFO heads
        # (the stop comparison was most of GEMM's worst path on ECP5, 10.1 ns)
        take = Signal(name="take")
        m.d.comb += take.eq(all_valid & ~over & ~row_bad & ~self.status.error & pipe_en & final)
        m.d.comb += [p.ready.eq(take) for p in ports]
        # the step counter moves without waiting for the lock-step check (``run``): a beat
        # whose inputs disagree raises an error in the next cycle, and stops the unit anyway
        # (``step_onehot``: the same step, one bit per step, for the operand multiplexers)
        step_next = Signal.like(step, name="step_next")
        m.d.comb += step_next.eq(step)
        with m.If(all_valid & pipe_en & ~self.status.error):
            m.d.comb += step_next.eq(0)
            if self.ii > 1:
                with m.If(~final):
                    m.d.comb += step_next.eq(step + 1)
                    for node, end in zip(timed[:-1], ends[:-1]):
                        if not isinstance(end, int):  # skip the steps of rows beyond the count
                            with m.If(step == end):
                                m.d.comb += step_next.eq(node.start + node.steps)
        m.d.sync += [step.eq(step_next),
                     step_onehot.eq(Cat(*(step_next == k for k in range(self.ii))))]

        # the output stage: a beat's last step, ``latency`` pipeline moves later
        merged = self._merged is not None
        ctrl = {"hd": hd, "stop": s, "last": last, "emit": emit}
        if self._count is not None:
            ctrl["rows"] = self._count
        out_at, busy = run & final, 0
        out_emits = out_at & emit  # the output stage has a beat that emits (a register if L > 0)
        stage_emits = [out_emits]
        for k in range(1, self.latency + 1):
            v = Signal(name=f"out_stage{k}")
            e = Signal(name=f"out_stage{k}_emits")
            regs = {f: Signal(Value.cast(x).shape(), name=f"out_stage{k}_{f}", reset_less=True)
                    for f, x in ctrl.items()}
            with m.If(pipe_en):
                m.d.sync += [v.eq(out_at), e.eq(out_emits)] + [regs[f].eq(ctrl[f]) for f in ctrl]
            out_at, out_emits, ctrl, busy = v, e, regs, busy | v
            stage_emits.append(e)
        done = Signal(name="done")  # the output stage completes a beat
        m.d.comb += done.eq(out_at & pipe_en)
        # the output register has a spare behind it (a skid buffer): a result that meets a full
        # output register waits in the spare, and the pipeline moves while the spare is empty,
        # so its one enable is a register and ``out.ready`` reaches only the two registers
        load = out_emits & pipe_en     # the output stage hands a result to the output register
        if self.skid:
            spare = Signal.like(out_buf, name="out_spare", reset_less=True)
            spare_valid = Signal(name="out_spare_valid")
            m.d.comb += pipe_en.eq(~spare_valid)
        else:   # the enable as a register, set a cycle ahead (**Timing**)
            ahead = Signal(name="pipe_en_reg", init=1)
            will_hold = Signal(name="out_valid_next")
            will_emit = Signal(name="out_emits_next")
            m.d.comb += [pipe_en.eq(ahead),
                         will_hold.eq(Mux(~out_valid | o.ready, load, out_valid)),
                         will_emit.eq(Mux(pipe_en, stage_emits[-2], out_emits))]
            m.d.sync += ahead.eq(~(will_hold & will_emit))
            spare_valid = 0
        self._out_rows = ctrl.get("rows")

        if self.retile is not None:
            result_if_data, acc_regs, init_vals = self._elaborate_retile(m, stream_args, hd, over,
                                                                         row_bad)
            raise_error(m, self.status, ErrorCode.OVER_BOUND, all_valid & ~mismatch & over)
        else:
            m.d.comb += over.eq(0)
            differ_rows = 0
            for c in counts[1:]:
                differ_rows = differ_rows | (c != counts[0])
            m.d.comb += row_bad.eq(all_valid & hd & differ_rows)
            acc_regs = init_vals = None
            if self.mode != "map":
                init_vals = self._init_values(self.init)
                # merged: the node holds the accumulator (the argument is not read)
                acc_regs = init_vals if merged else self._signals(self.init, "acc")
            args = ([acc_regs] if acc_regs is not None else []) + list(stream_args)
            restart = final & (s >= self.b) if self.mode != "map" else 0
            # a step counts as issued when every input offers its beat: a beat refused for an
            # error issues its step too (harmless: the unit stops, and a next beat's step would
            # write the same registers), and ``valid`` stays two LUTs from the ports
            issue = Issue(step, all_valid, hd, pipe_en, family, restart, self.ii, step_onehot)
            result_if_data = self._elaborate_graph(m, issue, args, acc_regs)

        # the output beat: the output stage's result, into the output register or the spare
        beat = Signal.like(out_buf, name="out_beat")
        data = beat.data
        m.d.comb += beat.last.eq(ctrl["last"])
        if self.mode == "accum":
            emitted = Signal(name="emit_data")
            m.d.comb += [emitted.eq(ctrl["stop"] >= self.b),
                         beat.has_data.eq(emitted)]
            with m.If(ctrl["stop"] > self.b):
                m.d.comb += beat.stop.eq(ctrl["stop"] - self.b)
            with m.If(ctrl["hd"]):
                m.d.comb += self._assign(data, result_if_data, self.out_type)
            with m.Else():  # merged: a stop-only beat's sum is the accumulator too
                m.d.comb += self._assign(data, result_if_data if merged else acc_regs,
                                         self.out_type)
        else:
            m.d.comb += [beat.has_data.eq(ctrl["hd"]), beat.stop.eq(ctrl["stop"])]
            m.d.comb += self._assign(data, result_if_data, self.out_type)
        if self.skid:
            with m.If(~out_valid | o.ready):
                m.d.sync += out_valid.eq(spare_valid | load)
                with m.If(spare_valid):
                    m.d.sync += [out_buf.eq(spare), spare_valid.eq(0)]
                with m.Elif(load):
                    m.d.sync += out_buf.eq(beat)
            with m.Elif(load):
                m.d.sync += [spare.eq(beat), spare_valid.eq(1)]
        else:   # a result is loaded only into an empty output register
            with m.If(load):
                m.d.sync += [out_buf.eq(beat), out_valid.eq(1)]
            with m.Elif(o.ready):
                m.d.sync += out_valid.eq(0)
        if acc_regs is not None and not merged:
            with m.If(done):
                with m.If(ctrl["stop"] >= self.b):
                    m.d.sync += self._assign_value(acc_regs, init_vals)
                with m.Elif(ctrl["hd"]):
                    m.d.sync += self._assign_value(acc_regs, result_if_data)

        ended = Signal(name="ended")  # the stream's last beat was taken: no input is awaited
        with m.If(finish & last):
            m.d.sync += ended.eq(1)
        m.d.comb += [
            self.status.busy.eq(any_valid | out_valid | spare_valid | busy),
            self.status.stall_in.eq(~all_valid & ~self.status.error & ~ended),
            self.status.stall_out.eq(out_valid & ~o.ready),
        ]
        return m
