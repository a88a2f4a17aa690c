"""Each hardware unit as step sequences of the timing engine, with the unit's own parameters.

A builder takes the unit (:class:`~stepforge.compiler.lower.UnitInstance`), its input and output
:class:`~stepforge.perf.engine.Edge` objects by port name and the model's :class:`Timing`, and
returns the actors that model it. The timings are the units' documented ones (``docs/units.md``,
the unit docstrings): the PCU's ``cycles(rows)`` per beat and its ``latency``; the load units'
tile buffer (``buffer_tiles``) and memory lines per tile (``placement.tile_lines``); the PMU's
slots and replay start-up; one beat per cycle for shape units and routers, a held beat for the
units that look one beat ahead; the host stream reader's bursts through the memory (pipelined,
``depth`` beats in flight) and the writer's cycles per beat.
"""

import numpy as np

from ..compiler.fifo_sizing import looks_ahead
from ..compiler.ops.compute import Accum, Map, Scan
from ..compiler.ops.io import Discard, Input, Output
from ..compiler.ops.memory import Bufferize, Streamify
from ..compiler.ops.offchip import (LinearOffChipLoad, LinearOffChipStore, RandomOffChipLoad,
                                    RandomOffChipStore)
from ..compiler.ops.routing import Broadcast, EagerMerge, Parallelize, Partition, Reassemble
from ..compiler.ops.shape import Expand
from .beats import fit, mapping_in, mapping_out
from .engine import NEG, StepSeq, _steps, same
from .offchip import LoadActor, ReaderActor, StoreActor

__all__ = ["build_unit", "value_ports", "Timing"]


class Timing:
    """The constants of the model that are not a unit's parameter: handshake offsets measured
    once against the RTL (``docs/perf.md``, "Calibration")."""
    pcu_slack = 2           # the PCU's output register and its spare (without the spare, the
                            # register and the stopped pipeline's output stage: units._pcu)
    hold_slack = 1          # a held beat (Promote, Reshape, RepeatStatic, the FlatMap units)
    load_ready = 2          # cycles from a tile's last line on the response bus to its beat
    grant_delay = 2         # a request's first line is granted two cycles after it is accepted
    store_queue = 2         # tiles a store unit holds while their lines wait (its tile_queue)
    pmu_start = 4           # a buffer id accepted in t gives its first beat in t + 4 (the
                            # replay engine's command queue is one of them)
    pmu_slack = 2           # the read side's two-entry output FIFO
    pmu_places = 4          # a read side issues a read while fewer of its beats are in flight
                            # (its two stages and output FIFO: ReplayEngine's credit)
    pmu_alloc = 3           # the read of a buffer's last entry in t frees its block for the
                            # writer's store in t + 3 (release, walker, free list)
    router_start = 1        # a router loads its first selector element
    select_ready = 2        # a group's first beat moves 2 cycles after its selector element's
                            # push at the earliest (visible, then in the unit's register)
    reader_ready = 1        # a host stream beat leaves its reader's FIFO the cycle after its
                            # last line arrives: mem_latency + 1 after that line's grant
    end = 2                 # the done flag and the cycle counter after the last sink finished


def _rows_cost(comp, beats):
    """The PCU's cycles per input beat: ``cycles(rows)`` for data beats, 1 for stop-only."""
    cost = np.ones(beats.n, dtype=np.int64)
    has = beats.has.astype(bool)
    if getattr(comp, "dyn_bound", None) is not None:
        rows = beats.rows()
        for r in np.unique(rows[has]):
            cost[has & (rows == r)] = comp.cycles(int(r) if r >= 0 else None)
    else:
        cost[has] = comp.ii
    return cost


