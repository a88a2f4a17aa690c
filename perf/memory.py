"""The off-chip memory in the timing model: one line granted per cycle among all clients.

The memory (:class:`~stepforge.hdl.memory.MemoryModel`) grants one line per cycle, round robin
over its read and write ports, a request's lines in order. First-come-first-served grants are not
monotone in the request times (a later request of one client lets another go first), which a
fixed point cannot iterate on, so the model grants in two passes:

1. *free*: each client alone, one line per cycle from its request on
   (``last[k] = max(r[k] + L - 1, last[k-1] + L)``): a lower bound;
2. *ordered*: every line of every client in one fixed order, the order of their request times in
   pass 1 (lines of requests made in the same cycle interleave, as the round robin does), one
   line per cycle: ``g = max(r, g_prev + 1)`` along that order. A fixed order is monotone, and
   the free schedule's order respects every dependency of the program, so it adds no cycle.
"""

import numpy as np

from .engine import Actor, chain, same

__all__ = ["Memory", "MemoryClient"]


class _Requests:
    """A client's request times, as the memory watches them."""

    def __init__(self, count):
        self.times = np.zeros(count, dtype=np.int64)
        self.version = 0


class MemoryClient:
    """One unit's requests: ``count`` requests of ``lines`` lines each. ``version`` changes with
    the grants (the unit watches it)."""

    def __init__(self, memory, name, kind, count, lines):
        self.memory, self.name, self.kind = memory, name, kind
        self.count, self.lines = int(count), max(int(lines), 1)
        self.req = _Requests(self.count)
        self.wait = np.zeros(self.count, dtype=np.int64)
        self.last = np.zeros(self.count, dtype=np.int64)      # grant of each request's last line
        self.version = 0

    @property
    def times(self):
        return self.req.times

    def grants(self, times):
        """The grant of each request's last line for request ``times`` if the client had the
        memory to itself (a lower bound)."""
        L = self.lines
        return chain(times + (L - 1), step=L)

    def estimate(self, times):
        """The grants of requests at ``times`` as far as the client can tell: exact while the
        memory grants each client alone, else a lower bound (the memory's last grants)."""
        own = self.grants(times)
        return own if self.memory.order is None else np.maximum(own, self.last)

    def request(self, times, grants=None):
        """Set the request times; whether they changed. ``grants``: :meth:`grants` of ``times``
        when the caller has them."""
        if same(times, self.req.times):
            return False
        self.req.times = np.asarray(times, dtype=np.int64).copy()
        self.req.version += 1
        if self.memory.order is None:      # what the memory will grant
            self.last = self.grants(self.req.times) if grants is None else grants
        return True

    def done(self):
        return self.last


class Memory(Actor):
    """The grants of every :class:`MemoryClient` (module doc)."""

    name = "memory"

    def __init__(self, geometry):
        self.geometry = geometry
        self.clients = []
        self.watch = []
        self.order = None
        self.live = []

    def client(self, name, kind, count, lines):
        c = MemoryClient(self, name, kind, count, lines)
        self.clients.append(c)
        self.watch = [c.req for c in self.clients]
        return c

    def reset(self):
        for c in self.clients:
            c.req.times = np.zeros(c.count, dtype=np.int64)
            c.last = np.zeros(c.count, dtype=np.int64)
            c.req.version += 1
            c.version += 1

    def set_order(self):
        """Fix the order of every line: the order of the current request times."""
        live = [c for c in self.clients if c.count]
        self.live = live
        if not live:
            self.order = None
            return
        times = np.concatenate([np.repeat(c.times, c.lines) for c in live])
        line = np.concatenate([np.tile(np.arange(c.lines), c.count) for c in live])
        who = np.concatenate([np.full(c.count * c.lines, i) for i, c in enumerate(live)])
        self.order = np.lexsort((who, line, times))

    def update(self):
        changed = False
        if self.order is None:
            for c in self.clients:
                if c.count:
                    changed |= self._set(c, c.grants(c.times))
            return changed
        times = np.concatenate([np.repeat(c.times, c.lines) for c in self.live])
        order = self.order
        g = np.empty(len(times), dtype=np.int64)
        g[order] = chain(times[order])
        at = 0
        for c in self.live:
            n = c.count * c.lines
            changed |= self._set(c, g[at:at + n].reshape(c.count, c.lines).max(axis=1))
            at += n
        return changed

    @staticmethod
    def _set(c, last):
        if same(last, c.last):
            return False
        c.last = last
        c.version += 1
        return True
