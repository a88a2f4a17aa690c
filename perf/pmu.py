"""The PMU in the timing model: a Bufferize's write side and its Streamify read sides.

The write side takes a beat per cycle and sends a buffer's ref two cycles after its closing beat
(its input queue and its ref FIFO); buffer ``k`` waits until every read side has released buffer
``k - slots``. A read side takes a buffer id, starts replaying it ``pmu_start`` cycles later, one
beat per cycle into its output FIFO, and releases the buffer as it reads the buffer's last entry.

**Where a release binds** (``hdl/pmu/replay_engine.py``, ``writer.py``). The replay engine
issues a read while fewer than ``pmu_places`` (4) of its beats are in its two stages and its
output FIFO: the read of beat ``s`` is issued at ``I[s] = max(I[s - 1] + 1, P[s - 4] + 1,
start)``, three cycles before its push at the earliest, and the read of a buffer's last entry
raises its release. The release frees the buffer's block (the arbiter takes it, the walker
pushes the block onto the free list), and the writer stores the next buffer's first beat
``pmu_alloc`` (3) cycles after that issue at the earliest. The writer's two-entry input queue
takes that beat and the one after it before then: the beat two after a buffer's first is taken
from the FIFO the cycle after the first is stored (``I + 4``). A buffer of one or two beats
closes with a beat that is stored, and sends its ref, no earlier than that.
"""

import numpy as np

from .beats import fit, mapping_in
from .engine import NEG, StepSeq, chain, filled, strided

__all__ = ["write_side", "ReadSide"]


def write_side(u, ins, outs, tm, readers):
    """The write side of a PMU (Bufferize): a beat per cycle, a ref per closed buffer; buffer
    ``k`` waits for the release of buffer ``k - slots`` by every read side."""
    node, comp = u.node, u.component
    x = ins["in0"]
    refs = outs["out"]
    S = x.n
    closes = x.info.stop >= node.b
    seq = StepSeq(u.name, np.ones(S, dtype=np.int64), [(x, None)],
                  [(refs, fit(closes, refs.n, S), 2, 1)])
    # the first step of each buffer: step 0 and every step after a closing beat
    ends = np.flatnonzero(closes[:-1])
    starts = np.empty(len(ends) + 1, dtype=np.int64)
    starts[0] = 0
    np.add(ends, 1, out=starts[1:])
    slots = comp.params.slots or comp.params.blocks
    seq.buffer_sizes = sizes = np.diff(starts, append=S)
    alloc, queue = tm.pmu_alloc, WRITE_QUEUE

    plans = {}          # per read side: the steps that wait for a release, which, and how long

    def plan_for(r):
        # buffer b stores its first beat (step starts[b]) ``alloc`` cycles after the read of
        # buffer b - slots's last entry; the queue takes that beat and the next before then
        k = np.arange(len(starts)) - slots
        ok = (k >= 0) & (k < len(r.release))
        plan = []
        after = starts + queue
        m = ok & (after < S)
        if m.any():             # the beat ``queue`` after the first enters the queue then
            plan.append((strided(after[m]), strided(k[m]), alloc + 1))
        for j in range(queue):  # a buffer closed within the queue: its closing beat's store
            m = ok & (sizes == j + 1)
            if m.any():
                plan.append((strided(starts[m] + j), strided(k[m]), alloc - 1 + j))
        return plan

    def slot_bound():
        out = []
        for r in readers:
            plan = plans.get(id(r))
            if plan is None:
                plan = plans[id(r)] = plan_for(r)
            for steps, k, wait in plan:
                out.append((steps, r.release[k] + wait))
        return out
    seq.extra.append(slot_bound)
    seq.readers = readers
    return seq


class ReadSide(StepSeq):
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
        super().__init__(u.name, cost, ins_, [(out, None, 1, tm.pmu_slack)])
        # the first beat of a buffer starts pmu_start cycles after its id is taken
        self.first = first[first < S]
        self.last = (np.concatenate([self.first[1:] - 1, [S - 1]]).astype(np.int64)
                     if len(self.first) else np.zeros(0, dtype=np.int64))
        self._last = strided(self.last)
        self.tm = tm
        self.bufs = bufs
        self.release = np.zeros(len(self.first), dtype=np.int64)
        self.first_take = bi[self.first]

        ok = self.first_take >= 0
        starts, takes = strided(self.first[ok]), strided(self.first_take[ok])
        self._starts, self._takes = starts, takes

        def start_bound():
            return [(starts, bufs.arrived[takes] + tm.pmu_start)]
        self.extra.append(start_bound)

    def update(self):
        changed = super().update()
        if len(self.first):
            self.release = self.issues()[self._last]
        return changed

    def issues(self):
        """The cycle the replay engine issues each beat's read (module doc): a cycle after a
        place frees (the push ``pmu_places`` beats before), one a cycle, a buffer's first no
        earlier than the cycle after its id was pushed (``pmu_start - 3``: its push comes three
        cycles after the issue). From the pushes alone, so that the write side, which watches
        them, sees every change; a lower bound of the read side's own steps' issue."""
        P = self.outs[0][0].P
        k = self.tm.pmu_places
        a = filled(self.S, NEG)
        if self.S > k:
            np.add(P[:-k], 1, out=a[k:])
        v = a[self._starts]
        low = self.bufs.arrived[self._takes] + (self.tm.pmu_start - PMU_ISSUE)
        if type(self._starts) is slice:
            np.maximum(v, low, out=v)
        else:
            a[self._starts] = np.maximum(v, low)
        return chain(a)


#: Cycles from a replayed beat's read to its push at the earliest (two stages, the FIFO).
PMU_ISSUE = 3
#: Beats the writer's input queue takes before it stores the first (``WriteDecoder``).
WRITE_QUEUE = 2
