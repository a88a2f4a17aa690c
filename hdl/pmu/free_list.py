"""The free list of a PMU: the blocks no buffer holds, as a FIFO of block numbers."""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from .interfaces import AllocSignature, FreeSignature

__all__ = ["FreeList"]


class FreeList(wiring.Component):
    """The free blocks of a PMU in a memory initialised to ``0 .. blocks-1``.

    A pop takes the head block in the cycle it is popped (an asynchronous read of the head
    slot); a pushed block is the head one cycle later if the list was empty.

    Parameters
    ----------
    params : stepforge.hdl.pmu.params.PMUParams
        The PMU's parameters (``blocks``).

    Members
    -------
    alloc : ``In(AllocSignature(params))``
        ``head``: the next free block; ``count``: free blocks (``nonempty``: not 0, a
        register); ``pop``: take the head.
    free : ``In(FreeSignature(params))``
        A block going back to the list (one per cycle, always taken).
    """

    def __init__(self, params):
        self.params = params
        super().__init__({"alloc": In(AllocSignature(params)), "free": In(FreeSignature(params))})

    def __repr__(self):
        return f"FreeList({self.params!r})"

    def elaborate(self, platform):
        m = Module()
        nblocks = self.params.blocks
        m.submodules.free_mem = free_mem = Memory(shape=unsigned(self.params.id_width),
                                                  depth=max(nblocks, 2), init=list(range(nblocks)))
        free_wr = free_mem.write_port()
        free_rd = free_mem.read_port(domain="comb")

        count = Signal(range(nblocks + 1), init=nblocks, name="free_count")
        rptr = Signal(range(max(nblocks, 2)), name="free_rptr")
        wptr = Signal(range(max(nblocks, 2)), name="free_wptr")
        pop, push = self.alloc.pop, self.free.valid
        m.d.comb += [
            free_rd.addr.eq(rptr), self.alloc.head.eq(free_rd.data), self.alloc.count.eq(count),
            free_wr.addr.eq(wptr), free_wr.data.eq(self.free.payload), free_wr.en.eq(push),
        ]

        def wrap_inc(ptr):
            return Mux(ptr == nblocks - 1, 0, ptr + 1)

        with m.If(pop):
            m.d.sync += rptr.eq(wrap_inc(rptr))
        with m.If(push):
            m.d.sync += wptr.eq(wrap_inc(wptr))
        count_next = Signal.like(count, name="free_count_next")
        nonempty = Signal(init=nblocks != 0, name="free_nonempty")  # count != 0, a register
        m.d.comb += [count_next.eq(count + push - pop), self.alloc.nonempty.eq(nonempty)]
        m.d.sync += [count.eq(count_next), nonempty.eq(count_next != 0)]
        return m
