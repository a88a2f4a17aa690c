"""Buffer lifetimes in a PMU: the pending bits, the release arbiter and the block walker."""

from amaranth.hdl import Array, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..unit import StatusSignature
from .interfaces import AsyncReadSignature, FreeSignature, ReleaseSignature

__all__ = ["ReleaseArbiter"]


class ReleaseArbiter(wiring.Component):
    """Reference counts of the buffers, and their return to the free list.

    Every read side ``i`` has one *pending* bit per block: set when a buffer starting at that
    block closes (``pend_set``, unless the read side has finished), cleared when the arbiter
    takes the read side's release of it. Releases are taken one per cycle, round robin. The
    release that clears a buffer's last bit starts the walker, which pushes the buffer's blocks
    (its descriptor's ``nblk``, along the ``next`` chain) to the free list, one per cycle; that
    release waits while the walker is busy with another buffer (unless on its last block).

    Parameters
    ----------
    params : stepforge.hdl.pmu.params.PMUParams
        The PMU's parameters (its read sides and blocks).

    Members
    -------
    pend_set : ``In(params.blocks)``
        One-hot: the buffer starting at this block closes this cycle.
    finished : ``In(1).array(k)``
        Read side ``i`` has finished: buffers closing now do not wait for it.
    pending : ``Out(params.blocks).array(k)``
        The pending bits of read side ``i``.
    rel : ``In(ReleaseSignature(params)).array(k)``
        The release requests of read side ``i``.
    desc_rd : ``Out(AsyncReadSignature(...))``
        Asynchronous read of the descriptor table (the released buffer's block count).
    next_rd : ``Out(AsyncReadSignature(...))``, ``mode="dynamic"`` only
        Asynchronous read of the ``next`` table (the block after the walked one).
    free : ``Out(FreeSignature(params))``
        Blocks going back to the free list.
    status : ``Out(StatusSignature)``
        ``busy`` while a release waits or the walker runs. It never stalls nor raises an error.
    """

    def __init__(self, params):
        self.params = pmu = params
        k, idw = len(pmu.readers), pmu.id_width
        members = {
            "pend_set": In(pmu.blocks),
            "finished": In(1).array(k),
            "pending": Out(pmu.blocks).array(k),
            "rel": In(ReleaseSignature(pmu)).array(k),
            "desc_rd": Out(AsyncReadSignature(idw, pmu.desc_layout())),
        }
        if pmu.mode == "dynamic":
            members["next_rd"] = Out(AsyncReadSignature(idw, unsigned(idw)))
        members["free"] = Out(FreeSignature(pmu))
        members["status"] = Out(StatusSignature)
        super().__init__(members)

    def __repr__(self):
        return f"ReleaseArbiter({self.params!r})"

    def elaborate(self, platform):
        m = Module()
        pmu = self.params
        k, id_w = len(pmu.readers), pmu.id_width
        pending, rel = self.pending, self.rel
        pend_clr = [Signal(pmu.blocks, name=f"pend_clr{i}") for i in range(k)]
        for i in range(k):
            m.d.sync += pending[i].eq((pending[i] | Mux(self.finished[i], 0, self.pend_set))
                                      & ~pend_clr[i])

        # -- the walker -------------------------------------------------------------------------
        w_act = Signal(name="walk_active")
        w_cur = Signal(id_w, name="walk_block")
        w_rem = Signal(range(pmu.max_blocks + 1), name="walk_left")
        w_one = Signal(name="walk_one_left")    # w_rem == 1, a register beside the count
        w_accept_ok = Signal(name="walk_accept_ok")
        m.d.comb += w_accept_ok.eq(~w_act | w_one)

        # -- round-robin arbiter ----------------------------------------------------------------
        grant = Signal(range(max(k, 2)), name="rel_grant")
        any_rel = Signal(name="rel_any")
        rr = Signal(range(max(k, 2)), name="rel_rr")
        with m.Switch(rr):
            for start in range(k):
                with m.Case(start):
                    for off in reversed(range(k)):  # the last assignment wins: lowest offset
                        j = (start + off) % k
                        with m.If(rel[j].valid):
                            m.d.comb += [grant.eq(j), any_rel.eq(1)]
        g_id = Signal(id_w, name="rel_grant_id")
        m.d.comb += g_id.eq(Array(r.id for r in rel)[grant])
        others_clear = Signal(name="rel_last_consumer")
        m.d.comb += others_clear.eq(Cat(*[(grant == j) | ~pending[j].bit_select(g_id, 1)
                                          for j in range(k)]).all())
        take = Signal(name="rel_take")
        m.d.comb += take.eq(any_rel & (~others_clear | w_accept_ok))
        for j in range(k):
            m.d.comb += rel[j].taken.eq(take & (grant == j))
            with m.If(rel[j].taken):
                m.d.comb += pend_clr[j].bit_select(g_id, 1).eq(1)
        with m.If(take):
            m.d.sync += rr.eq(Mux(grant == k - 1, 0, grant + 1))

        # -- the walker returns the last consumer's buffer, one block per cycle -----------------
        m.d.comb += self.desc_rd.addr.eq(g_id)
        start_walk = Signal(name="walk_start")
        m.d.comb += start_walk.eq(take & others_clear)
        m.d.comb += [self.free.valid.eq(w_act), self.free.payload.eq(w_cur)]
        if pmu.mode == "dynamic":
            m.d.comb += self.next_rd.addr.eq(w_cur)
            walk_next = self.next_rd.data
        else:
            walk_next = w_cur
        with m.If(w_act):
            m.d.sync += [w_cur.eq(walk_next), w_rem.eq(w_rem - 1), w_one.eq(w_rem == 2)]
            with m.If(w_one):
                m.d.sync += w_act.eq(0)
        with m.If(start_walk):
            m.d.sync += [w_act.eq(1), w_cur.eq(g_id), w_rem.eq(self.desc_rd.data.nblk),
                         w_one.eq(self.desc_rd.data.nblk == 1)]
        m.d.comb += self.status.busy.eq(w_act | any_rel)
        return m
