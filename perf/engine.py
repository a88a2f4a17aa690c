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

__all__ = ["Edge", "StepSeq", "Actor", "solve", "chain", "same", "filled", "NEG"]

#: "No constraint" (far below any cycle).
NEG = np.int64(-(1 << 40))
ONES = np.ones(1 << 16, dtype=np.int64)
STEPS = np.arange(1 << 16, dtype=np.int64)
#: Passes over a unit's own output loop (its results waiting for room) per update.
LOCAL_ROUNDS = 64


def _ones(n):
    return ONES[:n] if n <= len(ONES) else np.ones(n, dtype=np.int64)


def filled(n, value):
    """An int64 array of ``n`` times ``value`` (``np.full`` without its Python overhead)."""
    out = np.empty(n, dtype=np.int64)
    out.fill(value)
    return out


def same(a, b):
    """Whether two arrays hold the same values (``np.array_equal`` without its overhead)."""
    return len(a) == len(b) and a.tobytes() == b.tobytes()


def chain(a, cost=None, step=1):
    """``x[s] = max(a[s], x[s-1] + cost[s-1])`` for every ``s`` (``x[0] = a[0]``); without
    ``cost``, every step costs ``step``."""
    n = len(a)
    if n == 0:
        return a.copy()
    # already spaced (the usual case: a stream that flows): the recurrence is the identity, and
    # checking that is cheaper than the running maximum
    if n == 1 or (a[1:] - a[:-1] >= (step if cost is None else cost[:-1])).all():
        return a.copy()
    if cost is None:
        c = STEPS[:n] * step if n <= len(STEPS) else np.arange(n, dtype=np.int64) * step
    else:
        c = np.zeros(n, dtype=np.int64)
        if n > 1:
            np.cumsum(cost[:-1], out=c[1:])
    return c + np.maximum.accumulate(a - c)


class Edge:
    """One FIFO: ``n`` beats, ``depth`` entries, push and pop times of every beat."""

    def __init__(self, name, n, depth, info=None):
        self.name, self.n, self.depth = name, int(n), int(depth)
        self.info = info            # the beats' arrays (stop, has_data, rows, data)
        self.pv = self.cv = 0          # changes of the pushes, of the pops
        self.P = np.zeros(self.n, dtype=np.int64)
        self.C = np.zeros(self.n, dtype=np.int64)
        self.src = self.dst = None
        self.version = 0
        self._room = self._room_of = None

    def __repr__(self):
        return f"Edge({self.name!r}, n={self.n}, depth={self.depth})"

    @property
    def P(self):
        """Push time of every beat (replaced, never written in place)."""
        return self._P

    @P.setter
    def P(self, value):
        self._P = value
        self.pv += 1

    @property
    def C(self):
        """Pop time of every beat (replaced, never written in place)."""
        return self._C

    @C.setter
    def C(self, value):
        self._C = value
        self.cv += 1

    def room(self):
        """Earliest push time of every beat allowed by the free entries: ``C[j-depth] + 1``
        (kept until the pops change: ``C`` is replaced, never written in place)."""
        if self._room_of is self.C:
            return self._room
        out = filled(self.n, NEG)
        d = self.depth
        if d < self.n:
            out[d:] = self.C[:-d] + 1
        self._room, self._room_of = out, self.C
        return out


