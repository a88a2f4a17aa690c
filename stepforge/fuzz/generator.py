"""The random program generator: seeded, composing 3-12 operators of every family.

:func:`generate` draws a :class:`~stepforge.fuzz.program.FuzzProgram`. It keeps a *pool* of the
streams built so far and applies random *motifs* (:mod:`stepforge.fuzz.motifs`): one operator or
a few that belong together (a Partition, the work on its outputs and the Reassemble that gathers
them; a Bufferize and its Streamify readers). Every line is executed as it is written, so a
motif sees the real shapes and element types of its inputs, and a line the language rejects
raises :class:`GeneratorBug` at once: the generator writes valid programs only.

Two streams may be consumed in lock step (Map, Zip, Accum over several streams) only if their
stops agree at run time. The generator tracks a *structure key* per stream: streams with equal
keys have identical stop structure (a static shape determines it; Map, Scan and a per-element
reference load keep it; every other operator derives a new key from its inputs').
"""

import numpy as np

import stepforge

from .. import __all__ as PUBLIC
from ..compiler.dims import dim_eq
from ..compiler.errors import StepError
from ..compiler.types import Buffer, Tile
from .exprs import INT_DTYPES
from .program import FuzzProgram, Line

__all__ = ["Generator", "GeneratorBug", "Skip", "MAX_ELEMENTS"]

#: A stream may hold at most this many elements (bounds included): keeps designs and runs small.
MAX_ELEMENTS = 96


class GeneratorBug(Exception):
    """The generator wrote a line the language rejects (or a motif failed): a bug to fix here."""


class Skip(Exception):
    """A motif does not apply to the chosen input; the generator tries another."""


