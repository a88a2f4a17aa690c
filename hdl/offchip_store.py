"""Off-chip stores as hardware: LinearOffChipStore (in order) and RandomOffChipStore (scatter).

Both units write through a *tile writer*: it holds up to two tiles, issues a tile's burst on the
memory write port when the tile enters (:class:`~stepforge.hdl.memory.TensorPlacement`: one
segment per tile row, a tensor row apart, or a single segment when the rows are contiguous) and
presents the head tile's words as the lines of its burst (``placement.tile_lines``), cut exactly
as the memory consumes them. The tile *retires* in the cycle its last line is taken; a write
taken in a cycle is visible to every read granted later. The next tile's burst is already
requested while the head tile's lines go out, so a stream of tiles is written at one line per
cycle (the memory's rate) when the memory is free.
"""

from amaranth.hdl import C, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from ..compiler.types import Bool, Index, Tile
from ..contract.beat import beat_signature, stop_width
from .fifo import StreamFIFO
from .memory import TensorPlacement, index_shape, quiet_on_error
from .unit import ErrorCode, StatusSignature, check, check_int, raise_error

__all__ = ["LinearStoreUnit", "RandomStoreUnit"]


def _check_placement(placement, unit):
    check(isinstance(placement, TensorPlacement), unit, "placement", "a TensorPlacement",
          placement, error=TypeError)


