"""The timing engine of the performance model: beats, FIFOs and units as max-plus recurrences.

Every FIFO of the system is an :class:`Edge` with one push time ``P[j]`` (the producer's write
handshake) and one pop time ``C[j]`` (the consumer's read handshake) per beat ``j``. A
:class:`StepSeq` is a unit (or one side of a unit) as a sequence of steps; step ``s`` starts at

    ``T[s] = max(T[s-1] + cost[s-1], inputs available, room for its outputs, extra bounds)``

and pops the input beats it consumes at ``T[s] + pop_off[s]``. An output beat is *ready*
``off`` cycles after its step starts and is pushed at ``max(ready, P[j-1] + 1, C[j-depth] + 1)``
(a StreamFIFO takes a beat only when it has a free entry, and its output is valid the cycle after
the write). A unit with ``slack = k`` on an output holds at most ``k`` finished results that
the FIFO has not taken yet (its output registers); ``slack = 0`` is a combinational unit, whose
input pop and output push are the same handshake.

Both recurrences have the form ``x[s] = max(a[s], x[s-1] + c[s-1])``, which is
``cumsum(c) + cummax(a - cumsum(c))``: NumPy solves a whole stream at once. Constraints between
units (data forwards, back-pressure backwards, the shared memory's arbitration) are iterated to
the least fixed point (:func:`solve`); a schedule that does not settle is a deadlock.
"""

import numpy as np

__all__ = ["Edge", "StepSeq", "Actor", "solve", "chain", "NEG"]

#: "No constraint" (far below any cycle).
NEG = np.int64(-(1 << 40))


def chain(a, cost):
    """``x[s] = max(a[s], x[s-1] + cost[s-1])`` for every ``s`` (``x[0] = a[0]``)."""
    if len(a) == 0:
        return a.copy()
    c = np.zeros(len(a), dtype=np.int64)
    if len(a) > 1:
        np.cumsum(cost[:-1], out=c[1:])
    return c + np.maximum.accumulate(a - c)


class Edge:
    """One FIFO: ``n`` beats, ``depth`` entries, push and pop times of every beat."""

    def __init__(self, name, n, depth, info=None):
        self.name, self.n, self.depth = name, int(n), int(depth)
        self.info = info            # the beats' arrays (stop, has_data, rows, data)
        self.P = np.zeros(self.n, dtype=np.int64)
        self.C = np.zeros(self.n, dtype=np.int64)
        self.src = self.dst = None

    def __repr__(self):
        return f"Edge({self.name!r}, n={self.n}, depth={self.depth})"

    def room(self, j):
        """Earliest push time of beats ``j`` allowed by the free entries: ``C[j-depth] + 1``."""
        k = j - self.depth
        out = np.full(len(j), NEG, dtype=np.int64)
        ok = k >= 0
        out[ok] = self.C[k[ok]] + 1
        return out


class Actor:
    """Anything the fixed point iterates: ``update()`` recomputes its times, returns whether
    any changed."""

    name = "?"

    def update(self):
        raise NotImplementedError

    def end(self):
        """The cycle this actor finishes (sinks: the run ends when every sink has)."""
        return None


class StepSeq(Actor):
    """A unit as a sequence of steps (module doc).

    Parameters
    ----------
    name : str
    cost : array of int
        Cycles each step occupies the unit (>= 1).
    ins : list of (Edge, index array)
        Per step, the beat of the edge it consumes (-1: none).
    outs : list of (Edge, index array, off, slack)
        Per step, the beat it produces (-1: none), ready ``off`` cycles after the step starts;
        ``slack`` finished results may wait for the FIFO (0: combinational).
    pop_off : int or array
        A consumed beat is popped ``pop_off`` cycles after its step starts.
    t0 : int
        The first step's earliest start.
    """

    def __init__(self, name, cost, ins=(), outs=(), pop_off=0, t0=0):
        self.name = name
        self.cost = np.asarray(cost, dtype=np.int64)
        self.S = len(self.cost)
        self.ins = [(e, np.asarray(i, dtype=np.int64)) for e, i in ins]
        self.outs = [(e, np.asarray(i, dtype=np.int64),
                      np.broadcast_to(np.asarray(off, dtype=np.int64), (self.S,)), slack)
                     for e, i, off, slack in outs]
        self.pop_off = np.broadcast_to(np.asarray(pop_off, dtype=np.int64), (self.S,))
        self.t0 = t0
        self.extra = []             # callables -> array of lower bounds on T
        self.T = np.zeros(self.S, dtype=np.int64)
        self.wait_in = np.zeros(self.S, dtype=np.int64)
        self.wait_out = np.zeros(self.S, dtype=np.int64)
        for e, idx in self.ins:
            _check_cover(name, e, idx)
            e.dst = self
        for e, idx, _, _ in self.outs:
            _check_cover(name, e, idx)
            e.src = self

    def __repr__(self):
        return f"StepSeq({self.name!r}, steps={self.S})"

    def update(self):
        S = self.S
        if S == 0:
            return False
        a_in = np.full(S, self.t0, dtype=np.int64)
        for e, idx in self.ins:
            m = idx >= 0
            a_in[m] = np.maximum(a_in[m], e.P[idx[m]] + 1)
        a_out = np.full(S, NEG, dtype=np.int64)
        for e, idx, off, slack in self.outs:
            m = idx >= 0
            j = idx[m]
            if slack == 0:
                bound = e.room(j)
            else:
                k = j - slack
                bound = np.full(len(j), NEG, dtype=np.int64)
                ok = k >= 0
                bound[ok] = e.P[k[ok]] - off[m][ok]
            a_out[m] = np.maximum(a_out[m], bound)
        a = np.maximum(a_in, a_out)
        for f in self.extra:
            a = np.maximum(a, f())
        T = chain(a, self.cost)
        changed = not np.array_equal(T, self.T)
        self.T = T
        prev = np.empty(S, dtype=np.int64)
        prev[0] = self.t0
        prev[1:] = T[:-1] + self.cost[:-1]
        self.wait_in = np.maximum(a_in - prev, 0)
        self.wait_out = np.maximum(np.maximum(a_out, a_in) - np.maximum(prev, a_in), 0)
        for e, idx in self.ins:
            m = idx >= 0
            C = T[m] + self.pop_off[m]
            if not changed and np.array_equal(e.C[idx[m]], C):
                continue
            e.C[idx[m]] = C
            changed = True
        for e, idx, off, slack in self.outs:
            m = idx >= 0
            j = idx[m]
            if slack == 0:
                P = T[m]
            else:
                ready = np.maximum(T[m] + off[m], e.room(j))
                P = chain(ready, np.ones(len(j), dtype=np.int64))
            if not np.array_equal(e.P[j], P):
                e.P[j] = P
                changed = True
        return changed

    def busy(self):
        return int(self.cost.sum())

    def end(self):
        return int(self.T[-1] + self.cost[-1]) if self.S else 0


def _check_cover(name, edge, idx):
    got = idx[idx >= 0]
    if len(got) != edge.n or (len(got) and not np.array_equal(got, np.arange(edge.n))):
        raise AssertionError(f"{name}: the steps cover beats {got[:8].tolist()}.. of "
                             f"{edge.name} ({edge.n} beats), not each once in order")


def solve(actors, max_rounds=None):
    """Iterate ``actors`` to their least fixed point; return the rounds it took, or None when
    the schedule does not settle (a deadlock: some beat waits on itself)."""
    max_rounds = max_rounds or 8 * len(actors) + 40
    for r in range(1, max_rounds + 1):
        changed = False
        for a in actors:
            changed |= bool(a.update())
        if not changed:
            return r
    return None
