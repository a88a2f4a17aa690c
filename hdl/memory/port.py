"""The signatures of the memory system's ports: client bursts, response lines, the word port."""

from amaranth.hdl import unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .geometry import MemoryGeometry, check_count

__all__ = ["MemoryPort", "ResponseSignature", "DebugSignature", "client_ports",
           "client_shapes"]


def ResponseSignature(geometry):
    """Read response lines, seen from the memory (all members ``Out``)."""
    return wiring.Signature({
        "valid": Out(1),
        "count": Out(range(geometry.lanes + 1)),
        "last": Out(1),
        "data": Out(geometry.line_layout),
    })


def DebugSignature(geometry):
    """The memory's word port, seen from the host or debugger.

    ``addr`` (word address) with ``we`` + ``wdata`` writes a word; with ``re`` it reads one, and
    ``rdata`` carries it with ``rvalid`` high exactly
    :attr:`~stepforge.hdl.memory.MemoryModel.word_latency` cycles later (one access per cycle,
    pipelined). An access waits one cycle in a register; no client line is granted in the
    cycle after an access.
    """
    return wiring.Signature({
        "addr": Out(unsigned(geometry.addr_bits)),
        "we": Out(1),
        "wdata": Out(unsigned(geometry.word_bits)),
        "re": Out(1),
        "rdata": In(unsigned(geometry.word_bits)),
        "rvalid": In(1),
    })


class MemoryPort(wiring.Signature):
    """A client's port on a :class:`~stepforge.hdl.memory.MemoryModel`, seen from the client.

    Every request of a port is a burst of one shape, ``burst = (count, rows, stride)``: ``rows``
    segments of ``count`` consecutive words, segment ``k`` starting ``k * stride`` words after
    the request's ``addr`` (``rows`` 1 and ``stride`` 0 for a plain run of words). The shape is a
    property of the port, fixed when the design is built, so the memory turns it into lines with
    constant tables and counters instead of arithmetic on every request.

    Parameters
    ----------
    geometry : MemoryGeometry
    kind : {"read", "write"}
    burst : (int, int, int)
        ``(count, rows, stride)``: ``count >= 1`` words per segment, ``rows >= 1`` segments,
        ``stride >= 0`` words between segment starts.
    start_lane : int, optional
        The lane of every request's first word (``addr % lanes``), when the client knows it
        when the design is built (a tensor whose tiles all start in one lane,
        :meth:`TensorPlacement.port`); the memory then routes this client's words with fixed
        wiring instead of a crossbar. ``None``: any lane.

    Members
    -------
    req : ``Out(stream.Signature(geometry.request_layout))``
        Bursts: the first word's address.
    resp : ``In(ResponseSignature(geometry))``
        Read ports only: the burst's lines.
    data : ``Out(stream.Signature(geometry.line_layout))``
        Write ports only: the burst's lines.
    """

    def __init__(self, geometry, kind, burst, start_lane=None):
        if not isinstance(geometry, MemoryGeometry):
            raise TypeError(f"MemoryPort geometry must be a MemoryGeometry, not {geometry!r}")
        if kind not in ("read", "write"):
            raise ValueError(f"MemoryPort kind must be 'read' or 'write', not {kind!r}")
        if not isinstance(burst, tuple) or len(burst) != 3:
            raise ValueError(f"MemoryPort burst must be a tuple (count, rows, stride), not {burst!r}")
        count, rows, stride = burst
        check_count("MemoryPort burst count", count, 1)
        check_count("MemoryPort burst rows", rows, 1)
        check_count("MemoryPort burst stride", stride, 0)
        if max(count, rows) >= 1 << geometry.count_bits:
            raise ValueError(f"MemoryPort burst {burst!r} does not fit count_bits="
                             f"{geometry.count_bits}")
        if start_lane is not None and (isinstance(start_lane, bool)
                                       or not isinstance(start_lane, int)
                                       or not 0 <= start_lane < geometry.lanes):
            raise ValueError(f"MemoryPort start_lane must be None or an int in "
                             f"0..{geometry.lanes - 1}, not {start_lane!r}")
        self.geometry, self.kind, self.burst = geometry, kind, burst
        self.start_lane = start_lane
        members = {"req": Out(stream.Signature(geometry.request_layout))}
        if kind == "read":
            members["resp"] = In(ResponseSignature(geometry))
        else:
            members["data"] = Out(stream.Signature(geometry.line_layout))
        super().__init__(members)

    @property
    def lines(self):
        """Word counts of the lines of one burst (:meth:`MemoryGeometry.burst_lines`)."""
        return self.geometry.burst_lines(*self.burst)

    @property
    def shape(self):
        """``burst``, with ``start_lane`` appended when it is known: an entry of
        :class:`~stepforge.hdl.memory.MemoryModel`'s ``read_ports`` or ``write_ports``."""
        return self.burst if self.start_lane is None else self.burst + (self.start_lane,)

    def __eq__(self, other):
        return (type(other) is MemoryPort and other.kind == self.kind
                and other.geometry == self.geometry and other.shape == self.shape)

    def __hash__(self):
        return hash((MemoryPort, self.kind, self.geometry, self.shape))

    def __repr__(self):
        lane = "" if self.start_lane is None else f", start_lane={self.start_lane}"
        return f"MemoryPort({self.geometry!r}, {self.kind!r}, {self.burst!r}{lane})"


def client_ports(owner, geometry, read_ports, write_ports):
    """The client ports of a memory (:class:`~stepforge.hdl.memory.MemoryModel`,
    :class:`~stepforge.hdl.memory.sdram_memory.SDRAMMemory`): ``(read_ports, write_ports,
    members)``, the burst shapes as tuples and the members ``read0``, ``read1``, ...,
    ``write0``, ... of ``In(MemoryPort)``.

    Raises
    ------
    ValueError
        No port at all, or a shape that is not ``(count, rows, stride)`` or ``(count, rows,
        stride, start_lane)``; the message names ``owner`` (the memory's class name).
    """
    read_ports = tuple(tuple(b) for b in read_ports)
    write_ports = tuple(tuple(b) for b in write_ports)
    if not read_ports and not write_ports:
        article = "an" if owner[0] in "AEIOUS" else "a"
        raise ValueError(f"{article} {owner} needs at least one read or write port")
    members = {}
    for kind, shapes in (("read", read_ports), ("write", write_ports)):
        for i, shape in enumerate(shapes):
            if len(shape) not in (3, 4):
                raise ValueError(f"{owner} {kind}_ports[{i}] must be (count, rows, stride) or "
                                 f"(count, rows, stride, start_lane), not {shape!r}")
            members[f"{kind}{i}"] = In(MemoryPort(geometry, kind, shape[:3], *shape[3:]))
    return read_ports, write_ports, members


def client_shapes(clients):
    """``{"read_ports": [...], "write_ports": [...]}``: the burst shapes of ``clients``
    (components with a ``mem`` port of :class:`MemoryPort`, or the signatures themselves), read
    and write apart, in order: the keyword arguments of a memory with a port for each."""
    sigs = [c if isinstance(c, MemoryPort) else c.mem.signature for c in clients]
    return {"read_ports": [s.shape for s in sigs if s.kind == "read"],
            "write_ports": [s.shape for s in sigs if s.kind == "write"]}
