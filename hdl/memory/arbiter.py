"""A round-robin arbiter: one grant per cycle among the requesters, fair over time."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .geometry import check_count, index_shape

__all__ = ["RoundRobin"]


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
        Which one.
    onehot : ``Out(n)``
        The same grant, one bit per requester (no decoding of ``index`` on the paths that
        steer by it).
    """

    def __init__(self, n):
        self.n = check_count("RoundRobin n", n, 1)
        super().__init__({"requests": In(n), "enable": In(1), "grant": Out(1),
                          "index": Out(index_shape(n)), "onehot": Out(n)})

    def __repr__(self):
        return f"RoundRobin({self.n})"

    def elaborate(self, platform):
        m = Module()
        n = self.n
        last = Signal(index_shape(n), init=n - 1, name="last_grant")
        with m.If(self.enable):
            with m.Switch(last):
                for p in range(n):
                    with (m.Case(p) if p < n - 1 else m.Default()):
                        order = [(p + k) % n for k in range(1, n + 1)]
                        with m.If(self.requests[order[0]]):
                            m.d.comb += [self.grant.eq(1), self.index.eq(order[0]),
                                         self.onehot[order[0]].eq(1)]
                        for c in order[1:]:
                            with m.Elif(self.requests[c]):
                                m.d.comb += [self.grant.eq(1), self.index.eq(c),
                                             self.onehot[c].eq(1)]
        with m.If(self.grant):
            m.d.sync += last.eq(self.index)
        return m