def _pcu(u, ins, outs, tm):
    node, comp = u.node, u.component
    names = node.input_names
    first = ins[names[0]]
    S = max(e.n for e in ins.values())
    beats = first.info
    cost = _rows_cost(comp, beats) if first.n == S else np.ones(S, dtype=np.int64) * comp.ii
    in_maps = [(ins[p], None if ins[p].n == S else mapping_in(ins[p].n, S)) for p in names]
    out = outs["out"]
    if isinstance(node, Accum) and first.n == S:
        closes = beats.stop >= node.b
        idx = fit(closes, out.n, S)
    elif out.n == S:
        idx = None
    else:
        idx = mapping_out(out.n, S)
    if comp.skid:
        return [StepSeq(u.name, cost, in_maps, [(out, idx, cost + comp.latency, tm.pcu_slack)],
                        pop_off=cost - 1)]
    # no spare (an Accum whose results are two beats apart or more, hdl/pcu/pcu.py): a result
    # that meets a full output register waits in the output stage with the pipeline stopped,
    # so the unit holds two results (the register's and the output stage's), and the step
    # after a result's waits with it: the pipeline stops ``latency + cost - 2`` cycles after
    # result ``j``'s step starts, unless result ``j - 1`` has left the register by then, and
    # moves again the cycle after it leaves. The first step after result ``j``'s starts no
    # earlier than result ``j - 1``'s push less ``latency - 2`` (docs/perf.md, 2026-11-28)
    emits = np.arange(S) if idx is None else np.flatnonzero(np.asarray(idx) >= 0)
    tail = emits[1:-1] + 1
    return [StepSeq(u.name, cost, in_maps, [(out, idx, cost + comp.latency, 2)],
                    pop_off=cost - 1, tails={out: (tail, int(comp.latency) - 2)})]


def _generic(u, ins, outs, tm, *, hold=False, cost=1, t0=0):
    """A unit of one beat per cycle, inputs and outputs spread evenly over its steps. A unit that
    looks one beat ahead (``hold``) emits each output one step later, in the step that takes the
    next input beat (and the last in a step of its own): it holds an element until it sees what
    follows it."""
    S0 = max([e.n for e in ins.values()] + [e.n for e in outs.values()] + [1])
    S = S0 + (1 if hold else 0)
    in_maps = []
    for e in ins.values():
        if e.n == S:
            idx = None
        else:
            idx = np.full(S, -1, dtype=np.int64)
            idx[:S0] = mapping_in(e.n, S0)
        in_maps.append((e, idx))
    out_maps = []
    for e in outs.values():
        if e.n == S:
            idx = None
        elif hold:
            idx = np.full(S, -1, dtype=np.int64)
            idx[1:] = mapping_out(e.n, S0)
        else:
            idx = mapping_out(e.n, S0)
        out_maps.append((e, idx, 1 if hold else 0, tm.hold_slack if hold else 0))
    return [StepSeq(u.name, np.full(S, cost, dtype=np.int64), in_maps, out_maps, t0=t0)]


def _broadcast(u, ins, outs, tm):
    x = ins["in0"]
    S = x.n
    depth = getattr(u.component, "depth", 2)
    out_maps = [(e, None if e.n == S else mapping_out(e.n, S), 1, depth)
                for e in outs.values()]
    return [StepSeq(u.name, np.ones(S, dtype=np.int64), [(x, None)], out_maps)]


class ExpandSeq(StepSeq):
    """An Expand (:class:`~stepforge.hdl.expand.ExpandUnit`): one output beat per reference
    beat, combinational. The repeated element is read straight from ``in0`` while it is
    repeated, so each of its copies needs it there, the first one included; the unit takes
    the data beat with the reference beat that ends its repetition (a stop of level ``>= b``):
    data beat ``j`` is popped at the last step of group ``j`` and bounds its first step.

    ``first``: per data beat, the step of its group's first output."""

    def __init__(self, name, S, ref, x, take, first, out):
        super().__init__(name, np.ones(S, dtype=np.int64), [(ref, None), (x, take)],
                         [(out, None, 0, 0)])
        self._x, self._first = x, first
        self.extra.append(lambda: [(first, x.arrived + 1)])

    def _stall_inputs(self):
        # waiting for the data element at the group's first step is waiting for an input
        a_in = super()._stall_inputs()
        st = self._first
        a_in[st] = np.maximum(a_in[st], self._x.arrived + 1)
        return a_in


def _expand(u, ins, outs, tm):
    x, ref, out = ins.get("in0"), ins.get("ref"), outs.get("out")
    S = ref.n if ref is not None else 0
    if (x is None or out is None or type(u.component).__name__ != "ExpandUnit" or not S
            or out.n != S or not 0 < x.n <= S):
        return _generic(u, ins, outs, tm)
    take = fit(ref.info.stop >= u.node.b, x.n, S)        # the step that pops each data beat
    last = np.nonzero(take >= 0)[0]
    first = np.concatenate([[0], last[:-1] + 1])
    return [ExpandSeq(u.name, S, ref, x, take, first, out)]


