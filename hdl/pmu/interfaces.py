"""The interfaces between the parts of a :class:`~stepforge.hdl.pmu.PMU`.

Each function takes the :class:`~stepforge.hdl.pmu.params.PMUParams` the parts are built from.
"""

from amaranth.hdl import unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AllocSignature", "FreeSignature", "ReleaseSignature", "AsyncReadSignature",
           "connect_async_read"]


def AllocSignature(params):
    """The writer's side of the free list: ``pop`` the ``head`` block (while ``nonempty``, a
    register: ``count != 0``)."""
    return wiring.Signature({
        "pop": Out(1),
        "head": In(params.id_width),
        "count": In(range(params.blocks + 1)),
        "nonempty": In(1),
    })


def FreeSignature(params):
    """Blocks going back to the free list, one per cycle (the free list always takes them)."""
    return stream.Signature(unsigned(params.id_width), always_ready=True)


def ReleaseSignature(params):
    """A read side's release request: it is done with buffer ``id``; ``taken`` by the arbiter.

    ``valid`` stays high until ``taken``.
    """
    return wiring.Signature({
        "valid": Out(1),
        "id": Out(params.id_width),
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
