"""The PMU component: parameter checks, ports, the memories, and the parts wired together."""

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory

from ..ram_attrs import NO_COLLISION
from ..unit import merge_status
from .controller import PlainController, RefController
from .data_ram import DataRAM
from .free_list import FreeList
from .interfaces import connect_async_read
from .params import PMUParams
from .release import ReleaseArbiter
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
        Bound of a dynamic tile row count (see :func:`~stepforge.contract.beat.element_layout`).

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

    def __new__(cls, *args, **kwargs):
        # The parameters are checked before the component exists: a refused PMU is never an
        # elaboratable that Amaranth would report as created but never used.
        params = PMUParams(*args, **kwargs)
        self = super().__new__(cls, src_loc_at=1)
        self.params = params
        return self

    def __init__(self, elem_type, rank, b, shape, *, mode="static", slots=2, block_size=None,
                 blocks=None, readers=None, row_bound=None):
        p = self.params  # the same arguments, checked by __new__
        self.elem_type, self.rank, self.b, self.shape = p.elem_type, p.rank, p.b, p.shape
        self.mode, self.slots, self.readers, self.row_bound = p.mode, p.slots, p.readers, p.row_bound
        self.blocks, self.block_size = p.blocks, p.block_size
        self.max_entries, self.max_blocks = p.max_entries, p.max_blocks
        self.buffer_type = p.buffer_type
        super().__init__(p.members())

    def port_names(self, i):
        """Names of the ``(buffers, ref, out)`` ports of read side ``i``.

        ``("buffers", "ref", "out")`` with one read side, else ``("buffers{i}", "ref{i}",
        "out{i}")``; the ``ref`` port exists only for the reference form.
        """
        return self.params.port_names(i)

    def __repr__(self):
        return f"PMU({self.params.arguments()})"

    def elaborate(self, platform):
        m = Module()
        p = self.params
        k = len(self.readers)
        dynamic = self.mode == "dynamic"
        nentries = self.blocks * self.block_size  # memories get at least two words
        # any part has raised an error: every part stops. A register (a cycle after the error
        # flags), not their OR: it gates the decision of every part, and the OR in front of it
        # was a LUT level of the worst iCE40 paths of the write side and the replay
        halt = Signal(name="halt")
        m.d.sync += halt.eq(self.status.error)

        # -- memories --------------------------------------------------------------------------
        m.submodules.data_mem = data_mem = DataRAM(p.entry_layout(), max(nentries, 2), k)
        m.submodules.stop_mem = stop_mem = Memory(shape=p.stop_shape(), depth=max(nentries, 2),
                                                  init=[], attrs=NO_COLLISION)
        m.submodules.desc_mem = desc_mem = Memory(shape=p.desc_layout(),
                                                  depth=max(self.blocks, 2), init=[])
        if dynamic:
            m.submodules.next_mem = next_mem = Memory(shape=unsigned(p.id_width),
                                                      depth=max(self.blocks, 2), init=[])

        # -- write side --------------------------------------------------------------------------
        m.submodules.free_list = free_list = FreeList(p)
        m.submodules.writer = writer = Writer(p)
        m.submodules.release = release = ReleaseArbiter(p)
        wiring.connect(m, wiring.flipped(self.in0), writer.in0)
        wiring.connect(m, writer.refs, wiring.flipped(self.refs))
        wiring.connect(m, writer.alloc, free_list.alloc)
        wiring.connect(m, writer.data_wr, data_mem.write)
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
                m.submodules[f"control{i}"] = ctrl = PlainController(p, i)
            else:
                m.submodules[f"control{i}"] = ctrl = RefController(p, i)
                wiring.connect(m, wiring.flipped(getattr(self, nr)), ctrl.ref)
            m.submodules[f"replay{i}"] = eng = ReplayEngine(p, i)
            wiring.connect(m, wiring.flipped(getattr(self, nb)), ctrl.buffers)
            wiring.connect(m, ctrl.cmd, eng.cmd)
            wiring.connect(m, eng.out, wiring.flipped(getattr(self, no)))
            wiring.connect(m, eng.rel, release.rel[i])
            wiring.connect(m, eng.data_rd, data_mem.read_port(i))
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
        merge_status(m, self.status, [part.status for part in parts])
        return m
