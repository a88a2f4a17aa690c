"""The PMU in the timing model: a Bufferize's write side and its Streamify read sides.

The write side takes a beat per cycle and sends a buffer's ref two cycles after its closing beat
(its input queue and its ref FIFO); buffer ``k`` waits until every read side has released buffer
``k - slots``. A read side takes a buffer id, starts replaying it ``pmu_start`` cycles later, one
beat per cycle into its output FIFO, and releases the buffer after its last replayed beat.
"""

import numpy as np

from .beats import fit, mapping_in
from .engine import StepSeq, strided

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
    seq.buffer_sizes = np.diff(starts, append=S)

    plans = {}          # per read side: the buffers that wait for a release, and which

    def slot_bound():
        out = []
        for r in readers:
            plan = plans.get(id(r))
            if plan is None:
                k = np.arange(len(starts)) - slots
                ok = (k >= 0) & (k < len(r.release))
                plan = plans[id(r)] = (strided(starts[ok]), strided(k[ok]))
            out.append((plan[0], r.release[plan[1]] + 1))
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

        def start_bound():
            return [(starts, bufs.P[takes] + tm.pmu_start)]
        self.extra.append(start_bound)

    def update(self):
        changed = super().update()
        if len(self.first):
            self.release = self.outs[0][0].P[self._last]
        return changed
