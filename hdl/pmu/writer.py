"""The write side of a PMU (Bufferize): entries into memory, bounds, descriptors, ``refs``."""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import WritePort
from amaranth.lib.wiring import In, Out

from ...contract.beat import beat_layout, beat_signature
from ..fifo import lut_queue
from ..flags import below_after
from ..unit import ErrorCode, StatusSignature, raise_error
from .interfaces import AllocSignature
from .write_decoder import WriteDecoder

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
    counted against its bound as the interpreter's ``check_buffer`` does.

    Two stages. A :class:`~.write_decoder.WriteDecoder` decides, as a beat enters its two-entry
    queue, everything that follows from the beats before it in the stream; the write stage
    takes the queue's head into memory with the block the free list gives, so its decision to
    take a beat is one gate of registers. ``in0.ready`` and the queue's head are registers; a
    beat is stored one cycle after ``in0`` takes it at the earliest.

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
        b, bsize = pmu.b, pmu.block_size
        idw = pmu.id_width
        refs_layout = beat_layout(pmu.buffer_type, pmu.rank - b)

        # -- stage 1, the decoder (write_decoder.py): each beat's part in its buffer ----------
        m.submodules.decoder = dec = WriteDecoder(pmu)
        wiring.connect(m, wiring.flipped(self.in0), dec.in0)

        # -- stage 2, the write stage: the head beat into memory ------------------------------
        i0 = dec.out
        h = i0.payload
        # (its storage follows the input: the write decision reaches only the pointer and flags)
        refs_fifo = lut_queue(m, refs_layout.size, 3, name="refs_fifo")
        m.d.comb += [self.refs.payload.eq(refs_fifo.r_data), self.refs.valid.eq(refs_fifo.r_rdy),
                     refs_fifo.r_en.eq(self.refs.ready)]

        open_ = Signal(name="w_open")
        head = Signal(idw, name="w_head")
        blk = Signal(idw, name="w_block")
        last_addr = Signal(range(max(pmu.blocks * bsize, 2)), name="w_last_addr")
        # any beat waits while ``refs`` is full, not only one that pushes a reference: whether a
        # beat closes a buffer stays out of the decision. The FIFO has a third entry for it.
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
        # A beat is taken without waiting for its checks (the decoder made them): a beat over a
        # bound or ending the stream in an open buffer is taken and raises the error, and the
        # PMU stops (``halt``, then ``go``); only what others see of it (its reference, the
        # buffer's descriptor and pending bit) waits for the checks.
        fire = Signal(name="w_fire")
        fault = Signal(name="w_fault")
        good = Signal(name="w_fire_checked")
        m.d.comb += [
            fire.eq(i0.valid & go & (~h.need_alloc | self.alloc.nonempty)), i0.ready.eq(fire),
            refs_in.eq(fire & h.refs_push),
            fault.eq(fire & (h.over | h.unclosed)), good.eq(fire & ~fault),
        ]
        raise_error(m, self.status, ErrorCode.OVER_BOUND, fault & h.over)
        raise_error(m, self.status, ErrorCode.UNCLOSED_BUFFER, fault & ~h.over & h.unclosed)

        new_blk = Signal(idw, name="w_new_block")
        cur_blk = Signal(idw, name="w_cur_block")
        addr = Signal(range(max(pmu.blocks * bsize, 2)), name="w_addr")
        head_n = Signal(idw, name="w_head_next")
        m.d.comb += [
            new_blk.eq(self.alloc.head),
            cur_blk.eq(Mux(h.need_alloc, new_blk, blk)),
            addr.eq(cur_blk * bsize + h.offset),
            head_n.eq(Mux(h.fresh, new_blk, head)),
            self.data_wr.addr.eq(addr),
            self.data_wr.data.data.eq(h.data),
            self.data_wr.data.has_data.eq(h.has_data),
            self.data_wr.en.eq(fire & h.store),
            self.alloc.pop.eq(fire & h.need_alloc),
        ]
        # The stop memory's and the descriptor table's writes wait a cycle in registers: both
        # are LUT RAM of several blocks on the ECP5, whose write enables decode the address
        # (the allocation's choice of block, then the decode: the worst ECP5 GEMV paths, 6.2
        # ns over 6 cells). Nothing reads an entry in the cycle after it is written: a closed
        # buffer's reference leaves through ``refs`` a cycle later and a command for it waits
        # in its replay's queue a cycle more before its descriptor is read.
        m.d.sync += [
            self.stop_wr.addr.eq(Mux(h.merge, last_addr, addr)),
            self.stop_wr.data.eq(h.stop),
            self.stop_wr.en.eq(fire & (h.store | h.merge)),
        ]
        if pmu.mode == "dynamic":
            m.d.comb += [self.next_wr.addr.eq(blk), self.next_wr.data.eq(new_blk),
                         self.next_wr.en.eq(fire & h.need_alloc & ~h.fresh)]
        m.d.sync += [
            self.desc_wr.addr.eq(head_n),
            self.desc_wr.data.eq(h.desc),
            self.desc_wr.en.eq(good & h.closes),
        ]
        ref_beat = Signal(refs_layout, name="w_ref_beat")
        m.d.comb += [
            ref_beat.data.eq(head_n),
            ref_beat.has_data.eq(h.closes),
            ref_beat.stop.eq(h.ref_stop),
            ref_beat.last.eq(h.last),
            refs_fifo.w_data.eq(ref_beat),
            refs_fifo.w_en.eq(good & h.refs_push),
        ]
        with m.If(good & h.closes):
            m.d.comb += self.pend_set.bit_select(head_n, 1).eq(1)

        with m.If(fire):
            with m.If(h.store):
                m.d.sync += [last_addr.eq(addr), blk.eq(cur_blk)]
            with m.If(h.closes):
                m.d.sync += open_.eq(0)
            with m.Elif(h.store):
                m.d.sync += [open_.eq(1), head.eq(head_n)]

        m.d.comb += [
            self.status.busy.eq(open_ | i0.valid | refs_fifo.r_rdy),
            self.status.stall_in.eq(open_ & ~i0.valid),
            self.status.stall_out.eq(self.refs.valid & ~self.refs.ready),
        ]
        return m