class Actor:
    """Anything the fixed point iterates: ``update()`` recomputes its times, returns whether
    any changed."""

    name = "?"
    watch = ()          # objects with a ``version``: the actor is up to date while none changed

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

    #: Skip an update when only the output FIFOs' pops changed and none of them binds
    #: (:meth:`_outputs_quiet`); False recomputes every time (the same schedule).
    skip_quiet = True

    def __init__(self, name, cost, ins=(), outs=(), pop_off=0, t0=0):
        self.name = name
        self.cost = np.asarray(cost, dtype=np.int64)
        self.S = S = len(self.cost)
        self.pop_off = _per_step(pop_off, S)
        self.unit_cost = bool(S) and int(self.cost.max()) == 1 == int(self.cost.min())
        self.t0 = t0
        self.extra = []             # callables -> [(steps, lower bounds on their T)]
        self.T = np.zeros(S, dtype=np.int64)
        self._bounds = (np.zeros(S, dtype=np.int64), np.zeros(S, dtype=np.int64))
        self._plan = self._seen = None
        self.ins, self.outs = [], []
        for e, idx in ins:
            idx = np.asarray(idx, dtype=np.int64)
            _check_cover(name, e, idx)
            e.dst = self
            self.ins.append((e, np.nonzero(idx >= 0)[0]))
        for e, idx, off, slack in outs:
            idx = np.asarray(idx, dtype=np.int64)
            _check_cover(name, e, idx)
            e.src = self
            steps = np.nonzero(idx >= 0)[0]
            off = _per_step(off, S)[steps]
            self.outs.append((e, steps, off, slack))
        self.watch = [e for e, _ in self.ins] + [e for e, *_ in self.outs]

    def __repr__(self):
        return f"StepSeq({self.name!r}, steps={self.S})"

    def _make_plan(self):
        """The index arrays of :meth:`update`, with ``None`` for a port that has a beat in every
        step (no gather or scatter needed)."""
        S = self.S

        def every(steps):
            return None if len(steps) == S else steps
        ins = []
        for e, steps in self.ins:
            pop = self.pop_off[steps]
            ins.append((e, every(steps), pop if pop.any() else None))
        comb, held = [], []
        for e, steps, off, slack in self.outs:
            st = every(steps)
            if not slack:
                k = e.depth
                tail = None if k >= e.n else slice(k, None) if st is None else steps[k:]
                comb.append((e, st, tail, k))
            else:
                tail = None if slack >= e.n else (
                    slice(slack, None) if st is None else steps[slack:], off[slack:])
                held.append((e, st, off, slack, tail))
        self._plan = ins, comb, held
        # what the steps depend on besides the output FIFOs' pops: input pushes, extra bounds
        ports = {id(e) for e, *_ in self.outs} | {id(e) for e, _ in self.ins}
        self._fwd = [e for e, _ in self.ins] + [o for o in self.watch if id(o) not in ports]
        return self._plan

    def _forward_key(self):
        return [o.pv if isinstance(o, Edge) else o.version for o in self._fwd]

    def _outputs_quiet(self, comb, held):
        """Whether the output FIFOs' new pops leave every step and push as it is (only their
        pops changed since the last update): each pop frees its entry no later than the push
        that needs it already happens. Then :meth:`update` would change nothing (its stall
        bounds neither: a bound that does not move a step is no wait)."""
        T = self.T
        for e, st, tail, k in comb:
            if tail is not None and not (e.C[:-k] + 1 <= T[tail]).all():
                return False
        for e, *_ in held:
            if not (e.room() <= e.P).all():
                return False
        return True

    def _pushes(self, T):
        """Push times of every output with slack, given the step starts ``T``."""
        return [chain(np.maximum((T if st is None else T[st]) + off, e.room()))
                for e, st, off, slack, tail in (self._plan or self._make_plan())[2]]

    def update(self):
        S = self.S
        if S == 0:
            return False
        ins, comb, held = self._plan or self._make_plan()
        if self.skip_quiet and self._forward_key() == self._seen and \
                self._outputs_quiet(comb, held):
            return False
        a_in = None
        for e, st, pop in ins:
            v = e.P + 1
            if st is None:
                a_in = v if a_in is None else np.maximum(a_in, v, out=a_in)
            else:
                if a_in is None:
                    a_in = filled(S, self.t0)
                a_in[st] = np.maximum(a_in[st], v)
        if a_in is None:
            a_in = filled(S, self.t0)
        else:
            np.maximum(a_in, self.t0, out=a_in)
        base = a_in
        for e, st, tail, k in comb:
            if tail is not None:
                if base is a_in:
                    base = a_in.copy()
                base[tail] = np.maximum(base[tail], e.C[:-k] + 1)
        for f in self.extra:
            for idx, low in f():
                if base is a_in:
                    base = a_in.copy()
                base[idx] = np.maximum(base[idx], low)
        # the unit's own results waiting for room bound its next steps: solve that loop here
        bounded = [h for h in held if h[4] is not None]
        if not bounded:
            a = base
            T = chain(a, None if self.unit_cost else self.cost)
            new = self._pushes(T)
        else:
            pushes = [e.P for e, *_ in bounded]
            last = None
            for _ in range(LOCAL_ROUNDS):
                a = base.copy()
                for (e, st, off, slack, (tst, toff)), P in zip(bounded, pushes):
                    a[tst] = np.maximum(a[tst], P[:-slack] - toff)
                if last is not None and same(a, last):
                    break                   # the same bounds: the same steps and pushes
                last = a
                T = chain(a, None if self.unit_cost else self.cost)
                new = self._pushes(T)
                pushes = [P for P, h in zip(new, held) if h[4] is not None]
        changed = not same(T, self.T)
        self.T = T
        self._bounds = (a_in, a)
        for e, st, pop in ins:
            C = T.copy() if st is None else T[st]
            if pop is not None:
                C += pop
            if not same(e.C, C):
                e.C = C
                e.version += 1
                changed = True
        for (e, *_), P in zip(held, new):
            if not same(e.P, P):
                e.P = P
                e.version += 1
                changed = True
        for e, st, tail, k in comb:
            P = T.copy() if st is None else T[st]
            if not same(e.P, P):
                e.P = P
                e.version += 1
                changed = True
        self._seen = self._forward_key()
        return changed

    @property
    def wait_in(self):
        """Cycles each step waited for its inputs (after the step before it)."""
        a_in, _ = self._bounds
        return np.maximum(a_in - self._prev(), 0)

    @property
    def wait_out(self):
        """Cycles each step waited for room for its outputs (beyond its inputs)."""
        a_in, a = self._bounds
        return np.maximum(a - np.maximum(self._prev(), a_in), 0)

    def _prev(self):
        prev = np.empty(self.S, dtype=np.int64)
        if self.S:
            prev[0] = self.t0
            prev[1:] = self.T[:-1] + self.cost[:-1]
        return prev

    def busy(self):
        return int(self.cost.sum())

    def end(self):
        return int(self.T[-1] + self.cost[-1]) if self.S else 0


