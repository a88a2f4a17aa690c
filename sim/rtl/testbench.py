"""Driving a unit in Amaranth's simulator with token streams, under random valid/ready patterns.

:func:`simulate` feeds every input port the canonical beats of a token list, takes the beats of
every output port until each has sent ``last``, and returns their token lists, the cycle count and
the unit's final status. Producers idle and consumers stall at random (seeded) so that each unit is
proven under back-pressure; with ``valid_p = ready_p = 1`` it measures throughput. Every cycle the
stream rules are checked on every port: a valid beat stays valid and unchanged until it is taken.
A run in which nothing moves for ``idle_limit`` cycles stops with :class:`Stall`, naming the ports
that wait, instead of hanging.
"""

import random

from amaranth.hdl import Module, Signal, Value
from amaranth.sim import Simulator

from ...contract.beat import pack_beat, unpack_beat
from ...contract.tokens import Beat, from_beats, to_beats

__all__ = ["Stall", "SimRun", "simulate", "check_ready_to_valid"]


class Stall(AssertionError):
    """Nothing moved for too long: the unit is deadlocked or waits for a beat that never comes."""


class SimRun:
    """The outcome of :func:`simulate`.

    Attributes
    ----------
    outputs : dict of str to list
        Token list received on each output port.
    beats : dict of str to list of Beat
        The raw beats received on each output port.
    payloads : dict of str to list of int
        The payload bits of those beats (padding included, e.g. a dynamic tile's rows beyond
        its count).
    cycles : int
        Cycles from the first to the last transfer.
    accepted : dict of str to int
        Beats accepted on each input port.
    error, code : int
        The unit's final ``status.error`` and ``status.code``.
    status_counts : dict of str to int
        Cycles in which ``busy``, ``stall_in`` and ``stall_out`` were high.
    inspected : object
        What the ``inspect`` function of :func:`simulate` returned (``None`` without one).
    """

    def __init__(self):
        self.outputs, self.beats, self.payloads, self.accepted = {}, {}, {}, {}
        self.cycles = 0
        self.error = self.code = 0
        self.status_counts = {"busy": 0, "stall_in": 0, "stall_out": 0}
        self.inspected = None


