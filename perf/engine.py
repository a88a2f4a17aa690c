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

__all__ = ["Edge", "StepSeq", "Actor", "Watched", "solve", "watching", "chain", "offsets", "same",
           "filled", "strided", "NEG"]

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
    """Whether two arrays hold the same values (``np.array_equal`` without its overhead). The
    last elements first: a schedule that moves mostly moves its end."""
    n = len(a)
    if n != len(b):
        return False
    if n > 64 and a[-1] != b[-1]:
        return False
    return a.tobytes() == b.tobytes()


def offsets(n, cost=None, step=1):
    """``c[s] = cost[0] + ... + cost[s-1]`` (``c[0] = 0``; without ``cost``, ``s * step``): the
    offsets with which :func:`chain` solves its recurrence."""
    if cost is None:
        if n > len(STEPS):
            return np.arange(n, dtype=np.int64) * step
        return STEPS[:n] if step == 1 else STEPS[:n] * step     # read only: a view
    c = np.zeros(n, dtype=np.int64)
    if n > 1:
        np.cumsum(cost[:-1], out=c[1:])
    return c


def chain(a, cost=None, step=1, c=None):
    """``x[s] = max(a[s], x[s-1] + cost[s-1])`` for every ``s`` (``x[0] = a[0]``); without
    ``cost``, every step costs ``step``. ``c``: the :func:`offsets` of the costs, when the caller
    keeps them (a unit's costs do not change between its updates). A new array."""
    n = len(a)
    if n <= 1:
        return a.copy()
    if c is None:
        c = offsets(n, cost, step)
    # x[s] - c[s] = max over r <= s of a[r] - c[r]: three calls, whether or not a step waits
    x = np.subtract(a, c)
    np.maximum.accumulate(x, out=x)
    x += c
    return x


class Edge:
    """One FIFO: ``n`` beats, ``depth`` entries, push and pop times of every beat."""

    _fwd_w = ()         # the step sequences that wait for its pushes (StepSeq._make_plan)
    _w = ()             # the actors that watch it (:func:`watching`)

    def __init__(self, name, n, depth, info=None, lag=0):
        self.name, self.n, self.depth = name, int(n), int(depth)
        self.lag = int(lag)         # cycles a buffered queue adds before a beat is offered
        self._arrived = self._arrived_of = None
        self.info = info            # the beats' arrays (stop, has_data, rows, data)
        self.pv = self.cv = 0          # changes of the pushes, of the pops
        self.P = np.zeros(self.n, dtype=np.int64)
        self.C = np.zeros(self.n, dtype=np.int64)
        self.src = self.dst = None
        self._room = self._room_of = self._rchain = None
        self._held_rooms = {}

    def __repr__(self):
        lag = f", lag={self.lag}" if self.lag else ""
        return f"Edge({self.name!r}, n={self.n}, depth={self.depth}{lag})"

    @property
    def arrived(self):
        """The push of every beat as its consumer sees it (the beat is offered the cycle
        after): ``P``, or ``P + lag`` behind a buffered queue, whose storage is read into its
        output one cycle later (kept until the pushes change)."""
        if not self.lag:
            return self.P
        if self._arrived_of is not self.P:
            self._arrived, self._arrived_of = self.P + self.lag, self.P
        return self._arrived

    @property
    def P(self):
        """Push time of every beat (replaced, never written in place)."""
        return self._P

    @P.setter
    def P(self, value):
        self._P = value
        self.pv += 1
        for a in self._w:           # the actors that watch this edge (solve)
            a._dirty = True
        for a in self._fwd_w:       # the units whose steps wait for these pushes
            a._fwd_moved = True

    @property
    def C(self):
        """Pop time of every beat (replaced, never written in place)."""
        return self._C

    @C.setter
    def C(self, value):
        self._C = value
        self.cv += 1
        for a in self._w:
            a._dirty = True

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
        self._rchain = None
        return out

    def room_chain(self):
        """:func:`chain` of :meth:`room` (the pushes the free entries alone allow, a beat a
        cycle at most), kept with it until the pops change. Once the consumer has set the pops
        they rise by a cycle a beat at least (a unit's steps do), and so does the room: the room
        is its own chain then, but for its first ``depth`` entries, which bound nothing
        (:data:`NEG`, where the chain has ``NEG + k``)."""
        room = self.room()
        if self._rchain is None:
            self._rchain = room if self.cv > 1 else chain(room)
            self._held_rooms = {}
        return self._rchain

    def held_room(self, slack, off):
        """``room_chain()[:-slack] - off``: what a producer that holds ``slack`` results, each
        ready ``off`` after its step, owes the room at its step ``j + slack`` (kept with the
        room)."""
        R = self.room_chain()
        out = self._held_rooms.get((slack, off))
        if out is None:
            out = self._held_rooms[(slack, off)] = R[:-slack] - off
        return out


