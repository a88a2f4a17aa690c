"""The cycle-approximate performance model of a compiled program (``docs/perf.md``).

:func:`predict` takes a :class:`~stepforge.compiler.lower.HardwareGraph` and the interpreter's
run of its program (``keep_edges=True``: every stream's tokens, i.e. every FIFO's beats) and
times every beat of every FIFO with the units' own parameters (:mod:`stepforge.perf.units`)
and the memory's arbitration (:mod:`stepforge.perf.memory`), by the max-plus fixed point of
:mod:`stepforge.perf.engine`. It predicts the run's cycles, each unit's busy and stalled
fractions and each FIFO's high-water mark: what ``stepforge run`` measures in Verilator.
"""

import time
from dataclasses import dataclass, field

import numpy as np

from ..compiler.errors import StepError
from ..compiler.lower import buffered_queue
from ..compiler.ops.feedback import feedbacks
from ..compiler.ops.memory import Bufferize, Streamify
from ..sim.ref.interpreter import run
from .beats import beats_of, shape_beats, static_shape
from .engine import Edge, feeders, same, solve
from .framing import framing_run
from .memory import Memory
from .pmu import ReadSide, write_side
from .units import Timing, build_unit, value_ports

__all__ = ["PerfResult", "predict", "predict_program", "needs_run", "data_streams",
           "Deadlock", "ModelError", "check_modelled", "run_for", "value_streams"]


class ModelError(StepError, ValueError):
    """The model cannot time this program (a feedback edge: its actors have no cycle support).

    A :class:`~stepforge.compiler.errors.StepError`, so the command line prints it as
    ``error: ModelError: ...`` and exits with status 2 (``loader.EXIT_CODES``: a design the
    model cannot hold); a ``ValueError`` for callers that caught the earlier refusal.
    """


def check_modelled(program):
    """Raise :class:`ModelError` if ``program`` closes a cycle (a feedback edge), naming the
    feedback and pointing at the levels that run it."""
    cyclic = feedbacks(program)
    if cyclic:
        raise ModelError(f"the performance model does not model cycles: {program.name} closes "
                         f"one with the feedback {cyclic[0].name} (run it in Verilator, "
                         f"--level rtl, or in the interpreter, --level ref)", op=cyclic[0].name)


class Deadlock(Exception):
    """The model's schedule does not settle: some beat waits, through full and empty FIFOs, on
    itself. ``edges`` lists the FIFOs whose beats never settle (name, depth, beats); ``full``
    and ``empty`` name those stuck full (their producer waits for room) and empty (their
    consumer waits for a beat), each as ``(name, depth, beats, pushed, popped)``: the beats
    that move before the deadlock."""

    def __init__(self, message, edges=(), full=(), empty=()):
        super().__init__(message)
        self.edges = list(edges)
        self.full, self.empty = list(full), list(empty)


@dataclass
class PerfResult:
    """What :func:`predict` returns.

    Attributes
    ----------
    cycles : int
        Predicted cycles of the run (as the system's ``cycles`` counter counts them).
    units : dict of str to dict
        ``{unit: {"busy", "stall_in", "stall_out"}}`` as fractions of the run.
    fifos : dict of str to dict
        ``{stream: {"depth", "beats", "high_water"}}``.
    rounds : int
        Fixed-point rounds the schedule took.
    seconds : float
        Time spent in the model (the interpreter's run excluded).
    edges : dict of str to Edge
        The timed beats (push and pop cycle of every beat of every FIFO).
    """
    cycles: int
    units: dict
    fifos: dict
    rounds: int
    seconds: float
    edges: dict = field(default_factory=dict, repr=False)


def _high_water(e):
    if e.n == 0:
        return 0
    pops = np.searchsorted(e.C, e.P, side="right")      # pops are in order
    return int(min(max((np.arange(1, e.n + 1) - pops).max(), 0), e.depth))


