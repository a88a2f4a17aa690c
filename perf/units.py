"""Each hardware unit as step sequences of the timing engine, with the unit's own parameters.

A builder takes the unit (:class:`~stepforge.compiler.lower.UnitInstance`), its input and output
:class:`~stepforge.perf.engine.Edge` objects by port name and the model's :class:`Timing`, and
returns the actors that model it. The timings are the units' documented ones (``docs/units.md``,
the unit docstrings): the PCU's ``cycles(rows)`` per beat and its ``latency``; the load units'
tile buffer (``buffer_tiles``) and memory lines per tile (``placement.tile_lines``); the PMU's
slots and replay start-up; one beat per cycle for shape units and routers, a held beat for the
units that look one beat ahead, the host stream units' cycles per beat.
"""

import numpy as np

from ..compiler.ops.compute import Accum, FlatMap, Map, Scan
from ..compiler.ops.io import Discard, Input, Output
from ..compiler.ops.memory import Bufferize, Streamify
from ..compiler.ops.offchip import (LinearOffChipLoad, LinearOffChipStore, RandomOffChipLoad,
                                    RandomOffChipStore)
from ..compiler.ops.routing import Broadcast, EagerMerge, Parallelize, Partition, Reassemble
from ..compiler.ops.shape import Promote, RepeatStatic, Reshape
from .beats import fit, mapping_in, mapping_out
from .engine import LOCAL_ROUNDS, NEG, Actor, StepSeq, chain, same
from .memory import MemoryClient

__all__ = ["build_unit", "Timing"]


class Timing:
    """The constants of the model that are not a unit's parameter: handshake offsets measured
    once against the RTL (``docs/perf.md``, "Calibration")."""
    pcu_slack = 2           # the PCU's output register and its spare
    hold_slack = 1          # a held beat (Promote, Reshape, RepeatStatic, the FlatMap units)
    load_ready = 1          # cycles from a tile's last line on the response bus to its beat
    grant_delay = 2         # a request's first line is granted two cycles after it is accepted
    store_queue = 2         # tiles a store unit holds while their lines wait for the memory
    pmu_start = 3           # a buffer id accepted in t gives its first beat in t + 3
    pmu_slack = 2           # the read side's two-entry output FIFO
    router_start = 1        # a router loads its first selector element
    reader_extra = 3        # a host stream beat: ceil(words/lanes) + mem_latency + 3 cycles
    end = 3                 # the done flag and the cycle counter after the last sink finished


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
    in_maps = [(ins[p], np.arange(S) if ins[p].n == S else mapping_in(ins[p].n, S)) for p in names]
    out = outs["out"]
    if isinstance(node, Accum) and first.n == S:
        closes = beats.stop >= node.b
        idx = fit(closes, out.n, S)
    elif out.n == S:
        idx = np.arange(S)
    else:
        idx = mapping_out(out.n, S)
    return [StepSeq(u.name, cost, in_maps, [(out, idx, cost + comp.latency, tm.pcu_slack)],
                    pop_off=cost - 1)]


def _generic(u, ins, outs, tm, *, hold=False, cost=1, t0=0):
    """A unit of one beat per cycle, inputs and outputs spread evenly over its steps. A unit that
    looks one beat ahead (``hold``) emits each output one step later, in the step that takes the
    next input beat (and the last in a step of its own): it holds an element until it sees what
    follows it."""
    S0 = max([e.n for e in ins.values()] + [e.n for e in outs.values()] + [1])
    S = S0 + (1 if hold else 0)
    in_maps = []
    for e in ins.values():
        idx = np.full(S, -1, dtype=np.int64)
        idx[:S0] = mapping_in(e.n, S0)
        in_maps.append((e, idx))
    out_maps = []
    for e in outs.values():
        idx = np.full(S, -1, dtype=np.int64)
        if hold:
            idx[1:] = mapping_out(e.n, S0)
        else:
            idx[:] = mapping_out(e.n, S0)
        out_maps.append((e, idx, 1 if hold else 0, tm.hold_slack if hold else 0))
    return [StepSeq(u.name, np.full(S, cost, dtype=np.int64), in_maps, out_maps, t0=t0)]


def _looks_ahead(node):
    if isinstance(node, Promote):
        return node.b in (0, node.inputs[0].rank + 1)
    if isinstance(node, Reshape):
        return node.b == 0
    return isinstance(node, (RepeatStatic, FlatMap))


def _broadcast(u, ins, outs, tm):
    x = ins["in0"]
    S = x.n
    depth = getattr(u.component, "depth", 2)
    out_maps = [(e, np.arange(S) if e.n == S else mapping_out(e.n, S), 1, depth)
                for e in outs.values()]
    return [StepSeq(u.name, np.ones(S, dtype=np.int64), [(x, np.arange(S))], out_maps)]


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
    return [StepSeq(u.name, np.ones(S, dtype=np.int64),
                    [(x, in_x), (sel, fit(in_sel, sel.n, S))], outs_, t0=tm.router_start)]


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
    if sel_in is not None:
        in_maps.append((sel_in, fit(sel_em, sel_in.n, S)))
    data_em = np.ones(S, dtype=bool)
    data_em[-1] = False
    out_maps = []
    for name in out_names:
        e = outs[name]
        em = sel_em if name == "select" else data_em
        out_maps.append((e, fit(em, e.n, S), 0, 0))
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