class _TileWriter(wiring.Component):
    """The shared back end of the store units (module doc).

    Members
    -------
    cmd : ``In(stream.Signature({"addr", "data"}))``
        A tile's first word address and its bits (the beat's ``data`` field).
    mem : ``Out(placement.port("write"))``
    busy : ``Out(1)``
        A tile is held (queued or being written).
    retire : ``Out(1)``
        The held tile's last line is taken in this cycle.

    ``cmd.ready`` depends only on registers (the tile queue's room), so the store unit's
    ``in0.ready`` does not wait on the memory's ``req.ready``. ``queue`` is the tiles held (2,
    or 1: a tile enters only after the previous one retired, ``lines + 2`` cycles apart).
    """

    def __init__(self, placement, queue=2):
        self.placement, self.queue = placement, queue
        g = placement.geometry
        self.cmd_layout = data.StructLayout({"addr": unsigned(g.addr_bits),
                                             "data": unsigned(placement.tile_words * g.word_bits)})
        super().__init__({
            "cmd": In(stream.Signature(self.cmd_layout)),
            "mem": Out(placement.port("write")),
            "busy": Out(1),
            "retire": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        p, g = self.placement, self.placement.geometry
        L, T = g.lanes, p.tile_words
        counts = p.tile_lines                      # words of each line of the tile's burst
        starts = [sum(counts[:i]) for i in range(len(counts))]
        nlines = len(counts)
        cmd, mem = self.cmd, self.mem

        # Tiles wait in a queue of two (or one), and their bursts' addresses in a queue beside it.
        # A tile enters whenever the tile queue has room: ``cmd.ready`` is a register's output,
        # not the memory's ``req.ready``. Its burst is requested in the same cycle when no
        # earlier burst waits (so the memory knows the next burst while the current one's lines
        # go out and its lines follow without a gap: the memory offers a burst's first line two
        # cycles after it accepts the request), else it waits in the address queue. A tile
        # leaves its queue only after its last line, so after its burst was requested: the
        # address queue never holds more entries than the tile queue and has room when it has.
        Q = self.queue
        # (two tiles are kept in registers enabled by the push alone, so the memory's grant of
        # the last line, which pops the head tile, reaches no wide enable)
        m.submodules.tiles = tiles = StreamFIFO(unsigned(T * g.word_bits), Q, counters=False,
                                                split=True)
        m.submodules.bursts = bursts = StreamFIFO(unsigned(g.addr_bits), Q, counters=False)
        enter = Signal(name="tile_enter")
        direct = Signal(name="burst_direct")          # no burst waits: request this one now
        m.d.comb += [
            cmd.ready.eq(tiles.i.ready),
            enter.eq(cmd.valid & cmd.ready),
            tiles.i.valid.eq(cmd.valid),
            tiles.i.payload.eq(cmd.payload.data),
            direct.eq(~bursts.o.valid),
            mem.req.valid.eq(Mux(direct, enter, bursts.o.valid)),
            bursts.o.ready.eq(mem.req.ready),
            bursts.i.valid.eq(enter & ~(direct & mem.req.ready)),
            bursts.i.payload.eq(cmd.payload.addr),
        ]
        p.request(m, mem, Mux(direct, cmd.payload.addr, bursts.o.payload))

        cur = tiles.o.valid
        tile = tiles.o.payload
        line = Signal(index_shape(nlines), name="line")        # the next line of the head tile
        lanes = []
        for i in range(L):
            reach = [(k, s) for k, s in enumerate(starts) if i < counts[k]]
            if not reach:       # no line ever puts a word in this lane (a tile narrower than a line)
                lanes.append(C(0, g.word_bits))
                continue
            word = Signal(g.word_bits, name=f"lane{i}_word")
            for k, s in reach:
                with m.If(line == k):
                    m.d.comb += word.eq(tile.word_select(s + i, g.word_bits))
            lanes.append(word)
        m.d.comb += mem.data.payload.eq(Cat(*lanes))
        taken = Signal(name="line_taken")
        m.d.comb += [mem.data.valid.eq(cur),
                     taken.eq(mem.data.valid & mem.data.ready),
                     self.retire.eq(taken & (line == nlines - 1)),
                     tiles.o.ready.eq(self.retire)]
        with m.If(taken):
            m.d.sync += line.eq(Mux(line == nlines - 1, 0, line + 1))
        m.d.comb += self.busy.eq(cur)
        return m


class LinearStoreUnit(wiring.Component):
    """LinearOffChipStore: write a stream's tiles to tiles 0, 1, 2, ... of a tensor.

    The ``k``-th element goes to linear tile index ``k`` (row-major over the tile grid); stops are
    consumed. A ``k``-th element with ``k >= ntiles`` raises ``ADDRESS_RANGE`` and is not taken.
    ``done`` rises once the beat with ``last`` has been taken and every write has been taken by
    the memory (so a read granted from then on sees the whole tensor).

    Parameters
    ----------
    placement : stepforge.hdl.memory.TensorPlacement
    rank : int
        Rank of the input stream.
    row_bound : not used
        (The input's tiles are static.)
    tile_queue : int, default 2
        Tiles the unit holds: 2 writes a tile per ``len(placement.tile_lines)`` cycles; 1 (one
        tile register less) a tile per ``len(placement.tile_lines) + 2`` cycles, for a
        stream whose tiles are at least that far apart (the lowering: an Accum's results).

    Members
    -------
    in0 : ``In(beat_signature(Tile(dtype, tr, tc), rank))``
    mem : ``Out(placement.port("write"))``
    done : ``Out(1)``
        Sticky: the stream has ended and all its writes are in memory.
    status : ``Out(StatusSignature)``
        ``error`` with ``ErrorCode.ADDRESS_RANGE``.
    """

    @quiet_on_error
    def __init__(self, placement, rank, *, tile_queue=2):
        _check_placement(placement, "LinearStoreUnit")
        stop_width(rank)
        self.placement, self.rank = placement, rank
        self.tile_queue = check_int("LinearStoreUnit", "tile_queue", tile_queue, 1, 2)
        self.tile_type = Tile(placement.dtype, *placement.tile)
        super().__init__({
            "in0": In(beat_signature(self.tile_type, rank)),
            "mem": Out(placement.port("write")),
            "done": Out(1),
            "status": Out(StatusSignature),
        })

    @property
    def onchip_bytes(self):
        """Bytes of the tile register."""
        return self.placement.tile_bytes

    def __repr__(self):
        queue = "" if self.tile_queue == 2 else f", tile_queue={self.tile_queue}"
        return f"LinearStoreUnit({self.placement!r}, {self.rank}{queue})"

    def elaborate(self, platform):
        m = Module()
        p = self.placement
        gc = p.grid[1]
        m.submodules.writer = writer = _TileWriter(p, self.tile_queue)
        wiring.connect(m, wiring.flipped(self.mem), writer.mem)
        i = self.in0
        count = Signal(range(p.ntiles + 1), name="count")
        filled = Signal(name="filled")              # count == ntiles, as a register
        addr = Signal(p.geometry.addr_bits, init=p.base, name="tile_addr")
        col = Signal(index_shape(gc), name="tile_col")
        seen_last = Signal(name="seen_last")
        bad = Signal(name="too_many")
        m.d.comb += bad.eq(i.payload.has_data & filled)
        fault = Signal(name="fault")
        m.d.comb += fault.eq(i.valid & bad & ~seen_last)
        raise_error(m, self.status, ErrorCode.ADDRESS_RANGE, fault)
        # ``closed``: the stream has ended, the tensor is full or the unit has failed
        # (``seen_last | filled | error``), and ``ended``: the stream has ended or the unit has
        # failed, each one register beside the others, so a beat's acceptance is one gate from
        # registers (a tile's reaches the memory's request queue in the same cycle, and the
        # input FIFO's ``valid`` into the count and the flags was a worst path of SwiGLU I=256
        # on the ECP5: 10.6 ns over 5 cells)
        closed = Signal(name="closed")
        ended = Signal(name="ended")
        ok = Signal(name="ok")
        m.d.comb += [
            ok.eq(~ended & ~bad),
            writer.cmd.valid.eq(i.valid & i.payload.has_data & ~closed),
            writer.cmd.payload.addr.eq(addr),
            writer.cmd.payload.data.eq(i.payload.data),
            i.ready.eq(Mux(i.payload.has_data, ~closed & writer.cmd.ready, ~ended)),
        ]
        take = Signal(name="take")
        data_in = Signal(name="data_in")
        m.d.comb += [take.eq(i.valid & i.ready), data_in.eq(take & i.payload.has_data)]
        with m.If(data_in):
            m.d.sync += [count.eq(count + 1), filled.eq(count == p.ntiles - 1)]
            with m.If(col == gc - 1):
                m.d.sync += [col.eq(0), addr.eq(addr + (p.row_step - (gc - 1) * p.col_step))]
            with m.Else():
                m.d.sync += [col.eq(col + 1), addr.eq(addr + p.col_step)]
        with m.If(take & i.payload.last):
            m.d.sync += seen_last.eq(1)
        m.d.sync += [closed.eq(closed | fault | (take & i.payload.last)
                               | (data_in & (count == p.ntiles - 1))),
                     ended.eq(ended | fault | (take & i.payload.last))]
        m.d.comb += [
            self.done.eq(seen_last & ~writer.busy),
            self.status.busy.eq(writer.busy | (i.valid & ok)),
            self.status.stall_in.eq(~i.valid & ~seen_last & ~writer.busy),
            self.status.stall_out.eq((writer.mem.req.valid & ~writer.mem.req.ready)
                                     | (writer.mem.data.valid & ~writer.mem.data.ready)),
        ]
        return m


class RandomStoreUnit(wiring.Component):
    """RandomOffChipStore: a scatter; one acknowledgement per address (semantics section 4).

    Addresses and data are paired element by element: the ``k``-th ``addr`` element (a linear
    tile index) takes the ``k``-th ``data`` element, whatever the data stream's stops (they are
    consumed). Writes happen in stream order, so a later write to the same tile wins. Each
    element's acknowledgement (``True``, with the address beat's ``stop`` and ``last``) leaves
    after its write has been taken by the memory; stop-only and bare-``Done`` address beats are
    acknowledged in order as beats without data. The final acknowledgement waits until the data
    stream has ended too.

    Errors (``status.error`` with the code; the offending beat is not taken and the unit stops
    taking input):

    * ``ADDRESS_RANGE``: an address ``>= ntiles``;
    * ``EARLY_END``: an address element after the data stream has ended;
    * ``LEFTOVER``: a data element after the address stream has ended.

    Parameters
    ----------
    placement : stepforge.hdl.memory.TensorPlacement
    addr_rank : int
        Rank of the address stream (and of ``ack``).
    data_rank : int
        Rank of the data stream.

    Members
    -------
    addr : ``In(beat_signature(Index(), addr_rank))``
    data : ``In(beat_signature(Tile(dtype, tr, tc), data_rank))``
    ack : ``Out(beat_signature(Bool(), addr_rank))``
    mem : ``Out(placement.port("write"))``
    status : ``Out(StatusSignature)``
    """

    #: Depth of the acknowledgement queue.
    ACK_DEPTH = 3

    @quiet_on_error
    def __init__(self, placement, addr_rank, data_rank):
        _check_placement(placement, "RandomStoreUnit")
        stop_width(addr_rank)
        stop_width(data_rank)
        self.placement, self.addr_rank, self.data_rank = placement, addr_rank, data_rank
        self.tile_type = Tile(placement.dtype, *placement.tile)
        super().__init__({
            "addr": In(beat_signature(Index(), addr_rank)),
            "data": In(beat_signature(self.tile_type, data_rank)),
            "ack": Out(beat_signature(Bool(), addr_rank)),
            "mem": Out(placement.port("write")),
            "status": Out(StatusSignature),
        })

    @property
    def onchip_bytes(self):
        """Bytes of the tile register."""
        return self.placement.tile_bytes

    def __repr__(self):
        return f"RandomStoreUnit({self.placement!r}, {self.addr_rank}, {self.data_rank})"

    def elaborate(self, platform):
        m = Module()
        p = self.placement
        depth = self.ACK_DEPTH
        m.submodules.writer = writer = _TileWriter(p)
        wiring.connect(m, wiring.flipped(self.mem), writer.mem)
        a, d, ack = self.addr, self.data, self.ack
        sw = stop_width(self.addr_rank)
        tag_layout = data.StructLayout({"has_data": 1, "stop": unsigned(sw), "last": 1})
        m.submodules.acks = acks = fifo.SyncFIFO(width=tag_layout.size, depth=depth)

        error = self.status.error
        addr_ended = Signal(name="addr_ended")
        data_ended = Signal(name="data_ended")
        # the tags of the tiles in the writer (up to two), acknowledged as each tile retires
        m.submodules.pending_tags = pend = fifo.SyncFIFO(width=tag_layout.size, depth=2)
        pending = Signal(name="pending")                 # a tile in the writer awaits its ack
        m.d.comb += pending.eq(pend.r_rdy)

        addr_elem = Signal(name="addr_elem")
        data_elem = Signal(name="data_elem")
        bad = Signal(name="bad_index")
        m.d.comb += [addr_elem.eq(a.valid & a.payload.has_data & ~addr_ended),
                     data_elem.eq(d.valid & d.payload.has_data & ~data_ended),
                     bad.eq(a.payload.data >= p.ntiles)]
        raise_error(m, self.status, ErrorCode.ADDRESS_RANGE, addr_elem & bad)
        raise_error(m, self.status, ErrorCode.EARLY_END, addr_elem & ~bad & data_ended)
        raise_error(m, self.status, ErrorCode.LEFTOVER, data_elem & addr_ended)

        room = Signal(name="room")
        m.d.comb += room.eq(acks.level + pend.level < depth)
        pair = Signal(name="pair")
        m.d.comb += [
            writer.cmd.valid.eq(addr_elem & data_elem & ~bad & ~error & room),
            writer.cmd.payload.addr.eq(p.address_of(a.payload.data)),
            writer.cmd.payload.data.eq(d.payload.data),
            pair.eq(writer.cmd.valid & writer.cmd.ready),
        ]
        # A stop-only or bare-Done address beat is acknowledged after every earlier element.
        marker = Signal(name="marker")
        m.d.comb += marker.eq(a.valid & ~a.payload.has_data & ~addr_ended & ~error & ~pending
                              & acks.w_rdy)
        # A data beat without an element is consumed at once.
        skip = Signal(name="skip")
        m.d.comb += skip.eq(d.valid & ~d.payload.has_data & ~data_ended & ~error)
        m.d.comb += [a.ready.eq(pair | marker), d.ready.eq(pair | skip)]
        with m.If((pair | marker) & a.payload.last):
            m.d.sync += addr_ended.eq(1)
        with m.If((pair | skip) & d.payload.last):
            m.d.sync += data_ended.eq(1)

        tag_in = Signal(tag_layout, name="tag_in")
        m.d.comb += [tag_in.has_data.eq(a.payload.has_data), tag_in.stop.eq(a.payload.stop),
                     tag_in.last.eq(a.payload.last)]
        m.d.comb += [pend.w_en.eq(pair), pend.w_data.eq(tag_in), pend.r_en.eq(writer.retire),
                     acks.w_en.eq(writer.retire | marker),
                     acks.w_data.eq(Mux(writer.retire, pend.r_data, tag_in))]

        head = data.View(tag_layout, acks.r_data)
        m.d.comb += [
            ack.valid.eq(acks.r_rdy & (~head.last | data_ended)),
            ack.payload.data.eq(head.has_data),
            ack.payload.has_data.eq(head.has_data),
            ack.payload.stop.eq(head.stop),
            ack.payload.last.eq(head.last),
            acks.r_en.eq(ack.valid & ack.ready),
            self.status.busy.eq(pending | writer.busy | ack.valid),
            self.status.stall_in.eq(~addr_ended & ~pending & ~a.valid
                                    | addr_elem & ~d.valid & ~data_ended),
            self.status.stall_out.eq(ack.valid & ~ack.ready),
        ]
        return m