def _high_waters(edges):
    """:func:`_high_water` of every edge of the list at once: the edges' beats laid end to end,
    each edge's times lifted above the one's before it so that the pops stay in order."""
    live = [e for e in edges if e.n]
    out = {e.name: 0 for e in edges}
    if not live:
        return out
    n = np.array([e.n for e in live], dtype=np.int64)
    start = np.zeros(len(live), dtype=np.int64)
    np.cumsum(n[:-1], out=start[1:])
    lift = np.repeat(np.arange(len(live), dtype=np.int64) << 40, n)
    P = np.concatenate([e.P for e in live]) + lift
    C = np.concatenate([e.C for e in live]) + lift
    # beats pushed by P[j] (j + 1 of its edge) less those popped by then
    held = np.arange(1, len(P) + 1, dtype=np.int64) - np.searchsorted(C, P, side="right")
    high = np.maximum.reduceat(held, start)
    for e, h in zip(live, high.tolist()):
        out[e.name] = min(max(h, 0), e.depth)
    return out


def value_streams(hw):
    """The streams of ``hw`` whose elements the model reads (selectors, dynamic tile rows)."""
    ports = {}
    for ei in hw.edges:
        ports[("out",) + tuple(ei.src)] = ei.stream
        ports[("in",) + tuple(ei.dst)] = ei.stream
    need = set()
    for u in hw.units:
        for side, port in value_ports(u):
            s = ports.get((side, u.name, port))
            if s is not None:
                need.add(s)
    return need


def data_streams(hw):
    """The streams of ``hw`` whose beats the model takes from the interpreter's run: those of a
    symbolic shape (data-dependent framing) and those whose elements it reads (selectors, dynamic
    tile rows, :func:`value_streams`). The others' beats follow from their shapes."""
    return {ei.stream for ei in hw.edges if static_shape(ei.stream) is None} | value_streams(hw)


def run_for(hw, tensors=None, inputs=None):
    """What :func:`predict` needs of the interpreter for ``hw`` on this data: None when every
    beat follows from the shapes (:func:`needs_run` false), else the interpreter's run cut to
    the data streams (:func:`stepforge.perf.framing.framing_run`: their tokens, the values the
    model reads, without computing the tiles nothing reads). A program the model does not time
    (a cycle) raises :class:`ModelError` here, before the interpreter runs, as :func:`build`
    does."""
    check_modelled(hw.program)
    need = data_streams(hw)
    if not need:
        return None
    return framing_run(hw.program, tensors, inputs, need, value_streams(hw))


def needs_run(hw):
    """Whether :func:`predict` needs the interpreter's run of ``hw.program`` (some beats depend
    on the data, :func:`data_streams`)."""
    return bool(data_streams(hw))


def build(hw, ref, timing=None, depths=None):
    """The edges and actors of ``hw`` on the interpreter's run ``ref`` (None: every beat from the
    shapes, :func:`data_streams`): ``(edges, actors, memory)``. ``depths`` overrides FIFO depths
    by stream name."""
    check_modelled(hw.program)
    tm = timing or Timing()
    depths = depths or {}
    edges = {}
    by_stream = {}
    need = data_streams(hw)
    if need and ref is None:
        names = sorted(s.name for s in need)
        raise ValueError(f"predict() needs the interpreter's run of {hw.program.name}: the beats "
                         f"of {', '.join(names[:3])}{' ...' if len(names) > 3 else ''} depend on "
                         f"the data")
    framed = {}                 # beats by shape, within this call (no state between calls)
    for ei in hw.edges:
        name = ei.name
        s = ei.stream
        if s in need:
            info = beats_of(ref.edges[s])
        else:
            shape = static_shape(s)
            info = framed.get(shape)
            if info is None:
                info = framed[shape] = shape_beats(shape)
        depth = depths.get(name, ei.depth)
        # (a buffered queue offers a beat a cycle later)
        e = Edge(name, info.n, depth, info, lag=int(buffered_queue(depth, ei.block_ram)))
        edges[name] = e
        by_stream[ei.stream] = e
    ins = {u.name: {} for u in hw.units}
    outs = {u.name: {} for u in hw.units}
    for ei in hw.edges:
        e = by_stream[ei.stream]
        outs[ei.src[0]][ei.src[1]] = e
        ins[ei.dst[0]][ei.dst[1]] = e
    mem = Memory(hw.geometry)
    # the PMUs: each Bufferize's write side with the read sides (Streamify) of its component
    pmus = {}
    for u in hw.units:
        if isinstance(u.node, Bufferize):
            readers = []
            w = write_side(u, ins[u.name], outs[u.name], tm, readers)
            pmus[u.node] = w
            for r in hw.units:
                if isinstance(r.node, Streamify) and r.component is u.component:
                    side = ReadSide(r, ins[r.name], outs[r.name], tm, w.buffer_sizes)
                    readers.append(side)
                    w.watch.append(side.outs[0][0])      # its releases bound the write side
                    pmus[r.node] = side
    actors = []
    for u in hw.units:
        actors += build_unit(u, ins[u.name], outs[u.name], tm, mem, pmus)
    actors.append(mem)
    return edges, actors, mem


