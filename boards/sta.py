"""Static timing analysis of a routed design from nextpnr's SDF, for the worst paths by unit.

nextpnr reports one critical path per clock. To name the *several* worst paths, a build asks
nextpnr for the routed design's delays (``--sdf``: every cell's input-to-output and
clock-to-output delays, every setup time, every routed connection's delay) and times it again
here: arrival times propagate from the clock-to-output delay of every register (flip-flop,
block RAM, registered DSP, LUTRAM read) through logic and routing to every register input with
a setup time. A path's delay is its arrival plus the endpoint's setup time; the worst path's
delay gives the same Fmax as nextpnr's (within its clock-skew modelling, a few ps).

Paths from or to an I/O pin are not register-to-register paths and are not timed (as in
nextpnr, whose Fmax leaves out its ``<async>`` paths). A cell clocked by a constant (an iCE40
MAC16 without any register: nextpnr models it as clocked by ``$PACKER_GND``) is timed as
combinational logic: the setup time of its input plus its clock-to-output delay, so a path
register -> MAC16 -> register is one path (nextpnr times its two halves apart, and its
iCE40 MAC16 delays are 100 ps placeholders: such a path is faster here than on silicon).
"""

import re
from dataclasses import dataclass

__all__ = ["Timing", "Path", "read_sdf", "analyse"]

_CLOCK_PORTS = {"CLK", "RCLK", "WCLK", "CLKA", "CLKB", "WCK", "CLK0", "CLK1", "CLK2", "CLK3",
                "INCLK", "OUTCLK", "CLOCK"}
_ESC = re.compile(r"\\(.)")
_TRIPLE = re.compile(r"\((-?[\d.]*):(-?[\d.]*):(-?[\d.]*)\)")
_EVENT = re.compile(r"\((?:posedge|negedge)\s+(\S+?)\)")


def _name(text):
    return _ESC.sub(r"\1", text)


def _split(ref):
    """``inst/port`` (an SDF reference, escapes kept) -> ``(inst, port)``."""
    i = len(ref) - 1
    while i >= 0:
        if ref[i] == "/" and (i == 0 or ref[i - 1] != "\\"):
            return _name(ref[:i]), _name(ref[i + 1:])
        i -= 1
    return "", _name(ref)


def _delay(text):
    """The largest value of an SDF line's delay triples, in ns (the SDF is in ps)."""
    values = [float(v) for t in _TRIPLE.findall(text) for v in t if v not in ("", "-")]
    return max(values) / 1000.0 if values else 0.0


@dataclass
class _Cell:
    type: str
    arcs: list        # (from port, to port, ns)
    setups: list      # (data port, clock port, ns)


def read_sdf(path):
    """``(cells, wires)`` of an SDF file written by nextpnr.

    ``cells`` maps an instance name to its type, its ``IOPATH`` arcs and its setup checks;
    ``wires`` lists the routed connections ``((driver, port), (sink, port), ns)``.
    """
    cells, wires = {}, []
    cell = None
    with open(path) as f:
        for line in f:
            s = line.strip()
            if s.startswith("(INTERCONNECT "):
                a, b = s[len("(INTERCONNECT "):].split(" ", 2)[:2]
                wires.append((_split(a), _split(b), _delay(s)))
            elif s.startswith("(IOPATH "):
                body = s[len("(IOPATH "):]
                m = _EVENT.match(body)              # "(posedge CLK) Q (..)" or "CLK Q (..)"
                src, dst = (m.group(1), body[m.end():].split()[0]) if m else body.split()[:2]
                cell.arcs.append((_name(src), _name(dst), _delay(s)))
            elif s.startswith(("(SETUPHOLD ", "(SETUP ")):
                events = _EVENT.findall(s)
                if len(events) >= 2:
                    tail = s[s.rfind(events[1]):]
                    m = _TRIPLE.search(tail)
                    setup = max(float(v) for v in m.groups() if v) / 1000.0 if m else 0.0
                    cell.setups.append((_name(events[0]), _name(events[1]), setup))
            elif s.startswith("(CELLTYPE "):
                cell = _Cell(s[len("(CELLTYPE "):].strip(')"'), [], [])
            elif s.startswith("(INSTANCE"):
                inst = _name(s[len("(INSTANCE"):].rstrip(")").strip())
                if inst:
                    cells[inst] = cell
    return cells, wires


