"""The PMU: on-chip memory implementing Bufferize and Streamify of one buffer stream.

A Bufferize and the Streamify nodes that replay its buffers share storage, so one
:class:`PMU` holds both sides (architecture section 3, semantics section 4 "On-chip memory",
``docs/memory.md``):

* the **write side** (Bufferize) takes the beats of ``in0``, stores each one as an *entry*
  ``(data, has_data, stop)`` and, on a stop ``s >= b``, closes the buffer and sends its id with
  stop ``s - b`` on ``refs``;
* each **read side** (one per Streamify consumer, :class:`Replay`) takes buffer ids on
  ``buffers`` (normally ``refs`` after whatever FIFOs and routing the program puts between the
  two nodes), optionally a reference stream on ``ref``, and replays the buffers' entries on
  ``out``: once (plain), ``repeat`` times, once per reference element, optionally in an affine
  order.

Storage
-------
Entries live in :class:`amaranth.lib.memory.Memory` instances organised as ``blocks`` blocks of
``block_size`` entries: a data memory ``{data, has_data}`` and a narrow stop memory (so that a
stop arriving in its own beat is merged into the entry of the element it follows by rewriting
the stop alone; stored buffers are therefore always in canonical framing). Both have one write
port (the write side) and one synchronous read port per read side. A wide element is spread
over as many block RAMs as its width needs by the synthesis tool (width banking); one write and
one read per cycle per read side need no further banking.

Allocation. Free blocks sit in a free list (a FIFO of block numbers in a memory initialised to
``0 .. blocks-1``). A buffer is a chain of blocks linked through a ``next`` table; its id on
the wire is its first block. A descriptor table indexed by that block holds the buffer's entry
count, block count and whether it fills its static shape.

* ``mode="static"`` (N-buffering): ``slots`` blocks of ``prod(shape)`` entries, one buffer per
  block, no chaining: with the default ``slots=2`` the writer fills one buffer while a reader
  replays the other.
* ``mode="dynamic"`` (block allocator): ``blocks`` blocks of ``block_size`` entries; a buffer
  takes blocks as it grows. An empty free list stalls the writer (back-pressure); a buffer that
  exceeds its declared bound raises ``OVER_BOUND`` whatever the free list holds.

Bounds are checked exactly as the interpreter's ``check_buffer`` does, fibre by fibre and level
by level: a level-``k`` fibre longer than ``shape[b - 1 - k]`` (a static size or the declared
bound of a symbolic dimension) raises ``OVER_BOUND`` on the beat that overflows it. Because of
this check a buffer never holds more than ``prod(shape)`` entries.

Lifetimes and consumers
-----------------------
Every read side is one Streamify consumer; the reference count of a buffer is the number of
read sides, kept as one *pending* bit per read side and block. Closing a buffer sets its bits;
a read side clears its bit right after its last replay of the buffer (the final replay of a
buffer element, or the end of its repetition in the reference form, even after zero replays).
When the last bit clears, a walker returns the buffer's blocks to the free list, one block per
cycle. Releases of several read sides are taken one per cycle by a round-robin arbiter.

Decisions (hardware limits, each one detected rather than silently misread):

* A read side frees a buffer after each buffer element's last replay. A reference that comes
  back after its buffer was freed (an id repeated in one consumer's stream, which the
  interpreter allows by freeing after the *last* occurrence) raises ``BAD_BUFFER``. If the
  block was reused meanwhile the stale id cannot be told from the new buffer.
* ``buffers`` and ``ref`` take stops fused into the beat of the element they follow (the
  canonical framing, which ``refs`` always has); ``Done`` may be a bare beat. A stop-only beat
  right after an element beat without a stop raises ``BAD_STOP``: merging it would hold back
  the last beat of a replay until the next beat arrives, which deadlocks programs whose next
  buffer depends on this replay (an accumulation through a Bufferize loop). ``in0`` accepts any
  framing.
* A read side that never receives some buffer (a routing operator sent it to another
  consumer) clears its bits when its streams have ended, as the interpreter does: with several
  read sides, each one then sweeps its pending bits (one block per cycle) and releases what it
  still holds; buffers closed after that never wait for it. Until then such a buffer stays
  allocated, so a PMU whose references are *routed* (not broadcast) to several read sides needs
  room for every buffer in flight, or it stalls for good.

Timing
------
Write side: one beat per cycle, including buffer switches (a block is popped from the free list
in the cycle of the beat that needs it); ``refs`` leaves a two-entry FIFO one cycle after the
closing beat. Read side: one beat per cycle, including between replays and between buffers;
the memory's synchronous read is hidden by a one-stage pipeline in front of a two-entry output
FIFO, so a command accepted in cycle ``t`` offers its first beat on ``out`` in cycle ``t + 3``.
Every output's ``valid`` and payload come from registers (no path from ``ready``).
"""

import math

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, fifo, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..compiler.types import Buffer, ElemType
from .beat import BUFFER_ID_BITS, beat_layout, beat_signature, element_layout, stop_width
from .unit import ErrorCode, StatusSignature, raise_error

__all__ = ["Replay", "PMU"]


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