def _settle(edges, actors, mem, max_rounds=None, timing=None):
    """The fixed point with each client alone at the memory, then again with the memory's lines
    in the order of that schedule, and, while a load starves, in a round robin's order of the
    last schedule's requests until that order is its own schedule's round robin
    (:mod:`stepforge.perf.memory`, passes 1 to 3)."""
    mem.order = None
    fd = feeders(actors)        # the same in every pass
    rounds = solve(actors, max_rounds, feeders=fd)
    if rounds is None or not any(c.count for c in mem.clients):
        return rounds
    mem.set_order()
    if not mem.update():
        return rounds           # the shared grant delays nothing: already the fixed point

    # the shared grant is never earlier than a client's own, so the first fixed point is below
    # the second: iterating from it still reaches the least one. Only the actors that watch a
    # client whose grants moved (and what they move in turn) update again: the others' inputs
    # are what they were at the first fixed point (a client's estimate with the order set is
    # its own grants while its grants are the first pass's). The memory watches its clients'
    # requests: its entry is kept, it has just been updated with the order.
    free = _snapshot(edges, actors, mem) if ROUND_ROBIN_PASSES else None
    mem._dirty = False          # just updated
    # an order pass settles the memory's lines one loop through the units at a time (below)
    ordered = max_rounds or order_rounds(actors, mem)
    r = solve(actors, ordered, feeders=fd)
    if r is None:
        return None
    rounds += r
    # a load that starts late waits behind the free schedule's lines (pass 3 of perf.memory):
    # the order of a round robin over this schedule's requests, solved again from the first
    # fixed point (below every order's), until no load starves or the order is the round robin
    # of its own schedule. A pass moves the requests, so its order may no longer be a round
    # robin's of its own schedule (the memory idles while a reader's line waits,
    # Memory.idle_while_waiting): then it is made again from that schedule. The passes do not
    # swing for ever: a schedule is causal (a request waits only on earlier grants), so where
    # a pass's order first differs from the last, the orders before it are the round robin's
    # of both schedules, and the next pass's first difference comes later (docs/perf.md,
    # "2026-11-28 (session 19)").
    lag = _lags(mem, timing or Timing())
    agreed = -1
    budget = ordered            # rounds for all the round-robin passes together
    settled = None              # the last pass that settled (taken back when one runs out)
    for p in range(ROUND_ROBIN_PASSES):
        if budget <= 0 or not mem.starved():
            break
        order = mem.round_robin_order([c.last for c in mem.live], lag)
        first = first_change(order, mem.order)
        if first is None or first <= agreed:
            # the order is its own schedule's round robin (solving it again reaches this
            # schedule), or a pass that gains no place on the last (which a causal schedule
            # cannot give: kept as a guard)
            break
        agreed = first
        settled = _snapshot(edges, actors, mem)
        _restore(free)
        mem.order = order
        mem.update()
        mem._dirty = False
        r = solve(actors, budget, feeders=fd)
        if r is None:
            # a legal order does not deadlock (the free pass found any deadlock): the passes
            # ran out of rounds, and the last one that settled stands
            _restore(settled)
            rounds += budget
            break
        rounds += r
        budget -= r
    return rounds


