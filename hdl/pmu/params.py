"""The checked parameters of a PMU and everything sized from them (what its parts are built of)."""

import math

from amaranth.hdl import unsigned
from amaranth.lib import data
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ...compiler.types import Buffer, ElemType
from ...contract.beat import BUFFER_ID_BITS, beat_signature, element_layout, stop_width
from ..unit import StatusSignature, check, check_choice, check_int, check_ints, is_int
from .replay import Replay

__all__ = ["PMUParams"]


class PMUParams:
    """The parameters of a :class:`~stepforge.hdl.pmu.PMU`, checked, and the sizes, layouts and
    ports that follow from them. The PMU checks its parameters by building this object before
    it exists itself, and hands it to each of its parts.

    Parameters
    ----------
    elem_type, rank, b, shape, mode, slots, block_size, blocks, readers, row_bound
        As for :class:`~stepforge.hdl.pmu.PMU`.

    Attributes
    ----------
    elem_type, rank, b, shape, mode, readers, row_bound
        The parameters (``shape`` and ``readers`` as tuples, ``readers`` defaulted).
    slots : int or None
        Static mode: the number of buffers; ``None`` in dynamic mode.
    blocks, block_size : int
        The storage: ``blocks`` blocks of ``block_size`` entries (static mode: one block of
        ``prod(shape)`` entries per slot).
    max_entries, max_blocks : int
        Entries and blocks of one buffer at its full bound.
    buffer_type : stepforge.compiler.types.Buffer
        Element type of ``refs`` and ``buffers``.

    Raises
    ------
    ValueError
        As for :class:`~stepforge.hdl.pmu.PMU`.
    """

    def __init__(self, elem_type, rank, b, shape, *, mode="static", slots=2, block_size=None,
                 blocks=None, readers=None, row_bound=None):
        check(isinstance(elem_type, ElemType) and not isinstance(elem_type, Buffer), "PMU",
              "elem_type", "an element type other than Buffer", elem_type)
        check_int("PMU", "rank", rank, 1)
        check_int("PMU", "b", b, 1, rank)
        shape = check_ints("PMU", "shape", shape, 1, length=b)
        check_choice("PMU", "mode", mode, ("static", "dynamic"))
        readers = (Replay(),) if readers is None else readers
        check(isinstance(readers, (tuple, list)) and len(readers) > 0
              and all(isinstance(r, Replay) for r in readers),
              "PMU", "readers", "a non-empty sequence of Replay", readers)
        self.elem_type, self.rank, self.b, self.shape = elem_type, rank, b, shape
        self.mode, self.readers, self.row_bound = mode, tuple(readers), row_bound
        self.max_entries = math.prod(shape)
        if mode == "static":
            self.slots = check_int("PMU", "slots", slots, 1, 1 << BUFFER_ID_BITS)
            check(block_size is None and blocks is None, "PMU", "block_size and blocks",
                  "None with mode='static'", (block_size, blocks))
            self.blocks, self.block_size = slots, self.max_entries
        else:
            self.slots = None
            block_size = shape[-1] if block_size is None else block_size
            self.block_size = check_int("PMU", "block_size", block_size, 1)
            need = -(-self.max_entries // block_size)
            blocks = 2 * need if blocks is None else blocks
            check(is_int(blocks) and need <= blocks <= 1 << BUFFER_ID_BITS, "PMU", "blocks",
                  f"an int in {need}..{1 << BUFFER_ID_BITS} (one buffer of shape {list(shape)} "
                  f"in blocks of {block_size}; a {BUFFER_ID_BITS}-bit buffer id)", blocks)
            self.blocks = blocks
        self.max_blocks = -(-self.max_entries // self.block_size)
        for i, r in enumerate(self.readers):
            if r.expand_rank is not None:
                check(r.expand_rank <= rank - b, "PMU", f"readers[{i}].expand_rank",
                      f"at most the buffer stream's rank {rank - b}", r.expand_rank)
            if r.order is not None:
                check(mode == "static", "PMU", "mode", f"'static' for the order of readers[{i}]",
                      mode)
                lo = hi = r.order[2]
                for n, s in zip(r.order[0], r.order[1]):
                    lo += min(0, (n - 1) * s)
                    hi += max(0, (n - 1) * s)
                check(lo >= 0 and hi < self.max_entries, "PMU", f"readers[{i}].order",
                      f"within the buffer of {self.max_entries} elements (it reads element "
                      f"{lo if lo < 0 else hi})", r.order)
        self.buffer_type = Buffer(elem_type, shape)

    def __repr__(self):
        return f"PMUParams({self.arguments()})"

    def arguments(self):
        """The constructor's arguments as ``repr`` shows them (``PMU``'s ``repr`` too)."""
        args = [repr(self.elem_type), str(self.rank), str(self.b), repr(self.shape)]
        if self.mode == "static":
            args.append(f"mode='static', slots={self.slots}")
        else:
            args.append(f"mode='dynamic', block_size={self.block_size}, blocks={self.blocks}")
        args.append(f"readers={self.readers!r}")
        if self.row_bound is not None:
            args.append(f"row_bound={self.row_bound!r}")
        return ", ".join(args)

    def port_names(self, i):
        """Names of the ``(buffers, ref, out)`` ports of read side ``i`` (see
        :meth:`PMU.port_names <stepforge.hdl.pmu.PMU.port_names>`)."""
        sfx = "" if len(self.readers) == 1 else str(i)
        return f"buffers{sfx}", f"ref{sfx}", f"out{sfx}"

    def members(self):
        """The PMU's signature members."""
        rank, b, row_bound = self.rank, self.b, self.row_bound
        members = {
            "in0": In(beat_signature(self.elem_type, rank, row_bound=row_bound)),
            "refs": Out(beat_signature(self.buffer_type, rank - b)),
        }
        for i, r in enumerate(self.readers):
            nb, nr, no = self.port_names(i)
            members[nb] = In(beat_signature(self.buffer_type, rank - b))
            if r.expand_rank is not None:
                members[nr] = In(beat_signature(r.ref_type, rank - b, row_bound=row_bound))
            members[no] = Out(beat_signature(self.elem_type, r.out_rank(rank, b),
                                             row_bound=row_bound))
        members["status"] = Out(StatusSignature)
        members["free_blocks"] = Out(range(self.blocks + 1))
        return members

    # -- sizes and layouts of the storage ---------------------------------------------------

    @property
    def id_width(self):
        """Width of a block number (and of a buffer id: its first block)."""
        return max(1, ceil_log2(self.blocks))

    @property
    def entry_addr_width(self):
        """Width of an entry address ``block * block_size + offset`` (at least one bit)."""
        return ceil_log2(max(self.blocks * self.block_size, 2))

    def entry_layout(self):
        """One entry of the data memory: the element and whether the beat carried one."""
        return data.StructLayout({
            "data": element_layout(self.elem_type, row_bound=self.row_bound),
            "has_data": unsigned(1),
        })

    def stop_shape(self):
        """One entry of the stop memory: a stop of level ``0 .. b - 1``."""
        return unsigned(stop_width(self.b - 1))

    def desc_layout(self):
        """One buffer descriptor: entry count, block count, whether it fills its static shape."""
        return data.StructLayout({
            "len": range(self.max_entries + 1),
            "nblk": range(self.max_blocks + 1),
            "full": unsigned(1),
        })

    def command_layout(self, i):
        """A command of read side ``i`` to its replay engine.

        ``replay``: replay the buffer ``id`` (else send one stop-only beat); ``stop``: the
        closing stop of the replay (or the stop-only beat's stop); ``last``: the replay ends
        the stream; ``release``: the read side is done with the buffer after this replay.
        """
        return data.StructLayout({
            "replay": unsigned(1),
            "id": unsigned(self.id_width),
            "stop": unsigned(stop_width(self.readers[i].out_rank(self.rank, self.b))),
            "last": unsigned(1),
            "release": unsigned(1),
        })