def _per_step(x, S):
    """``x`` (an int or an array of ``S``) as an array of ``S`` ints."""
    x = np.asarray(x, dtype=np.int64)
    return filled(S, x) if x.ndim == 0 else x


def _check_cover(name, edge, idx):
    got = idx[idx >= 0]
    if len(got) != edge.n or (len(got) and not same(got, np.arange(edge.n))):
        raise AssertionError(f"{name}: the steps cover beats {got[:8].tolist()}.. of "
                             f"{edge.name} ({edge.n} beats), not each once in order")


def solve(actors, max_rounds=None, backwards=True, seen=None):
    """Iterate ``actors`` to their least fixed point; return the rounds it took, or None when
    the schedule does not settle (a deadlock: some beat waits on itself).

    A round updates the actors in their order and then back in reverse, skipping an actor none
    of whose watched objects changed since its last update: data flows forwards in the first
    half and back-pressure backwards in the second. Every order reaches the same least fixed
    point (the updates are monotone and start below it); this one in the fewest updates.
    ``backwards=False`` sweeps forwards only. ``seen`` (a list, updated in place) carries what
    each actor last saw from an earlier solve of the same actors: an actor nothing of which
    changed since is not updated again (its update is a function of what it watches)."""
    max_rounds = max_rounds or 8 * len(actors) + 40
    if seen is None:
        seen = [None] * len(actors)
    n = len(actors)
    order = list(range(n)) + (list(range(n - 2, 0, -1)) if backwards else [])
    for r in range(1, max_rounds + 1):
        changed = False
        for i in order:
            a = actors[i]
            key = [o.version for o in a.watch]
            if key == seen[i]:
                continue
            changed |= bool(a.update())
            seen[i] = [o.version for o in a.watch]
        if not changed:
            return r
    return None