def first_change(a, b):
    """The first place where the orders ``a`` and ``b`` differ, None when they are the same."""
    if same(a, b):
        return None
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


def order_rounds(actors, mem):
    """The rounds :func:`solve` may take with the memory's lines in a fixed order (and the
    round-robin passes together): the cap of a free pass plus one round per line. A fixed order
    makes every line wait for the one before it; when the memory is busy, a delay reaches the
    later lines only through loops from the memory through the units back to the memory (a
    grant, the unit's beats, its next request), one loop a round of :func:`solve` (SwiGLU B64
    H64 I64 on the ECP5: loops of about 100 cycles, up to 242 rounds for its 21,504 lines, over
    the free pass's cap of 144), so the rounds grow with the program, not with its units. The
    orders the passes make are legal (each line after every line it may depend on) and the
    free pass has found any deadlock of the program first: this cap is a guard against a bug,
    not the test for a deadlock."""
    lines = sum(c.count * c.lines for c in mem.clients)
    return 8 * len(actors) + 40 + lines


#: Round-robin passes at most after the ordered one (``perf.memory``, pass 3), a guard: the
#: passes end when no reader starves, when the order is its own schedule's round robin (each
#: pass's order agrees with it over a longer prefix than the last) or when they have taken
#: :func:`order_rounds` rounds together (MoE static takes 3 passes, host-addressed decode
#: attention on one 8-byte channel 4, SwiGLU B64 H64 I64 on the ECP5 34 in 2,546 rounds;
#: ``docs/perf.md`` section 2 and "2026-11-28 (session 19)").
ROUND_ROBIN_PASSES = 1 << 16


def _lags(mem, tm):
    """Per live client, the fewest cycles from one of its grants to a request (as the memory
    sees it: the unit's step plus ``grant_delay``) that depends on it: a read's line reaches
    its beat ``mem_latency`` plus at least ``reader_ready`` cycles later, a store acknowledges
    a cycle after its grant; a FIFO takes a cycle; then the requesting unit's step."""
    ready = min(tm.load_ready, tm.reader_ready)
    out = []
    for c in mem.live:
        first = mem.geometry.latency + ready if c.kind == "read" else 1
        out.append(first + 1 + tm.grant_delay)
    return out


def _snapshot(edges, actors, mem):
    """Everything the fixed point changes, to solve again from this point (:func:`_restore`):
    arrays are replaced, never written in place, so shallow copies keep them (and each actor's
    dirty flag: what it has not seen yet)."""
    return [(o, dict(o.__dict__)) for o in list(edges.values()) + actors] \
        + [(o, dict(o.__dict__)) for c in mem.clients for o in (c, c.req)]


def _restore(snap):
    """Put back a :func:`_snapshot`."""
    for o, state in snap:
        o.__dict__.clear()
        o.__dict__.update(state)


def _deadlock(edges, actors, shown=6):
    """The :class:`Deadlock` of a schedule that does not settle. The beats on the wait grow
    with every round: a beat whose push (pop) time still changes over some more rounds never
    happens, so the beats before the first such one are what each FIFO pushed (popped)."""
    before = {name: (e.P, e.C) for name, e in edges.items()}     # replaced, never written
    solve(actors, 2 * len(actors) + 40)
    stuck = []
    for name, e in edges.items():
        P, C = before[name]
        pushed = next(iter(np.nonzero(P != e.P)[0]), e.n)
        popped = next(iter(np.nonzero(C != e.C)[0]), e.n)
        if min(pushed, popped) < e.n:
            stuck.append((name, e.depth, e.n, int(pushed), int(popped)))
    full = [s for s in stuck if s[3] - s[4] >= s[1]]
    # the empty FIFOs that moved the most beats first: the wait's front, not what lies behind it
    empty = sorted((s for s in stuck if s[3] == s[4]), key=lambda s: -s[3])

    def names(found, what):
        listed = ", ".join(f"{n} (holds {p - c} of {d}; {p} of {b} beats pushed)"
                           for n, d, b, p, c in found[:shown])
        more = f" and {len(found) - shown} more" if len(found) > shown else ""
        return f"; {what}: {listed}{more}" if found else ""
    return Deadlock("the schedule does not settle: a deadlock" + names(full, "full")
                    + names(empty, "empty"), [s[:3] for s in stuck], full, empty)