class Watched:
    """Something other than an edge that actors watch: :meth:`touch` when it changes."""

    _w = ()             # the actors that watch it (:func:`watching`)
    version = 0

    def touch(self):
        """It changed: a new ``version``, and every actor that watches it is dirty."""
        self.version += 1
        for a in self._w:
            a._dirty = True


class Actor:
    """Anything the fixed point iterates: ``update()`` recomputes its times, returns whether
    any changed."""

    name = "?"
    watch = ()          # what the actor reads: edges, and objects with a ``version`` and a
                        # ``touch()`` (:class:`Watched`); it is up to date while none changed
    _dirty = None       # something it watches changed since its last update (None: not yet
                        # registered with what it watches, :func:`watching`)

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
    tails : dict of Edge to (array of int, int), optional
        For a held output, ``(steps, off)``: step ``steps[j]`` starts no earlier than beat
        ``j``'s push less ``off`` (one step for each beat but the last ``slack``), instead of
        beat ``j + slack``'s own step less its ``off`` (a PCU without a spare,
        :func:`~stepforge.perf.units._pcu`).

    Notes
    -----
    A port's steps are kept as ``None`` (a beat in every step), a slice (consecutive steps) or an
    index array, so that most ports read and write views instead of gathering and scattering.
    An update that would change nothing is detected before the recurrences are solved
    (:meth:`_outputs_quiet`, :meth:`_bounds_quiet`); the stall figures (:attr:`wait_in`,
    :attr:`wait_out`) are therefore computed from the final schedule when they are read.
    """

    #: Skip an update when it provably changes nothing (:meth:`_outputs_quiet`,
    #: :meth:`_bounds_quiet`); False recomputes every time (the same schedule).
    skip_quiet = True

    def __init__(self, name, cost, ins=(), outs=(), pop_off=0, t0=0, tails=None):
        self.name = name
        self.tails = dict(tails or {})
        self.cost = np.asarray(cost, dtype=np.int64)
        self.S = S = len(self.cost)
        self.pop_off = pop_off if type(pop_off) is int else _per_step(pop_off, S)
        self.unit_cost = bool(S) and int(self.cost.max()) == 1 == int(self.cost.min())
        self.t0 = t0
        self.extra = []             # callables -> [(steps, lower bounds on their T)]
        self.T = np.zeros(S, dtype=np.int64)
        self._plan = None
        self._fwd_moved = True      # an input's pushes (or an extra bound's) moved since the
                                    # last update
        self._settled = False       # the last update solved the unit's own output loop
        self._applied = False       # its ports' pops and combinational pushes follow from T
        self.ins, self.outs = [], []
        for e, idx in ins:
            steps = _steps(name, e, idx, S)
            e.dst = self
            self.ins.append((e, steps))
        for e, idx, off, slack in outs:
            steps = _steps(name, e, idx, S)
            e.src = self
            if type(off) is not int:
                off = _per_step(off, S)[steps]
            self.outs.append((e, steps, off, slack))
        self.watch = [e for e, _ in self.ins] + [e for e, *_ in self.outs]

    def __repr__(self):
        return f"StepSeq({self.name!r}, steps={self.S})"

    def _make_plan(self):
        """The ports of :meth:`update`, each with its steps as ``None`` (every step), a slice or
        an index array (:func:`_view`), and an offset that is the same for every beat as an
        int."""
        S = self.S
        ins = []
        for e, steps in self.ins:
            pop = self.pop_off if type(self.pop_off) is int else _uniform(self.pop_off[steps])
            ins.append((e, _view(steps, S), None if isinstance(pop, int) and not pop else pop))
        comb, held = [], []
        for e, steps, off, slack in self.outs:
            st = _view(steps, S)
            if not slack:
                k = e.depth
                tail = None if k >= e.n else _view(steps[k:], S)
                comb.append((e, st, tail, k))
            elif e in self.tails:
                tst, toff = self.tails[e]
                if len(tst) != max(e.n - slack, 0):
                    raise AssertionError(f"{self.name}: {len(tst)} steps wait for {e.name}'s "
                                         f"{e.n} beats through a slack of {slack}")
                tail = (_view(np.asarray(tst, dtype=np.int64), S), _uniform(toff)) \
                    if len(tst) else None
                held.append((e, st, _uniform(off), slack, tail))
            else:
                tail = None if slack >= e.n else (_view(steps[slack:], S),
                                                  _uniform(off if type(off) is int
                                                           else off[slack:]))
                held.append((e, st, _uniform(off), slack, tail))
        self._plan = ins, comb, held
        # the unit's own output loop in closed form (:meth:`update`) when a result's readiness
        # never binds a later step through the slack, only the FIFO's room does
        self._closed = all(_closed_form(self.cost, steps, off, slack, self.tails.get(e))
                           for e, steps, off, slack in self.outs if slack)
        # the first input with a beat in every step starts the inputs' bound
        self._full = next((i for i, (_, st, _) in enumerate(ins) if st is None), None)
        self._coff = offsets(S, None if self.unit_cost else self.cost)
        # what the steps depend on besides the output FIFOs' pops: input pushes, extra bounds
        ports = {id(e) for e, *_ in self.outs} | {id(e) for e, _ in self.ins}
        fwd = [e for e, _ in self.ins] + [o for o in self.watch if id(o) not in ports]
        for o in fwd:
            if not isinstance(o, Edge):
                raise TypeError(f"{self.name}: a step sequence watches edges only, not {o!r}")
            if self not in o._fwd_w:
                o._fwd_w = o._fwd_w + (self,)
        return self._plan

    def _outputs_quiet(self, comb, held):
        """Whether the output FIFOs' new pops leave every step and push as it is (only their
        pops changed since the last update): each pop frees its entry no later than the push
        that needs it already happens."""
        T = self.T
        for e, st, tail, k in comb:
            if tail is not None and not _le(e.C[:-k] + 1, T[tail]):
                return False
        for e, *_ in held:
            if not _le(e.room(), e.P):
                return False
        return True

    def _bounds_quiet(self, base, held):
        """Whether the steps' new lower bounds ``base`` (inputs, room of the combinational
        outputs, extra bounds) bind no step and the held outputs' room binds no push: then the
        steps, pops and pushes stay as they are. The updates are monotone (every bound only
        rises while the fixed point iterates), so the last schedule, which satisfies these
        bounds, is still the least one."""
        if not (self._settled and _le(base, self.T)):
            return False
        return all(_le(e.room(), e.P) for e, *_ in held)

    def _inputs(self, ins):
        """The earliest start of every step allowed by its inputs (a beat is there the cycle
        after its push) and ``t0``: a new array."""
        full = self._full
        if full is None:
            a = filled(self.S, self.t0 - 1)
        elif len(ins) == 1:
            a = ins[0][0].arrived + 1
            if self.t0 > 0:
                np.maximum(a, self.t0, out=a)
            return a
        else:
            a = ins[full][0].arrived.copy()
        for i, (e, st, pop) in enumerate(ins):
            if i != full:
                _raise(a, st, e.arrived)
        a += 1
        if full is not None and self.t0 > 0:
            np.maximum(a, self.t0, out=a)
        return a

    def _bound(self, a, comb):
        """Raise ``a`` (in place) by the room of the combinational outputs and the extra
        bounds."""
        for e, st, tail, k in comb:
            if tail is not None:
                _raise(a, tail, e.C[:-k] + 1)
        for f in self.extra:
            for idx, low in f():
                _raise(a, idx, low)
        return a

    @staticmethod
    def _held(a, bounded, pushes):
        """``a`` raised by the held outputs' pushes ``pushes``: a step cannot start while
        ``slack`` of its unit's results wait for the FIFO (a new array)."""
        a = a.copy()
        for (e, st, off, slack, (tst, toff)), P in zip(bounded, pushes):
            _raise(a, tst, P[:-slack] - toff)
        return a

    @staticmethod
    def _held_quiet(T, bounded, pushes):
        """Whether the held outputs' pushes ``pushes`` bind no step of ``T``: then the steps and
        pushes are the unit's own loop's fixed point (the bounds only rise as it iterates, and
        these are already met)."""
        for (e, st, off, slack, (tst, toff)), P in zip(bounded, pushes):
            if not _le(P[:-slack] - toff, T if tst is None else T[tst]):
                return False
        return True

    def _pushes(self, T):
        """Push times of every output with slack, given the step starts ``T``."""
        out = []
        for e, st, off, slack, tail in (self._plan or self._make_plan())[2]:
            ready = T + off if st is None else T[st] + off
            out.append(chain(np.maximum(ready, e.room(), out=ready)))
        return out

    def update(self):
        S = self.S
        if S == 0:
            return False
        ins, comb, held = self._plan or self._make_plan()
        binds = False               # a new pop binds a step or a push (the bounds do too)
        if self.skip_quiet and not self._fwd_moved:
            if self._outputs_quiet(comb, held):
                return False
            binds = True
        base = self._bound(self._inputs(ins), comb)
        if self.skip_quiet and not binds and self._bounds_quiet(base, held):
            self._fwd_moved = False
            return False
        # the unit's own results waiting for room bound its next steps: solve that loop here
        bounded = [h for h in held if h[4] is not None]
        c = self._coff
        if not bounded:
            T = chain(base, c=c)
            new = self._pushes(T)
            self._settled = True
        elif self._closed:
            # pushes are chain(max(ready, room)) = max(chain(ready), chain(room)); the ready
            # part never binds a step (_closed_form), so the steps wait for chain(room) alone
            rooms = [e.room_chain() for e, *_ in held]
            a = base                    # not read again
            for e, st, off, slack, tail in held:
                if tail is not None and type(tail[1]) is int:
                    _raise(a, tail[0], e.held_room(slack, tail[1]))
                elif tail is not None:
                    _raise(a, tail[0], e.room_chain()[:-slack] - tail[1])
            T = chain(a, c=c)
            new = []
            for (e, st, off, slack, tail), R in zip(held, rooms):
                ready = T + off if st is None else T[st] + off
                if type(off) is not int:
                    ready = chain(ready)        # else ready already rises by 1 a beat at least
                new.append(np.maximum(ready, R, out=ready))
            self._settled = True
        else:
            pushes = [e.P for e, *_ in bounded]
            self._settled = False
            for _ in range(LOCAL_ROUNDS):
                T = chain(self._held(base, bounded, pushes), c=c)
                new = self._pushes(T)
                now = [P for P, h in zip(new, held) if h[4] is not None]
                if self._held_quiet(T, bounded, now):
                    self._settled = True        # the new pushes bind no step: T is the fixed point
                    break
                pushes = now
        moved = not same(T, self.T)
        changed = moved
        if moved or not self._applied:
            # the inputs' pops and the combinational outputs' pushes follow from T alone
            self.T = T
            self._applied = True
            for e, st, pop in ins:
                if st is None and pop is None:
                    if moved or not same(e.C, T):      # else e.C is the last T
                        e.C = T
                        changed = True
                    continue
                C = T if st is None else T[st]
                if pop is not None:
                    C = C + pop
                if not same(e.C, C):
                    e.C = C
                    changed = True
            for e, st, tail, k in comb:
                P = T if st is None else T[st]
                if not same(e.P, P):
                    e.P = P
                    changed = True
        for (e, *_), P in zip(held, new):
            if not same(e.P, P):
                e.P = P
                changed = True
        self._fwd_moved = False
        return changed

    def _stall_inputs(self):
        """The inputs' bound on each step in the current schedule (a new array)."""
        ins, comb, held = self._plan or self._make_plan()
        return self._inputs(ins)

    def _stall_bounds(self):
        """``(inputs, every bound)`` of each step in the current schedule: what the steps waited
        for (the stall figures of the final schedule)."""
        ins, comb, held = self._plan or self._make_plan()
        a_in = self._stall_inputs()
        a = self._bound(a_in.copy(), comb)
        bounded = [h for h in held if h[4] is not None]
        if bounded:
            a = self._held(a, bounded, [e.P for e, *_ in bounded])
        return a_in, a

    @property
    def wait_in(self):
        """Cycles each step waited for its inputs (after the step before it)."""
        return self._waits()[0]

    @property
    def wait_out(self):
        """Cycles each step waited for room for its outputs (beyond its inputs)."""
        return self._waits()[1]

    def _waits(self):
        a_in, a = self._stall_bounds()
        prev = self._prev()
        w_in = np.maximum(a_in - prev, 0)
        return w_in, np.maximum(a - np.maximum(prev, a_in), 0)

    def stalls(self):
        """``(cycles waiting for inputs, cycles waiting for room)`` over the whole schedule: the
        sums of :attr:`wait_in` and :attr:`wait_out`.

        In the final schedule every step starts at ``T = chain(a)`` (``a``: every bound,
        :meth:`_stall_bounds`), so step ``s`` waits ``T[s] - prev[s]`` cycles in all, of which
        ``max(a_in - prev, 0)`` for its inputs (``a_in <= a``) and the rest for room. The sum of
        ``T[s] - prev[s]`` telescopes to ``T[-1] - t0 - (cost[0] + ... + cost[-2])``: only the
        inputs' bound is computed."""
        if not self.S:
            return 0, 0
        prev = self._prev()
        w_in = int(np.add.reduce(np.maximum(self._stall_inputs() - prev, 0)))
        total = int(self.T[-1]) - self.t0 - (int(self.cost[:-1].sum()) if not self.unit_cost
                                             else self.S - 1)
        return w_in, total - w_in

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


