"""The PCU's datapath at elaboration: its arguments read from the input ports, accumulator
registers, each node's last step, and every node built in the order of the function."""

from amaranth.hdl import Signal

from ...compiler.types import Tuple
from ..tile_ops import HTile
from .checks import _is_dynamic

__all__ = []


class _Datapath:
    """The datapath half of :meth:`PCU.elaborate <stepforge.hdl.pcu.PCU.elaborate>` (a mixin)."""

    def _port_values(self):
        """The stream arguments as hardware values read in place from the input ports, and the
        ``rows`` fields of the inputs' dynamic tiles."""
        counts = []

        def value(t, view):
            if isinstance(t, Tuple):
                return tuple(value(f, view[f"f{i}"]) for i, f in enumerate(t.elems))
            if _is_dynamic(t):
                counts.append(view.rows)
                view = view.data
            return HTile(t.dtype, [[view[i][j] for j in range(t.cols)]
                                   for i in range(self._rows(t))])
        vals = [value(t, getattr(self, f"in{k}").payload.data) for k, t in enumerate(self.in_types)]
        if self.unpack and len(self.in_types) == 1:
            return list(vals[0]), counts
        return vals, counts

    def _node_end(self, m, node):
        """The last step of ``node`` for this beat: static, or looked up from the row count."""
        last = node.start + node.steps - 1
        if self._count is None or not node.dynamic:
            return last
        end = Signal(range(max(self.ii, 2)), name=f"{node.name}_end")
        with m.Switch(self._count):
            for r in range(self.dyn_bound + 1):
                with m.Case(r):
                    m.d.comb += end.eq(node.start + node.steps_for(r) - 1)
            with m.Default():
                m.d.comb += end.eq(last)
        return end

    def _signals(self, init, name):
        """Accumulator registers whose reset value is ``init``."""
        if isinstance(init.type, Tuple):
            return tuple(self._signals(f, f"{name}_f{i}") for i, f in enumerate(init.fill))
        t = init.type
        return HTile.signals(t.dtype, t.rows, t.cols, name, init=int(init.fill))

    def _init_values(self, init):
        if isinstance(init.type, Tuple):
            return tuple(self._init_values(f) for f in init.fill)
        t = init.type
        return HTile.const(t.dtype, int(init.fill), t.rows, t.cols)

    def _elaborate_graph(self, m, issue, args, acc_regs):
        """Build every node, each issuing its steps :attr:`_delay` pipeline moves after
        ``issue`` (the sequencer's); return the function's value as seen at the output stage
        (a merged ``mac`` adds into ``acc_regs``)."""
        timed = [e for e in self._order if id(e) in self._nodes]
        index = {id(e): k for k, e in enumerate(timed)}
        last = timed[-1] if timed else None
        delayed = [issue]
        for d in range(1, max(self._delay.values(), default=0) + 1):
            delayed.append(delayed[-1].later(m, 1, f"issue_d{d}"))
        values, final_values = {}, {}
        for e in self._order:
            if e.op == "arg":
                v = args[e.attrs["index"]]
                values[id(e)] = final_values[id(e)] = v
            elif e.op == "const":
                values[id(e)] = final_values[id(e)] = e.attrs["value"]
            elif e.op == "get":
                values[id(e)] = values[id(e.args[0])][e.attrs["index"]]
                final_values[id(e)] = final_values[id(e.args[0])][e.attrs["index"]]
            elif e.op == "tuple":
                values[id(e)] = tuple(values[id(a)] for a in e.args)
                final_values[id(e)] = tuple(final_values[id(a)] for a in e.args)
            else:
                node = self._nodes[id(e)]
                if id(e) in self._fused:
                    x, mm = self._fused[id(e)]
                    operands = [values[id(x)]] + [values[id(a)] for a in mm.args]
                else:
                    operands = [values[id(a)] for a in e.args]
                keep = not (e is last and node.steps == 1)
                extra = {}
                if id(e) == self._merged:
                    extra["acc_init"] = acc_regs
                    if self.fold_bound is not None:   # (a Tile accumulator of one fill value)
                        extra["acc_bits"] = node.accumulator_bits(self.fold_bound,
                                                                  int(self.init.fill))
                delay = self._delay[id(e)]
                if node.early_inputs and delay:
                    flags = [self._sources(a, index) == {"input"} for a in e.args]
                    extra["early"] = (issue, delay, flags)
                nxt = node.elaborate(m, delayed[self._delay[id(e)]], operands, start=node.start,
                                     keep_reg=keep, **extra)
                values[id(e)] = node.reg
                final_values[id(e)] = nxt if e is last else node.reg
        return final_values[id(self.fn.body)]
