"""The edge FIFO: a stream-to-stream queue with occupancy and high-water outputs."""

from types import SimpleNamespace

from amaranth.hdl import C, Module, Mux, Shape, Signal, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .flags import below_after, count_step
from .ram_attrs import NO_COLLISION

__all__ = ["StreamFIFO", "lut_queue"]


class StreamFIFO(wiring.Component):
    """A synchronous first-in first-out queue between two streams.

    Every beat accepted on ``i`` leaves on ``o`` once, in order. ``i.ready`` and ``o.valid`` are
    functions of registered state only, so a chain of units joined by StreamFIFOs has no
    combinational path from one unit's ``ready`` or ``valid`` to the next: the FIFO is the cut
    that makes units composable and closes timing.

    Two queue implementations are offered, with the timing of the queues of
    :mod:`amaranth.lib.fifo`.

    * ``buffered=False`` (the default): a head register in front of a queue of ``depth - 1``
      beats with the timing of a :class:`~amaranth.lib.fifo.SyncFIFO` (:func:`lut_queue`, whose
      storage's write enable is a register of its own). ``o`` comes from flip-flops, so
      no LUT-RAM read sits on the path into the next unit, and the timing is that of a
      ``SyncFIFO`` of ``depth``: a beat written in cycle ``t`` is offered on ``o`` in cycle
      ``t + 1`` and a FIFO of depth 2 sustains one beat per cycle. Right for the small, wide
      FIFOs on most edges (a beat of a 4x4 int16 tile is 260 bits wide and rarely needs more
      than 2-4 entries); a depth-2 FIFO is two registers.
    * ``buffered=True``: the timing of :class:`~amaranth.lib.fifo.SyncFIFOBuffered`, the
      storage read synchronously into an output register, so it maps to block RAM
      (``SB_RAM40_4K``, ``DP16KD``) and its output is registered, at the cost of one more cycle
      of latency (a beat written in cycle ``t`` is offered in cycle ``t + 2``) and of
      throughput at small depths: it sustains one beat per cycle only from depth 3 on (depth 2
      moves at most one beat every other cycle). Use it for the deep FIFOs that the sizing pass
      derives from symbol bounds. Its flags are registers of their own
      (:meth:`_storage_and_output`). With ``block_ram=True`` the storage is always block RAM
      (``ram_style = "block"``), however small: a wide beat then costs block RAMs instead of
      two registers and a multiplexer per bit (a 4x4 int8 tile's 132-bit beat: 9
      ``SB_RAM40_4K`` instead of about 370 logic cells on a UP5K).

    A two-entry FIFO (``buffered=False``) of a beat, a :class:`~amaranth.lib.data.StructLayout`
    with a ``data`` field of 8 bits or more, keeps ``data`` apart from the other fields: two
    registers written in turn and read through a multiplexer by a one-bit read pointer, beside
    a two-entry queue of the other fields (same timing, same flip-flops, the multiplexer instead
    of the head's). A wide beat's registers are then enabled by the producer's push alone, and
    the consumer's ``ready`` (often the deepest decision of the next unit) reaches only the read
    pointer and the narrow fields, not the enable of a hundred flip-flops: the worst iCE40 paths
    were such enables (``o.ready`` through the head's refill, 19-20 ns on a UP5K). With
    ``split=True`` a payload that is all data (a queue of tiles) is kept so, with registered
    ``valid`` and ``ready`` flags of its own.

    With either implementation a depth-1 FIFO alternates between full and empty and so moves at
    most one beat every other cycle. ``level`` counts every accepted beat that has not left, so
    it equals (beats accepted on ``i``) - (beats sent on ``o``) after every clock edge, and
    reaches ``depth`` when the consumer stalls.

    Parameters
    ----------
    shape : amaranth.hdl.ShapeLike
        Payload shape, usually a beat layout (:func:`~stepforge.contract.beat.beat_layout`).
    depth : int
        Number of entries, ``>= 1``.
    buffered : bool, default False
        Select :class:`~amaranth.lib.fifo.SyncFIFOBuffered` instead of
        :class:`~amaranth.lib.fifo.SyncFIFO` (see above).
    block_ram : bool, default False
        With ``buffered`` and ``depth >= 2``: the storage is block RAM whatever its size (Yosys
        would keep a small memory in flip-flops).
    counters : bool, default True
        Provide ``high_water`` (the simulation target's statistic); a board build leaves it
        out. ``level`` is always there (unused, it costs nothing).
    split : bool, optional
        For ``depth=2`` without ``buffered``: keep the data apart (see above). By default a beat
        layout's ``data`` field of 8 bits or more is; ``True`` keeps a whole payload that is all
        data apart (a tile queue), ``False`` never.

    Members
    -------
    i : ``In(stream.Signature(shape))``
        Beats to enqueue. ``i.ready`` is high whenever ``level < depth`` (for ``buffered=True``:
        whenever the storage behind the output register has room); it does not depend on
        ``i.valid`` or ``o.ready`` combinationally.
    o : ``Out(stream.Signature(shape))``
        Beats in the order they were accepted.
    level : ``Out(range(depth + 1))``
        Current occupancy.
    high_water : ``Out(range(depth + 1))``
        Only with ``counters``.
        Sticky maximum occupancy since reset: the largest value ``level`` held at any earlier
        clock edge (a register, so it follows a new maximum of ``level`` one cycle later).
        Cleared only by reset.

    Raises
    ------
    ValueError
        ``depth`` is not an int ``>= 1``, or ``block_ram`` without ``buffered`` and
        ``depth >= 2``.
    """

    def __init__(self, shape, depth, *, buffered=False, block_ram=False, counters=True,
                 split=None):
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError(f"StreamFIFO depth must be an int >= 1, not {depth!r}")
        if block_ram and not (buffered and depth >= 2):
            raise ValueError(f"StreamFIFO block_ram=True needs buffered=True and depth >= 2 (the "
                             f"block RAM's synchronous read is the buffered queue's), not "
                             f"buffered={buffered!r}, depth={depth!r}")
        self._shape = shape
        self._width = Shape.cast(shape).width
        self._depth = depth
        self._buffered = bool(buffered)
        self._block_ram = bool(block_ram)
        self._counters = bool(counters)
        self._split = split
        members = {"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape)),
                   "level": Out(range(depth + 1))}
        if counters:
            members["high_water"] = Out(range(depth + 1))
        super().__init__(members)

    @property
    def shape(self):
        """The payload shape."""
        return self._shape

    @property
    def depth(self):
        """The number of entries."""
        return self._depth

    @property
    def buffered(self):
        """Whether the queue is :class:`~amaranth.lib.fifo.SyncFIFOBuffered`."""
        return self._buffered

    @property
    def block_ram(self):
        """Whether the buffered queue's storage is block RAM whatever its size."""
        return self._block_ram

    def __repr__(self):
        buffered = ", buffered=True" if self._buffered else ""
        block_ram = ", block_ram=True" if self._block_ram else ""
        counters = "" if self._counters else ", counters=False"
        split = "" if self._split is None else f", split={self._split}"
        return (f"StreamFIFO({self._shape!r}, depth={self._depth}{buffered}{block_ram}"
                f"{counters}{split})")

    def elaborate(self, platform):
        m = Module()
        if self._buffered and self._depth == 1:
            m.submodules.queue = queue = fifo.SyncFIFOBuffered(width=self._width, depth=1)
            m.d.comb += [
                queue.w_data.eq(self.i.payload),
                queue.w_en.eq(self.i.valid),
                self.i.ready.eq(queue.w_rdy),
                self.o.payload.eq(queue.r_data),
                self.o.valid.eq(queue.r_rdy),
                queue.r_en.eq(self.o.ready),
            ]
            level = queue.level
        elif self._buffered:
            level = self._storage_and_output(m)
        elif self._split_data():
            level = self._data_apart(m)
        else:
            level = self._head_and_queue(m)
        m.d.comb += self.level.eq(level)
        if self._counters:
            with m.If(level > self.high_water):
                m.d.sync += self.high_water.eq(level)
        return m

    def _storage_and_output(self, m):
        """``buffered=True`` from depth 2: a memory of ``depth - 1`` beats read synchronously
        into the output register, with the timing of
        :class:`~amaranth.lib.fifo.SyncFIFOBuffered` of ``depth`` (a beat written in cycle
        ``t`` is offered in cycle ``t + 2``). Its ``i.ready`` and "the memory holds a beat" are
        registers set from the count's comparisons (:func:`~stepforge.hdl.flags.below_after`),
        and the count steps by a multiplexer (:func:`~stepforge.hdl.flags.count_step`): the
        handshakes only choose between values made from registers (Amaranth's queue compares
        its count in the write's and the read's enables, the worst iCE40 load unit paths).
        Returns the level."""
        inner = self._depth - 1
        # (a collision never happens: the slot written is ``produce``, the slot read is
        # ``consume``, and they are the same only when the memory is empty, which reads
        # nothing, or full, which writes nothing)
        attrs = {"ram_style": "block", **NO_COLLISION} if self._block_ram else None
        storage = m.submodules.storage = Memory(shape=unsigned(self._width), depth=inner, init=[],
                                                attrs=attrs)
        wr = storage.write_port()
        rd = storage.read_port(domain="sync")
        produce = Signal(range(inner), name="produce")
        consume = Signal(range(inner), name="consume")
        stored = Signal(range(inner + 1), name="stored")
        room = Signal(name="room", init=1)
        nonempty = Signal(name="stored_nonempty")
        out_valid = Signal(name="out_valid")
        push = Signal(name="push")
        fetch = Signal(name="fetch")                  # the memory's head moves to the output
        m.d.comb += [
            self.i.ready.eq(room),
            push.eq(self.i.valid & room),
            fetch.eq(nonempty & (~out_valid | self.o.ready)),
            # the slot at ``produce`` is free whenever there is room, so it follows the input:
            # its write enable is the registered ``room``, not the producer's ``valid`` (the
            # worst iCE40 load unit paths went from the walk's last step through the push into
            # the tag queue's storage, 5 LUT levels)
            wr.addr.eq(produce), wr.data.eq(self.i.payload), wr.en.eq(room),
            rd.addr.eq(consume), rd.en.eq(fetch),
            self.o.payload.eq(rd.data), self.o.valid.eq(out_valid),
        ]

        def advance(ptr):
            return ptr.eq(Mux(ptr == inner - 1, 0, ptr + 1)) if inner > 1 else ptr.eq(0)

        with m.If(push):
            m.d.sync += advance(produce)
        with m.If(fetch):
            m.d.sync += [advance(consume), out_valid.eq(1)]
        with m.Elif(self.o.ready):
            m.d.sync += out_valid.eq(0)
        m.d.sync += [
            stored.eq(count_step(stored, push, fetch)),
            room.eq(below_after(stored, inner, push, fetch)),
            nonempty.eq(~below_after(stored, 1, push, fetch)),
        ]
        return stored + out_valid

    def _split_data(self):
        """Whether the wide ``data`` field (or, with ``split=True``, the whole payload) is kept
        apart (see the class doc)."""
        if self._depth != 2 or self._buffered:
            return False
        if self._split is not None:
            return self._split
        layout = self._shape
        return (isinstance(layout, data.StructLayout) and "data" in layout.members
                and len(layout.members) > 1 and Shape.cast(layout.members["data"]).width >= 8)

    def _data_apart(self, m):
        """The data in two registers with write and read pointers. The other fields of a beat
        wait in a two-entry StreamFIFO of their own that decides ``valid``, ``ready`` and the
        level; a payload that is all data has its own ``valid`` and ``ready`` flags."""
        layout = self._shape
        beat = isinstance(layout, data.StructLayout) and "data" in layout.members
        wide = layout.members["data"] if beat else layout
        i_data = self.i.payload.data if beat else self.i.payload
        o_data = self.o.payload.data if beat else self.o.payload
        regs = [Signal(Shape.cast(wide).width, name=f"data{k}", reset_less=True) for k in range(2)]
        wp = Signal(name="data_wp")
        rp = Signal(name="data_rp")
        push = Signal(name="push")
        pop = Signal(name="pop")
        m.d.comb += [push.eq(self.i.valid & self.i.ready), pop.eq(self.o.valid & self.o.ready),
                     o_data.eq(Mux(rp, regs[1], regs[0]))]
        # The register at ``wp`` is free whenever the FIFO is not full (slots fill in order),
        # and a free register follows the input: a push leaves the beat in it, and its enable
        # is made of registers (``i.ready``, ``wp``) instead of the producer's ``valid`` (the
        # push into a memory line generator's request registers was an ECP5 GEMV path at
        # 200 MHz, from the store's input beat through its decision)
        for k, reg in enumerate(regs):
            with m.If(self.i.ready & (wp == k)):
                m.d.sync += reg.eq(i_data)
        with m.If(push):
            m.d.sync += wp.eq(~wp)
        with m.If(pop):
            m.d.sync += rp.eq(~rp)
        rest = {k: v for k, v in layout.members.items() if k != "data"} if beat else {}
        if rest:
            m.submodules.fields = fields = StreamFIFO(data.StructLayout(rest), 2, counters=False)
            m.d.comb += [fields.i.valid.eq(self.i.valid), self.i.ready.eq(fields.i.ready),
                         self.o.valid.eq(fields.o.valid), fields.o.ready.eq(self.o.ready)]
            for k in rest:
                m.d.comb += [fields.i.payload[k].eq(self.i.payload[k]),
                             self.o.payload[k].eq(fields.o.payload[k])]
            return fields.level
        level = Signal(range(3), name="level")
        full = Signal(name="full")
        nonempty = Signal(name="nonempty")
        m.d.comb += [self.i.ready.eq(~full), self.o.valid.eq(nonempty)]
        # (the flags from the count's comparisons, the handshakes choosing last: a client's
        # burst request into the memory's request queue was 5 LUT levels on the UP5K)
        m.d.sync += [level.eq(count_step(level, push, pop)),
                     full.eq(~below_after(level, 2, push, pop)),
                     nonempty.eq(~below_after(level, 1, push, pop))]
        return level

    def _head_and_queue(self, m):
        """A head register in front of a queue of ``depth - 1`` beats: ``o`` comes straight from
        flip-flops (no LUT-RAM read on the path into the next unit) with the timing of
        :class:`~amaranth.lib.fifo.SyncFIFO` of ``depth`` (a beat written in cycle ``t`` is
        offered in cycle ``t + 1``; ``i.ready`` is ``level < depth``). A beat enters the head
        when the head is empty or leaves in this cycle with the queue empty, else the queue; the
        head refills from the queue. Returns the level."""
        head = Signal(self._width, name="head", reset_less=True)
        head_valid = Signal(name="head_valid")
        pop = Signal(name="pop")
        push = Signal(name="push")
        m.d.comb += [self.o.payload.eq(head), self.o.valid.eq(head_valid),
                     pop.eq(head_valid & self.o.ready)]
        if self._depth == 1:
            m.d.comb += [self.i.ready.eq(~head_valid), push.eq(self.i.valid & self.i.ready)]
            with m.If(push):
                m.d.sync += [head.eq(self.i.payload), head_valid.eq(1)]
            with m.Elif(pop):
                m.d.sync += head_valid.eq(0)
            return head_valid
        queue = self._queue(m, self._depth - 1)
        # ``i.ready`` (the level is below the depth: the head is empty or the queue has room)
        # is a register of its own, set from the level's next value: the producer's decision
        # starts at one flip-flop instead of the head's and the queue's flags (an edge FIFO's
        # ready into a load unit's move and its slot counts: 9 cells, a worst path of SwiGLU
        # I=256 on the ECP5), and the handshakes reach it only through ``below_after``'s choice
        ready = Signal(name="i_ready", init=1)
        m.d.sync += ready.eq(below_after(head_valid + queue.level, self._depth, push, pop))
        m.d.comb += [self.i.ready.eq(ready),
                     push.eq(self.i.valid & self.i.ready),
                     queue.w_data.eq(self.i.payload)]
        # The head takes a new value when it is empty or leaves: the queue's head if the queue
        # holds one (it is never non-empty while the head is), else the input's beat. The data
        # select is the queue's registered ``r_rdy``; only the enable depends on ``o.ready``.
        refill = Signal(name="head_refill")
        m.d.comb += [refill.eq(~head_valid | pop),
                     queue.w_en.eq(push & ~(refill & ~queue.r_rdy)), queue.r_en.eq(pop)]
        with m.If(refill):
            m.d.sync += [head.eq(Mux(queue.r_rdy, queue.r_data, self.i.payload)),
                         head_valid.eq(queue.r_rdy | push)]
        return head_valid + queue.level

    def _queue(self, m, depth):
        """The queue behind the head, with the ports and the timing of a
        :class:`~amaranth.lib.fifo.SyncFIFO` of ``depth`` (``w_data``, ``w_en``, ``w_rdy``,
        ``r_data``, ``r_en``, ``r_rdy``, ``level``; ``r_data`` read asynchronously). For one
        entry a plain register."""
        if depth > 1:
            return lut_queue(m, self._width, depth)
        q = SimpleNamespace(w_data=Signal(self._width, name="queue_w_data"),
                            w_en=Signal(name="queue_w_en"), w_rdy=Signal(name="queue_w_rdy"),
                            r_data=Signal(self._width, name="queue_r_data", reset_less=True),
                            r_en=Signal(name="queue_r_en"), r_rdy=Signal(name="queue_r_rdy"),
                            level=Signal(range(2), name="queue_level"))
        m.d.comb += [q.w_rdy.eq(~q.r_rdy), q.level.eq(q.r_rdy)]
        # while empty the register follows the input (its data is unused until ``r_rdy``), so
        # its enable is a register's output, not the push that depends on ``o.ready``
        with m.If(~q.r_rdy):
            m.d.sync += q.r_data.eq(q.w_data)
        with m.If(q.w_en & q.w_rdy):
            m.d.sync += q.r_rdy.eq(1)
        with m.Elif(q.r_en):
            m.d.sync += q.r_rdy.eq(0)
        return q