def _closed_form(cost, steps, off, slack, tail=None):
    """Whether a held output (beats in ``steps``, ready ``off`` after their step starts) never
    holds a later step back through its ``slack`` except by the FIFO's room: for beats ``i <
    j`` the step of beat ``j`` starts at least ``cost[steps[i]] + (j - i - 1)`` after beat
    ``i``'s, so ``off[i] - cost[steps[i]] - off[j] <= slack - 1`` makes beat ``i``'s readiness
    (and its chain, one beat a cycle) no later than what beat ``j = i + slack`` waits for.
    ``tail``: the output's ``(steps, off)`` of :class:`StepSeq`'s ``tails`` (:func:`_closed_tail`)."""
    if tail is not None:
        return _closed_tail(cost, steps, off, *tail)
    if type(off) is int or len(off) <= slack:
        return True         # a constant offset: off - cost[i] - off <= -1 < slack
    return int((off - cost[steps]).max()) - int(off.min()) <= slack - 1


def _closed_tail(cost, steps, off, tail, toff):
    """:func:`_closed_form` for a held output whose beat ``j`` bounds step ``tail[j]`` (the
    ``tails`` of :class:`StepSeq`): the readiness of beat ``i <= j`` (and its chain, one beat a
    cycle), less ``toff``, never binds step ``tail[j]``, which starts at least ``cost[steps[i]]
    + (tail[j] - steps[i] - 1)`` after beat ``i``'s step. Since ``steps[j] - steps[i] >= j -
    i``, ``max(off - cost[steps]) - toff <= min(tail - steps - 1)`` suffices."""
    m = len(tail)
    if m == 0:
        return True
    st = np.asarray(steps[:m])
    late = int((off - cost[steps]).max())
    toff = int(toff) if type(toff) is int else int(np.min(toff))
    return late - toff <= int((np.asarray(tail) - st - 1).min())


