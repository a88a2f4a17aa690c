"""A round-robin arbiter: one grant per cycle among the requesters, fair over time; and the
AND-OR that steers by its one-hot grant."""

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .geometry import check_count, index_shape

__all__ = ["RoundRobin", "select_onehot"]


def select_onehot(values, onehot):
    """The value whose bit of ``onehot`` is set (at most one is), as an AND-OR: two LUT levels
    for a handful of values, where a multiplexer by a binary index follows the index's own
    logic."""
    values = [Value.cast(v) for v in values]
    if all(v is values[0] for v in values):
        return values[0]
    result = Mux(onehot[0], values[0], 0)
    for c in range(1, len(values)):
        result = result | Mux(onehot[c], values[c], 0)
    return result


class RoundRobin(wiring.Component):
    """Grant one of ``n`` requesters per cycle, starting the search after the last one granted.

    The grant is combinational from ``requests`` and ``enable`` (and the registered last grant),
    so a requester granted in a cycle can be granted again in the next only if no other
    requester is waiting.

    Parameters
    ----------
    n : int
        Requesters (``>= 1``).

    Members
    -------
    requests : ``In(n)``
        Requester ``i`` wants a grant.
    enable : ``In(1)``
        Grant nothing in a cycle where it is low.
    grant : ``Out(1)``
        A requester is granted this cycle.
    index : ``Out(range(n))``
        Which one (the choice's index, whatever ``enable``: meaningful with ``grant``).
    onehot : ``Out(n)``
        The same grant, one bit per requester (no decoding of ``index`` on the paths that
        steer by it).
    choice : ``Out(n)``
        The requester that is granted when ``enable`` is high, one bit per requester, whatever
        ``enable``: a multiplexer that only matters in a granted cycle steers by it and stays
        off ``enable``'s path.
    """

    def __init__(self, n):
        self.n = check_count("RoundRobin n", n, 1)
        super().__init__({"requests": In(n), "enable": In(1), "grant": Out(1),
                          "index": Out(index_shape(n)), "onehot": Out(n), "choice": Out(n)})

    def __repr__(self):
        return f"RoundRobin({self.n})"

    def elaborate(self, platform):
        m = Module()
        n = self.n
        last = Signal(index_shape(n), init=n - 1, name="last_grant")
        with m.Switch(last):
            for p in range(n):
                with (m.Case(p) if p < n - 1 else m.Default()):
                    order = [(p + k) % n for k in range(1, n + 1)]
                    with m.If(self.requests[order[0]]):
                        m.d.comb += [self.index.eq(order[0]), self.choice[order[0]].eq(1)]
                    for c in order[1:]:
                        with m.Elif(self.requests[c]):
                            m.d.comb += [self.index.eq(c), self.choice[c].eq(1)]
        with m.If(self.enable):
            m.d.comb += [self.grant.eq(self.requests.any()), self.onehot.eq(self.choice)]
        with m.If(self.grant):
            m.d.sync += last.eq(self.index)
        return m