def lut_queue(m, width, depth, *, init=(), name="queue"):
    """A first-in first-out queue of ``depth >= 2`` entries of ``width`` bits, built into ``m``,
    with the ports and the timing of :class:`~amaranth.lib.fifo.SyncFIFO` (``r_data`` read
    asynchronously: LUT RAM or flip-flops), returned as a namespace of ``w_data``, ``w_en``,
    ``w_rdy``, ``r_data``, ``r_en``, ``r_rdy`` and ``level``.

    Its flags are registers of their own (:func:`~stepforge.hdl.flags.below_after`), and its
    free slot follows the input: the storage's write enable is the registered ``w_rdy``, not
    the push, which on most paths depends on the producer's ``valid`` and on a consumer's
    ``ready`` (Amaranth's ``SyncFIFO`` enables its storage with them: the PMU replay's output
    queue was 4 LUT levels into 111 flip-flop enables on a UP5K). The queue starts holding
    ``init`` (at most ``depth`` entries, the first at the head). Signals and the storage are
    named after ``name``.
    """
    init = list(init)
    if depth < 2:
        raise ValueError(f"lut_queue depth must be >= 2, not {depth!r}")
    if len(init) > depth:
        raise ValueError(f"lut_queue init holds {len(init)} entries, more than its depth {depth}")
    storage = Memory(shape=unsigned(width), depth=depth, init=init)
    m.submodules[f"{name}_storage"] = storage
    wr = storage.write_port()
    rd = storage.read_port(domain="comb")
    q = SimpleNamespace(w_data=Signal(width, name=f"{name}_w_data"),
                        w_en=Signal(name=f"{name}_w_en"),
                        w_rdy=Signal(name=f"{name}_w_rdy", init=len(init) < depth),
                        r_data=Signal(width, name=f"{name}_r_data"),
                        r_en=Signal(name=f"{name}_r_en"),
                        r_rdy=Signal(name=f"{name}_r_rdy", init=len(init) > 0),
                        level=Signal(range(depth + 1), name=f"{name}_level", init=len(init)))
    produce = Signal(range(depth), name=f"{name}_produce", init=len(init) % depth)
    consume = Signal(range(depth), name=f"{name}_consume")
    push = Signal(name=f"{name}_push")
    pop = Signal(name=f"{name}_pop")
    m.d.comb += [wr.addr.eq(produce), wr.data.eq(q.w_data), wr.en.eq(q.w_rdy),
                 rd.addr.eq(consume), q.r_data.eq(rd.data),
                 push.eq(q.w_en & q.w_rdy), pop.eq(q.r_en & q.r_rdy)]

    def advanced(ptr):
        return Mux(ptr == depth - 1, 0, ptr + 1)

    with m.If(push):
        m.d.sync += produce.eq(advanced(produce))
    with m.If(pop):
        m.d.sync += consume.eq(advanced(consume))
    m.d.sync += [q.level.eq(count_step(q.level, push, pop)),
                 q.w_rdy.eq(below_after(q.level, depth, push, pop)),
                 q.r_rdy.eq(~below_after(q.level, 1, push, pop))]
    return q
