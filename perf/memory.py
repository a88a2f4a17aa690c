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
3. *round robin* (only when the ordered grants starve a load, :meth:`Memory.starved`): the
   free schedule runs every client at a line per cycle, so a load that starts later (MoE's
   expert weights) finds every line the others requested before it, in that too fast
   schedule, ahead of it in the order, where the hardware's round robin serves a client with an empty queue within one turn of the others.
   The order is then the one a round robin gives the last schedule's requests
   (:meth:`Memory.round_robin_order`), each line kept after every line it may depend on (a
   request whose grant, plus the fewest cycles from a grant to a request that depends on it,
   is at most its own request: the order stays legal), and the fixed point is solved again
   from pass 1's, which lies below every order's. That pass moves the requests, so its order
   may no longer be a round robin's of its own schedule: while the memory idles in a cycle
   where a reader's line waits (:meth:`Memory.idle_while_waiting`, which no round robin
   does), or a reader's first request still starves, the order is made again from the new
   schedule, until it is the round robin of its own schedule (``model._settle``). The schedule
   is causal, so each pass's order agrees with that round robin over a longer prefix than the
   last pass's did: the passes end (``docs/perf.md``, "2026-11-28 (session 19)").
"""

import numpy as np

from .engine import Actor, Watched, chain, same

__all__ = ["Memory", "MemoryClient"]

#: Lines of the first chunk the round-robin arbiter grants without checking the dependencies
#: (:meth:`Memory.round_robin_order`; each next chunk twice as long).
SPECULATE = 256


class _Requests(Watched):
    """A client's request times, as the memory watches them."""

    def __init__(self, count):
        self.times = np.zeros(count, dtype=np.int64)


