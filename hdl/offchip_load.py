"""Off-chip loads as hardware: LinearOffChipLoad (affine walk) and RandomOffChipLoad (gather).

Both units have the same back end, a *tile fetcher*:

1. A front end produces one **command** per output beat: a tile's first word address with the
   beat's ``stop``/``last`` (or a stop-only / bare-``Done`` beat with no tile).
2. A command with a tile takes a slot of an on-chip **tile buffer** of ``buffer_tiles`` tiles (a
   credit: no slot, no command) and the tile's burst goes out on the memory read port
   (:class:`~stepforge.hdl.memory.TensorPlacement`: one segment per tile row, a tensor row
   apart, or a single segment when the rows are contiguous). Its ``stop``/``last`` go into a tag
   FIFO.
3. Response lines are written into the slot line by line (a tile's lines have static word
   counts, ``placement.tile_lines``); a slot whose last line has arrived is *full*. Lines arrive
   in request order, so slots fill in order.
4. The output beat is the head tag, with the head slot's tile when the tag carries data, once
   that slot is full and its registered read (not transparent to writes) holds the whole tile:
   a tile whose last line arrives in cycle ``t`` can leave in cycle ``t + 2``. It moves into
   the output register (freeing its slot) when the register is empty or being read. A tile
   of several lines is read at a registered address, so the next head's tile can move one
   cycle after a move at the earliest (the memory delivers a tile every two cycles or more).
   ``out.valid`` and ``out.payload`` are registers: the tile buffer's read ends in the unit,
   not in the next unit's FIFO (GEMM's worst path on ECP5, 10 ns).

The memory never waits for a client, so a slot is reserved before its burst is issued; the
buffer is therefore also the unit's latency cover. A tile holds its slot for about
``mem_latency + 5 + lines`` cycles (the memory grants a burst's first line two cycles after it
accepts the request), so the default ``buffer_tiles = mem_latency + 6`` sustains the
memory's rate: ``len(placement.tile_lines)`` cycles per tile (one line per cycle; lines pack as
many tile rows as the lanes take without bank conflicts), and at most one tile per cycle at the
output. The unit's on-chip storage is ``buffer_tiles x bytes(tile)`` (:attr:`onchip_bytes`; the
paper's model counts ``2 x bytes(tile)``).
"""

from amaranth.hdl import C, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..compiler.types import ElemType, Index, Tile
from ..contract.beat import beat_signature, stop_width
from .fifo import StreamFIFO
from .flags import below_after, count_step
from .memory import TensorPlacement, index_shape, quiet_on_error
from .platform import platform_family
from .ram_attrs import NO_COLLISION
from .unit import ErrorCode, StatusSignature, check, check_int, check_ints, raise_error
from .walk import WalkIndex

__all__ = ["LinearLoadUnit", "RandomLoadUnit"]


def _check_placement(placement, unit):
    check(isinstance(placement, TensorPlacement), unit, "placement", "a TensorPlacement",
          placement, error=TypeError)


def _default_buffer(placement, buffer_tiles, unit):
    if buffer_tiles is None:
        return placement.geometry.latency + 6
    return check_int(unit, "buffer_tiles", buffer_tiles, 1)


def _command_layout(placement, stop_bits):
    return data.StructLayout({"addr": unsigned(placement.geometry.addr_bits), "has_data": 1,
                              "stop": unsigned(stop_bits), "last": 1})


