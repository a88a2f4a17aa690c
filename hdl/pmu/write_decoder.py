"""The first stage of a PMU's write side: each beat's part in its buffer, decided as it enters."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...contract.beat import beat_layout, beat_signature
from ..fifo import StreamFIFO

__all__ = ["WriteDecoder", "entry_layout"]


def entry_layout(params):
    """A decoded beat of the write side: its fields and what it does to the open buffer.

    ``data``, ``has_data``, ``last``
        The beat's own.
    ``store``
        Written as an entry at (block, ``offset``).
    ``merge``
        A stop-only beat that rewrites the stop of the entry before it.
    ``closes``
        Closes the buffer (its stop is ``>= b``).
    ``fresh``
        No buffer is open: a buffer starting with this beat begins at the allocated block.
    ``need_alloc``
        Stored in a new block (popped from the free list).
    ``offset``
        The entry's offset in its block.
    ``stop``
        The stop as stored (``b - 1`` when closing).
    ``refs_push``, ``ref_stop``
        The beat sends a reference (a closed buffer, or the bare ``Done``), with this stop.
    ``over``, ``unclosed``
        The beat breaks a bound, or ends the stream in an open buffer.
    ``desc``
        The buffer's descriptor after this beat (written when it closes).
    """
    pmu = params
    data_shape = beat_layout(pmu.elem_type, pmu.rank, row_bound=pmu.row_bound)["data"].shape
    refs_stop = beat_layout(pmu.buffer_type, pmu.rank - pmu.b)["stop"].shape
    return data.StructLayout({
        "data": data_shape, "has_data": 1, "last": 1,
        "store": 1, "merge": 1, "closes": 1, "fresh": 1, "need_alloc": 1,
        "offset": range(max(pmu.block_size, 2)),
        "stop": pmu.stop_shape(),
        "refs_push": 1, "ref_stop": refs_stop,
        "over": 1, "unclosed": 1,
        "desc": pmu.desc_layout(),
    })


class WriteDecoder(wiring.Component):
    """Decides each beat's part in its buffer as it enters a two-entry queue.

    Everything but the block a beat lands in follows from the beats before it in the stream:
    whether it is stored or merged into the stop of the entry before it, whether it needs a new
    block and its offset there, the buffer's length and block count, the bound checks of the
    interpreter's ``check_buffer``. The decoder keeps those as registers of its own and puts
    the outcome beside the beat (:func:`entry_layout`), so the
    :class:`~.writer.Writer`'s decision to take the queue's head is one gate of registers (the
    decision from the head's raw fields was the worst iCE40 path of the write side, 25 ns over
    6-7 cells). ``in0.ready`` and ``out`` are registers; a beat taken in cycle ``t`` is on
    ``out`` in ``t + 1``.

    Parameters
    ----------
    params : stepforge.hdl.pmu.params.PMUParams
        The PMU's parameters.

    Members
    -------
    in0 : ``In(beat_signature(params.elem_type, params.rank))``
        The stream to bufferize.
    out : ``Out(stream.Signature(entry_layout(params)))``
        The decoded beats, in order.
    """

    def __init__(self, params):
        self.params = params
        self.entry_layout = entry_layout(params)
        super().__init__({
            "in0": In(beat_signature(params.elem_type, params.rank, row_bound=params.row_bound)),
            "out": Out(stream.Signature(self.entry_layout)),
        })

    def __repr__(self):
        return f"WriteDecoder({self.params!r})"

    def elaborate(self, platform):
        m = Module()
        pmu = self.params
        b, shape, bsize = pmu.b, pmu.shape, pmu.block_size
        m.submodules.queue = inq = StreamFIFO(self.entry_layout, 2, counters=False)
        wiring.connect(m, inq.o, wiring.flipped(self.out))
        ip = self.in0.payload
        accept = Signal(name="d_accept")
        m.d.comb += [inq.i.valid.eq(self.in0.valid), self.in0.ready.eq(inq.i.ready),
                     accept.eq(self.in0.valid & inq.i.ready)]

        d_open = Signal(name="d_open")
        d_prev_nostop = Signal(name="d_prev_nostop")
        # the next stored beat needs a new block (no buffer is open, or its block is full)
        d_blk_needed = Signal(name="d_block_needed", init=1)
        d_off = Signal(range(bsize + 1), name="d_offset")
        d_len = Signal(range(pmu.max_entries + 1), name="d_len")
        d_nblk = Signal(range(pmu.max_blocks + 1), name="d_blocks")
        d_elems = Signal(range(pmu.max_entries + 1), name="d_elems")
        cnt = [Signal(range(shape[b - 1 - j] + 1), name=f"d_count{j}") for j in range(b)]

        s, hd = ip.stop, ip.has_data
        closes = Signal(name="d_closes")
        bare_done = Signal(name="d_bare_done")
        store = Signal(name="d_store")
        merge = Signal(name="d_merge")
        need_alloc = Signal(name="d_need_alloc")
        cur_off = Signal(range(max(bsize, 2)), name="d_cur_offset")
        t_eff = Signal(range(max(b, 2)), name="d_level")  # the stop as stored: b-1 when closing
        m.d.comb += [
            closes.eq(s >= b),
            bare_done.eq(~hd & (s == 0) & ip.last),
            store.eq(Mux(d_prev_nostop, hd, hd | (s != 0))),
            merge.eq(~hd & (s != 0) & d_prev_nostop),
            need_alloc.eq(store & d_blk_needed),
            cur_off.eq(Mux(d_blk_needed, 0, d_off)),
            t_eff.eq(Mux(closes, b - 1, s)),
        ]
        over_terms = [hd & (cnt[0] >= shape[b - 1])]
        for j in range(1, b):
            over_terms.append((t_eff >= j) & (cnt[j] >= shape[b - 1 - j]))
        # the buffer's descriptor after this beat: each count's two candidates come from
        # registers, the beat's kind picks one
        len_n = Signal.like(d_len, name="d_len_next")
        nblk_n = Signal.like(d_nblk, name="d_blocks_next")
        elems_n = Signal.like(d_elems, name="d_elems_next")
        full = Signal(name="d_full")
        # (the increments are of the registers alone, and ``d_open`` and the beat's kind only
        # choose: the open flag through an add's carry into the head of the decoder's queue
        # was an 11-cell ECP5 GEMV path at 200 MHz)
        m.d.comb += [
            len_n.eq(Mux(d_open, Mux(store, d_len + 1, d_len), store)),
            nblk_n.eq(Mux(d_open, Mux(need_alloc, d_nblk + 1, d_nblk), need_alloc)),
            elems_n.eq(Mux(d_open, Mux(hd, d_elems + 1, d_elems), hd)),
            # compared before the add (the add's carry into the comparison was a 16-cell path)
            full.eq(Mux(d_open, Mux(hd, d_elems == pmu.max_entries - 1,
                                    d_elems == pmu.max_entries),
                        Mux(hd, pmu.max_entries == 1, pmu.max_entries == 0))),
        ]
        e = inq.i.payload
        m.d.comb += [
            e.data.eq(ip.data), e.has_data.eq(hd), e.last.eq(ip.last),
            e.store.eq(store), e.merge.eq(merge), e.closes.eq(closes), e.fresh.eq(~d_open),
            e.need_alloc.eq(need_alloc), e.offset.eq(cur_off), e.stop.eq(t_eff),
            e.refs_push.eq(closes | (bare_done & ~d_open)),
            e.ref_stop.eq(Mux(closes, s - b, 0)),
            e.over.eq(Cat(*over_terms).any()),
            e.unclosed.eq(ip.last & ~closes & ~(bare_done & ~d_open)),
            e.desc.len.eq(len_n), e.desc.nblk.eq(nblk_n),
            e.desc.full.eq(full),
        ]
        with m.If(accept):
            with m.If(store):
                m.d.sync += [d_prev_nostop.eq(hd & (s == 0)), d_off.eq(cur_off + 1),
                             d_blk_needed.eq(cur_off == bsize - 1)]
            with m.If(merge):
                m.d.sync += d_prev_nostop.eq(0)
            with m.If(closes):
                m.d.sync += [d_open.eq(0), d_prev_nostop.eq(0), d_len.eq(0), d_nblk.eq(0),
                             d_elems.eq(0), d_blk_needed.eq(1)]
            with m.Elif(store):
                m.d.sync += [d_open.eq(1), d_len.eq(len_n), d_nblk.eq(nblk_n),
                             d_elems.eq(elems_n)]
            for j in range(b):  # the fibre counters of the bound check
                with m.If(closes | (t_eff > j)):
                    m.d.sync += cnt[j].eq(0)
                if j > 0:
                    with m.Elif(t_eff == j):
                        m.d.sync += cnt[j].eq(cnt[j] + 1)
                else:
                    with m.Elif(hd):
                        m.d.sync += cnt[0].eq(cnt[0] + 1)
        return m