def _chunks(beats, b):
    """Chunk number of each beat of a stream cut into rank-``b`` chunks (-1: a stop-only beat
    between chunks)."""
    has = beats.has.astype(bool)
    if b == 0:
        cid = np.cumsum(has) - 1
        cid[~has] = -1
        return cid
    closes = beats.stop >= b
    start = np.concatenate([[0], np.cumsum(closes)[:-1]])
    cid = start.copy()
    cid[~has & closes & (np.concatenate([[True], closes[:-1]]))] = -1
    return cid


class RouterSeq(StepSeq):
    """A router whose selector element sits in a register (Partition, Reassemble: the Timing
    of ``hdl/partition.py``, ``hdl/reassemble.py``). Element ``j`` is taken as the last beat of
    the group before it moves, or the cycle after it arrives when the router waits for it; its
    group's first beat moves the cycle after it was taken. So the selector FIFO frees an entry
    a group earlier than a plain input would, and a late element costs one cycle more.

    ``sel_idx``: per step, the selector beat whose group starts there (-1: none)."""

    def __init__(self, name, cost, ins, outs, sel, sel_idx, t0, ready):
        super().__init__(name, cost, ins, outs, t0=t0)
        steps = _steps(name, sel, sel_idx, len(self.cost))
        sel.dst = self
        self.sel = sel
        first = steps == 0
        self._sel_prev = np.where(first, 0, steps - 1)
        self._first = first if first.any() else None
        self.watch.append(sel)
        self._sel_steps, self._sel_ready = steps, ready
        self.extra.append(lambda: [(steps, sel.arrived + ready)])

    def _stall_inputs(self):
        # waiting for the selector is waiting for an input
        a_in = super()._stall_inputs()
        st = self._sel_steps
        a_in[st] = np.maximum(a_in[st], self.sel.arrived + self._sel_ready)
        return a_in

    def update(self):
        changed = super().update()
        sel = self.sel
        if not sel.n:
            return changed
        C = self.T[self._sel_prev]
        if self._first is not None:
            C[self._first] = NEG
        np.maximum(C, sel.arrived + 1, out=C)
        if not same(sel.C, C):
            sel.C = C
            changed = True
        return changed


def _masks(beats):
    return [int(v) for v in beats.values]


def _partition(u, ins, outs, tm):
    node = u.node
    x, sel = ins["in0"], ins["select"]
    cid = _chunks(x.info, node.b)
    masks = _masks(sel.info)
    S = x.n + 1                                     # + the final bare Done
    in_sel = np.zeros(S, dtype=bool)
    emits = {k: np.zeros(S, dtype=bool) for k in range(len(node.outputs))}
    seen = -1
    for s in range(x.n):
        c = cid[s]
        if c < 0 or c >= len(masks):
            continue
        if c != seen:
            in_sel[s] = True
            seen = c
        m = masks[c]
        for k in emits:
            if m >> k & 1:
                emits[k][s] = True
    in_x = np.full(S, -1, dtype=np.int64)
    in_x[:x.n] = np.arange(x.n)
    outs_ = []
    for k, name in enumerate(node.output_names):
        e = outs[name]
        outs_.append((e, fit(emits[k], e.n, S), 0, 0))
    return [RouterSeq(u.name, np.ones(S, dtype=np.int64), [(x, in_x)], outs_, sel,
                      fit(in_sel, sel.n, S), tm.router_start, tm.select_ready)]


def _take_chunk(beats, pos, b):
    """Beats of the chunk of ``beats`` starting at ``pos``: its end (exclusive)."""
    n = beats.n
    if b == 0:
        j = pos
        while j < n and not beats.has[j]:
            j += 1
        return min(j + 1, n)
    j = pos
    while j < n and beats.stop[j] < b:
        j += 1
    return min(j + 1, n)


def _gather(u, ins_list, sel_values, b, out_names, outs, tm, sel_in=None):
    """Reassemble and EagerMerge: per selector value, a chunk from each selected input."""
    pos = [0] * len(ins_list)
    steps_in = [[] for _ in ins_list]
    step_sel = []
    s = 0
    for m in sel_values:
        first = True
        for k in range(len(ins_list)):
            if not m >> k & 1:
                continue
            e = ins_list[k]
            end = _take_chunk(e.info, pos[k], b)
            for j in range(pos[k], end):
                steps_in[k].append(s)
                if first:
                    step_sel.append(s)
                    first = False
                s += 1
            pos[k] = end
    S = s + 1
    in_maps = []
    for k, e in enumerate(ins_list):
        em = np.zeros(S, dtype=bool)
        em[np.array(steps_in[k], dtype=np.int64)] = True
        in_maps.append((e, fit(em, e.n, S)))
    sel_em = np.zeros(S, dtype=bool)
    sel_em[np.array(step_sel, dtype=np.int64)] = True
    data_em = np.ones(S, dtype=bool)
    data_em[-1] = False
    out_maps = []
    for name in out_names:
        e = outs[name]
        em = sel_em if name == "select" else data_em
        out_maps.append((e, fit(em, e.n, S), 0, 0))
    if sel_in is not None:
        return [RouterSeq(u.name, np.ones(S, dtype=np.int64), in_maps, out_maps, sel_in,
                          fit(sel_em, sel_in.n, S), tm.router_start, tm.select_ready)]
    return [StepSeq(u.name, np.ones(S, dtype=np.int64), in_maps, out_maps, t0=tm.router_start)]


