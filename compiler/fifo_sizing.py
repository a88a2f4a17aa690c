"""FIFO depths: the sizing rule, the linear program that replaces it, and the static deadlock check.

Every stream of a lowered program becomes a FIFO. Two things decide how deep it must be
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
from .ops.memory import Bufferize
from .ops.routing import Broadcast, EagerMerge, Partition, Reassemble
from .ops.shape import Promote, RepeatStatic, Reshape

__all__ = ["UnitTiming", "Need", "FifoPlan", "reconvergences", "lp_depths", "check_deadlocks",
           "looks_ahead", "unit_timing", "chunk_beats", "downstream"]


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
        if isinstance(node, Accum) and node.b:
            x = node.inputs[0]
            dims = x.shape[len(x.shape) - node.b:]
            if all(isinstance(d, int) for d in dims):
                out = ii * max(math.prod(dims), 1)
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
            return UnitTiming(interval=per + geometry.latency + 2, latency=per + geometry.latency + 2)
        return UnitTiming(hold=per + 2)
    if isinstance(node, Broadcast):
        return UnitTiming(latency=1, buffer=getattr(comp, "depth", 2))
    return UnitTiming()      # a look-ahead's wait for the next beat is in the holds


@dataclass
class Need:
    """One reconvergence: the FIFOs of ``path`` (streams from the fork's output ``branch`` to the
    join) must hold ``beats`` (``expr`` at the bounds; ``full`` with the latency skew covered)."""
    fork: object
    join: object
    branch: object
    path: list
    beats: int
    expr: object
    full: int
    other: object
    why: str


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


def _reach(program, stream, cons):
    """Nodes reachable from ``stream``, each with ``(hold after, hold before)`` (bounds), the
    hold before as an expression, and the paths (lists of streams) to it with their holds."""
    sym = program.symbols
    card = program.cardinality(stream)
    whole = sym.bound(card) or 0
    out, paths = {}, {}
    stack = [(stream, 0, sympy.Integer(0), 0, False, [stream])]
    while stack:
        s, hold, hexpr, last, filtered, path = stack.pop()
        for node, _ in cons[s]:
            h, hx = _hold(node)
            if h and filtered:
                # behind a data-dependent router a hold may take the fork's whole stream to fill
                if whole > h:
                    h, hx = whole, card
            new_last = max(last, h)
            total, texpr = (hold, hexpr) if hold >= h else (h, hx)
            if looks_ahead(node):
                # it keeps one element until the next arrives: one more upstream hold
                total, texpr = hold + max(last, 1), hexpr + max(last, 1)
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
            if n not in seen:
                seen.add(n)
                stack.extend(n.outputs)
    return seen


def reconvergences(program, timing):
    """Every :class:`Need` of the program: per fork, branch, first meeting node and path."""
    cons = program.consumers()
    needs = []
    for node in program.nodes:
        if len(node.outputs) < 2:
            continue
        reach = [_reach(program, o, cons) for o in node.outputs]
        buffer = timing(node).buffer
        for i, o in enumerate(node.outputs):
            mine, my_paths = reach[i]
            for j, (other, other_paths) in enumerate(reach):
                if i == j:
                    continue
                meets = set(mine) & set(other)
                later = set().union(*(downstream(m, cons) for m in meets)) if meets else set()
                for meet in sorted(meets - later, key=lambda n: n.name):
                    H, Hx = other[meet][1], other[meet][2]
                    C, Cx = chunk_beats(meet, [p for p, _, _ in other_paths[meet]])
                    if C > H:
                        H, Hx = C, Cx
                    skew = max(_path_latency(p, timing) for p, _, _ in other_paths[meet])
                    # beats arrive no faster than the slowest unit on the branches lets them
                    slow = max([_interval(p, meet, timing) for p, _, _ in other_paths[meet]]
                               + [_interval(p, meet, timing) for p, _, _ in my_paths[meet]])
                    for path, h, hx in my_paths[meet]:
                        beats = H - h - buffer
                        full = beats + -(-max(skew - _path_latency(path, timing), 0) // slow)
                        # never more than the first rule's hold + 2, which runs at full rate
                        full = min(full, max(H - h + 2, beats))
                        if full <= 0:
                            continue
                        needs.append(Need(node, meet, o, path, max(beats, 0),
                                          sympy.simplify(Hx - hx), full, other_paths[meet][0][0],
                                          _why(node, o, meet, other_paths[meet][0][0], H, Hx)))
    return needs


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
            row[index[s]] = 1
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
                        "why": n.why + f"; this path holds {r} beats"}
    bits = int(sum(depths[s] * widths[s] for s in streams))
    return FifoPlan(depths, notes, needs, bits, time.perf_counter() - t0)


def _solve(c, A, b, lb, ub):
    """``min c.x`` over integers with ``A x >= b`` and ``lb <= x <= ub`` (``A`` of 0/1 rows).

    Constraints that share no variable with another are solved in closed form (the deficit on the
    row's cheapest free variable: exact for one covering row); the rest, if any, by SciPy's HiGHS.
    """
    x = lb.astype(float).copy()
    # a row that pinned depths keep from holding its beats is left to the static check
    reach = A @ np.where(np.isinf(ub), 1e18, ub) if len(b) else b
    A, b = A[reach >= b], b[reach >= b]
    if not len(b):
        return x
    shared = (A.sum(axis=0) > 1)
    coupled = np.array([bool((row.astype(bool) & shared).any()) for row in A])
    for row, need in zip(A[~coupled], b[~coupled]):
        cols = np.nonzero(row)[0]
        deficit = need - x[cols].sum()
        free = [k for k in cols if ub[k] > x[k]]
        if deficit > 0 and free:
            k = min(free, key=lambda k: c[k])
            x[k] += min(deficit, ub[k] - x[k])
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
    beats (of which stream, of what shape and element) that would be stuck."""
    found = []
    for n in reconvergences(program, timing) if needs is None else needs:
        have = sum(depths[s] for s in n.path)
        if have >= n.beats:
            continue
        fifos = ", ".join(f"{s.name} (depth {depths[s]})" for s in n.path)
        buf = timing(n.fork).buffer
        found.append(f"deadlock: {n.why}; the path {fifos} to {n.join.name} holds {have} beats"
                     + (f" and {n.fork.name} {buf} more" if buf else "")
                     + f": {n.beats - have} beats of {n.branch.name} {fmt_shape(n.branch.shape)} "
                     f"of {n.branch.dtype!r} would be stuck")
    return found