class Replay:
    """How one read side of a :class:`PMU` replays buffers (the parameters of a Streamify).

    Parameters
    ----------
    repeat : int, optional
        Static repeat count ``>= 1``: every replay but the last closes with ``S_B``, the last
        with ``S_(B + 1 + s)`` (``s`` the buffer element's own stop). ``None``: plain replay.
    expand_rank : int, optional
        ``c >= 1``: the reference form; the read side gets a ``ref`` port and replays the
        current buffer once per reference element until the reference shows a stop ``>= c``.
        Exclusive with ``repeat``.
    ref_type : stepforge.compiler.types.ElemType, optional
        Element type of the reference stream (its contents are ignored, but it types the port).
        Required with ``expand_rank``.
    order : tuple, optional
        ``(out_shape, stride)`` or ``(out_shape, stride, offset)``: replay element
        ``offset + sum(idx_d * stride_d)`` (row-major) at each index ``idx`` of a walk over
        ``out_shape``. Static mode only; the buffer must fill its shape (else ``BAD_BUFFER``).

    Raises
    ------
    ValueError
        A parameter of the wrong type or out of range, or ``repeat`` with ``expand_rank``.
    """

    def __init__(self, repeat=None, *, expand_rank=None, ref_type=None, order=None):
        if repeat is not None and (not _is_int(repeat) or repeat < 1):
            raise ValueError(f"Replay needs repeat >= 1, not {repeat!r}")
        if expand_rank is not None:
            if not _is_int(expand_rank) or expand_rank < 1:
                raise ValueError(f"Replay needs expand_rank >= 1, not {expand_rank!r}")
            if repeat is not None:
                raise ValueError("Replay takes either repeat or expand_rank, not both")
            if not isinstance(ref_type, ElemType):
                raise ValueError(f"Replay with expand_rank needs ref_type (the reference stream's "
                                 f"element type), not {ref_type!r}")
        elif ref_type is not None:
            raise ValueError("Replay: ref_type needs expand_rank")
        if order is not None:
            if not isinstance(order, (tuple, list)) or len(order) not in (2, 3):
                raise ValueError(f"Replay needs order = (out_shape, stride[, offset]), not {order!r}")
            out_shape, stride = tuple(order[0]), tuple(order[1])
            offset = order[2] if len(order) == 3 else 0
            if not out_shape or not all(_is_int(d) and d > 0 for d in out_shape):
                raise ValueError(f"Replay: order out_shape must be positive ints, not {order[0]!r}")
            if len(stride) != len(out_shape) or not all(_is_int(s) for s in stride) \
                    or not _is_int(offset):
                raise ValueError(f"Replay: order needs one int stride per dimension and an int "
                                 f"offset, not {order!r}")
            order = (out_shape, stride, offset)
        self.repeat = repeat
        self.expand_rank = expand_rank
        self.ref_type = ref_type
        self.order = order

    def __repr__(self):
        args = []
        if self.repeat is not None:
            args.append(repr(self.repeat))
        if self.expand_rank is not None:
            args.append(f"expand_rank={self.expand_rank}")
            args.append(f"ref_type={self.ref_type!r}")
        if self.order is not None:
            args.append(f"order={self.order!r}")
        return f"Replay({', '.join(args)})"

    def depth(self, b):
        """Number of levels one replay spans: ``len(out_shape)`` with an order, else ``b``."""
        return len(self.order[0]) if self.order is not None else b

    def out_rank(self, rank, b):
        """Rank of the replayed stream for a PMU buffering ``b`` levels of a rank-``rank`` input."""
        return (rank - b) + self.depth(b) + (1 if self.repeat is not None else 0)


