"""Driving off-chip units together with a memory model in Amaranth's simulator.

:class:`MemoryBench` wires one or more units' ``mem`` ports to a
:class:`~stepforge.hdl.memory.MemoryModel` (read ports in order to ``read[0], read[1], ...``, write
ports to ``write[0], ...``) and drives the memory's ``stall`` input from a 16-bit LFSR, so random
memory stalls cost no Python per cycle and the same bench converts to Verilog. Its stream ports
and ``status`` are those of the units (looked up by name, first unit first), so
:func:`~stepforge.sim.rtl.testbench.simulate` drives it like a bare unit. :func:`simulate_with_memory`
does that, waits for a sink's ``done``, and reads back the memory contents and traffic counters
through the simulator's back door.
"""

from amaranth.hdl import Const, Elaboratable, Fragment, Module, Mux, Signal
from amaranth.lib import wiring

from ...hdl.memory import MemoryModel, backdoor_read
from .testbench import simulate

__all__ = ["MemoryBench", "simulate_with_memory"]


class MemoryBench(Elaboratable):
    """Units connected to a memory model, with random memory stalls.

    Parameters
    ----------
    units : wiring.Component or list of wiring.Component
        Units with a ``mem`` port of :class:`~stepforge.hdl.memory.MemoryPort`.
    memory : MemoryModel
        Its first read ports and first write ports are those of the units, in order
        (:meth:`MemoryModel.for_clients <stepforge.hdl.memory.MemoryModel.for_clients>` builds
        one); ``ValueError`` otherwise.
    stall_p : float, default 0
        Probability (in 1/256 steps) that the memory is stalled in a cycle.
    seed : int, default 1
        LFSR seed (non-zero after masking to 16 bits).
    platform : object, optional
        Elaborate the units for this platform (a :class:`~stepforge.hdl.platform.FamilyPlatform`):
        the forms a board build gives them, where those simulate (the memory stays as it is).

    Attributes
    ----------
    stall : Signal
        The memory's ``stall`` input as driven by the LFSR.
    done : Signal
        High when every unit that has a ``done`` output has it high (constantly high if none has).
    """

    def __init__(self, units, memory, *, stall_p=0.0, seed=1, platform=None):
        units = list(units) if isinstance(units, (list, tuple)) else [units]
        if not isinstance(memory, MemoryModel):
            raise TypeError(f"expected a MemoryModel, not {memory!r}")
        for kind, have in (("read", memory.read), ("write", memory.write)):
            need = [u.mem.signature for u in units if u.mem.signature.kind == kind]
            if need != [p.signature.flip() for p in have[:len(need)]]:
                raise ValueError(
                    f"the units' {kind} ports (bursts {[s.burst for s in need]}) are not the "
                    f"first {kind} ports of the memory (bursts "
                    f"{[p.signature.flip().burst for p in have]}, geometry {memory.geometry!r}); "
                    f"build it with MemoryModel.for_clients")
        if not 0.0 <= stall_p <= 1.0:
            raise ValueError(f"stall_p must be in [0, 1], not {stall_p!r}")
        self.units, self.memory, self.platform = units, memory, platform
        self.threshold = round(stall_p * 256)
        self.seed = (seed & 0xFFFF) or 1
        self.stall = Signal(name="bench_stall")
        self.done = Signal(name="bench_done")
        self.has_done = any(hasattr(u, "done") for u in units)

    def __getattr__(self, name):
        if name.startswith("_") or name in ("units", "memory", "platform"):
            raise AttributeError(name)
        for u in self.units:
            if hasattr(u, name):
                return getattr(u, name)
        raise AttributeError(f"no unit of the bench has a port {name!r}")

    def elaborate(self, platform):
        m = Module()
        m.submodules.memory = mem = self.memory
        nread = nwrite = 0
        done = Const(1)
        for i, u in enumerate(self.units):
            m.submodules[f"unit{i}"] = u if self.platform is None else _ForPlatform(u, self.platform)
            if u.mem.signature.kind == "read":
                wiring.connect(m, u.mem, mem.read[nread])
                nread += 1
            else:
                wiring.connect(m, u.mem, mem.write[nwrite])
                nwrite += 1
            if hasattr(u, "done"):
                done = done & u.done
        # Galois LFSR x^16 + x^14 + x^13 + x^11 + 1: a new pseudo-random byte every cycle.
        lfsr = Signal(16, init=self.seed, name="stall_lfsr")
        m.d.sync += lfsr.eq(Mux(lfsr[0], (lfsr >> 1) ^ 0xB400, lfsr >> 1))
        m.d.comb += [self.stall.eq(lfsr[:8] < self.threshold), mem.stall.eq(self.stall),
                     self.done.eq(done)]
        return m


class _ForPlatform(Elaboratable):
    """``unit`` elaborated for ``platform`` (its ports stay the unit's own)."""

    def __init__(self, unit, platform):
        self.unit, self.platform = unit, platform

    def elaborate(self, platform):
        return Fragment.get(self.unit, self.platform)


def simulate_with_memory(units, memory, inputs, outputs, *, stall_p=0.0, stall_seed=1,
                         read_back=True, platform=None, **kwargs):
    """:func:`~stepforge.sim.rtl.testbench.simulate` of ``units`` wired to ``memory``.

    Parameters
    ----------
    units, memory, stall_p
        As for :class:`MemoryBench` (``stall_seed`` is its ``seed``).
    inputs, outputs, **kwargs
        As for :func:`~stepforge.sim.rtl.testbench.simulate`. When a unit has a ``done`` output (the
        LinearStoreUnit) and ``wait_for`` is not given, the run ends when every ``done`` is high
        (``outputs`` must then be empty).
    read_back : bool, default True
        Read the whole memory after the run.
    platform : object, optional
        As for :class:`MemoryBench`.

    Returns
    -------
    SimRun
        ``inspected`` is a dict with ``bytes_read``, ``bytes_written`` and (with ``read_back``)
        ``memory``: the contents as bytes from address 0, all read ``mem_latency`` cycles after
        the run's end (every line granted by then has reached the storage and the counters).
    """
    bench = MemoryBench(units, memory, stall_p=stall_p, seed=stall_seed, platform=platform)
    if "wait_for" not in kwargs and bench.has_done:
        if outputs:
            raise ValueError("units with a done output end the run on done; collect outputs "
                             "from them in a separate run or pass wait_for=")
        kwargs["wait_for"] = bench.done

    async def inspect(ctx):
        # a write line reaches the storage the cycle after its grant (the memory's stage S), so
        # a unit's `done` may rise before its last write is in storage: let the pipeline drain
        for _ in range(memory.geometry.latency):
            await ctx.tick()
        out = {"bytes_read": int(ctx.get(memory.bytes_read)),
               "bytes_written": int(ctx.get(memory.bytes_written))}
        if read_back:
            out["memory"] = backdoor_read(ctx, memory, 0, memory.geometry.size_words)
        return out

    return simulate(bench, inputs, outputs, inspect=inspect, **kwargs)