class _TileFetcher(wiring.Component):
    """The shared back end of the load units (module doc, steps 2-4).

    Members
    -------
    cmd : ``In(stream.Signature(_command_layout(...)))``
        ``addr`` is the tile's first word (ignored when ``has_data`` is 0).
    out : ``Out(beat_signature(Tile(dtype, tr, tc), rank))``
    mem : ``Out(placement.port("read"))``
    busy : ``Out(1)``
        A command is being issued, a tile is in flight or a beat waits to leave.
    """

    def __init__(self, placement, rank, buffer_tiles):
        self.placement, self.rank, self.buffer_tiles = placement, rank, buffer_tiles
        self.tile_type = Tile(placement.dtype, *placement.tile)
        self.cmd_layout = _command_layout(placement, stop_width(rank))
        super().__init__({
            "cmd": In(stream.Signature(self.cmd_layout)),
            "out": Out(beat_signature(self.tile_type, rank)),
            "mem": Out(placement.port("read")),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p, g = self.placement, self.placement.geometry
        K, T = self.buffer_tiles, p.tile_words
        cmd, out, mem = self.cmd, self.out, self.mem
        stop_bits = stop_width(self.rank)

        # -- issue: the tiles' bursts wait in a two-entry queue in front of the memory ----------
        # (its ``ready`` is a register: the memory's ``req.ready`` ends in the queue instead of
        # going through the command's acceptance into the walk, the worst iCE40 GEMM path)
        m.submodules.requests = reqq = StreamFIFO(unsigned(g.addr_bits), 2, counters=False)
        inflight = Signal(range(K + 1), name="inflight")
        m.d.comb += [mem.req.valid.eq(reqq.o.valid), reqq.o.ready.eq(mem.req.ready)]
        p.request(m, mem, reqq.o.payload)

        tag_layout = data.StructLayout({"has_data": 1, "stop": unsigned(stop_bits), "last": 1})
        # the tags wait in a buffered FIFO: its head is a register (no LUT-RAM read starts the
        # output's decision: the worst GEMM path on ECP5, 9.1 ns) and its write side does not
        # depend on the pop (the worst iCE40 GEMV path, 30 ns). A tag is needed only once its
        # tile has arrived, so the FIFO's extra cycle costs only stop-only beats.
        m.submodules.tags = tags = StreamFIFO(tag_layout, K + 2, buffered=True, counters=False)
        c = cmd.payload
        take = Signal(name="take")
        tag_in = Signal(tag_layout, name="tag_in")
        # room for a tag and a free slot are flags, registered from the counts' next values (the
        # comparisons of the tag FIFO's level and of ``inflight`` were on the worst iCE40 load
        # path, 26 ns over 7 cells, from the counts through the acceptance into the tag storage)
        # (``data_room``: a tile-buffer slot is free and the burst queue has room). The counts
        # of tags and requests held are registers of their own beside the two FIFOs, not the
        # FIFOs' ``level``: the buffered FIFO's level is a sum, and with the request FIFO's own
        # level register ABC merged the room logic into the FIFO's state, a path of 7 LUTs
        # from the output's move (GEMV --tile 4x4 on the UP5K: 43.8 -> 40.2 MHz median)
        ntags = Signal(range(K + 3), name="tags_held")
        nreqs = Signal(range(3), name="requests_held")
        tag_room = Signal(name="tag_room", init=1)
        data_room = Signal(name="data_room", init=1)
        m.d.comb += [
            cmd.ready.eq(tag_room & (~c.has_data | data_room)),
            take.eq(cmd.valid & cmd.ready),
            tag_in.has_data.eq(c.has_data), tag_in.stop.eq(c.stop), tag_in.last.eq(c.last),
            tags.i.valid.eq(take),
            tags.i.payload.eq(tag_in),
        ]
        alloc = Signal(name="alloc")
        m.d.comb += alloc.eq(take & c.has_data)
        m.d.comb += [reqq.i.valid.eq(alloc), reqq.i.payload.eq(c.addr)]

        # -- the tile buffer ------------------------------------------------------------------
        m.submodules.tilebuf = tilebuf = Memory(shape=unsigned(T * g.word_bits), depth=K, init=[],
                                                attrs=NO_COLLISION)
        wr = tilebuf.write_port(granularity=g.word_bits)
        # a registered read of the next head slot (block RAM on iCE40 instead of flip-flops),
        # not transparent to the cycle's write: a slot written in the cycle it was read is read
        # again (``stale``) rather than bypassing the write data into the read register (a
        # multiplexer per bit, 257 LUT4 for a 128-bit tile on ECP5)
        wr_slot = Signal(index_shape(K), name="wr_slot")
        rd_slot = Signal(index_shape(K), name="rd_slot")
        # slots fill and empty in order, so the full slots are the ``nfull`` from the head on
        # (and ``wr_slot`` is ``rd_slot + nfull``): a count, not a bitmap read at two pointers
        nfull = Signal(range(K + 1), name="slots_full")
        resp = mem.resp
        # A tile's lines have static word counts (``placement.tile_lines``: the memory packs a
        # burst the same way at every address), so the write side counts lines, not words: line
        # ``k`` writes words ``start[k] ..`` from response words ``0 .. tile_lines[k] - 1``, and
        # the tile is complete with its last line (a register says so; no adder of the response
        # count on the way into the slot flags)
        lines = p.tile_lines
        starts = [sum(lines[:k]) for k in range(len(lines))]
        wr_line = Signal(index_shape(len(lines)), name="wr_line")
        wr_last = Signal(name="wr_last", init=len(lines) == 1)
        completes = Signal(name="tile_complete")
        m.d.comb += [wr.addr.eq(wr_slot), completes.eq(resp.valid & wr_last)]
        for t in range(T):
            word = Signal(g.word_bits, name=f"wword{t}")
            en = Signal(name=f"wen{t}")
            for k, (first, n) in enumerate(zip(starts, lines)):
                if first <= t < first + n:
                    with m.If(wr_line == k):
                        m.d.comb += [word.eq(resp.data[t - first]), en.eq(resp.valid)]
            m.d.comb += [wr.data.word_select(t, g.word_bits).eq(word), wr.en[t].eq(en)]
        with m.If(completes):
            m.d.sync += wr_slot.eq(Mux(wr_slot == K - 1, 0, wr_slot + 1))
        if len(lines) > 1:
            with m.If(resp.valid):
                with m.If(wr_last):
                    m.d.sync += [wr_line.eq(0), wr_last.eq(0)]
                with m.Else():
                    m.d.sync += [wr_line.eq(wr_line + 1), wr_last.eq(wr_line == len(lines) - 2)]

        # -- output: the head beat moves into the output register -----------------------------
        # ``tile_ok``: the head slot's tile has arrived (``slots_full`` is not 0) and is not
        # stale (the head slot was written in the cycle it was read, or, with a registered
        # read address, another slot was read, so ``head_tile`` is not the head's tile yet and
        # the slot is read again); one register, so the move is two LUT levels
        tile_ok = Signal(name="head_tile_ok")
        head = tags.o.payload
        avail = Signal(name="head_ready")
        move = Signal(name="move")
        out_valid = Signal(name="out_valid")
        out_beat = Signal.like(out.payload, name="out_beat", reset_less=True)
        tile = Signal(T * g.word_bits, name="head_tile")    # the tile buffer's read (below)
        m.d.comb += [
            avail.eq(tags.o.valid & (~head.has_data | tile_ok)),
            move.eq(avail & (~out_valid | out.ready)),
            tags.o.ready.eq(move),
            out.valid.eq(out_valid),
            out.payload.eq(out_beat),
        ]
        with m.If(~out_valid | out.ready):
            m.d.sync += [
                out_valid.eq(avail),
                out_beat.data.eq(tile),         # ignored when the beat has no data
                out_beat.has_data.eq(head.has_data),
                out_beat.stop.eq(head.stop),
                out_beat.last.eq(head.last),
            ]
        # (a data tile leaves: from the head's registers and the output's room, not through
        # ``move``, so that it is two LUT levels too)
        freed = Signal(name="freed")
        data_avail = Signal(name="head_tile_ready")
        m.d.comb += [data_avail.eq(tags.o.valid & head.has_data & tile_ok),
                     freed.eq(data_avail & (~out_valid | out.ready))]
        # the slot after the head is a register beside it (the wrap-around increment is not
        # on the path from the head pointer into the tile buffer's read address)
        rd_after = Signal.like(rd_slot, name="rd_slot_after", init=1 % K)
        rd_next = Signal.like(rd_slot, name="rd_slot_next")
        m.d.comb += rd_next.eq(Mux(freed, rd_after, rd_slot))
        # A tile of several lines leaves at most every other cycle anyway (the memory gives one
        # line a cycle), so the buffer is read at the head slot's register: the output's
        # handshake stays off the block RAM's address (the worst iCE40 load path, 21 ns over
        # four LUTs), and the new head's tile is read in the cycle after a move (``stale``).
        # A one-line tile reads the next head slot as the move happens, one tile a cycle.
        registered_read = len(lines) > 1
        if not registered_read and platform_family(platform) == "ecp5":
            # ECP5 (LUT RAM tile buffer): both candidates of the next head slot are read, the
            # head's and the one after it, and the move picks one behind the read registers,
            # so the output's handshake does not reach the LUT RAM's read address (the worst
            # path of SwiGLU I=256's loads, 10.8 ns: the tag FIFO's head through the move into
            # the read address). The same words in the same cycles for twice the LUT RAM.
            rd_head = tilebuf.read_port(domain="sync")
            rd_ahead = tilebuf.read_port(domain="sync")
            moved_on = Signal(name="read_moved_on")
            m.d.comb += [rd_head.addr.eq(rd_slot), rd_ahead.addr.eq(rd_after),
                         tile.eq(Mux(moved_on, rd_ahead.data, rd_head.data))]
            m.d.sync += moved_on.eq(freed)
        else:
            rd = tilebuf.read_port(domain="sync")
            m.d.comb += [rd.addr.eq(rd_slot if registered_read else rd_next), tile.eq(rd.data)]
        m.d.sync += [rd_slot.eq(rd_next), nfull.eq(count_step(nfull, completes, freed))]
        with m.If(freed):
            m.d.sync += rd_after.eq(Mux(rd_after == K - 1, 0, rd_after + 1))
        # the next head's flags from the count (registers); ``freed`` (which depends on
        # ``out.ready``) only chooses between comparisons made beside it. The slot written
        # this cycle is the next head slot when no other full slot lies between them: no full
        # slot is left after this cycle's move (a write needs a slot in flight, so ``nfull``
        # is below ``K`` whenever ``resp.valid``)
        # (``full_*``: the head slot is full after this cycle; ``ok_*``: and not read again;
        # for a move of a tile and for none, the move choosing last)
        full_freed = Mux(completes, nfull != 0, nfull >= 2)
        full_kept = Mux(completes, 1, nfull != 0)
        if registered_read:
            ok_freed = C(0, 1)
            ok_kept = full_kept & ~(resp.valid & (nfull == 0))
        else:
            ok_freed = full_freed & ~(resp.valid & (nfull == 1))
            ok_kept = full_kept & ~(resp.valid & (nfull == 0))
        m.d.sync += tile_ok.eq(Mux(freed, ok_freed, ok_kept))
        sent = Signal(name="request_sent")
        m.d.comb += sent.eq(reqq.o.valid & reqq.o.ready)
        req_room = below_after(nreqs, 2, alloc, sent)      # the burst queue will have room
        m.d.sync += [inflight.eq(count_step(inflight, alloc, freed)),
                     ntags.eq(count_step(ntags, take, move)),
                     nreqs.eq(count_step(nreqs, alloc, sent)),
                     # the output's move (``freed``, the latest of the handshakes) chooses last
                     # between the flag's two values (it went through the comparisons' choice
                     # and the AND: SwiGLU I=256's worst ECP5 path, the output register
                     # through the move into ``data_room``, 10.7 ns over 7 cells)
                     data_room.eq(Mux(freed,
                                      below_after(inflight, K, alloc, C(1, 1)) & req_room,
                                      below_after(inflight, K, alloc, C(0, 1)) & req_room)),
                     tag_room.eq(below_after(ntags, K + 2, take, move))]
        m.d.comb += self.busy.eq(reqq.o.valid | (inflight != 0) | tags.o.valid | out_valid)
        return m


class _WalkState:
    """Registers of an affine walk, and the logic that steps it (see LinearLoadUnit)."""

    def __init__(self, m, placement, out_shape, stride, offset):
        p = placement
        gc = p.grid[1]
        self.start_addr = p.tile_addr(offset)
        self.start_col = offset % gc
        # the indices and their flags: which dimension counts, the stop and the walk's end are
        # registers (hdl.walk)
        self.index = WalkIndex(out_shape)
        self.addr = Signal(p.geometry.addr_bits, init=self.start_addr, name="walk_addr")
        self.col = Signal(index_shape(gc), init=self.start_col, name="walk_col")
        self.stop = Signal(range(len(out_shape) + 1), name="walk_stop")
        m.d.comb += self.stop.eq(self.index.stop())
        self.final = self.index.final
        self._m, self._p = m, p
        self._out_shape, self._stride = out_shape, stride

    def step(self):
        """Statements (under the caller's condition) that advance the walk by one element."""
        m, p, ix = self._m, self._p, self.index
        out_shape, stride = self._out_shape, self._stride
        D = len(out_shape)
        gc = p.grid[1]
        m.d.sync += ix.advance()
        # (one add per dimension, the counting dimension choosing among the sums: the sums
        # start from the address register in parallel. A constant increment chosen first and
        # one adder put the choice in front of the carry chain: on the ECP5 GEMV 256x256's
        # median over 12 seeds fell from 185.2 to 170.4 MHz, for 2 fewer LUT levels on UP5K)
        with m.If(self.final):
            m.d.sync += [self.addr.eq(self.start_addr), self.col.eq(self.start_col)]
        for d in range(D):
            # Step dimension d (all deeper dimensions are at their last index and wrap to 0).
            with m.If(ix.counts(d)):
                delta = stride[d] - sum(stride[e] * (out_shape[e] - 1) for e in range(d + 1, D))
                q, r = divmod(delta, gc)
                col = Signal(range(2 * gc), name=f"walk_col_step{d}")
                m.d.comb += col.eq(self.col + r)
                base = q * p.row_step + r * p.col_step
                with m.If(col >= gc):
                    m.d.sync += [self.col.eq(col - gc),
                                 self.addr.eq(self.addr + (base + p.row_step - gc * p.col_step))]
                with m.Else():
                    m.d.sync += [self.col.eq(col), self.addr.eq(self.addr + base)]


class LinearLoadUnit(wiring.Component):
    """LinearOffChipLoad: read tiles of a tensor in an affine order (semantics section 4).

    Element ``idx`` (outermost first) of the walk over ``out_shape`` is the tile with linear index
    ``offset + sum(idx_d * stride_d)``; its stop is the number of innermost walk dimensions at
    their last index (a size-1 dimension always is), so the output is one tensor of rank
    ``len(out_shape)``, its last tile carrying ``last``. The walk is checked when the unit is
    built: every tile it reads lies inside the tensor.

    With a reference port (``ref_type`` given) the whole walk runs once per reference element;
    the last tile of that read gets the stop ``len(out_shape) + r`` where ``r`` is the reference
    element's stop, and the reference's ``last``. A stop-only reference beat ``S_r`` becomes a
    stop-only beat ``S_(len(out_shape) + r)`` and a bare ``Done`` stays a bare ``Done``. A reference
    beat is taken when the last burst of its read has been issued. Inputs are expected in the
    canonical stop framing (an element carries the stop that follows it); ``Done`` may be bare.

    Throughput: one line per cycle from the memory, ``len(placement.tile_lines)`` cycles per tile
    (but at least one); see the module doc.

    Parameters
    ----------
    placement : stepforge.hdl.memory.TensorPlacement
        The tensor (memory geometry, dtype, shape, tile, base address).
    out_shape : tuple of int
        Sizes of the walk, outermost first; ``()`` reads one tile.
    stride : tuple of int
        Stride of each walk dimension in tiles (0 re-reads, negative walks backwards).
    offset : int, default 0
        Linear index of the first tile.
    ref_type : stepforge.compiler.types.ElemType, optional
        Element type of the reference stream (its contents are ignored); enables ``ref``.
    ref_rank : int, optional
        Rank of the reference stream (required with ``ref_type``).
    row_bound : int or Mapping, optional
        For a reference of dynamic tiles (:func:`~stepforge.contract.beat.element_layout`).
    buffer_tiles : int, optional
        Slots of the tile buffer (default ``mem_latency + 6``).

    Members
    -------
    ref : ``In(beat_signature(ref_type, ref_rank))``
        Only with ``ref_type``.
    out : ``Out(beat_signature(Tile(dtype, tr, tc), rank))``
        ``rank = len(out_shape)`` (+ ``ref_rank`` with a reference).
    mem : ``Out(placement.port("read"))``
    status : ``Out(StatusSignature)``
        Never raises ``error``.

    Raises
    ------
    ValueError
        A malformed walk or one that leaves the tensor.
    """

    @quiet_on_error
    def __init__(self, placement, out_shape, stride, *, offset=0, ref_type=None, ref_rank=None,
                 row_bound=None, buffer_tiles=None):
        _check_placement(placement, "LinearLoadUnit")
        out_shape = check_ints("LinearLoadUnit", "out_shape", out_shape, 1)
        stride = check_ints("LinearLoadUnit", "stride", stride, length=len(out_shape))
        check_int("LinearLoadUnit", "offset", offset)
        lo = hi = offset
        for n, s in zip(out_shape, stride):
            lo, hi = lo + min(0, s * (n - 1)), hi + max(0, s * (n - 1))
        check(lo >= 0 and hi < placement.ntiles, "LinearLoadUnit", "walk (out_shape, stride, offset)",
              f"within the {placement.ntiles} tiles of tensor {placement.shape} (it reads tile "
              f"{lo if lo < 0 else hi})", (out_shape, stride, offset))
        check((ref_type is None) == (ref_rank is None), "LinearLoadUnit", "ref_type and ref_rank",
              "both given or both None", (ref_type, ref_rank))
        if ref_type is not None:
            check(isinstance(ref_type, ElemType), "LinearLoadUnit", "ref_type", "an element type",
                  ref_type, error=TypeError)
            check_int("LinearLoadUnit", "ref_rank", ref_rank, 0)
        self.placement, self.out_shape, self.stride, self.offset = placement, out_shape, stride, offset
        self.ref_type, self.ref_rank, self.row_bound = ref_type, ref_rank, row_bound
        self.buffer_tiles = _default_buffer(placement, buffer_tiles, "LinearLoadUnit")
        self._explicit_buffer = buffer_tiles
        self.tile_type = Tile(placement.dtype, *placement.tile)
        self.rank = len(out_shape) + (ref_rank or 0)
        members = {}
        if ref_type is not None:
            members["ref"] = In(beat_signature(ref_type, ref_rank, row_bound=row_bound))
        members.update({
            "out": Out(beat_signature(self.tile_type, self.rank)),
            "mem": Out(placement.port("read")),
            "status": Out(StatusSignature),
        })
        super().__init__(members)

    @property
    def onchip_bytes(self):
        """Bytes of the tile buffer."""
        return self.buffer_tiles * self.placement.tile_bytes

    def __repr__(self):
        args = [repr(self.placement), repr(self.out_shape), repr(self.stride)]
        if self.offset:
            args.append(f"offset={self.offset}")
        if self.ref_type is not None:
            args += [f"ref_type={self.ref_type!r}", f"ref_rank={self.ref_rank}"]
        if self.row_bound is not None:
            args.append(f"row_bound={self.row_bound!r}")
        if self._explicit_buffer is not None:
            args.append(f"buffer_tiles={self.buffer_tiles}")
        return f"LinearLoadUnit({', '.join(args)})"

    def elaborate(self, platform):
        m = Module()
        D = len(self.out_shape)
        m.submodules.fetch = fetch = _TileFetcher(self.placement, self.rank, self.buffer_tiles)
        wiring.connect(m, wiring.flipped(self.out), fetch.out)
        wiring.connect(m, wiring.flipped(self.mem), fetch.mem)
        walk = _WalkState(m, self.placement, self.out_shape, self.stride, self.offset)
        cmd = fetch.cmd
        step = Signal(name="step")
        m.d.comb += [cmd.payload.addr.eq(walk.addr), step.eq(cmd.valid & cmd.ready)]
        if self.ref_type is None:
            finished = Signal(name="finished")
            m.d.comb += [cmd.valid.eq(~finished), cmd.payload.has_data.eq(1),
                         cmd.payload.stop.eq(walk.stop), cmd.payload.last.eq(walk.final)]
            with m.If(step):
                walk.step()
                with m.If(walk.final):
                    m.d.sync += finished.eq(1)
            m.d.comb += self.status.stall_in.eq(0)
        else:
            ref = self.ref
            r = ref.payload
            m.d.comb += [cmd.valid.eq(ref.valid), cmd.payload.has_data.eq(r.has_data),
                         cmd.payload.last.eq(r.last & (walk.final | ~r.has_data))]
            with m.If(r.has_data):
                m.d.comb += cmd.payload.stop.eq(Mux(walk.final, D + r.stop, walk.stop))
                m.d.comb += ref.ready.eq(cmd.ready & walk.final)
                with m.If(step):
                    walk.step()
            with m.Else():
                m.d.comb += cmd.payload.stop.eq(Mux(r.stop != 0, D + r.stop, 0))
                m.d.comb += ref.ready.eq(cmd.ready)
            m.d.comb += self.status.stall_in.eq(~ref.valid & ~fetch.busy)
        m.d.comb += [self.status.busy.eq(fetch.busy | cmd.valid),
                     self.status.stall_out.eq(self.out.valid & ~self.out.ready)]
        return m


class RandomLoadUnit(wiring.Component):
    """RandomOffChipLoad: one tile per address, a gather (semantics section 4).

    Each ``addr`` element is a linear tile index ``k``; the output beat is tile ``k`` with the
    address beat's ``stop`` and ``last`` (stop-only and bare-``Done`` beats pass through in order).
    An index outside the tensor (``k >= ntiles``) raises ``ADDRESS_RANGE``: that address beat is
    not taken, nothing more is requested, and tiles already requested still leave.

    Parameters
    ----------
    placement : stepforge.hdl.memory.TensorPlacement
    addr_rank : int
        Rank of the address stream (and of the output).
    buffer_tiles : int, optional
        Slots of the tile buffer (default ``mem_latency + 6``).

    Members
    -------
    addr : ``In(beat_signature(Index(), addr_rank))``
    out : ``Out(beat_signature(Tile(dtype, tr, tc), addr_rank))``
    mem : ``Out(placement.port("read"))``
    status : ``Out(StatusSignature)``
        ``error`` with ``ErrorCode.ADDRESS_RANGE``.
    """

    @quiet_on_error
    def __init__(self, placement, addr_rank, *, buffer_tiles=None):
        _check_placement(placement, "RandomLoadUnit")
        stop_width(addr_rank)  # validates the rank
        self.placement, self.addr_rank = placement, addr_rank
        self.buffer_tiles = _default_buffer(placement, buffer_tiles, "RandomLoadUnit")
        self._explicit_buffer = buffer_tiles
        self.tile_type = Tile(placement.dtype, *placement.tile)
        super().__init__({
            "addr": In(beat_signature(Index(), addr_rank)),
            "out": Out(beat_signature(self.tile_type, addr_rank)),
            "mem": Out(placement.port("read")),
            "status": Out(StatusSignature),
        })

    @property
    def onchip_bytes(self):
        """Bytes of the tile buffer."""
        return self.buffer_tiles * self.placement.tile_bytes

    def __repr__(self):
        extra = "" if self._explicit_buffer is None else f", buffer_tiles={self.buffer_tiles}"
        return f"RandomLoadUnit({self.placement!r}, {self.addr_rank}{extra})"

    def elaborate(self, platform):
        m = Module()
        p = self.placement
        m.submodules.fetch = fetch = _TileFetcher(p, self.addr_rank, self.buffer_tiles)
        wiring.connect(m, wiring.flipped(self.out), fetch.out)
        wiring.connect(m, wiring.flipped(self.mem), fetch.mem)
        a = self.addr.payload
        bad = Signal(name="bad_index")
        m.d.comb += bad.eq(a.has_data & (a.data >= p.ntiles))
        raise_error(m, self.status, ErrorCode.ADDRESS_RANGE, self.addr.valid & bad)
        tile_addr = Signal(p.geometry.addr_bits, name="tile_addr")
        m.d.comb += tile_addr.eq(p.address_of(a.data))
        cmd = fetch.cmd
        ok = Signal(name="ok")
        m.d.comb += [
            ok.eq(~bad & ~self.status.error),
            cmd.valid.eq(self.addr.valid & ok),
            cmd.payload.addr.eq(tile_addr),
            cmd.payload.has_data.eq(a.has_data),
            cmd.payload.stop.eq(a.stop),
            cmd.payload.last.eq(a.last),
            self.addr.ready.eq(cmd.ready & ok),
            self.status.busy.eq(fetch.busy | self.addr.valid),
            self.status.stall_in.eq(~self.addr.valid & ~fetch.busy),
            self.status.stall_out.eq(self.out.valid & ~self.out.ready),
        ]
        return m
