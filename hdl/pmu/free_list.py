"""The free list of a PMU: the blocks no buffer holds, as a FIFO of block numbers."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from ..fifo import lut_queue
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
        # (a queue whose free slot follows the input: never full when a block comes back, since
        # a block is freed only after it was taken)
        q = lut_queue(m, self.params.id_width, max(nblocks, 2), init=range(nblocks),
                      name="free")
        m.d.comb += [self.alloc.head.eq(q.r_data), self.alloc.count.eq(q.level),
                     self.alloc.nonempty.eq(q.r_rdy), q.r_en.eq(self.alloc.pop),
                     q.w_data.eq(self.free.payload), q.w_en.eq(self.free.valid)]
        return m
