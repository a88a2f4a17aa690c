"""The off-chip units in the timing model: loads and stores through the memory's grants.

A load (:class:`~stepforge.hdl.offchip_load.LinearLoadUnit`, ``RandomLoadUnit``) issues a
command per output beat; a tile takes a slot of its ``buffer_tiles``-tile buffer, its
``len(placement.tile_lines)`` lines are requested ``grant_delay`` cycles later, and its beat is
ready ``mem_latency + load_ready`` cycles after its last line is granted. A store takes a beat
per cycle and requests a tile's lines as it enters; at most ``store_queue`` tiles wait for their
lines; it is done when its last line is granted.
"""

import numpy as np

from .beats import mapping_in, mapping_out
from .engine import LOCAL_ROUNDS, NEG, Actor, chain, filled, same

__all__ = ["LoadActor", "ReaderActor", "StoreActor"]


class LoadActor(Actor):
    """A load unit: a command per output beat, a tile buffer slot per tile, its lines through the
    memory, the beat out when its last line has arrived.

    **The output register.** A tile leaves its slot for the unit's output register
    (``hdl/offchip_load.py``, step 4) when the register is empty or being read, which is when
    the beat before it is pushed into the FIFO: the slot of beat ``k`` is free at ``S[k] =
    max(ready[k], P[k - 1] + 1)``, not at its own push ``P[k] = max(ready[k], room[k], P[k - 1]
    + 1)``. The two differ only while the FIFO is full: the register then holds one more beat,
    and the buffer takes one more tile's command (``buffer_tiles`` slots, the register and the
    FIFO's entries: ``buffer_tiles + 1 + depth`` tiles ahead of the consumer; :meth:`_freed`)."""

    #: cycles after a beat leaves until its slot takes the next tile's command
    slot_free = 0
    #: a beat waits in an output register, out of its slot, while the FIFO is full
    out_register = True

    def __init__(self, u, ins, out, mem, tm):
        self.name = u.name
        comp = u.component
        self.out = out
        out.src = self
        self.ref = next(iter(ins.values()), None)
        n = out.n
        self.ref_idx = (mapping_in(self.ref.n, n) if self.ref is not None and self.ref.n <= n
                        else None)
        if self.ref is not None:
            self.ref.dst = self
        has = out.info.has.astype(bool)
        self.has = has
        self.data = np.nonzero(has)[0]
        lines = len(comp.placement.tile_lines)
        self.buf = comp.buffer_tiles
        self.tm = tm
        self.latency = comp.placement.geometry.latency
        self.client = mem.client(self.name, "read", len(self.data), lines)
        self.T = np.zeros(n, dtype=np.int64)
        self._ready = filled(n, NEG)            # the last update's ready times (_freed)
        self.busy_cycles = len(self.data) * lines
        self.watch = [out, self.client] + ([self.ref] if self.ref is not None else [])

    def _plan(self):
        """Where a tile waits for a buffer slot: the beats of tiles ``buf`` tiles apart, as slices
        when every beat is a tile."""
        n, d, buf = self.out.n, self.data, self.buf
        if len(d) == n:
            self._every = True
            self._slots = (slice(buf, None), slice(0, max(n - buf, 0))) if buf < n else None
        else:
            self._every = False
            k = np.arange(len(d)) - buf
            ok = k >= 0
            self._slots = (d[ok], d[k[ok]]) if ok.any() else None
        self._extra = self.latency + self.tm.load_ready
        self._closed_slots()

    def _closed_slots(self):
        # a tile's own data (its line granted ``grant_delay`` after its command, a line per
        # tile, ready ``_extra`` later) frees its slot no later than ``buf`` commands on: only
        # what does not depend on this unit's commands (the FIFO's room, the memory's grants
        # to the others) can hold a command back, and the loop closes in one pass
        self._closed = (self.client.lines == 1
                        and self.tm.grant_delay + self._extra + self.slot_free <= self.buf)

    def update(self):
        if not hasattr(self, "_every"):
            self._plan()
        n = self.out.n
        base = np.zeros(n, dtype=np.int64)
        if self.ref_idx is not None:
            m = self.ref_idx >= 0
            base[m] = np.maximum(base[m], self.ref.arrived + 1)
        d = self.data
        every = self._every
        gd = self.tm.grant_delay
        room = self.out.room()
        P = self.out.P
        slots = self._slots
        client = self.client
        alone = client.memory.order is None
        once = slots is not None and self._closed
        if once and every:
            return self._alone(base, room, slots) if alone else self._ordered(base, slots)
        ready = self._ready      # a lower bound of this update's (the bounds only rise)
        if once:
            # the slots wait for what the pushes owe to the room and to the others' grants
            if alone:
                P = self.out.room_chain()
                ready = None        # a tile's own data frees its slot in time (_closed_slots)
            else:
                held = filled(n, NEG)
                held[d] = self._grants() + self._extra
                ready = held.copy()
                P = chain(np.maximum(held, room, out=held))
        for _ in range(LOCAL_ROUNDS):
            # a tile takes a slot of the buffer: the tile ``buf`` tiles before it must have left
            # its slot (for the output register, or for the FIFO)
            if slots is None:
                a = base
            else:
                a = base.copy()
                dst, src = slots
                a[dst] = np.maximum(a[dst], self._freed(P, ready)[src])
            T = chain(a)
            if every:
                own = self._estimate(T + gd)
                ready = own + self._extra
            else:
                ready = T + 1
                own = self._estimate(T[d] + gd)
                ready[d] = own + self._extra
            before, P = P, chain(np.maximum(ready, room))
            if slots is None or once or same(P, before):
                break           # the same pushes: the same slots, steps and grants
        changed = not same(T, self.T)
        self.T = T
        # alone at the memory, the grants are the estimate the loop ended on
        changed |= self._request(T + gd if every else T[d] + gd, own if alone else None, P)
        if not alone:
            if every:
                ready = self._grants() + self._extra
            else:
                ready = ready.copy()
                ready[d] = self._grants() + self._extra
            P = chain(np.maximum(ready, room))
        self._ready = ready
        return self._publish(T, P, changed)

    def _freed(self, P, ready):
        """Per beat, the cycle its slot takes a later tile's command, for pushes ``P`` and ready
        times ``ready`` (None: they bind no slot): ``max(ready[k], P[k - 1] + 1)`` (the class
        doc's output register), a host reader's ``P[k] + slot_free`` (its credit returns as the
        beat leaves)."""
        if not self.out_register:
            return P + self.slot_free if self.slot_free else P
        S = np.empty_like(P)
        if len(S):
            S[0] = NEG
            np.add(P[:-1], 1, out=S[1:])
        return S if ready is None else np.maximum(S, ready, out=S)

    def _grants(self):
        """The grant of each of this unit's tiles' last line (the memory's, or its own alone)."""
        return self.client.last

    def _estimate(self, times):
        """:meth:`MemoryClient.estimate` of the tiles' requests at ``times``."""
        return self.client.estimate(times)

    def _request(self, times, own, P):
        """Request the tiles' lines at ``times`` (``own``: their grants alone, when known;
        ``P``: the pushes this update found); whether the requests changed."""
        return self.client.request(times, own)

    def _publish(self, T, P, changed):
        """Keep the steps ``T`` (already in ``self.T``) and the pushes ``P``, and the reference's
        pops; whether anything changed (``changed``: the steps or the requests did)."""
        if not same(P, self.out.P):
            self.out.P = P
            changed = True
        if self.ref_idx is not None:
            C = T[self.ref_idx >= 0]
            if not same(self.ref.C, C):
                self.ref.C = C
                changed = True
        return changed

    def _alone(self, base, room, slots):
        """:meth:`update` alone at the memory, every beat a tile, the slot loop closed (one
        pass): the slots wait for the room's chain ``R``, and the pushes are ``chain(max(ready,
        room)) = max(ready, R)``: ``ready`` (the grants plus a constant) already rises by a
        cycle a beat at least, and so do the grants of one-line tiles, which are the requests
        themselves."""
        R = self.out.room_chain()
        a = base.copy()
        dst, src = slots
        a[dst] = np.maximum(a[dst], self._freed(R, None)[src])
        T = chain(a)
        client = self.client
        times = T + self.tm.grant_delay
        own = times if client.lines == 1 else client.grants(times)
        self._ready = own + self._extra
        P = np.maximum(self._ready, R)
        changed = not same(T, self.T)
        self.T = T
        changed |= self._request(times, own, P)
        return self._publish(T, P, changed)

    def _ordered(self, base, slots):
        """:meth:`update` with the memory's order set, every beat a tile, the slot loop closed:
        the pushes are ``chain(max(grants + ready, room))``, which no longer depends on this
        update's steps (the memory grants them), and equals ``max(grants + ready, R)`` (``R``
        the room's chain): a client's requests come in order in the memory's order, so its
        grants rise by a cycle a request at least. The slots wait for these pushes, and the
        steps request their lines."""
        R = self.out.room_chain()
        self._ready = ready = self._grants() + self._extra
        P = np.maximum(ready, R)
        a = base.copy()
        dst, src = slots
        a[dst] = np.maximum(a[dst], self._freed(P, ready)[src])
        T = chain(a)
        changed = not same(T, self.T)
        self.T = T
        changed |= self._request(T + self.tm.grant_delay, None, P)
        return self._publish(T, P, changed)

    def busy(self):
        return self.busy_cycles