class MemoryClient(Watched):
    """One unit's requests: ``count`` requests of ``lines`` lines each. ``version`` changes with
    the grants (the unit watches it)."""

    def __init__(self, memory, name, kind, count, lines):
        self.memory, self.name, self.kind = memory, name, kind
        self.count, self.lines = int(count), max(int(lines), 1)
        self.req = _Requests(self.count)
        self.wait = np.zeros(self.count, dtype=np.int64)
        self.last = np.zeros(self.count, dtype=np.int64)      # grant of each request's last line

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
        self.req.times = times         # a new array of the caller's, not written again
        self.req.touch()
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
        self._kept = None           # Memory._lines

    def client(self, name, kind, count, lines):
        c = MemoryClient(self, name, kind, count, lines)
        self.clients.append(c)
        self.watch = [c.req for c in self.clients]
        return c

    def reset(self):
        for c in self.clients:
            c.req.times = np.zeros(c.count, dtype=np.int64)
            c.last = np.zeros(c.count, dtype=np.int64)
            c.req.touch()
            c.touch()

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

    def starved(self):
        """Whether the current grants starve a reader (a load, a host stream), which no round
        robin does:

        - its first request waited more than the ``n - 1`` cycles a round robin over ``n``
          clients lets a client with an empty queue wait;
        - or the memory granted nothing in a cycle while one of its lines, already requested,
          waited (:meth:`idle_while_waiting`): a round robin grants a waiting line every cycle.

        (A starved store delays its own end, and its producer once its tile queue is full; a
        starved load every unit after it: only loads are worth another pass.)"""
        live = self.live
        n = len(live)
        if any(int(c.last[0]) - int(c.times[0]) - (c.lines - 1) > n - 1
               for c in live if c.kind == "read"):
            return True
        return self.idle_while_waiting()

    def idle_while_waiting(self):
        """Whether the fixed order left the memory idle in a cycle while a reader's line, already
        requested, waited for a later grant. An order is made from one schedule's requests;
        once the fixed point moves them, a line may sit in the order behind lines that are now
        requested after it, and wait for them while the memory idles (the host stream of
        decode attention's addresses behind the key and value loads it feeds: ``docs/perf.md``
        section 2, "The memory's order, made again")."""
        live = self.live
        if self.order is None or not live:
            return False
        times, g = self._lines()                      # every line's grant (update)
        lo = int(times.min())
        span = int(g.max()) - lo + 1
        busy = np.zeros(span, dtype=bool)
        busy[g - lo] = True
        # before[x - lo]: the idle cycles in [lo, x)
        before = np.zeros(span + 1, dtype=np.int64)
        np.cumsum(~busy, out=before[1:])
        if not all(c.kind == "read" for c in live):
            read = np.concatenate([np.full(c.count * c.lines, c.kind == "read") for c in live])
            times, g = times[read], g[read]
        # an idle cycle in [request, grant) of some reader's line
        return bool((before[g - lo] > before[times - lo]).any())

    def round_robin_order(self, grants, lag):
        """The order in which a round robin over the clients grants their lines when every
        request comes at its current time (module doc, pass 3): an array of line indices, as
        :meth:`set_order`'s. ``grants``: per client, the grant of each request's last line in
        a schedule of these requests; ``lag``: per client, the fewest cycles from one of its
        grants to a request that depends on it. A line goes after the lines of every request
        whose grant plus lag is at most its own request time: what it may depend on.

        The arbiter runs cycle by cycle in Python, first without the dependencies: in chunks
        of lines (:data:`SPECULATE`, doubling), each checked afterwards for a line granted
        before a line it depends on. While none is, every grant is the one the full arbiter
        makes (the first client after the last one granted whose line is requested, and that
        line may go); at the first chunk that has one, the full arbiter takes over from the
        chunk's start (``docs/perf.md`` section 2, "Speed after the round-robin passes")."""
        live = self.live
        n = len(live)
        never = float("inf")
        arr_np = [np.repeat(c.times, c.lines) if c.lines > 1 else c.times for c in live]
        base = np.cumsum([0] + [c.count * c.lines for c in live]).tolist()
        total = base[-1]
        granted_at = np.concatenate([np.repeat(g + d - 1, c.lines) if c.lines > 1 else g + (d - 1)
                                     for c, g, d in zip(live, grants, lag)])
        by_grant = np.argsort(granted_at, kind="stable")       # the lines in grant order
        # per line: how many lines of the grant order it depends on (a prefix of that order)
        need_all = np.searchsorted(granted_at[by_grant], np.concatenate(arr_np), side="left")
        # per client its lines' request times, ended by a sentinel no cycle reaches
        arrive = [a.tolist() + [never] for a in arr_np]
        order = []
        append = order.append
        nxt = [0] * n                   # each client's head line
        ha = [a[0] for a in arrive]     # its request time (a client with no line left: never)
        ptr = n - 1                     # the client granted last
        t = min(ha)
        after = [[(p + d) % n for d in range(1, n + 1)] for p in range(n)]   # turns after p
        left = total
        pos = np.full(total, total, dtype=np.int64)     # each line's place in the order
        done = 0                        # places in grant order, all of them served
        size = SPECULATE
        while left:
            s0 = len(order)
            kept = (t, ptr, nxt[:], ha[:], left)
            stop = max(left - size, 0)
            size *= 2
            while left > stop:
                for i in after[ptr]:
                    if ha[i] <= t:
                        break
                else:
                    t = max(t + 1, min(ha))
                    continue
                k = nxt[i]
                append(base[i] + k)
                k += 1
                nxt[i] = k
                ha[i] = arrive[i][k]
                ptr = i
                t += 1
                left -= 1
            s1 = len(order)
            chunk = np.array(order[s0:], dtype=np.int64)
            pos[chunk] = np.arange(s0, s1)
            # the served prefix of the grant order before each grant of the chunk (it ends
            # before place s1: s1 lines are served by then)
            served = np.maximum.accumulate(pos[by_grant[done:s1]])
            if (need_all[chunk] <= done + np.searchsorted(served, np.arange(s0, s1))).all():
                done += int(np.searchsorted(served, s1))
                continue
            del order[s0:]              # a line went before one it depends on: start again
            t, ptr, nxt, ha, left = kept
            break
        if not left:
            return np.array(order, dtype=np.int64)
        # the full arbiter from there: a client's head line goes if it is requested and the
        # lines it depends on are served
        rank = np.empty(total, dtype=np.int64)          # each line's place in grant order
        rank[by_grant] = np.arange(total)
        served = bytearray(total + 1)   # by place in grant order, a 0 past the end
        if order:
            np.frombuffer(served, dtype=np.uint8)[rank[np.array(order, dtype=np.int64)]] = 1
        rank = rank.tolist()
        ranks = [rank[base[i]:base[i + 1]] for i in range(n)]
        need = [need_all[base[i]:base[i + 1]].tolist() + [never] for i in range(n)]
        hn = [need[i][nxt[i]] for i in range(n)]
        while left:
            for i in after[ptr]:
                if ha[i] <= t and hn[i] <= done:
                    break
            else:
                t = max(t + 1, min(ha))
                continue
            k = nxt[i]
            append(base[i] + k)
            served[ranks[i][k]] = 1
            k += 1
            nxt[i] = k
            ha[i] = arrive[i][k]
            hn[i] = need[i][k]
            ptr = i
            t += 1
            left -= 1
            while served[done]:
                done += 1
        return np.array(order, dtype=np.int64)

    def update(self):
        changed = False
        if self.order is None:
            # alone, a client sets its own grants with its requests (MemoryClient.request)
            return False
        times, g = self._lines()
        at = 0
        for c in self.live:
            n = c.count * c.lines
            last = g[at:at + n]                 # a request's lines are granted in order
            changed |= self._set(c, last if c.lines == 1 else last[c.lines - 1::c.lines])
            at += n
        return changed

    def _lines(self):
        """Every line's request time and grant under the fixed order, in line order. Kept with
        the requests and the order they came from (arrays are replaced, never written in
        place): :meth:`idle_while_waiting` reads the last :meth:`update`'s."""
        key = [self.order] + [c.times for c in self.live]
        kept = self._kept
        if kept is not None and len(kept[0]) == len(key) \
                and all(a is b for a, b in zip(kept[0], key)):
            return kept[1], kept[2]
        times = np.concatenate([c.times if c.lines == 1 else np.repeat(c.times, c.lines)
                                for c in self.live])
        order = self.order
        g = np.empty(len(times), dtype=np.int64)
        g[order] = chain(times[order])
        self._kept = (key, times, g)
        return times, g

    @staticmethod
    def _set(c, last):
        if same(last, c.last):
            return False
        c.last = last
        c.touch()
        return True