def _le(a, b):
    """Whether ``a <= b`` everywhere (without ``ndarray.all``'s Python-level overhead)."""
    return len(a) == 0 or int(np.maximum.reduce(np.subtract(a, b))) <= 0


def _raise(a, st, low):
    """``a[st] = max(a[st], low)`` in place; ``st`` None, a slice or an index array."""
    if st is None:
        np.maximum(a, low, out=a)
    elif type(st) is slice:
        v = a[st]
        np.maximum(v, low, out=v)
    else:
        a[st] = np.maximum(a[st], low)


def _view(steps, S):
    """``steps`` (increasing step numbers) as None when they are every step of ``S``, as a
    slice when they are evenly spaced (consecutive or every ``k``-th), else as they are."""
    if len(steps) == S:
        return None
    return strided(steps)


def strided(idx):
    """An increasing index array as a slice when its indices are evenly spaced (a view where
    the array would gather or scatter), else the array."""
    n = len(idx)
    if n == 0:
        return idx
    first, last = int(idx[0]), int(idx[-1])
    if n == 1:
        return slice(first, first + 1)
    step = (last - first) // (n - 1)
    if step > 0 and last - first == step * (n - 1) and (
            n == 2 or int(np.subtract(idx[1:], idx[:-1]).min()) == step == int(
                np.subtract(idx[1:], idx[:-1]).max())):
        return slice(first, last + 1, step)
    return idx


