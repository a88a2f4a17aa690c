"""The write side of a PMU (Bufferize): entries into memory, bounds, descriptors, ``refs``."""

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, fifo, wiring
from amaranth.lib.memory import WritePort
from amaranth.lib.wiring import In, Out

from ...contract.beat import beat_layout, beat_signature
from ..fifo import StreamFIFO
from ..flags import below_after
from ..unit import ErrorCode, StatusSignature, raise_error
from .interfaces import AllocSignature

__all__ = ["Writer"]


class Writer(wiring.Component):
    """Stores the beats of ``in0`` as buffers and sends each closed buffer's id on ``refs``.

    Every beat is one entry ``(data, has_data, stop)`` at the next offset of the open buffer's
    current block (a block is popped from the free list in the cycle of the beat that needs
    it); a stop-only beat right after an element without a stop rewrites that element's stop
    instead. A stop ``s >= b`` closes the buffer: its descriptor is written, its pending bits
    set and its id leaves on ``refs`` (a three-entry FIFO; every beat waits while it is full,
    so the FIFO's flag is the only term of ``refs`` in the decision to take a beat) with stop
    ``s - b``. Each fibre is
    counted against its bound as the interpreter's ``check_buffer`` does. Beats enter through a
    two-entry queue (``ready`` and its head are registers; the head holds the beat's decoded
    kind), so a beat is stored one cycle after ``in0`` takes it at the earliest.

    Parameters
    ----------
    params : stepforge.hdl.pmu.params.PMUParams
        The PMU's parameters (every size comes from them).

    Members
    -------
    in0 : ``In(beat_signature(params.elem_type, params.rank))``
        The stream to bufferize.
    refs : ``Out(beat_signature(params.buffer_type, params.rank - params.b))``
        One buffer id per closed buffer.
    halt : ``In(1)``
        The PMU has raised an error: take nothing more.
    alloc : ``Out(AllocSignature(params))``
        The free list.
    data_wr, stop_wr, desc_wr : ``In(WritePort.Signature(...))``
        Write ports of the data, stop and descriptor memories.
    next_wr : ``In(WritePort.Signature(...))``, ``mode="dynamic"`` only
        Write port of the ``next`` table chaining a buffer's blocks.
    pend_set : ``Out(params.blocks)``
        One-hot: the buffer starting at this block closes this cycle (set its pending bits).
    status : ``Out(StatusSignature)``
        ``busy`` while a buffer is open or ``refs`` holds a beat; ``stall_in`` while an open
        buffer waits for ``in0``; ``stall_out`` while ``refs`` is not taken. Errors:
        ``OVER_BOUND``, ``UNCLOSED_BUFFER``.
    """

    def __init__(self, params):
        self.params = pmu = params
        aw, idw = pmu.entry_addr_width, pmu.id_width
        members = {
            "in0": In(beat_signature(pmu.elem_type, pmu.rank, row_bound=pmu.row_bound)),
            "refs": Out(beat_signature(pmu.buffer_type, pmu.rank - pmu.b)),
            "halt": In(1),
            "alloc": Out(AllocSignature(pmu)),
            "data_wr": In(WritePort.Signature(addr_width=aw, shape=pmu.entry_layout())),
            "stop_wr": In(WritePort.Signature(addr_width=aw, shape=pmu.stop_shape())),
            "desc_wr": In(WritePort.Signature(addr_width=idw, shape=pmu.desc_layout())),
        }
        if pmu.mode == "dynamic":
            members["next_wr"] = In(WritePort.Signature(addr_width=idw, shape=unsigned(idw)))
        members["pend_set"] = Out(pmu.blocks)
        members["status"] = Out(StatusSignature)
        super().__init__(members)

    def __repr__(self):
        return f"Writer({self.params!r})"

    def elaborate(self, platform):
        m = Module()
        pmu = self.params
        b, shape, bsize = pmu.b, pmu.shape, pmu.block_size
        idw = pmu.id_width
        # -- the input stage: beats wait in a two-entry queue with registered outputs, decoded
        # on the way in, so the decision to take a beat starts from registers (the decode and
        # the input FIFO's pop were on the worst iCE40 path, 33 ns over 11 cells)
        in_layout = beat_layout(pmu.elem_type, pmu.rank, row_bound=pmu.row_bound)
        m.submodules.in_queue = inq = StreamFIFO(data.StructLayout({
            "beat": in_layout, "closes": 1, "bare_done": 1, "no_stop": 1,
            # whether the beat is stored unless it follows an element without a stop, and
            # whether it merges into that element's stop if it does (then it is stored only
            # with data): the writer picks by its own register
            "store": 1, "merges": 1,
        }), 2, counters=False)
        ip = self.in0.payload
        m.d.comb += [
            inq.i.valid.eq(self.in0.valid), self.in0.ready.eq(inq.i.ready),
            inq.i.payload.beat.eq(ip),
            inq.i.payload.closes.eq(ip.stop >= b),
            inq.i.payload.bare_done.eq(~ip.has_data & (ip.stop == 0) & ip.last),
            inq.i.payload.no_stop.eq(ip.stop == 0),
            inq.i.payload.store.eq(ip.has_data | (ip.stop != 0)),
            inq.i.payload.merges.eq(~ip.has_data & (ip.stop != 0)),
        ]
        i0 = inq.o
        p = i0.payload.beat
        refs_layout = beat_layout(pmu.buffer_type, pmu.rank - b)
        m.submodules.refs_fifo = refs_fifo = fifo.SyncFIFO(width=refs_layout.size, depth=3)
        m.d.comb += [self.refs.payload.eq(refs_fifo.r_data), self.refs.valid.eq(refs_fifo.r_rdy),
                     refs_fifo.r_en.eq(self.refs.ready)]

        open_ = Signal(name="w_open")
        head = Signal(idw, name="w_head")
        blk = Signal(idw, name="w_block")
        off = Signal(range(bsize + 1), name="w_offset")
        # a stored beat needs a new block (no buffer is open, or its block is full): a register
        blk_needed = Signal(name="w_block_needed", init=1)
        length = Signal(range(pmu.max_entries + 1), name="w_len")
        nblk = Signal(range(pmu.max_blocks + 1), name="w_blocks")
        elems = Signal(range(pmu.max_entries + 1), name="w_elems")
        prev_nostop = Signal(name="w_prev_nostop")
        last_addr = Signal(range(max(pmu.blocks * bsize, 2)), name="w_last_addr")
        cnt = [Signal(range(shape[b - 1 - j] + 1), name=f"w_count{j}") for j in range(b)]

        # -- what this beat does -------------------------------------------------------------
        s = p.stop
        hd = p.has_data
        closes = Signal(name="w_closes")
        bare_done = Signal(name="w_bare_done")
        merge = Signal(name="w_merge")
        store = Signal(name="w_store")
        need_alloc = Signal(name="w_need_alloc")
        refs_push = Signal(name="w_refs_push")
        over = Signal(name="w_over")
        unclosed = Signal(name="w_unclosed")
        t_eff = Signal(range(max(b, 2)), name="w_level")  # the stop as stored: S_(b-1) when closing
        m.d.comb += [
            closes.eq(i0.payload.closes),
            bare_done.eq(i0.payload.bare_done),
            merge.eq(i0.payload.merges & prev_nostop),
            store.eq(Mux(prev_nostop, hd, i0.payload.store)),
            need_alloc.eq(store & blk_needed),
            refs_push.eq(closes | (bare_done & ~open_)),
            t_eff.eq(Mux(closes, b - 1, s)),
        ]
        over_terms = [hd & (cnt[0] >= shape[b - 1])]
        for j in range(1, b):
            over_terms.append((t_eff >= j) & (cnt[j] >= shape[b - 1 - j]))
        m.d.comb += [
            over.eq(Cat(*over_terms).any()),
            unclosed.eq(p.last & ~closes & ~(bare_done & ~open_)),
        ]
        ready_ok = Signal(name="w_can_go")
        # any beat waits while ``refs`` is full, not only one that pushes a reference: whether a
        # beat closes a buffer (its kind and ``w_open``) stays out of the decision, which was the
        # worst iCE40 write-side path (26 ns over 7 cells). The FIFO has a third entry for it.
        # ``go``: not halted and ``refs`` has room, one register (set from the FIFO's level, the
        # beat that pushes a reference this cycle and the pop, and from ``halt``); a beat after
        # an error may still be taken in the two cycles before ``go`` falls (its checks are
        # still made, and the error is already raised). The push is counted on ``fire``, not
        # on the checked push: the flag may fall a cycle early after a faulty beat.
        go = Signal(name="w_go", init=1)
        refs_pop = Signal(name="w_refs_pop")
        refs_in = Signal(name="w_refs_in")
        m.d.comb += refs_pop.eq(self.refs.valid & self.refs.ready)
        m.d.sync += go.eq(~self.halt & below_after(refs_fifo.level, 3, refs_in, refs_pop))
        m.d.comb += ready_ok.eq(go & (~need_alloc | self.alloc.nonempty))
        # A beat is taken without waiting for its checks (they are not on the path into the
        # writer's registers): a beat over a bound or ending the stream in an open buffer is
        # taken and raises the error, and the PMU stops (``halt``, then ``go``); only what others
        # see of it (its reference, the buffer's descriptor and pending bit) waits for the checks.
        fire = Signal(name="w_fire")
        m.d.comb += refs_in.eq(fire & refs_push)
        fault = Signal(name="w_fault")
        good = Signal(name="w_fire_checked")
        m.d.comb += [fire.eq(i0.valid & ready_ok), i0.ready.eq(fire),
                     fault.eq(fire & (over | unclosed)), good.eq(fire & ~fault)]
        raise_error(m, self.status, ErrorCode.OVER_BOUND, fault & over)
        raise_error(m, self.status, ErrorCode.UNCLOSED_BUFFER, fault & ~over & unclosed)

        # -- where it goes ---------------------------------------------------------------------
        new_blk = Signal(idw, name="w_new_block")
        m.d.comb += new_blk.eq(self.alloc.head)
        cur_blk = Signal(idw, name="w_cur_block")
        cur_off = Signal(range(max(bsize, 2)), name="w_cur_offset")
        m.d.comb += [cur_blk.eq(Mux(need_alloc, new_blk, blk)),
                     cur_off.eq(Mux(need_alloc, 0, off))]
        addr = Signal(range(max(pmu.blocks * bsize, 2)), name="w_addr")
        m.d.comb += addr.eq(cur_blk * bsize + cur_off)
        m.d.comb += [
            self.data_wr.addr.eq(addr),
            self.data_wr.data.data.eq(p.data),
            self.data_wr.data.has_data.eq(hd),
            self.data_wr.en.eq(fire & store),
            self.stop_wr.addr.eq(Mux(merge, last_addr, addr)),
            self.stop_wr.data.eq(Mux(closes, b - 1, s)),
            self.stop_wr.en.eq(fire & (store | merge)),
            self.alloc.pop.eq(fire & need_alloc),
        ]
        if pmu.mode == "dynamic":
            m.d.comb += [self.next_wr.addr.eq(blk), self.next_wr.data.eq(new_blk),
                         self.next_wr.en.eq(fire & need_alloc & open_)]

        # -- the buffer after this beat ------------------------------------------------------
        head_n = Signal(idw, name="w_head_next")
        len_n = Signal.like(length, name="w_len_next")
        nblk_n = Signal.like(nblk, name="w_blocks_next")
        elems_n = Signal.like(elems, name="w_elems_next")
        # each count's two candidates come from registers; the beat's kind only picks one
        len_0 = Signal.like(length, name="w_len_base")
        nblk_0 = Signal.like(nblk, name="w_blocks_base")
        m.d.comb += [
            head_n.eq(Mux(open_, head, new_blk)),
            len_0.eq(Mux(open_, length, 0)),
            len_n.eq(Mux(store, len_0 + 1, len_0)),
            nblk_0.eq(Mux(open_, nblk, 0)),
            nblk_n.eq(Mux(need_alloc, nblk_0 + 1, nblk_0)),
            elems_n.eq(Mux(open_, elems, 0) + hd),
        ]
        m.d.comb += [
            self.desc_wr.addr.eq(head_n),
            self.desc_wr.data.len.eq(len_n),
            self.desc_wr.data.nblk.eq(nblk_n),
            self.desc_wr.data.full.eq(elems_n == pmu.max_entries),
            self.desc_wr.en.eq(good & closes),
        ]
        ref_beat = Signal(refs_layout, name="w_ref_beat")
        m.d.comb += [
            ref_beat.data.eq(head_n),
            ref_beat.has_data.eq(closes),
            ref_beat.stop.eq(Mux(closes, s - b, 0)),
            ref_beat.last.eq(p.last),
            refs_fifo.w_data.eq(ref_beat),
            refs_fifo.w_en.eq(good & refs_push),
        ]
        with m.If(good & closes):
            m.d.comb += self.pend_set.bit_select(head_n, 1).eq(1)

        with m.If(fire):
            with m.If(store):
                m.d.sync += [last_addr.eq(addr), prev_nostop.eq(hd & i0.payload.no_stop),
                             off.eq(cur_off + 1), blk_needed.eq(cur_off == bsize - 1),
                             blk.eq(cur_blk)]
            with m.If(merge):
                m.d.sync += prev_nostop.eq(0)
            with m.If(closes):
                m.d.sync += [open_.eq(0), prev_nostop.eq(0), length.eq(0), nblk.eq(0),
                             elems.eq(0), blk_needed.eq(1)]
            with m.Elif(store):
                m.d.sync += [open_.eq(1), head.eq(head_n), length.eq(len_n), nblk.eq(nblk_n),
                             elems.eq(elems_n)]
            for j in range(b):  # the fibre counters of the bound check
                with m.If(closes | (t_eff > j)):
                    m.d.sync += cnt[j].eq(0)
                if j > 0:
                    with m.Elif(t_eff == j):
                        m.d.sync += cnt[j].eq(cnt[j] + 1)
                else:
                    with m.Elif(hd):
                        m.d.sync += cnt[0].eq(cnt[0] + 1)

        m.d.comb += [
            self.status.busy.eq(open_ | i0.valid | refs_fifo.r_rdy),
            self.status.stall_in.eq(open_ & ~i0.valid),
            self.status.stall_out.eq(self.refs.valid & ~self.refs.ready),
        ]
        return m
