"""A client's bursts as a stream of memory lines, each with the row and word of every lane."""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..fifo import StreamFIFO
from .port import MemoryPort

__all__ = ["LineLayout", "LineGenerator", "line_tables", "fixed_lanes", "fixed_sel"]


def LineLayout(geometry):
    """The layout of one line of a burst, as the memory's pipeline carries it.

    ``rows[j]``
        The row lane ``j`` reads or writes.
    ``use``
        The lanes the line moves a word in (a bit per lane).
    ``sel[j]``
        A write line: lane ``j`` takes word ``sel[j]`` of the client's line. A read line: word
        ``j`` of the response comes from lane ``sel[j]``.
    ``count``, ``last``
        Words in the line (``1..lanes``); the burst's last line.
    """
    L = geometry.lanes
    row_bits = max(1, geometry.addr_bits - geometry.lane_bits)
    return data.StructLayout({
        "rows": data.ArrayLayout(unsigned(row_bits), L),
        "use": unsigned(L),
        "sel": data.ArrayLayout(unsigned(max(1, geometry.lane_bits)), L),
        "count": range(L + 1),
        "last": 1,
    })


def line_tables(port):
    """The constant tables that turn a burst of ``port``'s shape into lines.

    Returns ``(lines, patterns)``: ``lines[l] = (pattern, count, delta)``, the pattern of line
    ``l``, its words, and the words from its first word to the next line's (0 for the last);
    ``patterns[p][r]`` lists, for a line whose first word sits in lane ``r``, ``(row offset,
    used, sel)`` of every lane ``j`` (row offset from the row of the line's first word; ``sel``
    as in :func:`LineLayout`).
    """
    g = port.geometry
    L = g.lanes
    offsets = g.line_offsets(*port.burst)
    shapes, lines = [], []
    for n, offs in enumerate(offsets):
        rel = tuple(o - offs[0] for o in offs)
        if rel not in shapes:
            shapes.append(rel)
        delta = offsets[n + 1][0] - offs[0] if n + 1 < len(offsets) else 0
        lines.append((shapes.index(rel), len(offs), delta))
    patterns = []
    for rel in shapes:
        by_r = []
        for r in range(L):
            row = [0] * L
            used = [0] * L
            sel = [0] * L
            for i, o in enumerate(rel):
                j = (r + o % L) % L
                row[j] = o // L + (j < r)
                used[j] = 1
                sel[j if port.kind == "write" else i] = i if port.kind == "write" else j
            by_r.append(list(zip(row, used, sel)))
        patterns.append(by_r)
    return lines, patterns


def fixed_lanes(port):
    """For a port with a known ``start_lane``: ``(row offset, used, sel)`` of every lane for each
    line of a burst (as in :func:`line_tables`, the lane of each line's first word being
    known); None when the port's requests may start in any lane."""
    if port.start_lane is None:
        return None
    g = port.geometry
    lines, patterns = line_tables(port)
    offsets = g.line_offsets(*port.burst)
    return [patterns[p][(port.start_lane + offs[0]) % g.lanes]
            for (p, _, _), offs in zip(lines, offsets)]


def fixed_sel(port):
    """The ``sel`` of :func:`LineLayout` that every line of ``port``'s bursts has where it
    matters (the lanes a write line uses; the first ``count`` words of a read line), as a tuple
    (0 where no line uses it); None when it varies from line to line or the start lane is not
    known. The memory then wires this client's words to its lanes without a crossbar."""
    lanes = fixed_lanes(port)
    if lanes is None:
        return None
    counts = port.lines
    sel = [None] * port.geometry.lanes
    for line, count in zip(lanes, counts):
        for k, (_, used, value) in enumerate(line):
            if (used if port.kind == "write" else k < count):
                if sel[k] not in (None, value):
                    return None
                sel[k] = value
    return tuple(0 if v is None else v for v in sel)


