"""What the parts of a :class:`~stepforge.hdl.pmu.PMU` share: table layouts and interfaces.

The functions take the (already checked) PMU whose parts they describe; its attributes
(``elem_type``, ``rank``, ``b``, ``blocks``, ``block_size``, ``max_entries``, ``max_blocks``,
``row_bound``) size everything.
"""

from amaranth.hdl import unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..beat import element_layout, stop_width

__all__ = ["id_width", "entry_addr_width", "entry_layout", "stop_shape", "desc_layout",
           "command_layout", "AllocSignature", "ReleaseSignature", "AsyncReadSignature",
           "FreeSignature", "connect_async_read"]


def id_width(pmu):
    """Width of a block number (and of a buffer id: its first block)."""
    return max(1, ceil_log2(pmu.blocks))


def entry_addr_width(pmu):
    """Width of an entry address ``block * block_size + offset`` (at least one bit)."""
    return ceil_log2(max(pmu.blocks * pmu.block_size, 2))


def entry_layout(pmu):
    """One stored entry of the data memory: the element and whether the beat carried one."""
    return data.StructLayout({
        "data": element_layout(pmu.elem_type, row_bound=pmu.row_bound),
        "has_data": unsigned(1),
    })


def stop_shape(pmu):
    """One stored entry of the stop memory: a stop of level ``0 .. b - 1``."""
    return unsigned(stop_width(pmu.b - 1))


def desc_layout(pmu):
    """One buffer descriptor: entry count, block count, whether it fills its static shape."""
    return data.StructLayout({
        "len": range(pmu.max_entries + 1),
        "nblk": range(pmu.max_blocks + 1),
        "full": unsigned(1),
    })


def command_layout(pmu, out_rank):
    """A read side's command to its replay engine.

    ``replay``: replay the buffer ``id`` (else send one stop-only beat); ``stop``: the closing
    stop of the replay (or the stop-only beat's stop); ``last``: the replay ends the stream;
    ``release``: the read side is done with the buffer after this replay.
    """
    return data.StructLayout({
        "replay": unsigned(1),
        "id": unsigned(id_width(pmu)),
        "stop": unsigned(stop_width(out_rank)),
        "last": unsigned(1),
        "release": unsigned(1),
    })


def AllocSignature(pmu):
    """The writer's side of the free list: ``pop`` the ``head`` block (while ``count != 0``)."""
    return wiring.Signature({
        "pop": Out(1),
        "head": In(id_width(pmu)),
        "count": In(range(pmu.blocks + 1)),
    })


def FreeSignature(pmu):
    """Blocks going back to the free list, one per cycle (the free list always takes them)."""
    return stream.Signature(unsigned(id_width(pmu)), always_ready=True)


def ReleaseSignature(pmu):
    """A read side's release request: it is done with buffer ``id``; ``taken`` by the arbiter.

    ``valid`` stays high until ``taken``.
    """
    return wiring.Signature({
        "valid": Out(1),
        "id": Out(id_width(pmu)),
        "taken": In(1),
    })


def AsyncReadSignature(addr_width, shape):
    """The reader's side of an asynchronous (``"comb"`` domain) memory read port."""
    return wiring.Signature({"addr": Out(addr_width), "data": In(shape)})


def connect_async_read(m, reader, port):
    """Wire the :func:`AsyncReadSignature` member ``reader`` to the memory read port ``port``.

    (``wiring.connect`` cannot: an asynchronous port's ``en`` is the constant 1.)
    """
    m.d.comb += [port.addr.eq(reader.addr), reader.data.eq(port.data)]