@dataclass(frozen=True)
class Path:
    """A register-to-register path: ``delay_ns`` (arrival plus setup), the launching and the
    capturing cell and port, and the cells on it in order (``cells``)."""
    delay_ns: float
    start: tuple
    end: tuple
    cells: tuple


@dataclass
class Timing:
    """The result of :func:`analyse`: every endpoint's delay and a way back along its path.

    Attributes
    ----------
    endpoints : list of (float, str, str)
        ``(delay ns, cell, port)`` of every timed register input, worst first.
    constant_clocked : set of str
        Cells timed as combinational because their clock is a constant.
    """
    endpoints: list
    constant_clocked: set
    _pred: dict
    _launch: dict

    @property
    def fmax_mhz(self):
        """1 / the worst path's delay, or None if nothing is timed."""
        worst = self.endpoints[0][0] if self.endpoints else 0.0
        return 1000.0 / worst if worst > 0 else None

    def path(self, cell, port):
        """The :class:`Path` that ends at input ``port`` of ``cell``."""
        node = (cell, port)
        delay = next(d for d, c, p in self.endpoints if (c, p) == node)
        chain = [node]
        while node in self._pred:
            node = self._pred[node]
            chain.append(node)
        chain.reverse()
        cells = []
        for c, _ in chain:
            if not cells or cells[-1] != c:
                cells.append(c)
        return Path(delay, chain[0], (cell, port), tuple(cells))


def analyse(cells, wires):
    """Time a routed design (:func:`read_sdf`'s result); see the module docstring."""
    # a cell is clocked by a constant when every clock port it has wired is a constant (an ECP5
    # MULT18X18D clocked on CLK0 ties CLK1..CLK3 to ground: it is clocked)
    tied, clocked = set(), set()
    for (src, _), (dst, port), _ in wires:
        if port in _CLOCK_PORTS:
            (tied if "$PACKER_GND" in src or "$PACKER_VCC" in src else clocked).add(dst)
    constant = tied - clocked
    succ, indeg, arrival, pred, launch = {}, {}, {}, {}, {}

    def edge(a, b, d):
        succ.setdefault(a, []).append((b, d))
        indeg[b] = indeg.get(b, 0) + 1
        indeg.setdefault(a, 0)

    for (a, b, d) in wires:
        edge(a, b, d)
    for name, cell in cells.items():
        clocks = {c for _, c, _ in cell.setups} | (_CLOCK_PORTS & {a for a, _, _ in cell.arcs})
        clock_out = [(o, d) for a, o, d in cell.arcs if a in clocks]
        if name in constant:
            for p, _, s in cell.setups:
                for o, d in clock_out:
                    edge((name, p), (name, o), s + d)
        else:
            for o, d in clock_out:
                node = (name, o)
                if d > arrival.get(node, -1.0):
                    arrival[node] = d
                    launch[node] = True
        for a, o, d in cell.arcs:
            if a not in clocks:
                edge((name, a), (name, o), d)
    # longest arrival by a topological walk (nodes on a combinational loop are left out)
    ready = [n for n, k in indeg.items() if k == 0]
    while ready:
        node = ready.pop()
        t = arrival.get(node)
        for nxt, d in succ.get(node, ()):
            if t is not None and (nxt not in arrival or t + d > arrival[nxt]) \
                    and not launch.get(nxt):
                arrival[nxt] = t + d
                pred[nxt] = node
            indeg[nxt] -= 1
            if indeg[nxt] == 0:
                ready.append(nxt)
    worst = {}
    for name, cell in cells.items():
        if name in constant:
            continue
        for p, _, s in cell.setups:
            t = arrival.get((name, p))
            if t is not None and t + s > worst.get((name, p), -1.0):
                worst[(name, p)] = t + s
    endpoints = sorted(((d, c, p) for (c, p), d in worst.items()), reverse=True)
    return Timing(endpoints, constant, pred, launch)
