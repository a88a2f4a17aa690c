"""When a node circuit works: the step it issues, whether it is issued, and the pipeline enable."""

from amaranth.hdl import Cat, Const, Signal, Value

from ..mux import one_hot_mux

__all__ = ["Issue"]


class Issue:
    """When a node works: the step it issues and whether it is issued, and the pipeline enable.

    Parameters
    ----------
    step : amaranth.hdl.Value
        The PCU sequencer's step as the node sees it.
    valid : amaranth.hdl.Value
        The step is issued; it takes effect in a cycle where ``enable`` is high.
    data : amaranth.hdl.Value
        The step belongs to a data beat (a stop-only beat issues step 0 and no data).
    enable : amaranth.hdl.Value
        The pipeline moves: the clock enable of every pipeline register.
    family : str or None
        :func:`dsp_family` of the platform.
    reset : amaranth.hdl.Value, default 0
        The step is the last of a beat after which the accumulator restarts (Accum and Scan:
        a stop ``s >= b``).
    steps : int, optional
        How many steps there are (the PCU's ``ii``): a test that the step is one of them all is
        left out.
    onehot : amaranth.hdl.Value, optional
        ``steps`` bits, bit ``step`` set: multiplexers select with it (AND-OR, no decoder).
    """

    def __init__(self, step, valid, data, enable, family=None, reset=0, steps=None, onehot=None):
        self.step, self.valid, self.data = step, valid, data
        self.enable, self.family, self.reset, self.steps = enable, family, reset, steps
        self.onehot = onehot

    def select(self, m, out, choices):
        """Drive ``out`` with ``choices[step]`` (a dict of step to value; 0 in the other steps):
        an AND-OR multiplexer of the one-hot step when there is one."""
        if self.onehot is None:
            with m.Switch(self.step):
                for c, v in choices.items():
                    with m.Case(c):
                        m.d.comb += out.eq(v)
            return
        width = len(Value.cast(out))
        values = []
        for v in choices.values():
            v = Value.cast(v)
            fill = v[-1] if v.shape().signed else Const(0, 1)
            values.append(v[:width] if len(v) >= width else Cat(v, fill.replicate(width - len(v))))
        m.d.comb += out.eq(one_hot_mux(Cat(*(self.onehot[c] for c in choices)), values))

    def later(self, m, n, name):
        """The same issue ``n`` moves of the pipeline later: ``step``, ``valid``, ``data`` and
        ``reset`` through ``n`` registers (``valid`` resets to 0, the others have no reset)."""
        step, valid, data, reset, onehot = self.step, self.valid, self.data, self.reset, self.onehot
        for k in range(1, n + 1):
            s = Signal(Value.cast(step).shape(), name=f"{name}_step{k}", reset_less=True)
            v = Signal(name=f"{name}_valid{k}")
            d = Signal(name=f"{name}_data{k}", reset_less=True)
            r = Signal(name=f"{name}_reset{k}", reset_less=True)
            with m.If(self.enable):
                m.d.sync += [s.eq(step), v.eq(valid), d.eq(data), r.eq(reset)]
            if onehot is not None:
                h = Signal(len(onehot), name=f"{name}_onehot{k}", reset_less=True)
                with m.If(self.enable):
                    m.d.sync += h.eq(onehot)
                onehot = h
            step, valid, data, reset = s, v, d, r
        return Issue(step, valid, data, self.enable, self.family, reset, self.steps, onehot)

    def has(self, steps):
        """The step is one of ``steps``."""
        steps = sorted(steps)
        if self.steps is not None and steps == list(range(self.steps)):
            return Const(1)
        if steps == list(range(steps[0], steps[-1] + 1)):
            return (self.step >= steps[0]) & (self.step <= steps[-1])
        return Cat(*(self.step == c for c in steps)).any()

    def active(self, steps):
        """The step is issued (or written) now and is one of ``steps``."""
        return self.enable & self.valid & self.has(steps)
