"""A cycle-by-cycle record of a unit's handshakes, for timing bounds and status definitions.

:func:`trace` feeds every input port its beats, drives every ``valid`` and ``ready`` from
fixed per-cycle patterns (:func:`pattern`, seeded, known to the test in advance) and records,
for every cycle, each port's ``valid``, ``ready`` and transfer and the unit's status. Unlike
:func:`stepforge.sim.rtl.testbench.simulate`, the back-pressure is a table the test can reason
about: a timing bound is computed from the very ``ready`` pattern the unit saw.
"""

import random

from amaranth.hdl import Module, Signal, Value
from amaranth.sim import Simulator

from stepforge.contract.beat import pack_beat, unpack_beat
from stepforge.contract.tokens import to_beats

__all__ = ["pattern", "Trace", "trace"]


def pattern(p, seed, cycles):
    """``cycles`` booleans, each ``True`` with probability ``p`` (seeded)."""
    rng = random.Random(seed)
    return [rng.random() < p for _ in range(cycles)]


class Trace:
    """What :func:`trace` saw.

    Attributes
    ----------
    cycles : int
        Cycles simulated.
    valid, ready, fire : dict of str to list of bool
        Per port, per cycle.
    taken : dict of str to list of int
        Per input port, the cycles its beats were taken.
    beats : dict of str to list of (int, Beat)
        Per output port, the cycle and beat of every transfer.
    status : dict of str to list of int
        ``busy``, ``stall_in``, ``stall_out``, ``error`` per cycle.
    left : dict of str to list of int
        Per input port, per cycle: beats not yet taken (at the start of the cycle).
    """

    def __init__(self, ports):
        self.cycles = 0
        self.valid = {n: [] for n in ports}
        self.ready = {n: [] for n in ports}
        self.fire = {n: [] for n in ports}
        self.taken, self.beats, self.left = {}, {}, {}
        self.status = {k: [] for k in ("busy", "stall_in", "stall_out", "error")}

    def last_cycle(self, port):
        """The cycle of ``port``'s last transfer."""
        return max(c for c, f in enumerate(self.fire[port]) if f)


def trace(dut, inputs, outputs, *, valid=None, ready=None, max_cycles=2000, tail=4):
    """Run ``dut`` with fixed ``valid``/``ready`` patterns and record every handshake.

    Parameters
    ----------
    dut : Component
    inputs : dict of str to (layout, tokens or list of Beat)
        Each input port's beats (the tokens' canonical beats, or beats as given).
    outputs : dict of str to layout
    valid, ready : dict of str to list of bool, optional
        Per port, per cycle: the producer offers its next beat (once offered, a beat stays
        offered until taken, as the stream rules want) / the consumer is ready. Missing ports or
        cycles beyond a list: always.
    max_cycles : int
        Give up (``AssertionError``) without every output's ``last`` by then.
    tail : int
        Cycles recorded after the last output has sent ``last``.

    Returns
    -------
    Trace
    """
    valid, ready = valid or {}, ready or {}
    feeds = {n: [pack_beat(lay, b) for b in (toks if toks and hasattr(toks[0], "last")
                                               else to_beats(toks))]
             for n, (lay, toks) in inputs.items()}
    ports = list(inputs) + list(outputs)
    tr = Trace(ports)
    tr.taken = {n: [] for n in inputs}
    tr.beats = {n: [] for n in outputs}
    tr.left = {n: [] for n in inputs}

    def on(table, n, cycle):
        pat = table.get(n)
        return True if pat is None or cycle >= len(pat) else pat[cycle]

    async def bench(ctx):
        sent = {n: 0 for n in inputs}
        holding = {n: False for n in inputs}
        ended, after = set(), None
        for cycle in range(max_cycles):
            for n in inputs:
                port = getattr(dut, n)
                more = sent[n] < len(feeds[n])
                v = more and (holding[n] or on(valid, n, cycle))
                holding[n] = v
                ctx.set(port.valid, v)
                ctx.set(Value.cast(port.payload), feeds[n][sent[n]] if v else 0)
                tr.left[n].append(len(feeds[n]) - sent[n])
            for n in outputs:
                ctx.set(getattr(dut, n).ready, on(ready, n, cycle))
            for n in ports:
                port = getattr(dut, n)
                v, r = bool(ctx.get(port.valid)), bool(ctx.get(port.ready))
                tr.valid[n].append(v)
                tr.ready[n].append(r)
                tr.fire[n].append(v and r)
            for k in tr.status:
                tr.status[k].append(int(ctx.get(getattr(dut.status, k))))
            for n, lay in outputs.items():
                if tr.fire[n][-1]:
                    beat = unpack_beat(lay, ctx.get(Value.cast(getattr(dut, n).payload)))
                    tr.beats[n].append((cycle, beat))
                    if beat.last:
                        ended.add(n)
            for n in inputs:
                if tr.fire[n][-1]:
                    tr.taken[n].append(cycle)
            await ctx.tick()
            for n in inputs:
                if tr.fire[n][cycle]:
                    sent[n] += 1
                    holding[n] = False
            tr.cycles = cycle + 1
            if after is None and len(ended) == len(outputs):
                after = cycle
            if after is not None and cycle - after >= tail:
                return
        raise AssertionError(f"no last on every output after {max_cycles} cycles: {ended}")

    top = Module()
    top.submodules.dut = dut
    heartbeat = Signal(name="heartbeat")  # a sync domain even for a combinational unit
    top.d.sync += heartbeat.eq(~heartbeat)
    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return tr
