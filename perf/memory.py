"""The off-chip memory in the timing model: one line granted per cycle among all clients.

The memory (:class:`~stepforge.hdl.memory.MemoryModel`) grants one line per cycle, round robin
over its read and write ports; a request's lines are granted in order. The model gathers every
client's line requests, orders them by request time (lines of requests made in the same cycle
interleave, as the round robin does) and grants them one per cycle:
``g[k] = max(r[k], g[k-1] + 1)``.
"""

import numpy as np

from .engine import Actor, chain

__all__ = ["Memory", "MemoryClient"]


class MemoryClient:
    """One unit's requests: ``count`` requests of ``lines`` lines each."""

    def __init__(self, memory, name, kind, count, lines):
        self.memory, self.name, self.kind = memory, name, kind
        self.count, self.lines = int(count), max(int(lines), 1)
        self.times = np.zeros(self.count, dtype=np.int64)
        self.last = np.zeros(self.count, dtype=np.int64)      # grant of each request's last line

    def request(self, times):
        """Set the request times; whether they changed."""
        if np.array_equal(times, self.times):
            return False
        self.times = np.asarray(times, dtype=np.int64).copy()
        return True

    def done(self):
        return self.last


class Memory(Actor):
    """The arbiter of every :class:`MemoryClient` (module doc)."""

    name = "memory"

    def __init__(self, geometry):
        self.geometry = geometry
        self.clients = []
        self.granted = 0

    def client(self, name, kind, count, lines):
        c = MemoryClient(self, name, kind, count, lines)
        self.clients.append(c)
        return c

    def update(self):
        live = [c for c in self.clients if c.count]
        if not live:
            return False
        times = np.concatenate([np.repeat(c.times, c.lines) for c in live])
        line = np.concatenate([np.tile(np.arange(c.lines), c.count) for c in live])
        who = np.concatenate([np.full(c.count * c.lines, i) for i, c in enumerate(live)])
        order = np.lexsort((who, line, times))
        g = np.empty(len(times), dtype=np.int64)
        g[order] = chain(times[order], np.ones(len(times), dtype=np.int64))
        self.granted = len(times)
        changed = False
        at = 0
        for c in live:
            n = c.count * c.lines
            last = g[at:at + n].reshape(c.count, c.lines).max(axis=1)
            at += n
            if not np.array_equal(last, c.last):
                c.last = last
                changed = True
        return changed
