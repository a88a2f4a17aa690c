"""FIFO depths: the sizing rule, the linear program that replaces it, and the static deadlock check.

Every stream of a lowered program becomes a FIFO. Three things decide how deep it must be
(``docs/perf.md``, "FIFO sizing"):

* **Rate.** A depth-1 StreamFIFO takes a beat only when it is empty, so a stream moves at most one
  beat every two cycles, or every ``hold + 1`` cycles when the consumer keeps the beat at the head
  for ``hold`` cycles (a PCU reads its operands in place and pops them in a beat's last step). A
  stream needs 2 entries for full rate unless its producer is slower than that anyway
  (``interval >= hold + 1``: an Accum's outputs, a PCU's results into a store).
* **Reconvergence.** When a node's outputs (a Broadcast, a Partition, a Reshape and its flags)
  meet again at a join, a branch that swallows ``H`` beats before its first beat reaches the
  join (an Accum or Bufferize reducing a fibre, one more for a unit that looks a beat ahead, a
  whole stream behind a data-dependent router) makes the fork push ``H`` beats into the other
  branches, which must hold them: the FIFOs along every path of a branch (plus the fork's own
  output buffer) must hold ``H`` minus what that branch swallows itself, or the fork, the branch
  and the join wait on each other forever. For full throughput a branch also covers the latency
  skew between the branches (the beats the fork sends while the slower branch's first beat is on
  its way).
* **Routing.** When the fork is itself a data-dependent router (Partition, EagerMerge), its
  branches may receive any split of its elements the bounds allow. The worst one holds a join
  (Reassemble, in element order) on one element of a branch while every other element, up to
  a branch's bound, goes to another branch: every path of a router's branch to the join must
  hold the branch's whole stream, counted in its elements (a FIFO of ``r``-row tiles holds
  ``r`` per entry; what the units keep counts too), up to the first node on that path where
  it meets another branch (an EagerMerge, or a Reassemble ordered by the merge's selector).
  :func:`routed_needs`.
* **Later joins.** A node downstream of where a fork's branches first meet is a join too when
  another branch reaches it without meeting first (a tile held past an EagerMerge by the
  look-ahead units meets its padding flags at the Filter, not at the Reassemble the merge's
  selector reaches); only the FIFOs before the first meeting count, since past it a FIFO also
  carries what the meeting node took from other inputs first.

The fork never pushes more than a branch's whole stream into it, so no need exceeds that.
The rule stepforge used first (``fifo_depth`` everywhere, ``fifo_depth + hold`` on each branch
of a reconvergent fork) stays in :mod:`stepforge.compiler.lower` (``fifo_sizing="rule"``);
:func:`lp_depths` minimises the total FIFO bits
subject to the constraints above: an integer program, a handful of variables per fork, whose
constraints that share no FIFO are solved in closed form and the rest with SciPy's HiGHS, with ``throughput`` between 0 (deadlock-free, minimal area) and 1 (full rate, the
default); :func:`check_deadlocks` reports every reconvergence whose FIFOs cannot hold its token
imbalance, naming the fork, the branches, the shapes and the beats that would be stuck. Holds are
SymPy expressions of the program's symbols, evaluated at their bounds; the plan keeps both.
"""

import math
import time
from dataclasses import dataclass, field

import numpy as np
import sympy

from .dims import fmt_shape
from .ops.compute import Accum, Filter, FlatMap
from .ops.feedback import Feedback
from .ops.memory import Bufferize
from .ops.routing import Broadcast, EagerMerge, Partition, Reassemble
from .ops.shape import Promote, RepeatStatic, Reshape

__all__ = ["UnitTiming", "Need", "FifoPlan", "reconvergences", "lp_depths", "check_deadlocks",
           "looks_ahead", "unit_timing", "chunk_beats", "downstream", "routed_needs",
           "cycle_paths", "cycle_seeds", "cycle_needs", "cycle_lookaheads"]


@dataclass
class UnitTiming:
    """What FIFO sizing needs of a unit: cycles between its output beats (``interval``), cycles
    it keeps an input beat at the head of its FIFO (``hold``), cycles from an input to its output
    (``latency``) and beats its fork buffers per output (``buffer``, a Broadcast's)."""
    interval: int = 1
    hold: int = 1
    latency: int = 0
    buffer: int = 0