class _Load(Actor):
    """A load unit: a command per output beat, a tile buffer slot per tile, its lines through the
    memory, the beat out when its last line has arrived."""

    def __init__(self, u, ins, out, mem, tm):
        self.name = u.name
        comp = u.component
        self.out = out
        out.src = self
        self.ref = next(iter(ins.values()), None)
        n = out.n
        self.ref_idx = (mapping_in(self.ref.n, n) if self.ref is not None and self.ref.n <= n
                        else None)
        if self.ref is not None:
            self.ref.dst = self
        has = out.info.has.astype(bool)
        self.has = has
        self.data = np.nonzero(has)[0]
        lines = len(comp.placement.tile_lines)
        self.buf = comp.buffer_tiles
        self.tm = tm
        self.latency = comp.placement.geometry.latency
        self.client = mem.client(self.name, "read", len(self.data), lines)
        self.T = np.zeros(n, dtype=np.int64)
        self.busy_cycles = len(self.data) * lines
        self.watch = [out, self.client] + ([self.ref] if self.ref is not None else [])

    def update(self):
        n = self.out.n
        base = np.zeros(n, dtype=np.int64)
        if self.ref_idx is not None:
            m = self.ref_idx >= 0
            base[m] = np.maximum(base[m], self.ref.P + 1)
        d = self.data
        room = self.out.room()
        P = self.out.P
        k = np.arange(len(d)) - self.buf
        ok = k >= 0
        last = None
        for _ in range(LOCAL_ROUNDS):
            # a tile takes a slot of the buffer: the tile ``buf`` tiles before it must have left
            a = base.copy()
            a[d[ok]] = np.maximum(a[d[ok]], P[d[k[ok]]])
            if last is not None and same(a, last):
                break
            last = a
            T = chain(a)
            ready = T + 1
            # the memory's last grants are a lower bound while the times only grow
            ready[d] = (np.maximum(self.client.grants(T[d] + self.tm.grant_delay),
                                   self.client.last) + self.latency + self.tm.load_ready)
            P = chain(np.maximum(ready, room))
        changed = not same(T, self.T)
        self.T = T
        changed |= self.client.request(T[d] + self.tm.grant_delay)
        ready[d] = self.client.done() + self.latency + self.tm.load_ready
        P = chain(np.maximum(ready, room))
        if not same(P, self.out.P):
            self.out.P = P
            self.out.version += 1
            changed = True
        if self.ref_idx is not None:
            m = self.ref_idx >= 0
            C = T[m]
            if not same(self.ref.C, C):
                self.ref.C = C
                self.ref.version += 1
                changed = True
        return changed

    def busy(self):
        return self.busy_cycles


class _Store(Actor):
    """A store unit: takes a beat per cycle, a tile's lines go to the memory as it enters; a few
    tiles may wait for their lines; done when the last line is written."""

    def __init__(self, u, ins, outs, mem, tm):
        self.name = u.name
        comp = u.component
        node = u.node
        self.x = ins["data"] if "data" in ins else ins["in0"]
        self.addr = ins.get("addr")
        for e in ins.values():
            e.dst = self
        self.ack = outs.get("ack")
        if self.ack is not None:
            self.ack.src = self
        n = self.x.n
        self.n = n
        self.data = np.nonzero(self.x.info.has.astype(bool))[0]
        lines = len(comp.placement.tile_lines)
        self.client = mem.client(self.name, "write", len(self.data), lines)
        self.tm = tm
        self.T = np.zeros(n, dtype=np.int64)
        self.finish = 0
        self.busy_cycles = len(self.data) * lines
        self.node = node
        self.addr_idx = (mapping_in(self.addr.n, n) if self.addr is not None and self.addr.n <= n
                         else None)
        self.watch = [e for e in (self.x, self.addr, self.ack) if e is not None] + [self.client]

    def update(self):
        n = self.n
        a = self.x.P + 1
        ai = self.addr_idx
        if ai is not None:
            m = ai >= 0
            a[m] = np.maximum(a[m], self.addr.P + 1)
        d = self.data
        done = self.client.done()
        k = np.arange(len(d)) - self.tm.store_queue
        ok = k >= 0
        q = np.full(len(d), NEG, dtype=np.int64)
        q[ok] = done[k[ok]]
        a[d] = np.maximum(a[d], q)
        T = chain(a)
        changed = not same(T, self.T)
        self.T = T
        changed |= self.client.request(T[d] + 1)
        if not same(self.x.C, T):
            self.x.C = T.copy()
            self.x.version += 1
            changed = True
        if ai is not None:
            m = ai >= 0
            if not same(self.addr.C, T[m]):
                self.addr.C = T[m]
                self.addr.version += 1
                changed = True
        if self.ack is not None:
            ready = T + 1
            ready[d] = done + 1
            idx = mapping_out(self.ack.n, n)
            m = idx >= 0
            P = chain(np.maximum(ready[m], self.ack.room()))
            if not same(self.ack.P, P):
                self.ack.P = P
                self.ack.version += 1
                changed = True
        self.finish = int(max(T[-1] + 1, (done.max() + 1) if len(done) else 0))
        return changed

    def end(self):
        return self.finish

    def busy(self):
        return self.busy_cycles