def predict(hw, ref=None, *, timing=None, depths=None, max_rounds=None):
    """Predict the Verilated run of ``hw`` (module doc).

    Parameters
    ----------
    hw : HardwareGraph
    ref : stepforge.sim.ref.interpreter.Result or stepforge.perf.framing.FramingResult, optional
        The interpreter's run of ``hw.program`` with ``keep_edges=True``, or :func:`run_for`'s
        cut run. Needed only when some beats depend on the data (:func:`needs_run`); the others
        are framed from their shapes.
    timing : Timing, optional
    depths : dict of str to int, optional
        FIFO depths by stream name, instead of the hardware graph's.

    Raises
    ------
    Deadlock
        When the schedule does not settle.
    ValueError
        When ``ref`` is None and some beats depend on the data.
    """
    t0 = time.perf_counter()
    tm = timing or Timing()
    edges, actors, mem = build(hw, ref, tm, depths)
    rounds = _settle(edges, actors, mem, max_rounds, tm)
    if rounds is None:
        raise _deadlock(edges, actors)
    by_name = {getattr(a, "name", None): a for a in actors}
    ends = [a.end() for u in hw.units if u.sink for a in [by_name.get(u.name)] if a is not None]
    ends = [x for x in ends if x is not None]
    last_push = max((int(e.P.max()) for e in edges.values() if e.n), default=0)
    cycles = max(ends + [last_push]) + tm.end
    units = {}
    for u in hw.units:
        a = by_name.get(u.name)
        if a is None or u.shared and not isinstance(u.node, Streamify):
            continue
        busy = a.busy() if hasattr(a, "busy") else 0
        wi, wo = a.stalls() if hasattr(a, "stalls") else (0, 0)
        units[u.name] = {"kind": u.kind, "busy": min(busy / cycles, 1.0),
                         "stall_in": min(wi / cycles, 1.0), "stall_out": min(wo / cycles, 1.0)}
    high = _high_waters(list(edges.values()))
    fifos = {name: {"depth": e.depth, "beats": e.n, "high_water": high[e.name]}
             for name, e in edges.items()}
    return PerfResult(int(cycles), units, fifos, rounds, time.perf_counter() - t0, edges)


def predict_program(program, tensors=None, inputs=None, *, config=None, depths=None,
                    fifo_sizing=None, throughput=1.0, timing=None):
    """Lower ``program``, run the interpreter on the lowered program when some beats depend on
    the data (:func:`needs_run`) and :func:`predict`: ``(PerfResult, hw, ref)`` (``ref`` None
    when the interpreter did not run). ``fifo_sizing`` and ``throughput`` are the lowering's.
    ``ref`` is the interpreter's full run (``keep_edges=True``, bounds checked): a caller that
    reports it (``stepforge run --level perf``) gets every stream; :func:`run_for` is the
    cheaper cut run for callers that only predict."""
    # deferred: the lowering builds the Amaranth units (0.5 s to import)
    from ..compiler.lower import lower
    check_modelled(program)                 # before the lowering and the interpreter's run
    kw = {} if fifo_sizing is None else {"fifo_sizing": fifo_sizing, "throughput": throughput}
    hw = lower(program, config, depths=depths, **kw)
    ref = (run(hw.program, tensors=tensors, inputs=inputs, keep_edges=True) if needs_run(hw)
           else None)
    return predict(hw, ref, timing=timing), hw, ref