class LineGenerator(wiring.Component):
    """Turn the bursts of one client into memory lines (:func:`LineLayout`), one per cycle.

    A request enters a two-entry queue (so ``req.ready`` is a register's output and a client can
    issue a burst every cycle). The line at the head of the burst is computed from the request's
    address with constant tables (:func:`line_tables`: no multiplier, one adder per lane for the
    row) into a two-entry line queue, while it has room (so the generator may run a line ahead
    of the memory); each line moves on to the next with one add of a constant. A line is
    offered two cycles after its request was accepted.

    Parameters
    ----------
    port : MemoryPort
        The client's port (its geometry, kind and burst shape).

    Members
    -------
    req : ``In(stream.Signature(geometry.request_layout))``
        The client's bursts.
    line : ``Out(stream.Signature(LineLayout(geometry)))``
        The lines of the bursts, in order; ``line.valid`` is a register, ``line.payload`` one
        of two registers chosen by a registered pointer.
    """

    def __init__(self, port):
        if not isinstance(port, MemoryPort):
            raise TypeError(f"LineGenerator port must be a MemoryPort, not {port!r}")
        self.port = port
        g = port.geometry
        super().__init__({"req": In(stream.Signature(g.request_layout)),
                          "line": Out(stream.Signature(LineLayout(g)))})

    def __repr__(self):
        return f"LineGenerator({self.port!r})"

    def elaborate(self, platform):
        m = Module()
        g = self.port.geometry
        L, lb = g.lanes, g.lane_bits
        lines, patterns = line_tables(self.port)
        nl = len(lines)

        # (``split``: the two addresses sit in registers enabled by the client's push alone, with
        # no write-address decode of a LUT-RAM behind the client's ``valid``; the grant, which
        # pops the head after a burst's last line, reaches only a read pointer)
        m.submodules.queue = queue = StreamFIFO(unsigned(g.addr_bits), 2, counters=False,
                                                split=True)
        m.d.comb += [queue.i.payload.eq(self.req.payload.addr), queue.i.valid.eq(self.req.valid),
                     self.req.ready.eq(queue.i.ready)]
        head = queue.o.payload

        index = Signal(range(max(nl, 2)), name="line_index")
        # the next line's first word (read only past a burst's first line: no reset)
        running = Signal(g.addr_bits, name="line_addr", reset_less=True)
        addr = Signal(g.addr_bits, name="head_addr")
        if nl == 1:
            m.d.comb += addr.eq(head)
        else:
            m.d.comb += addr.eq(Mux(index == 0, head, running))

        pattern = Signal(range(max(len(patterns), 2)), name="line_pattern")
        count = Signal(range(L + 1), name="line_count")
        delta = Signal(g.addr_bits, name="line_delta")
        last = Signal(name="line_last")
        nxt = Signal(LineLayout(g), name="line_next")
        row_off = [Signal(len(nxt.rows[0]), name=f"lane{j}_row_offset") for j in range(L)]
        fixed = fixed_lanes(self.port)

        def lanes_of(lanes):
            return [s for j, (off, used, sel) in enumerate(lanes)
                    for s in (row_off[j].eq(off), nxt.use[j].eq(used), nxt.sel[j].eq(sel))]

        with m.Switch(index):
            for n, (p, c, d) in enumerate(lines):
                with m.Case(n) if n < nl - 1 else m.Default():
                    m.d.comb += [count.eq(c), delta.eq(d), last.eq(n == nl - 1)]
                    if fixed is not None:   # the line's lanes are known from its index
                        m.d.comb += lanes_of(fixed[n])
                    else:                   # they follow from its pattern and first lane
                        m.d.comb += pattern.eq(p)

        row = addr[lb:]
        if fixed is None:                   # from the lane of the line's first word
            lane = addr[:lb] if lb else 0
            with m.Switch(pattern):
                for p, by_r in enumerate(patterns):
                    with m.Case(p) if p < len(patterns) - 1 else m.Default():
                        with m.Switch(lane):
                            for r, lanes in enumerate(by_r):
                                with m.Case(r) if r < L - 1 else m.Default():
                                    m.d.comb += lanes_of(lanes)
        m.d.comb += [nxt.rows[j].eq(row + row_off[j]) for j in range(L)]
        m.d.comb += [nxt.count.eq(count), nxt.last.eq(last)]

        # the lines wait in a two-entry queue kept apart (``split``): the arbiter's grant pops it
        # through a read pointer, and the next line enters while the queue has room (a
        # register), so the grant is not on the path into the queue's enables and the request
        # queue (the worst iCE40 memory paths, five LUTs from a client's valid); a line loaded
        # in cycle t is offered in t + 1, as from the single register it replaces
        m.submodules.lines = lineq = StreamFIFO(LineLayout(g), 2, counters=False, split=True)
        wiring.connect(m, lineq.o, wiring.flipped(self.line))
        load = Signal(name="line_load")
        m.d.comb += [load.eq(queue.o.valid & lineq.i.ready),
                     lineq.i.valid.eq(load), lineq.i.payload.eq(nxt)]
        with m.If(load):
            if nl > 1:
                m.d.sync += running.eq(addr + delta)
                with m.If(last):
                    m.d.sync += index.eq(0)
                with m.Else():
                    m.d.sync += index.eq(index + 1)
        m.d.comb += queue.o.ready.eq(load & last)
        return m