class ReaderActor(LoadActor):
    """A host input stream's :class:`~stepforge.hdl.beat_io.BeatReader`: a burst of ``nlines``
    memory lines for every beat (stop-only beats too), at most ``depth`` beats requested and not
    yet gone (beat ``k``'s request waits for beat ``k - depth`` to leave, and one cycle more: its
    credit returns at the clock edge), each beat ready ``mem_latency + reader_ready`` cycles
    after its last line's grant (it enters the reader's FIFO as the line arrives and leaves it
    the next cycle).

    **Speculative bursts.** The reader does not know where its stream ends: it keeps asking
    for the bursts after the last beat until that beat has arrived, and the memory grants
    every burst it was asked for (the bursts are read and dropped). It asks a burst per cycle
    while its memory port's queues have room, and a port holds :func:`port_bursts` bursts not
    yet granted (4 one-line bursts: the LineGenerator's two-entry request queue and two-entry
    line queue), so on a busy memory, when the last beat's line is granted, the port already
    holds that many bursts past it: ``spec = min(port_bursts, depth - 1, max_beats - n)``
    speculative bursts, requested a cycle apart after the last beat's (each also waiting for
    its credit: the beat ``depth`` before it to leave). On a busy memory they
    take one round-robin turn each (decode attention on one 8-byte channel: four readers' 16
    speculative lines, 10 % of the run; ``docs/perf.md`` section 2). Alone at the memory a
    reader may ask a few more (up to ``depth - 1``) before the last beat arrives; those are
    granted at once, and are not modelled."""

    slot_free = 1
    out_register = False

    def __init__(self, u, out, mem, tm):
        comp = u.component
        self.name, self.out, self.tm = u.name, out, tm
        out.src = self
        self.ref = self.ref_idx = None
        n = out.n
        self.has = np.ones(n, dtype=bool)
        self.data = np.arange(n)
        self.buf = comp.depth
        self.latency = comp.geometry.latency
        self.spec = speculative_bursts(comp, n)
        self.client = mem.client(self.name, "read", n + self.spec, comp.nlines)
        self.T = np.zeros(n, dtype=np.int64)
        self._ready = filled(n, NEG)
        self.busy_cycles = n * comp.nlines
        self.watch = [out, self.client]
        k = n + np.arange(self.spec) - self.buf          # the beat whose credit each one waits for
        self._credit = (k >= 0) & (k < n)
        self._credit_of = k[self._credit]
        self._after = np.arange(1, self.spec + 1)

    def _plan(self):
        super()._plan()
        self._extra = self.latency + self.tm.reader_ready
        self._closed_slots()

    def _grants(self):
        last = self.client.last
        return last[:self.out.n] if self.spec else last

    def _spec_times(self, times, P):
        """The speculative bursts' request times after the beats' ``times``: a cycle apart
        after the last beat's, each when its credit has returned (``P``: the beats' pushes)."""
        a = times[-1] + self._after if len(times) else self._after + self.tm.grant_delay - 1
        if self._credit.any() and P is not None and len(P):
            a = a.copy()
            a[self._credit] = np.maximum(a[self._credit], P[self._credit_of] + self.slot_free
                                         + self.tm.grant_delay)
        return chain(a)

    def _estimate(self, times):
        if not self.spec:
            return self.client.estimate(times)
        # the speculative bursts come after every beat's: they cannot hold a beat back
        return self.client.estimate(np.concatenate([times, self._spec_times(times, None)])
                                    )[:len(times)]

    def _request(self, times, own, P):
        if not self.spec:
            return self.client.request(times, own)
        full = np.concatenate([times, self._spec_times(times, P)])
        return self.client.request(full, None if own is None else self.client.grants(full))