class Generator:
    """Builds one random program line by line; see :func:`generate`."""

    def __init__(self, seed, *, min_ops=3, max_ops=12, name=None):
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.name = name or f"fuzz_{seed}"
        self.lines = []
        self.hints = {}
        self.group = 0
        # the names a program file gets from ``from stepforge import *``
        self.base = {k: getattr(stepforge, k) for k in PUBLIC}
        self.ns = dict(self.base, p=self.base["Program"](self.name))
        self.counters = {}
        self.struct = {}            # stream variable -> structure key
        self.pool = []              # stream variables a motif may read
        self.reads = {}             # variable -> times read
        self.target = int(self.rng.integers(min_ops, max_ops + 1))
        self.max_ops = max_ops

    # -- emitting lines ---------------------------------------------------------------------

    @property
    def program(self):
        return self.ns["p"]

    def fresh(self, prefix):
        n = self.counters.get(prefix, 0)
        self.counters[prefix] = n + 1
        return f"{prefix}{n}"

    def emit(self, text, defines=(), uses=()):
        """Execute ``text`` and record it; a rejection by the language is a :class:`GeneratorBug`."""
        try:
            exec(text, self.ns)
        except (StepError, ValueError, TypeError) as e:
            raise GeneratorBug(f"seed {self.seed}: the language rejects `{text}`: "
                               f"{type(e).__name__}: {e}") from e
        self.lines.append(Line(text, tuple(defines), tuple(uses), self.group))
        for u in uses:
            self.reads[u] = self.reads.get(u, 0) + 1

    def stream(self, var):
        s = self.ns[var]
        return s if not hasattr(s, "outputs") else s.out

    def add_stream(self, var, key, pool=True):
        self.struct[var] = key
        if pool:
            self.pool.append(var)

    def op(self, expr, uses, key=None, prefix="s", pool=True):
        """``s<k> = expr``: one operator with one output stream; returns the variable."""
        var = self.fresh(prefix)
        self.emit(f"{var} = {expr}", [(var, "stream")], uses)
        s = self.stream(var)
        if key is None or self.static(s):
            key = ("static", s.shape) if self.static(s) else ("node", var)
        self.add_stream(var, key, pool)
        self.check_size(s)
        return var

    def ops(self, expr, n, uses, keys, prefix="s", pool=True):
        """``a, b, .. = expr`` for an operator with ``n`` outputs; returns the variables."""
        names = [self.fresh(prefix) for _ in range(n)]
        self.emit(f"{', '.join(names)}{',' if n == 1 else ''} = {expr}",
                  [(v, "stream") for v in names], uses)
        for v, key in zip(names, keys):
            s = self.ns[v]
            self.add_stream(v, ("static", s.shape) if self.static(s) else key, pool)
            self.check_size(s)
        return names

    # -- facts about streams ----------------------------------------------------------------

    def static(self, s):
        return all(isinstance(d, int) for d in s.shape)

    def bound(self, d):
        return self.program.symbols.bound(d)

    def elements(self, s):
        """An upper bound of the stream's element count."""
        b = self.bound(self.program.cardinality(s))
        return b if b is not None else 10**9

    def check_size(self, s):
        if self.elements(s) > MAX_ELEMENTS:
            raise Skip(f"{s.name} may hold {self.elements(s)} elements")

    def same_shape(self, a, b):
        return a.rank == b.rank and all(dim_eq(x, y) for x, y in zip(a.shape, b.shape))

    def same_shape_inner(self, a, b):
        """Equal rank and equal dimensions below the outermost (what EagerMerge needs)."""
        return a.rank == b.rank and all(dim_eq(x, y) for x, y in zip(a.shape[1:], b.shape[1:]))

    def drain(self, var):
        """Mark ``var`` as read by nobody on purpose: no program output, drained in hardware."""
        for i, line in enumerate(self.lines):
            if any(v == var for v, _ in line.defines):
                defines = tuple((v, "drained" if v == var else k) for v, k in line.defines)
                self.lines[i] = Line(line.text, defines, line.uses, line.group)
        if var in self.pool:
            self.pool.remove(var)

    def lockstep_partners(self, var, pred=lambda s: True):
        """Pool streams with ``var``'s stop structure and shape."""
        s = self.stream(var)
        return [v for v in self.pool if v != var and self.struct[v] == self.struct[var]
                and self.same_shape(self.stream(v), s) and pred(self.stream(v))]

    def choose(self, seq):
        seq = list(seq)
        if not seq:
            raise Skip("nothing to choose from")
        return seq[int(self.rng.integers(len(seq)))]

    def pick(self, pred=lambda s: True):
        """A pool stream satisfying ``pred``; unread streams first, so programs stay connected."""
        cands = [v for v in self.pool if pred(self.stream(v))]
        if not cands:
            raise Skip("no stream fits")
        fresh = [v for v in cands if not self.reads.get(v)]
        if fresh and self.rng.random() < 0.8:
            cands = fresh
        return self.choose(cands)

    # -- declarations -----------------------------------------------------------------------

    def dtype(self):
        return str(self.rng.choice(INT_DTYPES, p=[0.3, 0.45, 0.25]))

    def tile_shape(self, big=0.05):
        if self.rng.random() < big:      # larger than the 4x4 hardware tile: hierarchical tiling
            return tuple(self.choose([(8, 4), (4, 8), (8, 8)]))
        return (int(self.choose([1, 1, 2, 4])), int(self.choose([1, 2, 2, 4])))

    def tensor(self, shape, dtype, role="input"):
        var = self.fresh("T")
        role_arg = "" if role == "input" else f", role={role!r}"
        self.emit(f"{var} = p.tensor({var!r}, {tuple(shape)}, {dtype}{role_arg})", [(var, "tensor")])
        return var

    def symbol(self, bound, ragged=True):
        var = self.fresh("R")
        self.emit(f"{var} = p.symbol({var!r}, bound={bound}{', ragged=True' if ragged else ''})",
                  [(var, "symbol")])
        return var

    def host_input(self, dims, elem, hint=None, prefix="x"):
        """``x<k> = p.input(...)``; ``dims`` holds ints and symbol variables (str)."""
        var = self.fresh(prefix)
        uses = [d for d in dims if isinstance(d, str)]
        shape = "[" + ", ".join(str(d) for d in dims) + "]"
        self.emit(f"{var} = p.input({var!r}, {shape}, {elem})", [(var, "stream")], uses)
        if hint:
            self.hints[var] = dict(hint)
        s = self.stream(var)
        self.add_stream(var, ("static", s.shape) if self.static(s) else ("input", var))
        self.check_size(s)
        return var

    def ragged_dims(self, rank, static_outer=True):
        """Dimensions for a host input: a static 1 or small size outside, ragged ones inside."""
        dims = [1 if static_outer or self.rng.random() < 0.5 else self.symbol(2)]
        for _ in range(rank):
            if self.rng.random() < 0.6:
                dims.append(self.symbol(int(self.rng.integers(1, 5))))
            else:
                dims.append(int(self.rng.integers(1, 4)))
        return dims

    # -- the program ------------------------------------------------------------------------

    def operators(self):
        return sum(1 for n in self.program.nodes if n.op not in ("Input", "Output"))

    def run(self, sources, motifs, finish):
        """Apply motifs until the program has its target number of operators.

        ``sources`` and ``motifs`` are lists of ``(function, weight)``; a source starts new
        streams, a motif reads the pool. ``finish(generator)`` ends the program.
        """
        attempts = 0
        while self.operators() < self.target and attempts < 300:
            attempts += 1
            table = sources if not self.pool or self.rng.random() < 0.15 else motifs
            fns, weights = zip(*table)
            weights = np.array(weights, dtype=float)
            motif = fns[int(self.rng.choice(len(fns), p=weights / weights.sum()))]
            snapshot = (len(self.lines), dict(self.counters), dict(self.struct), list(self.pool),
                        dict(self.reads), dict(self.hints))
            self.group += 1
            try:
                motif(self)
            except Skip:
                self.rollback(snapshot)
                continue
            if self.operators() > self.max_ops:
                self.rollback(snapshot)
        finish(self)
        return FuzzProgram(self.name, self.seed, list(self.lines), dict(self.hints))

    def rollback(self, snapshot):
        """Undo a motif that did not apply: rebuild the live program from the kept lines."""
        n, counters, struct, pool, reads, hints = snapshot
        self.lines = self.lines[:n]
        self.counters, self.struct, self.pool, self.reads, self.hints = (
            counters, struct, pool, reads, hints)
        self.ns = dict(self.base, p=self.base["Program"](self.name))
        for line in self.lines:
            exec(line.text, self.ns)


def is_buffer(s):
    return isinstance(s.dtype, Buffer)


def is_tile(s):
    return isinstance(s.dtype, Tile)
