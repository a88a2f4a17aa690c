"""The PMU component: parameter checks, ports, the memories, and the parts wired together."""

import math

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ...compiler.types import Buffer, ElemType
from ..beat import BUFFER_ID_BITS, beat_signature
from ..unit import StatusSignature, merge_status
from .controller import PlainController, RefController
from .free_list import FreeList
from .interfaces import connect_async_read, desc_layout, entry_layout, id_width, stop_shape
from .release import ReleaseArbiter
from .replay import Replay, _is_int
from .replay_engine import ReplayEngine
from .writer import Writer

__all__ = ["PMU"]


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

    def elaborate(self, platform):
        m = Module()
        k = len(self.readers)
        dynamic = self.mode == "dynamic"
        nentries = self.blocks * self.block_size  # memories get at least two words
        halt = Signal(name="halt")  # any part has raised an error: every part stops
        m.d.comb += halt.eq(self.status.error)

        # -- memories --------------------------------------------------------------------------
        m.submodules.data_mem = data_mem = Memory(shape=entry_layout(self), depth=max(nentries, 2),
                                                  init=[])
        m.submodules.stop_mem = stop_mem = Memory(shape=stop_shape(self), depth=max(nentries, 2),
                                                  init=[])
        m.submodules.desc_mem = desc_mem = Memory(shape=desc_layout(self),
                                                  depth=max(self.blocks, 2), init=[])
        if dynamic:
            m.submodules.next_mem = next_mem = Memory(shape=unsigned(id_width(self)),
                                                      depth=max(self.blocks, 2), init=[])

        # -- write side --------------------------------------------------------------------------
        m.submodules.free_list = free_list = FreeList(self)
        m.submodules.writer = writer = Writer(self)
        m.submodules.release = release = ReleaseArbiter(self)
        wiring.connect(m, wiring.flipped(self.in0), writer.in0)
        wiring.connect(m, writer.refs, wiring.flipped(self.refs))
        wiring.connect(m, writer.alloc, free_list.alloc)
        wiring.connect(m, writer.data_wr, data_mem.write_port())
        wiring.connect(m, writer.stop_wr, stop_mem.write_port())
        wiring.connect(m, writer.desc_wr, desc_mem.write_port())
        if dynamic:
            wiring.connect(m, writer.next_wr, next_mem.write_port())
        m.d.comb += [writer.halt.eq(halt), release.pend_set.eq(writer.pend_set),
                     self.free_blocks.eq(free_list.alloc.count)]
        parts = [writer]

        # -- read sides: a controller and a replay engine each ----------------------------------
        for i, r in enumerate(self.readers):
            nb, nr, no = self.port_names(i)
            if r.expand_rank is None:
                m.submodules[f"control{i}"] = ctrl = PlainController(self, i)
            else:
                m.submodules[f"control{i}"] = ctrl = RefController(self, i)
                wiring.connect(m, wiring.flipped(getattr(self, nr)), ctrl.ref)
            m.submodules[f"replay{i}"] = eng = ReplayEngine(self, i)
            wiring.connect(m, wiring.flipped(getattr(self, nb)), ctrl.buffers)
            wiring.connect(m, ctrl.cmd, eng.cmd)
            wiring.connect(m, eng.out, wiring.flipped(getattr(self, no)))
            wiring.connect(m, eng.rel, release.rel[i])
            wiring.connect(m, eng.data_rd, data_mem.read_port())
            wiring.connect(m, eng.stop_rd, stop_mem.read_port())
            connect_async_read(m, eng.desc_rd, desc_mem.read_port(domain="comb"))
            if dynamic:
                connect_async_read(m, eng.next_rd, next_mem.read_port(domain="comb"))
            m.d.comb += [ctrl.halt.eq(halt), eng.halt.eq(halt), eng.pending.eq(release.pending[i]),
                         release.finished[i].eq(ctrl.finished)]
            if k > 1:
                m.d.comb += eng.finished.eq(ctrl.finished)
            parts += [ctrl, eng]

        # -- lifetimes: release arbiter and block walker ----------------------------------------
        connect_async_read(m, release.desc_rd, desc_mem.read_port(domain="comb"))
        if dynamic:
            connect_async_read(m, release.next_rd, next_mem.read_port(domain="comb"))
        wiring.connect(m, release.free, free_list.free)
        parts.append(release)
        merge_status(m, self.status, [p.status for p in parts])
        return m