def _uniform(x):
    """``x`` as an int when every element is the same, else as it is."""
    if type(x) is int:
        return x
    if len(x) and int(x.min()) == int(x.max()):
        return int(x[0])
    return x if len(x) else 0


def _per_step(x, S):
    """``x`` (an int or an array of ``S``) as an array of ``S`` ints."""
    x = np.asarray(x, dtype=np.int64)
    return filled(S, x) if x.ndim == 0 else x


def _steps(name, edge, idx, S):
    """The steps of a port whose step ``s`` has beat ``idx[s]`` of ``edge`` (-1: none; None:
    beat ``s`` in step ``s``, every step), checked to cover every beat once, in order."""
    if idx is None:
        if edge.n != S:
            raise AssertionError(f"{name}: {edge.name} has {edge.n} beats, not one in each of "
                                 f"its {S} steps")
        return STEPS[:S] if S <= len(STEPS) else np.arange(S, dtype=np.int64)
    idx = np.asarray(idx, dtype=np.int64)
    steps = np.nonzero(idx >= 0)[0]
    got = idx[steps]
    n = len(got)
    if n != edge.n or (n and not same(got, STEPS[:n] if n <= len(STEPS) else np.arange(n))):
        raise AssertionError(f"{name}: the steps cover beats {got[:8].tolist()}.. of "
                             f"{edge.name} ({edge.n} beats), not each once in order")
    return steps


