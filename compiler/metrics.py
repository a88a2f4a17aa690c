"""Symbolic metrics of a program (spec section 5) and their substitution from a trace.

Each node reports its own off-chip traffic, on-chip memory and FLOPs as SymPy expressions of the
program's symbols; :func:`metrics` sums them. A *trace* maps symbols to observed values (the
reference interpreter produces one: :attr:`stepforge.sim.ref.interpreter.Result.trace`, or a user
supplies one as JSON); :func:`bind` turns it into a substitution:

* a dynamic-regular symbol must have one value everywhere (a trace that disagrees is an error);
* a ragged symbol is replaced by its largest observed value (a bound, used for memory);
* a ``count`` symbol (elements of one ragged stream) by its observed count.
"""

from dataclasses import dataclass, field

import sympy

from .dims import norm_dim

__all__ = ["Metrics", "metrics", "bind", "evaluate"]


def _sum(values):
    total = sympy.Integer(0)
    for v in values:
        total = total + sympy.sympify(v)
    return norm_dim(sympy.simplify(total)) if not isinstance(total, sympy.Integer) else int(total)


@dataclass
class Metrics:
    """Symbolic totals and their per-node terms.

    Attributes
    ----------
    offchip_read, offchip_write, onchip, flops : int or sympy.Expr
    per_node : dict of str to dict
        ``{node name: {"offchip_read": ..., "offchip_write": ..., "onchip": ..., "flops": ...}}``,
        only nodes with a non-zero term.
    """
    offchip_read: object
    offchip_write: object
    onchip: object
    flops: object
    per_node: dict = field(default_factory=dict)

    @property
    def offchip(self):
        return _sum([self.offchip_read, self.offchip_write])

    def subs(self, values):
        """The same metrics with ``values`` substituted (see :func:`bind`)."""
        def s(e):
            return evaluate(e, values)
        return Metrics(s(self.offchip_read), s(self.offchip_write), s(self.onchip), s(self.flops),
                       {n: {k: s(v) for k, v in d.items()} for n, d in self.per_node.items()})


def metrics(program):
    """Sum every node's symbolic metrics (a program with an unbound feedback is refused)."""
    from .ops.feedback import check_bound  # ops import metrics' dims; deferred like graph's
    check_bound(program)
    per_node = {}
    cols = {"offchip_read": [], "offchip_write": [], "onchip": [], "flops": []}
    for node in program.nodes:
        terms = {
            "offchip_read": node.offchip_read_bytes(),
            "offchip_write": node.offchip_write_bytes(),
            "onchip": node.onchip_bytes(),
            "flops": node.flops(),
        }
        terms = {k: norm_dim(v) for k, v in terms.items()}
        if any(v != 0 for v in terms.values()):
            per_node[node.name] = terms
        for k, v in terms.items():
            cols[k].append(v)
    return Metrics(_sum(cols["offchip_read"]), _sum(cols["offchip_write"]), _sum(cols["onchip"]),
                   _sum(cols["flops"]), per_node)


def bind(program, trace):
    """A substitution ``{symbol: int}`` from a trace ``{symbol or name: value or list of values}``."""
    table = program.symbols
    by_name = {str(s): s for s in table}
    values = {}
    for key, observed in trace.items():
        sym = by_name.get(str(key))
        if sym is None:
            raise KeyError(f"the trace names {key!r}, which is not a symbol of {program.name}")
        obs = list(observed) if isinstance(observed, (list, tuple)) else [observed]
        if not obs:
            continue
        kind = table.info(sym).kind
        if kind == "dynamic":
            if len(set(obs)) != 1:
                raise ValueError(f"dynamic symbol {sym} has several values in the trace: "
                                 f"{sorted(set(obs))} (declare it ragged=True?)")
            values[sym] = int(obs[0])
        elif kind == "count":
            values[sym] = int(sum(obs)) if len(obs) > 1 else int(obs[0])
        else:
            values[sym] = int(max(obs))
    return values


def evaluate(expr, values):
    """``expr`` with ``values`` substituted: an ``int`` when every symbol is bound."""
    expr = norm_dim(expr)
    if isinstance(expr, int):
        return expr
    out = expr.subs(values)
    out = sympy.simplify(out)
    return int(out) if out.is_Integer else out