def simulate(dut, inputs, outputs, *, valid_p=1.0, ready_p=1.0, seed=0, max_cycles=20000,
             idle_limit=200, stop_on_error=True, vcd=None, wait_for=None, inspect=None):
    """Run ``dut`` on token streams.

    Parameters
    ----------
    dut : amaranth.lib.wiring.Component
        The unit; every name in ``inputs`` and ``outputs`` is one of its stream ports.
    inputs : dict of str to (layout, tokens)
        Beat layout and token list of every input port. The tokens are fed as their canonical
        beats; a non-empty list of :class:`~stepforge.contract.tokens.Beat` is fed as is instead (a
        hand-made framing: a bare ``Done``, a stop in its own beat).
    outputs : dict of str to layout
        Beat layout of every output port to collect.
    valid_p, ready_p : float
        Probability that a producer offers its next beat / a consumer is ready in a cycle.
    seed : int
        Seeds the valid/ready patterns.
    max_cycles, idle_limit : int
        Give up (raise :class:`Stall`) after this many cycles in all, or without any transfer.
    stop_on_error : bool
        End the run as soon as ``status.error`` rises (the unit stops accepting input then).
    wait_for : amaranth.hdl.Value, optional
        End the run when this is high instead of when every output has sent ``last`` (e.g. a
        sink's ``done``, or ``error & ~busy`` to let a failing unit drain); the cycle in which it
        rises counts as the run's last cycle.
    inspect : async function of the testbench context, optional
        Called once after the run (e.g. to read a memory model through its back door); its
        return value is :attr:`SimRun.inspected`.

    Returns
    -------
    SimRun
    """
    rng = random.Random(seed)
    run = SimRun()
    feeds = {name: [pack_beat(layout, b) for b in _beats(tokens)] for name, (layout, tokens) in inputs.items()}
    ins = {name: getattr(dut, name) for name in inputs}
    outs = {name: getattr(dut, name) for name in outputs}
    in_payload = {n: Value.cast(p.payload) for n, p in ins.items()}
    out_payload = {n: Value.cast(p.payload) for n, p in outs.items()}
    status = getattr(dut, "status", None)

    async def bench(ctx):
        sent = {n: 0 for n in ins}
        got = {n: [] for n in outs}
        raw = {n: [] for n in outs}
        done = {n: False for n in outs}
        holding = {n: False for n in ins}
        offered = {n: None for n in outs}
        idle = first = last = 0
        for cycle in range(max_cycles):
            if wait_for is not None:
                if ctx.get(wait_for):
                    last = cycle
                    break
            elif all(done.values()):
                break
            if stop_on_error and status is not None and ctx.get(status.error):
                break
            for n, port in ins.items():
                more = sent[n] < len(feeds[n])
                valid = more and (holding[n] or rng.random() < valid_p)
                holding[n] = valid  # until it is taken (below)
                ctx.set(port.valid, valid)
                ctx.set(in_payload[n], feeds[n][sent[n]] if valid else 0)
            readies = {}
            for n, port in outs.items():
                readies[n] = not done[n] and rng.random() < ready_p
                ctx.set(port.ready, readies[n])
            moved = False
            pushes, pops = {}, {}
            for n, port in ins.items():
                pushes[n] = bool(ctx.get(port.valid)) and bool(ctx.get(port.ready))
            for n, port in outs.items():
                v = bool(ctx.get(port.valid))
                payload = ctx.get(out_payload[n])
                if offered[n] is not None:
                    assert v and payload == offered[n], (
                        f"port {n}: a valid beat changed or vanished before it was taken (cycle {cycle})")
                pops[n] = v and readies[n]
                offered[n] = payload if (v and not readies[n]) else None
                if pops[n]:
                    got[n].append(unpack_beat(outputs[n], payload))
                    raw[n].append(payload)
            if status is not None:
                for k in run.status_counts:
                    run.status_counts[k] += int(ctx.get(getattr(status, k)))
            await ctx.tick()
            for n in ins:
                holding[n] = holding[n] and not pushes[n]
                if pushes[n]:
                    sent[n] += 1
                    moved = True
            for n in outs:
                if pops[n]:
                    moved = True
                    if got[n][-1].last:
                        done[n] = True
            if moved:
                idle = 0
                first = first or cycle + 1
                last = cycle + 1
            else:
                idle += 1
                if idle >= idle_limit:
                    waiting_in = [n for n in ins if sent[n] < len(feeds[n])]
                    waiting_out = [n for n in outs if not done[n]]
                    raise Stall(f"nothing moved for {idle_limit} cycles; inputs with beats left: "
                                f"{waiting_in}, outputs without last: {waiting_out}, "
                                f"sent {sent}, received { {n: len(g) for n, g in got.items()} }")
        else:
            raise Stall(f"no end after {max_cycles} cycles")
        run.cycles = last - first + 1 if last else 0
        run.accepted = dict(sent)
        for n in outs:
            run.beats[n] = got[n]
            run.payloads[n] = raw[n]
            if done[n]:
                run.outputs[n] = from_beats(got[n])
        if status is not None:
            run.error, run.code = int(ctx.get(status.error)), int(ctx.get(status.code))
        if inspect is not None:
            run.inspected = await inspect(ctx)

    sim = Simulator(_with_clock(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
    return run


def check_ready_to_valid(dut, inputs, outputs, cycles=50, seed=0):
    """Assert that no output's ``valid`` depends combinationally on its own ``ready``.

    Feeds the inputs as :func:`simulate` does and, every cycle, flips each output's ``ready`` and
    checks that its ``valid`` and payload do not change (stream rule 3: valid must not wait on
    ready).
    """
    rng = random.Random(seed)
    feeds = {name: [pack_beat(layout, b) for b in _beats(tokens)] for name, (layout, tokens) in inputs.items()}
    ins = {name: getattr(dut, name) for name in inputs}
    outs = {name: getattr(dut, name) for name in outputs}

    async def bench(ctx):
        sent = {n: 0 for n in ins}
        for _ in range(cycles):
            for n, port in ins.items():
                valid = sent[n] < len(feeds[n])
                ctx.set(port.valid, valid)
                ctx.set(Value.cast(port.payload), feeds[n][sent[n]] if valid else 0)
            for n, port in outs.items():
                ctx.set(port.ready, 0)
                v0, p0 = ctx.get(port.valid), ctx.get(Value.cast(port.payload))
                ctx.set(port.ready, 1)
                v1, p1 = ctx.get(port.valid), ctx.get(Value.cast(port.payload))
                assert v0 == v1 and (not v0 or p0 == p1), f"output {n}: valid or payload follows ready"
                ctx.set(port.ready, rng.random() < 0.5)
            pushes = {n: ctx.get(p.valid) and ctx.get(p.ready) for n, p in ins.items()}
            await ctx.tick()
            for n in ins:
                sent[n] += int(bool(pushes[n]))

    sim = Simulator(_with_clock(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def _beats(tokens):
    """The beats to feed for ``tokens``: a list of Beat as is, else the canonical beats."""
    if tokens and all(isinstance(t, Beat) for t in tokens):
        return list(tokens)
    return to_beats(tokens)


def _with_clock(dut):
    """``dut`` inside a module that surely has a ``sync`` domain (a combinational unit has none)."""
    top = Module()
    top.submodules.dut = dut
    heartbeat = Signal(name="heartbeat")
    top.d.sync += heartbeat.eq(~heartbeat)
    return top