class PMU(wiring.Component):
    """Bufferize and its Streamify consumers over one banked on-chip memory (module doc).

    Parameters
    ----------
    elem_type : stepforge.compiler.types.ElemType
        Element type of the buffered stream (anything but ``Buffer``).
    rank : int
        Rank of the input stream ``in0`` (``>= 1``).
    b : int
        Number of buffered levels, ``1 <= b <= rank``.
    shape : tuple of int
        The buffer's shape ``(D_(b-1), .., D_0)``: static sizes, or the declared bounds of
        symbolic dimensions (each ``>= 1``).
    mode : {"static", "dynamic"}
        N-buffering or the block allocator.
    slots : int, default 2
        Static mode: number of buffers (``>= 1``).
    block_size : int, optional
        Dynamic mode: entries per block (``>= 1``; default ``shape[-1]``).
    blocks : int, optional
        Dynamic mode: number of blocks (default: twice what one buffer of the full bound needs;
        must be at least that much, so a buffer within its bound always fits).
    readers : sequence of Replay, default ``(Replay(),)``
        One read side per Streamify consumer; the reference count of every buffer.
    row_bound : int or Mapping, optional
        Bound of a dynamic tile row count (see :func:`~stepforge.hdl.beat.element_layout`).

    Members
    -------
    in0 : ``In(beat_signature(elem_type, rank))``
        The stream to bufferize.
    refs : ``Out(beat_signature(Buffer(elem_type, shape), rank - b))``
        One buffer id per closed buffer, with stop ``s - b``.
    buffers, ref, out : stream ports of the read side, when there is one read side
        ``buffers`` takes buffer ids (rank ``rank - b``), ``ref`` (reference form only) the
        reference stream (rank ``rank - b``, element ``ref_type``), ``out`` the replayed beats
        (rank :meth:`Replay.out_rank`). With several read sides the ports of read side ``i``
        are ``buffers{i}``, ``ref{i}`` and ``out{i}`` (see :meth:`port_names`).
    status : ``Out(StatusSignature)``
        ``busy`` while a buffer is open, a replay runs, a beat waits in an output FIFO, a
        release is pending or blocks are being freed; ``stall_in`` while an open buffer waits
        for ``in0`` or a read side waits for one of its inputs; ``stall_out`` while ``refs`` or
        an ``out`` holds a beat that is not taken. Errors: ``OVER_BOUND``, ``UNCLOSED_BUFFER``,
        ``REF_MISMATCH``, ``BAD_STOP``, ``BAD_BUFFER``.
    free_blocks : ``Out(range(blocks + 1))``
        Number of blocks in the free list (``blocks`` when every buffer has been freed).

    Raises
    ------
    ValueError
        A parameter of the wrong type or out of range, a reference form whose buffer stream is
        too shallow, an order in dynamic mode or outside the buffer, more than ``2**16`` blocks.
    """

    def __init__(self, elem_type, rank, b, shape, *, mode="static", slots=2, block_size=None,
                 blocks=None, readers=None, row_bound=None):
        try:
            members = self._configure(elem_type, rank, b, shape, mode, slots, block_size, blocks,
                                      readers, row_bound)
        except ValueError:
            self._MustUse__silence = True  # a refused PMU is not an unused one
            raise
        super().__init__(members)

    def _configure(self, elem_type, rank, b, shape, mode, slots, block_size, blocks, readers,
                   row_bound):
        if not isinstance(elem_type, ElemType) or isinstance(elem_type, Buffer):
            raise ValueError(f"PMU needs a non-Buffer element type, not {elem_type!r}")
        if not _is_int(rank) or rank < 1:
            raise ValueError(f"PMU needs rank >= 1, not {rank!r}")
        if not _is_int(b) or not 1 <= b <= rank:
            raise ValueError(f"PMU needs 1 <= b <= rank ({rank}), not {b!r}")
        shape = tuple(shape)
        if len(shape) != b or not all(_is_int(d) and d >= 1 for d in shape):
            raise ValueError(f"PMU needs a shape of {b} ints >= 1 (sizes or bounds), not {shape!r}")
        if mode not in ("static", "dynamic"):
            raise ValueError(f"PMU mode must be 'static' or 'dynamic', not {mode!r}")
        readers = (Replay(),) if readers is None else tuple(readers)
        if not readers or not all(isinstance(r, Replay) for r in readers):
            raise ValueError(f"PMU needs at least one Replay in readers, not {readers!r}")
        self.elem_type, self.rank, self.b, self.shape = elem_type, rank, b, shape
        self.mode, self.readers, self.row_bound = mode, readers, row_bound
        self.max_entries = math.prod(shape)
        if mode == "static":
            if not _is_int(slots) or slots < 1:
                raise ValueError(f"PMU static mode needs slots >= 1, not {slots!r}")
            if block_size is not None or blocks is not None:
                raise ValueError("PMU: block_size and blocks are for mode='dynamic'")
            self.slots = slots
            self.block_size = self.max_entries
            self.blocks = slots
        else:
            self.slots = None
            block_size = shape[-1] if block_size is None else block_size
            if not _is_int(block_size) or block_size < 1:
                raise ValueError(f"PMU dynamic mode needs block_size >= 1, not {block_size!r}")
            need = -(-self.max_entries // block_size)
            blocks = 2 * need if blocks is None else blocks
            if not _is_int(blocks) or blocks < need:
                raise ValueError(f"PMU dynamic mode needs blocks >= {need} (one buffer of shape "
                                 f"{list(shape)} in blocks of {block_size}), not {blocks!r}")
            self.block_size, self.blocks = block_size, blocks
        if self.blocks > (1 << BUFFER_ID_BITS):
            raise ValueError(f"PMU: {self.blocks} blocks do not fit a {BUFFER_ID_BITS}-bit buffer id")
        self.max_blocks = -(-self.max_entries // self.block_size)
        for i, r in enumerate(readers):
            if r.expand_rank is not None and r.expand_rank > rank - b:
                raise ValueError(f"PMU reader {i}: expand_rank {r.expand_rank} needs a buffer stream "
                                 f"of rank >= it, got rank {rank - b}")
            if r.order is not None:
                if mode != "static":
                    raise ValueError(f"PMU reader {i}: an affine order needs mode='static'")
                lo = hi = r.order[2]
                for n, s in zip(r.order[0], r.order[1]):
                    lo += min(0, (n - 1) * s)
                    hi += max(0, (n - 1) * s)
                if lo < 0 or hi >= self.max_entries:
                    raise ValueError(f"PMU reader {i}: order {r.order!r} reads element "
                                     f"{lo if lo < 0 else hi}, outside the buffer of "
                                     f"{self.max_entries} elements")
        self.buffer_type = Buffer(elem_type, shape)
        members = {
            "in0": In(beat_signature(elem_type, rank, row_bound=row_bound)),
            "refs": Out(beat_signature(self.buffer_type, rank - b)),
        }
        for i, r in enumerate(readers):
            nb, nr, no = self.port_names(i)
            members[nb] = In(beat_signature(self.buffer_type, rank - b))
            if r.expand_rank is not None:
                members[nr] = In(beat_signature(r.ref_type, rank - b, row_bound=row_bound))
            members[no] = Out(beat_signature(elem_type, r.out_rank(rank, b), row_bound=row_bound))
        members["status"] = Out(StatusSignature)
        members["free_blocks"] = Out(range(self.blocks + 1))
        return members

    def port_names(self, i):
        """Names of the ``(buffers, ref, out)`` ports of read side ``i``.

        ``("buffers", "ref", "out")`` with one read side, else ``("buffers{i}", "ref{i}",
        "out{i}")``; the ``ref`` port exists only for the reference form.
        """
        sfx = "" if len(self.readers) == 1 else str(i)
        return f"buffers{sfx}", f"ref{sfx}", f"out{sfx}"

    def __repr__(self):
        args = [repr(self.elem_type), str(self.rank), str(self.b), repr(self.shape)]
        if self.mode == "static":
            args.append(f"mode='static', slots={self.slots}")
        else:
            args.append(f"mode='dynamic', block_size={self.block_size}, blocks={self.blocks}")
        args.append(f"readers={self.readers!r}")
        if self.row_bound is not None:
            args.append(f"row_bound={self.row_bound!r}")
        return f"PMU({', '.join(args)})"

    # ---------------------------------------------------------------------------------------

    def elaborate(self, platform):
        m = Module()
        b = self.b
        nblocks, bsize = self.blocks, self.block_size
        dynamic = self.mode == "dynamic"
        id_w = max(1, ceil_log2(nblocks))
        nentries = nblocks * bsize  # memories get at least two words: no zero-width address
        status = self.status
        error = Signal(name="error_seen")
        m.d.comb += error.eq(status.error)

        # -- memories ------------------------------------------------------------------------
        entry_layout = data.StructLayout({
            "data": element_layout(self.elem_type, row_bound=self.row_bound),
            "has_data": unsigned(1),
        })
        m.submodules.data_mem = data_mem = Memory(shape=entry_layout, depth=max(nentries, 2), init=[])
        m.submodules.stop_mem = stop_mem = Memory(shape=unsigned(stop_width(b - 1)),
                                                  depth=max(nentries, 2), init=[])
        desc_layout = data.StructLayout({
            "len": range(self.max_entries + 1),
            "nblk": range(self.max_blocks + 1),
            "full": unsigned(1),
        })
        m.submodules.desc_mem = desc_mem = Memory(shape=desc_layout, depth=max(nblocks, 2), init=[])
        m.submodules.free_mem = free_mem = Memory(shape=unsigned(id_w), depth=max(nblocks, 2),
                                                  init=list(range(nblocks)))
        next_mem = None
        if dynamic:
            m.submodules.next_mem = next_mem = Memory(shape=unsigned(id_w), depth=max(nblocks, 2), init=[])

        data_wr = data_mem.write_port()
        stop_wr = stop_mem.write_port()
        desc_wr = desc_mem.write_port()
        free_wr = free_mem.write_port()
        free_rd = free_mem.read_port(domain="comb")
        next_wr = next_mem.write_port() if dynamic else None

        # -- free list -----------------------------------------------------------------------
        free_count = Signal(range(nblocks + 1), init=nblocks, name="free_count")
        free_rptr = Signal(range(max(nblocks, 2)), name="free_rptr")
        free_wptr = Signal(range(max(nblocks, 2)), name="free_wptr")
        free_pop = Signal(name="free_pop")
        free_push = Signal(name="free_push")
        free_head = Signal(id_w, name="free_head")
        m.d.comb += [free_rd.addr.eq(free_rptr), free_head.eq(free_rd.data),
                     self.free_blocks.eq(free_count)]

        def wrap_inc(ptr):
            return Mux(ptr == nblocks - 1, 0, ptr + 1)

        with m.If(free_pop):
            m.d.sync += free_rptr.eq(wrap_inc(free_rptr))
        with m.If(free_push):
            m.d.sync += free_wptr.eq(wrap_inc(free_wptr))
        m.d.sync += free_count.eq(free_count + free_push - free_pop)

        # -- pending bits (one per read side and block) --------------------------------------
        k = len(self.readers)
        pending = [Signal(nblocks, name=f"pending{i}") for i in range(k)]
        pend_set = Signal(nblocks, name="pend_set")
        pend_clr = [Signal(nblocks, name=f"pend_clr{i}") for i in range(k)]
        finished = [Signal(name=f"r{i}_finished") for i in range(k)]  # its streams have ended
        for i in range(k):
            m.d.sync += pending[i].eq((pending[i] | Mux(finished[i], 0, pend_set)) & ~pend_clr[i])

        # -- write side (Bufferize) ----------------------------------------------------------
        busy_terms, stall_in_terms, stall_out_terms = [], [], []
        self._elaborate_writer(m, error, data_wr, stop_wr, desc_wr, next_wr, free_count,
                               free_head, free_pop, pend_set, busy_terms, stall_in_terms,
                               stall_out_terms)

        # -- read sides (Streamify) ----------------------------------------------------------
        rel_pend, rel_id, rel_taken = [], [], []
        for i, r in enumerate(self.readers):
            rp = Signal(name=f"rel_pend{i}")
            rid = Signal(id_w, name=f"rel_id{i}")
            rt = Signal(name=f"rel_taken{i}")
            rel_pend.append(rp)
            rel_id.append(rid)
            rel_taken.append(rt)
            self._elaborate_reader(m, i, r, error, data_mem, stop_mem, desc_mem, next_mem,
                                   pending[i], rp, rid, rt, finished[i], busy_terms,
                                   stall_in_terms, stall_out_terms)

        # -- release arbiter and block walker -------------------------------------------------
        w_act = Signal(name="walk_active")
        w_cur = Signal(id_w, name="walk_block")
        w_rem = Signal(range(self.max_blocks + 1), name="walk_left")
        w_accept_ok = Signal(name="walk_accept_ok")
        m.d.comb += w_accept_ok.eq(~w_act | (w_rem == 1))

        grant = Signal(range(max(k, 2)), name="rel_grant")
        any_rel = Signal(name="rel_any")
        rr = Signal(range(max(k, 2)), name="rel_rr")
        with m.Switch(rr):
            for start in range(k):
                with m.Case(start):
                    for off in reversed(range(k)):  # the last assignment wins: lowest offset
                        j = (start + off) % k
                        with m.If(rel_pend[j]):
                            m.d.comb += [grant.eq(j), any_rel.eq(1)]
        g_id = Signal(id_w, name="rel_grant_id")
        m.d.comb += g_id.eq(Array(rel_id)[grant])
        others_clear = Signal(name="rel_last_consumer")
        m.d.comb += others_clear.eq(Cat(*[(grant == j) | ~pending[j].bit_select(g_id, 1)
                                          for j in range(k)]).all())
        take = Signal(name="rel_take")
        m.d.comb += take.eq(any_rel & (~others_clear | w_accept_ok))
        for j in range(k):
            m.d.comb += rel_taken[j].eq(take & (grant == j))
            with m.If(rel_taken[j]):
                m.d.comb += pend_clr[j].bit_select(g_id, 1).eq(1)
        with m.If(take):
            m.d.sync += rr.eq(Mux(grant == k - 1, 0, grant + 1))

        desc_w_rd = desc_mem.read_port(domain="comb")
        m.d.comb += desc_w_rd.addr.eq(g_id)
        start_walk = Signal(name="walk_start")
        m.d.comb += start_walk.eq(take & others_clear)
        # push one block per active cycle
        m.d.comb += [free_push.eq(w_act), free_wr.addr.eq(free_wptr), free_wr.data.eq(w_cur),
                     free_wr.en.eq(w_act)]
        if dynamic:
            next_w_rd = next_mem.read_port(domain="comb")
            m.d.comb += next_w_rd.addr.eq(w_cur)
            walk_next = next_w_rd.data
        else:
            walk_next = w_cur
        with m.If(w_act):
            m.d.sync += [w_cur.eq(walk_next), w_rem.eq(w_rem - 1)]
            with m.If(w_rem == 1):
                m.d.sync += w_act.eq(0)
        with m.If(start_walk):
            m.d.sync += [w_act.eq(1), w_cur.eq(g_id), w_rem.eq(desc_w_rd.data.nblk)]
        busy_terms += [w_act, any_rel]

        m.d.comb += [
            status.busy.eq(Cat(*busy_terms).any()),
            status.stall_in.eq(Cat(*stall_in_terms).any()),
            status.stall_out.eq(Cat(*stall_out_terms).any()),
        ]
        return m

    # ---------------------------------------------------------------------------------------

    def _elaborate_writer(self, m, error, data_wr, stop_wr, desc_wr, next_wr, free_count,
                          free_head, free_pop, pend_set, busy_terms, stall_in_terms,
                          stall_out_terms):
        b, shape, bsize = self.b, self.shape, self.block_size
        status = self.status
        i0 = self.in0
        p = i0.payload
        refs_layout = beat_layout(self.buffer_type, self.rank - b)
        m.submodules.refs_fifo = refs_fifo = fifo.SyncFIFO(width=refs_layout.size, depth=2)
        m.d.comb += [self.refs.payload.eq(refs_fifo.r_data), self.refs.valid.eq(refs_fifo.r_rdy),
                     refs_fifo.r_en.eq(self.refs.ready)]

        open_ = Signal(name="w_open")
        head = Signal.like(free_head, name="w_head")
        blk = Signal.like(free_head, name="w_block")
        off = Signal(range(bsize + 1), name="w_offset")
        length = Signal(range(self.max_entries + 1), name="w_len")
        nblk = Signal(range(self.max_blocks + 1), name="w_blocks")
        elems = Signal(range(self.max_entries + 1), name="w_elems")
        prev_nostop = Signal(name="w_prev_nostop")
        last_addr = Signal(range(max(self.blocks * bsize, 2)), name="w_last_addr")
        cnt = [Signal(range(shape[b - 1 - j] + 1), name=f"w_count{j}") for j in range(b)]

        s = p.stop
        hd = p.has_data
        closes = Signal(name="w_closes")
        bare_done = Signal(name="w_bare_done")
        merge = Signal(name="w_merge")
        nothing = Signal(name="w_nothing")
        store = Signal(name="w_store")
        need_alloc = Signal(name="w_need_alloc")
        refs_push = Signal(name="w_refs_push")
        over = Signal(name="w_over")
        unclosed = Signal(name="w_unclosed")
        t_eff = Signal(range(max(b, 2)), name="w_level")  # the stop as stored: S_(b-1) when closing
        m.d.comb += [
            closes.eq(s >= b),
            bare_done.eq(~hd & (s == 0) & p.last),
            nothing.eq(~hd & (s == 0) & ~p.last),
            merge.eq(~hd & (s != 0) & prev_nostop),
            store.eq(~bare_done & ~nothing & ~merge),
            need_alloc.eq(store & (~open_ | (off == bsize))),
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
        m.d.comb += ready_ok.eq(~error & (~need_alloc | (free_count != 0))
                                & (~refs_push | refs_fifo.w_rdy))
        fault = Signal(name="w_fault")
        m.d.comb += fault.eq(i0.valid & ready_ok & (over | unclosed))
        raise_error(m, status, ErrorCode.OVER_BOUND, fault & over)
        raise_error(m, status, ErrorCode.UNCLOSED_BUFFER, fault & ~over & unclosed)
        fire = Signal(name="w_fire")
        m.d.comb += [fire.eq(i0.valid & ready_ok & ~over & ~unclosed), i0.ready.eq(fire)]

        new_blk = Signal.like(free_head, name="w_new_block")
        m.d.comb += new_blk.eq(free_head)
        cur_blk = Signal.like(free_head, name="w_cur_block")
        cur_off = Signal(range(max(bsize, 2)), name="w_cur_offset")
        m.d.comb += [cur_blk.eq(Mux(need_alloc, new_blk, blk)),
                     cur_off.eq(Mux(need_alloc, 0, off))]
        addr = Signal(range(max(self.blocks * bsize, 2)), name="w_addr")
        m.d.comb += addr.eq(cur_blk * bsize + cur_off)

        # memory writes
        m.d.comb += [
            data_wr.addr.eq(addr),
            data_wr.data.data.eq(p.data),
            data_wr.data.has_data.eq(hd),
            data_wr.en.eq(fire & store),
            stop_wr.addr.eq(Mux(merge, last_addr, addr)),
            stop_wr.data.eq(Mux(closes, b - 1, s)),
            stop_wr.en.eq(fire & (store | merge)),
            free_pop.eq(fire & need_alloc),
        ]
        if next_wr is not None:
            m.d.comb += [next_wr.addr.eq(blk), next_wr.data.eq(new_blk),
                         next_wr.en.eq(fire & need_alloc & open_)]

        # the buffer after this beat
        head_n = Signal.like(free_head, name="w_head_next")
        len_n = Signal.like(length, name="w_len_next")
        nblk_n = Signal.like(nblk, name="w_blocks_next")
        elems_n = Signal.like(elems, name="w_elems_next")
        m.d.comb += [
            head_n.eq(Mux(open_, head, new_blk)),
            len_n.eq(Mux(open_, length, 0) + store),
            nblk_n.eq(Mux(open_, nblk, 0) + need_alloc),
            elems_n.eq(Mux(open_, elems, 0) + hd),
        ]
        m.d.comb += [
            desc_wr.addr.eq(head_n),
            desc_wr.data.len.eq(len_n),
            desc_wr.data.nblk.eq(nblk_n),
            desc_wr.data.full.eq(elems_n == self.max_entries),
            desc_wr.en.eq(fire & closes),
        ]
        ref_beat = Signal(refs_layout, name="w_ref_beat")
        m.d.comb += [
            ref_beat.data.eq(head_n),
            ref_beat.has_data.eq(closes),
            ref_beat.stop.eq(Mux(closes, s - b, 0)),
            ref_beat.last.eq(p.last),
            refs_fifo.w_data.eq(ref_beat),
            refs_fifo.w_en.eq(fire & refs_push),
        ]
        with m.If(fire & closes):
            m.d.comb += pend_set.bit_select(head_n, 1).eq(1)

        with m.If(fire):
            with m.If(store):
                m.d.sync += [last_addr.eq(addr), prev_nostop.eq(hd & (s == 0)),
                             off.eq(cur_off + 1), blk.eq(cur_blk)]
            with m.If(merge):
                m.d.sync += prev_nostop.eq(0)
            with m.If(closes):
                m.d.sync += [open_.eq(0), prev_nostop.eq(0), length.eq(0), nblk.eq(0),
                             elems.eq(0)]
            with m.Elif(store):
                m.d.sync += [open_.eq(1), head.eq(head_n), length.eq(len_n), nblk.eq(nblk_n),
                             elems.eq(elems_n)]
            for j in range(b):
                with m.If(closes | (t_eff > j)):
                    m.d.sync += cnt[j].eq(0)
                if j > 0:
                    with m.Elif(t_eff == j):
                        m.d.sync += cnt[j].eq(cnt[j] + 1)
                else:
                    with m.Elif(hd):
                        m.d.sync += cnt[0].eq(cnt[0] + 1)

        busy_terms += [open_, refs_fifo.r_rdy]
        stall_in_terms.append(open_ & ~i0.valid)
        stall_out_terms.append(self.refs.valid & ~self.refs.ready)

    # ---------------------------------------------------------------------------------------

    def _elaborate_reader(self, m, i, cfg, error, data_mem, stop_mem, desc_mem, next_mem,
                          pending, rel_pend, rel_id, rel_taken, finished, busy_terms,
                          stall_in_terms, stall_out_terms):
        b, bsize = self.b, self.block_size
        status = self.status
        nb, nr, no = self.port_names(i)
        bufs = getattr(self, nb)
        refp = getattr(self, nr) if cfg.expand_rank is not None else None
        out = getattr(self, no)
        out_rank = cfg.out_rank(self.rank, b)
        out_layout = beat_layout(self.elem_type, out_rank, row_bound=self.row_bound)
        lw = stop_width(out_rank)
        depth = cfg.depth(b)
        id_w = max(1, ceil_log2(self.blocks))
        pfx = f"r{i}_"

        # -- command interface between the controller and the replay engine -----------------
        cmd_valid = Signal(name=pfx + "cmd_valid")
        cmd_ready = Signal(name=pfx + "cmd_ready")
        cmd_replay = Signal(name=pfx + "cmd_replay")  # 1: replay the buffer; 0: one stop-only beat
        cmd_id = Signal(id_w, name=pfx + "cmd_id")
        cmd_L = Signal(lw, name=pfx + "cmd_stop")     # closing stop (or the stop-only beat's stop)
        cmd_last = Signal(name=pfx + "cmd_last")
        cmd_rel = Signal(name=pfx + "cmd_release")
        cmd_fire = Signal(name=pfx + "cmd_fire")
        m.d.comb += cmd_fire.eq(cmd_valid & cmd_ready)

        if cfg.expand_rank is None:
            done = self._plain_controller(m, pfx, cfg, depth, error, bufs, cmd_valid, cmd_replay,
                                          cmd_id, cmd_L, cmd_last, cmd_rel, cmd_fire, busy_terms,
                                          stall_in_terms)
        else:
            done = self._ref_controller(m, pfx, cfg, depth, error, bufs, refp, cmd_valid,
                                        cmd_replay, cmd_id, cmd_L, cmd_last, cmd_rel, cmd_fire,
                                        busy_terms, stall_in_terms)
        m.d.comb += finished.eq(done)

        # -- replay engine --------------------------------------------------------------------
        act = Signal(name=pfx + "active")
        e_replay = Signal(name=pfx + "replay")
        e_id = Signal(id_w, name=pfx + "id")
        e_blk = Signal(id_w, name=pfx + "block")
        e_off = Signal(range(max(bsize, 2)), name=pfx + "offset")
        n_walk = math.prod(cfg.order[0]) if cfg.order is not None else 0  # may exceed the buffer
        e_cnt = Signal(range(max(self.max_entries, n_walk) + 1), name=pfx + "left")
        e_L = Signal(lw, name=pfx + "stop")
        e_last = Signal(name=pfx + "last")
        e_rel = Signal(name=pfx + "release")

        m.submodules[f"out_fifo{i}"] = ofifo = fifo.SyncFIFO(width=out_layout.size, depth=2)
        m.d.comb += [out.payload.eq(ofifo.r_data), out.valid.eq(ofifo.r_rdy),
                     ofifo.r_en.eq(out.ready)]
        pop = Signal(name=pfx + "pop")
        m.d.comb += pop.eq(out.valid & out.ready)

        s1_v = Signal(name=pfx + "s1_valid")
        s1_mem = Signal(name=pfx + "s1_from_mem")
        s1_final = Signal(name=pfx + "s1_final")
        s1_L = Signal(lw, name=pfx + "s1_stop")
        s1_last = Signal(name=pfx + "s1_last")
        s1_wstop = Signal(lw, name=pfx + "s1_walk_stop")

        final = Signal(name=pfx + "final")
        credit = Signal(name=pfx + "credit")
        rel_ok = Signal(name=pfx + "release_ok")
        issue = Signal(name=pfx + "issue")
        m.d.comb += [
            final.eq(e_cnt == 1),
            credit.eq(ofifo.level + s1_v < 2 + pop),
            rel_ok.eq(~(final & e_rel) | ~rel_pend | rel_taken),
            issue.eq(act & credit & rel_ok),
        ]

        desc_rd = desc_mem.read_port(domain="comb")
        m.d.comb += desc_rd.addr.eq(cmd_id)
        # acceptance and its checks
        m.d.comb += cmd_ready.eq(~error & (~act | (issue & final)))
        live = Signal(name=pfx + "live")
        # a release issued this cycle or still waiting for the arbiter has ended the buffer
        m.d.comb += live.eq(pending.bit_select(cmd_id, 1)
                            & ~(rel_pend & (rel_id == cmd_id))
                            & ~(issue & final & e_rel & (e_id == cmd_id)))
        needs_live = Signal(name=pfx + "needs_live")
        m.d.comb += needs_live.eq(cmd_replay | cmd_rel)
        bad = Signal(name=pfx + "bad_buffer")
        bad_terms = [needs_live & ~live]
        if cfg.order is not None:
            bad_terms.append(cmd_replay & ~desc_rd.data.full)
        m.d.comb += bad.eq(Cat(*bad_terms).any())
        raise_error(m, status, ErrorCode.BAD_BUFFER, cmd_fire & bad)

        data_rd = data_mem.read_port()
        stop_rd = stop_mem.read_port()
        rd_addr = Signal(range(max(self.blocks * bsize, 2)), name=pfx + "read_addr")
        m.d.comb += [data_rd.addr.eq(rd_addr), stop_rd.addr.eq(rd_addr),
                     data_rd.en.eq(issue & e_replay), stop_rd.en.eq(issue & e_replay)]

        # the affine walk
        walk_stop = Signal(lw, name=pfx + "walk_stop")
        if cfg.order is not None:
            out_shape, stride, offset = cfg.order
            nd = len(out_shape)
            idx = [Signal(range(max(n, 2)), name=f"{pfx}walk{d}") for d, n in enumerate(out_shape)]
            span = max(abs(offset), 1) + sum(abs((n - 1) * s) for n, s in zip(out_shape, stride))
            lin = Signal(range(-span - 1, span + 2), init=offset, name=pfx + "walk_index")
            at_last = [Signal(name=f"{pfx}walk_last{d}") for d in range(nd)]
            for d in range(nd):
                m.d.comb += at_last[d].eq(idx[d] == out_shape[d] - 1)
            for kk in range(1, nd):  # S_kk when the kk innermost indices are at their last value
                with m.If(Cat(*at_last[nd - kk:]).all()):
                    m.d.comb += walk_stop.eq(kk)
            m.d.comb += rd_addr.eq(e_id * bsize + lin)
            with m.If(issue & e_replay):
                for d in reversed(range(nd)):
                    inner = Cat(*at_last[d + 1:]).all() if d + 1 < nd else Const(1)
                    delta = stride[d] - sum((out_shape[e] - 1) * stride[e] for e in range(d + 1, nd))
                    with m.If(inner & ~at_last[d]):
                        m.d.sync += [idx[d].eq(idx[d] + 1), lin.eq(lin + delta)]
                        for e in range(d + 1, nd):
                            m.d.sync += idx[e].eq(0)
            with m.If(cmd_fire):
                m.d.sync += [x.eq(0) for x in idx]
                m.d.sync += lin.eq(offset)
        else:
            m.d.comb += rd_addr.eq(e_blk * bsize + e_off)

        if next_mem is not None:
            next_rd = next_mem.read_port(domain="comb")
            m.d.comb += next_rd.addr.eq(e_blk)
        # issue
        with m.If(issue):
            m.d.sync += [s1_v.eq(1), s1_mem.eq(e_replay), s1_final.eq(final), s1_L.eq(e_L),
                         s1_last.eq(e_last), s1_wstop.eq(walk_stop), e_cnt.eq(e_cnt - 1)]
            if bsize > 1:
                with m.If(e_off == bsize - 1):
                    m.d.sync += e_off.eq(0)
                with m.Else():
                    m.d.sync += e_off.eq(e_off + 1)
            if next_mem is not None:
                with m.If(e_off == bsize - 1):
                    m.d.sync += e_blk.eq(next_rd.data)
            with m.If(final):
                m.d.sync += act.eq(0)
                with m.If(e_rel):
                    m.d.sync += [rel_pend.eq(1), rel_id.eq(e_id)]
        with m.Else():
            m.d.sync += s1_v.eq(0)
        with m.If(rel_taken & ~(issue & final & e_rel)):
            m.d.sync += rel_pend.eq(0)

        if len(self.readers) > 1:
            # At the end of its streams a read side releases every buffer it never received
            # (a routing operator sent it to another consumer), as the interpreter does.
            nblocks = self.blocks
            sw_ptr = Signal(range(nblocks + 1), name=pfx + "sweep")
            sweeping = Signal(name=pfx + "sweeping")
            sw_hit = Signal(name=pfx + "sweep_hit")
            m.d.comb += [
                sweeping.eq(finished & ~act & ~error & (sw_ptr != nblocks)),
                sw_hit.eq(pending.bit_select(sw_ptr, 1) & ~(rel_pend & (rel_id == sw_ptr))),
            ]
            with m.If(sweeping):
                with m.If(~sw_hit):
                    m.d.sync += sw_ptr.eq(sw_ptr + 1)
                with m.Elif(~rel_pend | rel_taken):
                    m.d.sync += [rel_pend.eq(1), rel_id.eq(sw_ptr), sw_ptr.eq(sw_ptr + 1)]
            busy_terms.append(sweeping)

        with m.If(cmd_fire & ~bad):
            if cfg.order is not None:
                n_entries = math.prod(cfg.order[0])
            else:
                n_entries = desc_rd.data.len
            m.d.sync += [act.eq(1), e_replay.eq(cmd_replay), e_id.eq(cmd_id), e_blk.eq(cmd_id),
                         e_off.eq(0), e_cnt.eq(Mux(cmd_replay, n_entries, 1)), e_L.eq(cmd_L),
                         e_last.eq(cmd_last), e_rel.eq(cmd_rel)]

        # stage 1: the memory's data is here; form the beat
        beat = Signal(out_layout, name=pfx + "beat")
        m.d.comb += [
            beat.data.eq(Mux(s1_mem, Value.cast(data_rd.data.data), 0)),
            beat.has_data.eq(s1_mem & data_rd.data.has_data),
            beat.last.eq(s1_last & s1_final),
        ]
        with m.If(s1_final):
            m.d.comb += beat.stop.eq(s1_L)
        with m.Else():
            m.d.comb += beat.stop.eq(s1_wstop if cfg.order is not None else stop_rd.data)
        m.d.comb += [ofifo.w_data.eq(beat), ofifo.w_en.eq(s1_v)]

        busy_terms += [act, s1_v, ofifo.r_rdy, rel_pend]
        stall_out_terms.append(out.valid & ~out.ready)

    def _plain_controller(self, m, pfx, cfg, depth, error, bufs, cmd_valid, cmd_replay, cmd_id,
                          cmd_L, cmd_last, cmd_rel, cmd_fire, busy_terms, stall_in_terms):
        """Plain and static-repeat replay: commands from the ``buffers`` beats alone."""
        status = self.status
        bp = bufs.payload
        n = cfg.repeat if cfg.repeat is not None else 1
        extra = 1 if cfg.repeat is not None else 0
        rep = Signal(range(max(n, 2)), name=pfx + "repeat")
        prev_nostop = Signal(name=pfx + "buf_prev_nostop")
        ended = Signal(name=pfx + "ended")
        is_el = Signal(name=pfx + "is_buffer")
        final_rep = Signal(name=pfx + "final_replay")
        split = Signal(name=pfx + "split_stop")
        m.d.comb += [
            is_el.eq(bp.has_data),
            final_rep.eq(rep == n - 1),
            split.eq(~bp.has_data & (bp.stop != 0) & prev_nostop),
        ]
        raise_error(m, status, ErrorCode.BAD_STOP, bufs.valid & ~error & split)
        m.d.comb += [
            cmd_valid.eq(bufs.valid & ~error & ~split & ~ended),
            cmd_replay.eq(is_el),
            cmd_id.eq(bp.data),
            cmd_last.eq(bp.last & (final_rep | ~is_el)),
            cmd_rel.eq(is_el & final_rep),
        ]
        with m.If(is_el):
            m.d.comb += cmd_L.eq(Mux(final_rep, depth + extra + bp.stop, depth))
        with m.Elif(bp.stop != 0):
            m.d.comb += cmd_L.eq(depth + extra + bp.stop)
        consume = Signal(name=pfx + "consume")
        m.d.comb += [consume.eq(cmd_fire & (final_rep | ~is_el)), bufs.ready.eq(consume)]
        with m.If(cmd_fire):
            with m.If(consume):
                m.d.sync += [rep.eq(0), prev_nostop.eq(is_el & (bp.stop == 0))]
                with m.If(bp.last):
                    m.d.sync += ended.eq(1)
            with m.Else():
                m.d.sync += rep.eq(rep + 1)
        stall_in_terms.append(~ended & ~bufs.valid)
        return ended

    def _ref_controller(self, m, pfx, cfg, depth, error, bufs, refp, cmd_valid, cmd_replay, cmd_id,
                        cmd_L, cmd_last, cmd_rel, cmd_fire, busy_terms, stall_in_terms):
        """Reference-driven replay: one command per ``ref`` beat, buffers taken as needed."""
        status = self.status
        c = cfg.expand_rank
        bp, rp = bufs.payload, refp.payload
        id_w = len(cmd_id)
        cur_v = Signal(name=pfx + "cur_valid")
        cur_id = Signal(id_w, name=pfx + "cur_id")
        cur_t = Signal.like(bp.stop, name=pfx + "cur_stop")
        buf_done = Signal(name=pfx + "buffers_done")
        ended = Signal(name=pfx + "ref_done")
        prev_ref_nostop = Signal(name=pfx + "ref_prev_nostop")
        prev_buf_nostop = Signal(name=pfx + "buf_prev_nostop")

        r = rp.stop
        e = rp.has_data
        ends = Signal(name=pfx + "ends")
        take = Signal(name=pfx + "take")
        eff_id = Signal(id_w, name=pfx + "eff_id")
        eff_t = Signal.like(bp.stop, name=pfx + "eff_stop")
        has_buf = Signal(name=pfx + "has_buffer")
        cur_v_n = Signal(name=pfx + "cur_valid_next")
        m.d.comb += [
            ends.eq(r >= c),
            take.eq(~cur_v & (e | ends)),
            eff_id.eq(Mux(cur_v, cur_id, bp.data)),
            eff_t.eq(Mux(cur_v, cur_t, bp.stop)),
            has_buf.eq(cur_v | (take & bp.has_data)),
            cur_v_n.eq(has_buf & ~ends),
        ]
        go = Signal(name=pfx + "go")
        m.d.comb += go.eq(refp.valid & ~error & ~ended & (~take | bufs.valid | buf_done))
        mismatch = Signal(name=pfx + "mismatch")
        m.d.comb += mismatch.eq((take & buf_done)
                                | (e & take & ~bp.has_data)
                                | (ends & (eff_t != r))
                                | (rp.last & cur_v_n))
        split = Signal(name=pfx + "split_stop")
        m.d.comb += split.eq((~e & (r != 0) & prev_ref_nostop)
                             | (take & ~buf_done & ~bp.has_data & (bp.stop != 0) & prev_buf_nostop))
        raise_error(m, status, ErrorCode.BAD_STOP, go & split)
        raise_error(m, status, ErrorCode.REF_MISMATCH, go & ~split & mismatch)
        m.d.comb += [
            cmd_valid.eq(go & ~mismatch & ~split),
            cmd_replay.eq(e),
            cmd_id.eq(eff_id),
            cmd_last.eq(rp.last),
            cmd_rel.eq(ends & has_buf),
        ]
        with m.If(e | (r != 0)):
            m.d.comb += cmd_L.eq(depth + r)
        m.d.comb += [refp.ready.eq(cmd_fire), bufs.ready.eq(cmd_fire & take)]
        with m.If(cmd_fire):
            m.d.sync += [cur_v.eq(cur_v_n), prev_ref_nostop.eq(e & (r == 0))]
            with m.If(take):
                m.d.sync += [cur_id.eq(bp.data), cur_t.eq(bp.stop),
                             prev_buf_nostop.eq(bp.has_data & (bp.stop == 0))]
                with m.If(bp.last):
                    m.d.sync += buf_done.eq(1)
            with m.If(rp.last):
                m.d.sync += ended.eq(1)

        # after the reference's Done the buffer stream must end too (a bare Done)
        tail = Signal(name=pfx + "tail_check")
        m.d.comb += tail.eq(ended & ~buf_done & bufs.valid & ~error)
        bare = Signal(name=pfx + "bare_done")
        m.d.comb += bare.eq(~bp.has_data & (bp.stop == 0) & bp.last)
        raise_error(m, status, ErrorCode.REF_MISMATCH, tail & ~bare)
        with m.If(tail & bare):
            m.d.comb += bufs.ready.eq(1)
            m.d.sync += buf_done.eq(1)
        busy_terms += [cur_v, ended & ~buf_done]  # ... and until the buffer stream's Done
        stall_in_terms.append((~ended & ~refp.valid) | (refp.valid & take & ~bufs.valid & ~buf_done)
                              | (ended & ~buf_done & ~bufs.valid))
        return ended & buf_done