def _reassemble(u, ins, outs, tm):
    node = u.node
    data = [ins[n] for n in node.input_names if n != "select"]
    sel = ins["select"]
    return _gather(u, data, _masks(sel.info), node.b, node.output_names, outs, tm, sel_in=sel)


def _eager_merge(u, ins, outs, tm):
    node = u.node
    data = [ins[n] for n in node.input_names]
    sel = outs["select"]
    return _gather(u, data, _masks(sel.info), node.b, node.output_names, outs, tm)


def _parallelize(u, ins, outs, tm):
    node = u.node
    x = ins["in0"]
    cid = _chunks(x.info, node.b)
    S = x.n + 1
    n = len(node.outputs)
    outs_ = []
    for k, name in enumerate(node.output_names):
        em = np.zeros(S, dtype=bool)
        em[:x.n] = (cid >= 0) & (cid % n == k)
        outs_.append((outs[name], fit(em, outs[name].n, S), 0, 0))
    in_x = np.full(S, -1, dtype=np.int64)
    in_x[:x.n] = np.arange(x.n)
    return [StepSeq(u.name, np.ones(S, dtype=np.int64), [(x, in_x)], outs_)]


def value_ports(u):
    """The ports of unit ``u`` whose elements (not only their framing) the model reads:
    ``[("in" or "out", port name)]``: a router's selector, a PCU's dynamic tile rows."""
    node, comp = u.node, u.component
    if isinstance(node, (Partition, Reassemble)):
        return [("in", "select")]
    if isinstance(node, EagerMerge):
        return [("out", "select")]
    if (type(comp).__name__ == "PCU" and isinstance(node, (Map, Accum, Scan))
            and getattr(comp, "dyn_bound", None) is not None):
        return [("in", node.input_names[0])]
    return []


class _Sink(StepSeq):
    """A sink step sequence that reports its end (Discard, BeatWriter)."""


def build_unit(u, ins, outs, tm, mem, pmus):
    """The actors of unit ``u`` (see module doc)."""
    node, comp = u.node, u.component
    kind = type(comp).__name__
    if isinstance(node, Bufferize):
        return [pmus[node]]
    if isinstance(node, Streamify):
        return [pmus[node]]
    if kind == "PCU" and isinstance(node, (Map, Accum, Scan)):
        return _pcu(u, ins, outs, tm)
    if isinstance(node, (LinearOffChipLoad, RandomOffChipLoad)):
        return [LoadActor(u, ins, outs["out"], mem, tm)]
    if isinstance(node, (LinearOffChipStore, RandomOffChipStore)):
        return [StoreActor(u, ins, outs, mem, tm)]
    if isinstance(node, Broadcast):
        return _broadcast(u, ins, outs, tm)
    if isinstance(node, Partition):
        return _partition(u, ins, outs, tm)
    if isinstance(node, Reassemble):
        return _reassemble(u, ins, outs, tm)
    if isinstance(node, EagerMerge):
        return _eager_merge(u, ins, outs, tm)
    if isinstance(node, Parallelize):
        return _parallelize(u, ins, outs, tm)
    if isinstance(node, Expand):
        return _expand(u, ins, outs, tm)
    if isinstance(node, Input):
        return [ReaderActor(u, outs["out"], mem, tm)]
    if isinstance(node, Output):
        g = comp.geometry
        per = -(-comp.wpb // g.lanes) + 2
        x = ins["in0"]
        return [_Sink(u.name, np.full(x.n, per, dtype=np.int64), [(x, None)], [])]
    if isinstance(node, Discard):
        x = ins["in0"]
        return [_Sink(u.name, np.ones(x.n, dtype=np.int64), [(x, None)], [])]
    return _generic(u, ins, outs, tm, hold=looks_ahead(node))