class _Sink(StepSeq):
    """A sink step sequence that reports its end (Discard, BeatWriter)."""


def _pmu(u, ins, outs, tm, readers):
    """The write side of a PMU (Bufferize): a beat per cycle, a ref per closed buffer; buffer
    ``k`` waits for the release of buffer ``k - slots`` by every read side."""
    node, comp = u.node, u.component
    x = ins["in0"]
    refs = outs["out"]
    S = x.n
    closes = x.info.stop >= node.b
    seq = StepSeq(u.name, np.ones(S, dtype=np.int64), [(x, np.arange(S))],
                  [(refs, fit(closes, refs.n, S), 1, 1)])
    # buffer number of every step, and the first step of each buffer
    buf_of = np.concatenate([[0], np.cumsum(closes)[:-1]])
    starts = np.nonzero(np.concatenate([[True], buf_of[1:] != buf_of[:-1]]))[0]
    slots = comp.params.slots or comp.params.blocks
    seq.buffer_sizes = np.diff(np.concatenate([starts, [S]]))

    def slot_bound():
        a = np.full(S, NEG, dtype=np.int64)
        for r in readers:
            rel = r.release
            k = np.arange(len(starts)) - slots
            ok = (k >= 0) & (k < len(rel))
            a[starts[ok]] = np.maximum(a[starts[ok]], rel[k[ok]] + 1)
        return a
    seq.extra.append(slot_bound)
    seq.readers = readers
    return seq


class _ReadSide(StepSeq):
    """A PMU read side (Streamify): per buffer id, the buffer replayed beat by beat."""

    def __init__(self, u, ins, outs, tm, sizes):
        node = u.node
        bufs = ins["buffers"]
        out = outs["out"]
        S = out.n
        nb = int(bufs.info.has.sum())
        per = None
        if node.repeat is not None and sizes is not None and len(sizes) >= nb:
            per = np.asarray(sizes[:nb], dtype=np.int64) * node.repeat
            if per.sum() != S:
                per = None
        if per is None:
            edges = mapping_in(max(nb, 1), S)
            first = np.nonzero(edges >= 0)[0]
        else:
            first = np.concatenate([[0], np.cumsum(per)[:-1]])
        take = np.zeros(S, dtype=bool)
        take[first[first < S]] = True
        bi = fit(take, bufs.n, S)
        ins_ = [(bufs, bi)]
        if "ref" in ins:
            ins_.append((ins["ref"], mapping_in(ins["ref"].n, S)))
        cost = np.ones(S, dtype=np.int64)
        super().__init__(u.name, cost, ins_, [(out, np.arange(S), 1, tm.pmu_slack)])
        self.pop_off = np.zeros(S, dtype=np.int64)
        # the first beat of a buffer starts pmu_start cycles after its id is taken
        self.first = first[first < S]
        self.last = np.concatenate([self.first[1:] - 1, [S - 1]]) if len(self.first) else []
        self.tm = tm
        self.bufs = bufs
        self.release = np.zeros(len(self.first), dtype=np.int64)
        self.first_take = bi[self.first]

        def start_bound():
            a = np.full(S, NEG, dtype=np.int64)
            ok = self.first_take >= 0
            a[self.first[ok]] = bufs.P[self.first_take[ok]] + 1 + tm.pmu_start - 1
            return a
        self.extra.append(start_bound)

    def update(self):
        changed = super().update()
        if len(self.first):
            self.release = self.outs[0][0].P[np.asarray(self.last, dtype=np.int64)]
        return changed


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
        return [_Load(u, ins, outs["out"], mem, tm)]
    if isinstance(node, (LinearOffChipStore, RandomOffChipStore)):
        return [_Store(u, ins, outs, mem, tm)]
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
    if isinstance(node, Input):
        g = comp.geometry
        per = -(-comp.wpb // g.lanes) + g.latency + tm.reader_extra
        out = outs["out"]
        return [StepSeq(u.name, np.full(out.n, per, dtype=np.int64), [],
                        [(out, np.arange(out.n), per, 1)])]
    if isinstance(node, Output):
        g = comp.geometry
        per = -(-comp.wpb // g.lanes) + 2
        x = ins["in0"]
        return [_Sink(u.name, np.full(x.n, per, dtype=np.int64), [(x, np.arange(x.n))], [])]
    if isinstance(node, Discard):
        x = ins["in0"]
        return [_Sink(u.name, np.ones(x.n, dtype=np.int64), [(x, np.arange(x.n))], [])]
    return _generic(u, ins, outs, tm, hold=_looks_ahead(node))