def unit_timing(comp, node):
    """The :class:`UnitTiming` of a built unit, from the parameters the units report (``ii``,
    ``latency``, ``placement.tile_lines``, a Broadcast's ``depth``, a host stream's ``wpb``)."""
    ii = getattr(comp, "ii", None)
    if isinstance(ii, int):                               # a PCU
        lat = getattr(comp, "latency", 0)
        out = ii
        if isinstance(node, Accum) and node.fold_size is not None:
            out = ii * max(node.fold_size, 1)
        return UnitTiming(interval=out, hold=ii, latency=ii + lat + 1)
    placement = getattr(comp, "placement", None)
    if placement is not None and node.outputs:             # a load
        g = placement.geometry
        return UnitTiming(interval=max(len(placement.tile_lines), 1), latency=g.latency + 4)
    wpb = getattr(comp, "wpb", None)
    geometry = getattr(comp, "geometry", None)
    if wpb is not None and geometry is not None:          # host streams
        per = -(-wpb // geometry.lanes)
        if node.outputs:
            # the pipelined BeatReader: a beat per burst of ``per`` lines (the memory moves one
            # line a cycle), its first beat ``mem_latency + per + 2`` cycles after the start
            return UnitTiming(interval=per, latency=per + geometry.latency + 2)
        return UnitTiming(hold=per + 2)                   # the BeatWriter: a beat at a time
    if isinstance(node, Broadcast):
        return UnitTiming(latency=1, buffer=getattr(comp, "depth", 2))
    return UnitTiming()      # a look-ahead's wait for the next beat is in the holds


@dataclass
class Need:
    """One reconvergence: the FIFOs of ``path`` (streams from the fork's output ``branch`` to the
    join) must hold ``beats`` (``expr`` at the bounds; ``full`` with the latency skew covered).

    ``weights`` (stream -> elements of ``branch`` one beat of it carries), when given, counts
    what the path holds in elements of ``branch`` instead of beats: a routed need
    (:func:`routed_needs`), where a FIFO of tiles holds a tile's elements per entry."""
    fork: object
    join: object
    branch: object
    path: list
    beats: int
    expr: object
    full: int
    other: object
    why: str
    weights: dict = None

    def weight(self, stream):
        """What one entry of ``stream``'s FIFO counts for: 1 beat, or its elements of ``branch``."""
        return 1 if self.weights is None else self.weights[stream]

    def holds(self, depths):
        """What the path's FIFOs hold at ``depths``, in the need's unit."""
        return sum(self.weight(s) * depths[s] for s in self.path)

    @property
    def unit(self):
        """``"beats"``, or ``"elements of BRANCH"`` for a routed need."""
        return "beats" if self.weights is None else f"elements of {self.branch.name}"


@dataclass
class FifoPlan:
    """What the sizing decided: ``depths`` by stream, and per stream ``{"expr", "why"}``."""
    depths: dict
    notes: dict = field(default_factory=dict)
    needs: list = field(default_factory=list)
    bits: int = 0
    seconds: float = 0.0


def _hold(node):
    """Beats a node swallows before it produces its first output: ``(bound, expr)``."""
    b = getattr(node, "b", None)
    if isinstance(node, (Accum, Bufferize)) and b:
        x = node.inputs[0]
        n, expr = 1, sympy.Integer(1)
        for d in x.shape[len(x.shape) - b:]:
            bound = node.program.symbols.bound(d)
            if bound is None:
                return 0, sympy.Integer(0)
            n *= bound
            expr = expr * d
        return n, expr
    return 0, sympy.Integer(0)


def looks_ahead(node):
    """Whether the unit of ``node`` holds an element until it sees the next beat (a stop may follow)."""
    if isinstance(node, Promote):
        return node.b in (0, node.inputs[0].rank + 1)
    if isinstance(node, Reshape):
        return node.b == 0
    return isinstance(node, (RepeatStatic, FlatMap))


_SELECTIVE = (Partition, Filter, EagerMerge)     # how many beats pass is data-dependent
_EPS = 1e-6                                      # a routed need's weights are ratios of bounds


def _whole(program, stream):
    """Elements of ``stream`` at the bounds (0 when a symbol has no bound)."""
    return program.symbols.bound(program.cardinality(stream)) or 0


def _advance(node, hold, hexpr, last, whole=None, card=None):
    """The hold after ``node`` of a walk that has ``hold`` (``hexpr``) before it and whose largest
    single hold so far is ``last``: ``(hold, expr, last)``. With ``whole`` (the walk is behind a
    data-dependent router) a hold of the node may take ``whole`` elements (``card``) to fill."""
    h, hx = _hold(node)
    if h and whole is not None and whole > h:
        h, hx = whole, card
    total, texpr = (hold, hexpr) if hold >= h else (h, hx)
    if looks_ahead(node):
        # it keeps one element until the next arrives: one more upstream hold
        total, texpr = hold + max(last, 1), hexpr + max(last, 1)
    return total, texpr, max(last, h)


def _reach(program, stream, cons):
    """Nodes reachable from ``stream``, each with ``(hold after, hold before)`` (bounds), the
    hold before as an expression, and the paths (lists of streams) to it with their holds."""
    card = program.cardinality(stream)
    whole = _whole(program, stream)
    out, paths = {}, {}
    stack = [(stream, 0, sympy.Integer(0), 0, False, [stream])]
    while stack:
        s, hold, hexpr, last, filtered, path = stack.pop()
        for node, _ in cons[s]:
            if isinstance(node, Feedback):
                continue        # a cycle's edge back: its own need (cycle_needs)
            # behind a data-dependent router a hold may take the fork's whole stream to fill
            total, texpr, new_last = _advance(node, hold, hexpr, last,
                                              *((whole, card) if filtered else ()))
            f = filtered or isinstance(node, _SELECTIVE)
            seen = paths.setdefault(node, [])
            if len(seen) < 64:
                seen.append((list(path), hold, hexpr))
            if (out.get(node, (-1, None, None, False))[0] >= total and out[node][3] >= f
                    and len(seen) >= 64):
                continue
            if out.get(node, (-1,))[0] < total or not out[node][3] and f:
                out[node] = (total, hold, hexpr, f)
            for o in node.outputs:
                stack.append((o, total, texpr, new_last, f, path + [o]))
    return out, paths


def downstream(node, cons):
    """Every node that reads, directly or through others, what ``node`` produces (``cons``:
    :meth:`Program.consumers`)."""
    seen, stack = set(), list(node.outputs)
    while stack:
        for n, _ in cons[stack.pop()]:
            if n not in seen and not isinstance(n, Feedback):
                seen.add(n)
                stack.extend(n.outputs)
    return seen


def reconvergences(program, timing):
    """Every :class:`Need` of the program: per fork, branch, first meeting node and path, and
    per path of a data-dependent router's branch its :func:`routed_needs`."""
    cons = program.consumers()
    needs = []
    for node in program.nodes:
        if len(node.outputs) < 2:
            continue
        reach = [_reach(program, o, cons) for o in node.outputs]
        buffer = timing(node).buffer
        for i, o in enumerate(node.outputs):
            mine, my_paths = reach[i]
            # the fork never pushes more than the branch's whole stream into it
            cap = _max_beats(program, o) - buffer
            met = set()
            for j, (other, other_paths) in enumerate(reach):
                if i == j:
                    continue
                meets = set(mine) & set(other)
                met |= meets
                later = set().union(*(downstream(m, cons) for m in meets)) if meets else set()
                for meet in sorted(meets, key=lambda n: n.name):
                    theirs, paths = other_paths[meet], my_paths[meet]
                    H, Hx = other[meet][1], other[meet][2]
                    if meet in later:
                        # a later join counts where the other branch reaches it without meeting
                        # this one first (a tile held past an EagerMerge meets its padding flags
                        # at the Filter, not at the Reassemble its selector reaches), and only
                        # the FIFOs before that first meeting hold for this branch: past it, a
                        # FIFO also carries what the meeting node takes from others first
                        theirs = [p for p in theirs if not any(s.node in meets for s in p[0][1:])]
                        if not theirs:
                            continue
                        _, H, Hx = max(theirs, key=lambda p: p[1])
                        paths = _before(paths, meets)
                    needs.extend(_join_needs(node, o, meet, theirs, paths, H, Hx, buffer, cap,
                                             timing))
            if isinstance(node, _SELECTIVE):
                # a routed branch's path ends where it first meets another branch: past that
                # node (an EagerMerge, a Reassemble), what it carries is the join's own stream
                for meet in sorted(met, key=lambda n: n.name):
                    first = [p for p in my_paths[meet] if not any(s.node in met for s in p[0][1:])]
                    needs.extend(routed_needs(program, node, o, meet, first, timing))
    for node in program.nodes:
        if isinstance(node, Feedback) and node.bound:
            needs.extend(cycle_needs(program, node, cons))
    return needs


def cycle_paths(fb, cons):
    """Every path (a list of streams) from the feedback ``fb``'s output back to its bound
    input: the cycles ``fb`` closes."""
    target = fb.inputs[0]
    paths, stack = [], [[fb.outputs[0]]]
    while stack:
        path = stack.pop()
        s = path[-1]
        if s is target:
            paths.append(path)
            continue
        for node, _ in cons[s]:
            if isinstance(node, Feedback) or any(x.node is node for x in path[1:]):
                continue
            for o in node.outputs:
                stack.append(path + [o])
    return paths


def cycle_seeds(program, fb, paths):
    """Elements a cycle of ``fb`` may carry at once, at the bounds, and what injects them: the
    inputs from outside the cycle of every EagerMerge on it (a merge into a cycle forwards
    them whenever it can; everything else on a cycle consumes one of its elements per element
    it passes on). ``(count, [stream, ..])``."""
    on = {s for p in paths for s in p}
    nodes = {s.node for s in on}
    seeds = []
    for node in program.nodes:
        if isinstance(node, EagerMerge) and node in nodes:
            seeds += [s for s in node.inputs if s not in on]
    return sum(_whole(program, s) for s in seeds), seeds


def cycle_needs(program, fb, cons):
    """The :class:`Need` of every path around the cycles that the feedback ``fb`` closes.

    A cycle deadlocks when every FIFO on one of its paths is full and every unit on it waits to
    push: the elements the cycle carries (its seeds, :func:`cycle_seeds`) must not fill a path.
    Each path must hold all of them, counted in elements of the feedback stream (a FIFO of a
    request's ``L`` addresses holds ``1 / L`` of a request per entry at the bound)."""
    paths = cycle_paths(fb, cons)
    if not paths:
        return []
    seeds, injected = cycle_seeds(program, fb, paths)
    if not seeds:
        return []
    branch = fb.outputs[0]
    names = ", ".join(s.name for s in injected)
    needs = []
    for path in paths:
        weights = {s: _elements_per_beat(program, branch, s) for s in path}
        via = " -> ".join(s.node.name for s in path[1:]) + f" -> {fb.name}"
        why = (f"the cycle {fb.name} -> {via} carries up to {seeds} elements of {branch.name} "
               f"(seeded by {names}); a path around it that cannot hold them all may fill, and "
               f"every unit on it then waits for the next")
        needs.append(Need(fb, fb, branch, path, seeds, sympy.Integer(seeds), seeds, branch, why,
                          weights))
    return needs


def cycle_lookaheads(program, fb, cons):
    """A message for every look-ahead unit (:func:`looks_ahead`) on a side branch of a cycle
    that the feedback ``fb`` closes and that joins the cycle again, whatever the depths.

    Such a unit is downstream of ``fb`` but on no path around the cycle, and one of the nodes
    it feeds (directly or through others) also reads a stream that a node of the cycle
    produces. It holds an element until the next one arrives; the next one is dispatched only
    when the cycle has gone round once more, which needs the join to take the held element (a
    Broadcast on the cycle waits for every consumer): a deadlock at any depth (the first
    decode-attention program promoted each query for its Expand this way)."""
    paths = cycle_paths(fb, cons)
    if not paths:
        return []
    ring = {s.node for p in paths for s in p[1:]}
    via = " -> ".join(s.node.name for s in paths[0][1:]) + f" -> {fb.name}"
    found = []
    for node in program.nodes:
        if node in ring or node is fb or not looks_ahead(node) or \
                node not in downstream(fb, cons):
            continue
        mine = downstream(node, cons) | {node}
        join = next(((m, s) for m in program.nodes if m in mine and m is not node
                     for s in m.inputs if s.node in ring and s.node not in mine), None)
        if join is None:
            continue
        m, s = join
        found.append(f"deadlock: {node.name} ({node.op}) looks ahead: it holds an element of "
                     f"{node.inputs[0].name} until the next one arrives, on a side branch of "
                     f"the cycle {fb.name} -> {via} that joins it again at {m.name} (with "
                     f"{s.name}); the next element comes round the cycle only after {m.name} "
                     f"has taken the held one, at any FIFO depth")
    return found


def _before(paths, meets):
    """``paths`` (``(path, hold, expr)``) cut before the first node of ``meets`` on each, without
    repeats."""
    out = {}
    for path, h, hx in paths:
        k = next((k for k, s in enumerate(path[1:], 1) if s.node in meets), len(path))
        out.setdefault(tuple(path[:k]), (list(path[:k]), h, hx))
    return list(out.values())


def _join_needs(fork, branch, join, theirs, mine, H, Hx, buffer, cap, timing):
    """The :class:`Need` of every path ``mine`` of ``branch`` (an output of ``fork``) to
    ``join``, where another branch (its paths ``theirs``) swallows ``H`` (``Hx``) beats first."""
    C, Cx = chunk_beats(join, [p for p, _, _ in theirs])
    if C > H:
        H, Hx = C, Cx
    skew = max(_path_latency(p, timing) for p, _, _ in theirs)
    # beats arrive no faster than the slowest unit on the branches lets them
    slow = max(_interval(p, join, timing) for p, _, _ in theirs + mine)
    needs = []
    for path, h, hx in mine:
        beats = min(H - h - buffer, cap)
        full = beats + -(-max(skew - _path_latency(path, timing), 0) // slow)
        # never more than the first rule's hold + 2, which runs at full rate
        full = min(full, max(H - h + 2, beats), cap)
        if full <= 0:
            continue
        needs.append(Need(fork, join, branch, path, max(beats, 0), sympy.simplify(Hx - hx), full,
                          theirs[0][0], _why(fork, branch, join, theirs[0][0], H, Hx)))
    return needs


def _max_beats(program, stream):
    """Beats ``stream`` carries at the bounds, at the most: its elements (each absorbs the stop
    after it), plus, when a dimension is symbolic, a stop-only beat per fibre that may be empty
    and a bare ``Done`` (a large number when a symbol has no bound)."""
    shape = stream.shape
    if all(isinstance(d, int) for d in shape):
        return max(math.prod(shape), 1)
    fibres = program.symbols.bound(math.prod(shape[:-1]) if len(shape) > 1 else 1)
    whole = program.symbols.bound(program.cardinality(stream))
    if whole is None or fibres is None:
        return 1 << 62
    return whole + fibres + 1


def _elements_per_beat(program, branch, stream):
    """Elements of ``branch`` one beat of ``stream`` (downstream of it) carries, at the bounds:
    a tile of ``r`` rows packed from ``r`` elements carries ``r``, a beat repeated ``k`` times
    ``1 / k`` (1 when a bound is unknown)."""
    whole, mine = _whole(program, branch), _whole(program, stream)
    return whole / mine if whole and mine else 1


def routed_needs(program, fork, branch, join, paths, timing):
    """The :class:`Need` of every path of ``branch`` (an output of the data-dependent router
    ``fork``) to ``join``, where the router's branches meet again: the whole stream.

    The routing decides, element by element, which branch receives what, within the bounds the
    program declares. The worst routing they allow sends one element to another branch first,
    whose join waits for it (a Reassemble in element order, a padded static tile that closes only
    after more elements of that branch or at the end) while everything else, up to ``branch``'s
    bound, goes to ``branch``: the join takes nothing of it meanwhile, and the router sends the
    other branch nothing more until ``branch`` has taken it all. So every path of ``branch`` to
    ``join`` must hold its whole stream, in elements of ``branch``: its FIFOs (a FIFO of tiles
    holds a tile's elements per entry) and what its units keep themselves (:func:`_kept`).
    A balanced routing needs far less; the bounds are what the hardware is built for."""
    whole = _whole(program, branch)
    needs = []
    for path, _, _ in paths:
        weights = {s: _elements_per_beat(program, branch, s) for s in path}
        own = math.floor(sum(_kept(prev, s, weights, timing) for prev, s in zip(path, path[1:]))
                         + _EPS)
        beats = whole - own
        if not whole or beats <= 0:
            continue
        why = (f"{fork.name} routes by data: {branch.name} {fmt_shape(branch.shape)} may receive "
               f"all of its {whole} elements (at the bounds) while {join.name} waits for an "
               f"element of another branch, and the units on the way keep {own} of them")
        needs.append(Need(fork, join, branch, path, beats, program.cardinality(branch) - own,
                          beats, branch, why, weights))
    return needs


def _kept(prev, stream, weights, timing):
    """Elements the unit between ``prev`` and ``stream`` (consecutive streams of a path) keeps
    when its output is blocked, at the least: a reduction's fibre, a look-ahead's held beat, a
    Broadcast's buffer per output; never a router's whole stream (a router may pass every beat)."""
    node = stream.node
    held = _hold(node)[0] + (1 if looks_ahead(node) else 0)
    return held * weights[prev] + timing(node).buffer * weights[stream]


def chunk_beats(join, paths):
    """Beats of the whole chunk a chunk-wise join (EagerMerge, Reassemble) may take from one of
    ``paths`` before it takes any from another: ``(bound, expr)``, or ``(0, 0)``.

    Such a join forwards one input's chunk whole, so while it does, a fork feeding both inputs
    (a Broadcast, a multi-hot Partition) pushes that many beats into the other branch, which
    must hold them (found by the random program generator, ``tests/regressions``)."""
    if not isinstance(join, (EagerMerge, Reassemble)):
        return 0, sympy.Integer(0)
    best = (0, sympy.Integer(0))
    for path in paths:
        s = path[-1]
        if s not in join.inputs or join.input_names[join.inputs.index(s)] == "select":
            continue
        n, expr = 1, sympy.Integer(1)
        for d in s.shape[1:]:                 # the dimensions of one chunk of a rank-b input
            bound = join.program.symbols.bound(d)
            if bound is None:
                return 0, sympy.Integer(0)
            n *= max(bound, 1)
            expr = expr * d
        if not all(isinstance(d, int) for d in s.shape[1:]):
            # an empty inner fibre is a stop-only beat: at most one more beat per element
            n, expr = 2 * n + 1, 2 * expr + 1
        if n > best[0]:
            best = (n, expr)
    return best


def _interval(path, join, timing):
    """Cycles between beats the units of ``path`` and the join take their inputs at."""
    return max([timing(join).hold] + [timing(s.node).hold for s in path[1:]])


def _path_latency(path, timing):
    """Cycles a first beat takes along ``path`` (each FIFO one, each unit its latency)."""
    return len(path) + sum(timing(s.node).latency for s in path[1:])


def _why(fork, branch, join, other, H, Hx):
    via = " -> ".join(s.node.name for s in other[1:]) or fork.name
    size = f"{H}" if str(Hx) == str(H) else f"{Hx} = {H} (at the bounds)"
    return (f"{fork.name} forks {branch.name} {fmt_shape(branch.shape)}; its branch {other[0].name} "
            f"swallows {size} beats (via {via}) before its first beat reaches {join.name}")


def _rate_floor(program, s, timing, cons):
    """2 when a depth-1 FIFO would slow the stream (module doc), else 1."""
    (reader, _), = cons[s] or [(None, None)]
    prod = timing(s.node)
    hold = timing(reader).hold if reader is not None else 1
    return 1 if prod.interval >= hold + 1 else 2


def lp_depths(program, widths, timing, *, throughput=1.0, pinned=None, base=2):
    """FIFO depths by the integer program of the module doc: a :class:`FifoPlan`. A full-rate
    stream gets ``min(base, 2)`` entries at least (``HardwareConfig.fifo_depth``)."""
    t0 = time.perf_counter()
    if not 0 <= throughput <= 1:
        raise ValueError(f"throughput must be a number in 0..1, not {throughput!r}")
    cons = program.consumers()
    streams = list(program.streams)
    index = {s: k for k, s in enumerate(streams)}
    lb = np.ones(len(streams))
    notes = {}
    for s in streams:
        if throughput >= 0.5 and _rate_floor(program, s, timing, cons) == 2 and base >= 2:
            lb[index[s]] = 2
            notes[s] = {"expr": "2", "why": "full rate: a depth-1 FIFO moves a beat every other cycle"}
        else:
            notes[s] = {"expr": "1", "why": ("the producer is no faster than a depth-1 FIFO"
                                             if throughput >= 0.5 else "minimal area")}
    ub = np.full(len(streams), np.inf)
    for s, d in (pinned or {}).items():
        lb[index[s]] = ub[index[s]] = d
        notes[s] = {"expr": str(d), "why": "pinned"}
    needs = reconvergences(program, timing)
    rows, rhs = [], []
    for n in needs:
        row = np.zeros(len(streams))
        for s in n.path:
            row[index[s]] = n.weight(s)
        rows.append(row)
        rhs.append(n.beats + math.ceil(throughput * (n.full - n.beats)))
    c = np.array([max(widths[s], 1) for s in streams], dtype=float)
    x = _solve(c, np.array(rows).reshape(len(rows), len(streams)), np.array(rhs), lb, ub)
    depths = {s: int(round(x[index[s]])) for s in streams}
    for n, r in zip(needs, rhs):
        # the FIFO of the path that took the beats carries the reason
        s = max(n.path, key=lambda s: depths[s] - lb[index[s]])
        if depths[s] > lb[index[s]]:
            notes[s] = {"expr": f"{n.expr} + {max(r - n.beats, 0)} - {timing(n.fork).buffer}"
                        if throughput else f"{n.expr} - {timing(n.fork).buffer}",
                        "why": n.why + f"; this path holds {r} {n.unit}"}
    bits = int(sum(depths[s] * widths[s] for s in streams))
    return FifoPlan(depths, notes, needs, bits, time.perf_counter() - t0)


def _solve(c, A, b, lb, ub):
    """``min c.x`` over integers with ``A x >= b`` and ``lb <= x <= ub`` (``A`` of non-negative
    rows: 1 per beat, or a FIFO entry's elements for a routed need).

    Constraints that share no variable with another are solved in closed form (the deficit on the
    row's cheapest free variable per unit it covers: exact for one covering row); the rest, if
    any, by SciPy's HiGHS.
    """
    x = lb.astype(float).copy()
    b = b - _EPS            # weights are ratios of bounds: a sum may fall short by a rounding
    # a row that pinned depths keep from holding its beats is left to the static check
    reach = A @ np.where(np.isinf(ub), 1e18, ub) if len(b) else b
    A, b = A[reach >= b], b[reach >= b]
    if not len(b):
        return x
    used = A > 0
    shared = used.sum(axis=0) > 1
    coupled = np.array([bool((row & shared).any()) for row in used])
    for row, need in zip(A[~coupled], b[~coupled]):
        cols = np.nonzero(row)[0]
        deficit = need - row[cols] @ x[cols]
        free = [k for k in cols if ub[k] > x[k]]
        if deficit > 0 and free:
            k = min(free, key=lambda k: c[k] / row[k])
            x[k] += min(math.ceil(deficit / row[k]), ub[k] - x[k])
    if coupled.any():
        # deferred: SciPy takes about a second to import; only coupled constraints need it
        from scipy.optimize import Bounds, LinearConstraint, milp
        cols = np.nonzero(A[coupled].sum(axis=0))[0]
        res = milp(c[cols], constraints=[LinearConstraint(A[coupled][:, cols], b[coupled], np.inf)],
                   integrality=np.ones(len(cols)), bounds=Bounds(lb[cols], ub[cols]))
        if not res.success:
            raise ValueError(f"FIFO sizing: the integer program has no solution ({res.message})")
        x[cols] = res.x
    return x


def check_deadlocks(program, depths, timing, needs=None):
    """Every reconvergence whose path cannot hold its token imbalance: a list of messages, each
    naming the fork, the path's FIFOs with their depths, the join, the swallowing branch and the
    beats (of which stream, of what shape and element) that would be stuck; then every
    look-ahead unit on a side branch of a cycle that joins it again (:func:`cycle_lookaheads`,
    whatever the depths)."""
    found = []
    for n in reconvergences(program, timing) if needs is None else needs:
        have = n.holds(depths)
        if have >= n.beats - _EPS:
            continue
        have = math.floor(have + _EPS)
        fifos = ", ".join(f"{s.name} (depth {depths[s]}{_per_entry(n, s)})" for s in n.path)
        buf = timing(n.fork).buffer
        found.append(f"deadlock: {n.why}; the path {fifos} to {n.join.name} holds {have} "
                     f"{n.unit}" + (f" and {n.fork.name} {buf} more" if buf else "")
                     + f": {n.beats - have} {n.unit.split(' of ')[0]} of {n.branch.name} "
                     f"{fmt_shape(n.branch.shape)} of {n.branch.dtype!r} would be stuck")
    cons = None
    for fb in program.nodes:
        if isinstance(fb, Feedback) and fb.bound:
            cons = cons or program.consumers()
            found.extend(cycle_lookaheads(program, fb, cons))
    return found


def _per_entry(need, stream):
    """``", 4 elements an entry"`` when an entry of ``stream`` does not count for one."""
    w = need.weight(stream)
    if need.weights is None or w == 1:
        return ""
    return f", {w:.3g} elements an entry"