def port_bursts(nlines):
    """Bursts of ``nlines`` lines a memory port holds before they are granted
    (:class:`~stepforge.hdl.memory.lines.LineGenerator`): its two-entry request queue and its
    two-entry line queue (2 one-line bursts, 1 burst of 2 lines, none whole of more)."""
    return 2 + 2 // max(int(nlines), 1)


def speculative_bursts(comp, n):
    """Speculative bursts a :class:`~stepforge.hdl.beat_io.BeatReader` of ``n`` beats asks
    for past its last beat on a busy memory (:class:`ReaderActor`)."""
    spec = min(port_bursts(comp.nlines), comp.depth - 1)
    if comp.max_beats is not None:
        spec = min(spec, comp.max_beats - n)
    return max(int(spec), 0)


class StoreActor(Actor):
    """A store unit: takes a beat per cycle, a tile's lines go to the memory as it enters; a few
    tiles may wait for their lines; done when the last line is written."""

    def __init__(self, u, ins, outs, mem, tm):
        self.name = u.name
        comp = u.component
        node = u.node
        self.x = ins["data"] if "data" in ins else ins["in0"]
        self.addr = ins.get("addr")
        for e in ins.values():
            e.dst = self
        self.ack = outs.get("ack")
        if self.ack is not None:
            self.ack.src = self
        n = self.x.n
        self.n = n
        self.data = np.nonzero(self.x.info.has.astype(bool))[0]
        lines = len(comp.placement.tile_lines)
        self.client = mem.client(self.name, "write", len(self.data), lines)
        self.tm, self.comp = tm, comp
        self.T = np.zeros(n, dtype=np.int64)
        self.finish = 0
        self.busy_cycles = len(self.data) * lines
        self.node = node
        self.addr_idx = (mapping_in(self.addr.n, n) if self.addr is not None and self.addr.n <= n
                         else None)
        self.watch = [e for e in (self.x, self.addr, self.ack) if e is not None] + [self.client]

    def update(self):
        n = self.n
        a = self.x.arrived + 1
        ai = self.addr_idx
        if ai is not None:
            m = ai >= 0
            a[m] = np.maximum(a[m], self.addr.arrived + 1)
        d = self.data
        client = self.client
        alone = client.memory.order is None
        done = client.done()
        k = np.arange(len(d)) - getattr(self.comp, "tile_queue", self.tm.store_queue)
        ok = k >= 0
        base = a
        for _ in range(LOCAL_ROUNDS):
            q = filled(len(d), NEG)
            q[ok] = done[k[ok]] + 1          # a tile's slot is free the cycle after it retires
            a = base.copy()
            a[d] = np.maximum(a[d], q)
            T = chain(a)
            times = T[d] + self.tm.grant_delay
            if not alone:
                break                   # the memory grants them, and updates this store after
            # alone at the memory, the grants are the store's own: its slots wait for them
            own = client.grants(times)
            if same(own, done):
                break
            done = own
        changed = not same(T, self.T)
        self.T = T
        changed |= client.request(times, done if alone else None)
        if not same(self.x.C, T):
            self.x.C = T.copy()
            changed = True
        if ai is not None:
            m = ai >= 0
            if not same(self.addr.C, T[m]):
                self.addr.C = T[m]
                changed = True
        if self.ack is not None:
            ready = T + 1
            ready[d] = done + 1
            idx = mapping_out(self.ack.n, n)
            m = idx >= 0
            P = chain(np.maximum(ready[m], self.ack.room()))
            if not same(self.ack.P, P):
                self.ack.P = P
                changed = True
        self.finish = int(max(T[-1] + 1, (done.max() + 1) if len(done) else 0))
        return changed

    def end(self):
        return self.finish

    def busy(self):
        return self.busy_cycles