def solve(actors, max_rounds=None, backwards=True, exchange=True, feeders=None):
    """Iterate ``actors`` to their least fixed point; return the rounds it took, or None when
    the schedule does not settle (a deadlock: some beat waits on itself).

    A round updates the actors in their order and then back in reverse, skipping an actor none
    of whose watched objects changed since its last update (its update is a function of what it
    watches: an edge's pushes and pops, a :class:`Watched`'s ``touch``): data flows forwards in
    the first half and back-pressure backwards in the second. Every order reaches the same
    least fixed point (the updates are monotone and start below it); this one in the fewest
    updates. ``backwards=False`` sweeps forwards only. What changed is kept on the actors
    (``Actor._dirty``): a second solve of the same actors updates only those something of
    which changed since.

    ``exchange``: an actor that changed is updated again at once with the producers of its
    depth-1 input FIFOs, back and forth until neither moves. Through a single entry, a producer
    pushes beat ``j`` only after the consumer popped beat ``j - 1``: when that binds, each
    exchange settles one more beat, where a round of the whole graph settled one.

    ``feeders``: :func:`feeders` of ``actors``, when the caller solves the same actors more
    than once (they follow from the graph alone)."""
    max_rounds = max_rounds or 8 * len(actors) + 40
    watching(actors)
    n = len(actors)
    order = [actors[i] for i in list(range(n)) + (list(range(n - 2, 0, -1)) if backwards
                                                   else [])]
    feeders = {} if not exchange else _feeders(actors) if feeders is None else feeders

    def step(a):
        """Update actor ``a`` unless nothing it watches changed; whether it changed."""
        if not a._dirty:
            return False
        moved = a.update()
        a._dirty = False            # what it changed itself it has seen
        return moved

    for r in range(1, max_rounds + 1):
        changed = False
        for a in order:
            if not a._dirty or not step(a):
                continue
            changed = True
            for j, beats in feeders.get(a, ()):
                for _ in range(beats + 2):
                    if not (step(j) and step(a)):
                        break
        if not changed:
            return r
    return None


def watching(actors):
    """Register each actor with the objects it watches, once: their changes mark it dirty
    (:func:`solve`). An actor starts dirty."""
    for a in actors:
        if a._dirty is None:
            for o in a.watch:
                if a not in o._w:
                    o._w = o._w + (a,)
            a._dirty = True


def feeders(actors):
    """What :func:`solve` exchanges with (:func:`_feeders`), to pass to it again."""
    return _feeders(actors)


def _feeders(actors):
    """Per actor that has one, ``(actor, beats)`` of each other actor that feeds it through a
    FIFO of depth 1 (``beats``: that FIFO's, which bounds the exchanges of :func:`solve`)."""
    index = {id(a): i for i, a in enumerate(actors)}
    out = {}
    for a in actors:
        found = {}
        for e in a.watch:
            if isinstance(e, Edge) and e.dst is a and e.depth == 1 and e.src is not a \
                    and id(e.src) in index:
                j = index[id(e.src)]
                found[j] = max(found.get(j, 0), e.n)
        if found:
            out[a] = [(actors[j], beats) for j, beats in sorted(found.items())]
    return out
