"""The edge FIFO: a stream-to-stream queue with occupancy and high-water outputs."""

from types import SimpleNamespace

from amaranth.hdl import Module, Mux, Shape, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["StreamFIFO"]


class StreamFIFO(wiring.Component):
    """A synchronous first-in first-out queue between two streams.

    Every beat accepted on ``i`` leaves on ``o`` once, in order. ``i.ready`` and ``o.valid`` are
    functions of registered state only, so a chain of units joined by StreamFIFOs has no
    combinational path from one unit's ``ready`` or ``valid`` to the next: the FIFO is the cut
    that makes units composable and closes timing.

    Two queue implementations from :mod:`amaranth.lib.fifo` are offered.

    * ``buffered=False`` (the default): a head register in front of a
      :class:`~amaranth.lib.fifo.SyncFIFO` of ``depth - 1`` beats. ``o`` comes from flip-flops, so
      no LUT-RAM read sits on the path into the next unit, and the timing is that of a
      ``SyncFIFO`` of ``depth``: a beat written in cycle ``t`` is offered on ``o`` in cycle
      ``t + 1`` and a FIFO of depth 2 sustains one beat per cycle. Right for the small, wide
      FIFOs on most edges (a beat of a 4x4 int16 tile is 260 bits wide and rarely needs more
      than 2-4 entries); a depth-2 FIFO is two registers.
    * ``buffered=True`` uses :class:`~amaranth.lib.fifo.SyncFIFOBuffered`: the storage is read
      synchronously into an output register, so it maps to block RAM (``SB_RAM40_4K``,
      ``DP16KD``) and its output is registered, at the cost of one more cycle of latency (a
      beat written in cycle ``t`` is offered in cycle ``t + 2``) and of throughput at small
      depths: it sustains one beat per cycle only from depth 3 on (depth 2 moves at most one
      beat every other cycle). Use it for the deep FIFOs that the sizing pass derives from
      symbol bounds.

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
    counters : bool, default True
        Provide ``level`` and ``high_water`` (the simulation target's statistics); a board build
        leaves them out.

    Members
    -------
    i : ``In(stream.Signature(shape))``
        Beats to enqueue. ``i.ready`` is high whenever ``level < depth`` (for ``buffered=True``:
        whenever the storage behind the output register has room); it does not depend on
        ``i.valid`` or ``o.ready`` combinationally.
    o : ``Out(stream.Signature(shape))``
        Beats in the order they were accepted.
    level : ``Out(range(depth + 1))``
        Current occupancy (only with ``counters``).
    high_water : ``Out(range(depth + 1))``
        Only with ``counters``.
        Sticky maximum occupancy since reset: the largest value ``level`` held at any earlier
        clock edge (a register, so it follows a new maximum of ``level`` one cycle later).
        Cleared only by reset.

    Raises
    ------
    ValueError
        ``depth`` is not an int ``>= 1``.
    """

    def __init__(self, shape, depth, *, buffered=False, counters=True):
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError(f"StreamFIFO depth must be an int >= 1, not {depth!r}")
        self._shape = shape
        self._width = Shape.cast(shape).width
        self._depth = depth
        self._buffered = bool(buffered)
        self._counters = bool(counters)
        members = {"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))}
        if counters:
            members.update({"level": Out(range(depth + 1)), "high_water": Out(range(depth + 1))})
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

    def __repr__(self):
        buffered = ", buffered=True" if self._buffered else ""
        counters = "" if self._counters else ", counters=False"
        return f"StreamFIFO({self._shape!r}, depth={self._depth}{buffered}{counters})"

    def elaborate(self, platform):
        m = Module()
        if self._buffered:
            m.submodules.queue = queue = fifo.SyncFIFOBuffered(width=self._width, depth=self._depth)
            m.d.comb += [
                queue.w_data.eq(self.i.payload),
                queue.w_en.eq(self.i.valid),
                self.i.ready.eq(queue.w_rdy),
                self.o.payload.eq(queue.r_data),
                self.o.valid.eq(queue.r_rdy),
                queue.r_en.eq(self.o.ready),
            ]
            level = queue.level
        else:
            level = self._head_and_queue(m)
        if self._counters:
            m.d.comb += self.level.eq(level)
            with m.If(level > self.high_water):
                m.d.sync += self.high_water.eq(level)
        return m

    def _head_and_queue(self, m):
        """A head register in front of a queue of ``depth - 1`` beats: ``o`` comes straight from
        flip-flops (no LUT-RAM read on the path into the next unit) with the timing of
        :class:`~amaranth.lib.fifo.SyncFIFO` of ``depth`` (a beat written in cycle ``t`` is
        offered in cycle ``t + 1``; ``i.ready`` is ``level < depth``). A beat enters the head
        when the head is empty or leaves in this cycle with the queue empty, else the queue; the
        head refills from the queue. Returns the level."""
        head = Signal(self._width, name="head")
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
        m.d.comb += [self.i.ready.eq(~head_valid | queue.w_rdy),
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
        """The queue behind the head: a :class:`~amaranth.lib.fifo.SyncFIFO`, or for one entry a
        plain register with the same ports (a ``SyncFIFO`` of depth 1 has zero-width pointers,
        which Verilog declares as ``[-1:0]``)."""
        if depth > 1:
            m.submodules.queue = queue = fifo.SyncFIFO(width=self._width, depth=depth)
            return queue
        q = SimpleNamespace(w_data=Signal(self._width, name="queue_w_data"),
                            w_en=Signal(name="queue_w_en"), w_rdy=Signal(name="queue_w_rdy"),
                            r_data=Signal(self._width, name="queue_r_data"),
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
