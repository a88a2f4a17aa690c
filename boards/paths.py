"""The worst register-to-register paths of a build, named by unit and signal."""

from dataclasses import dataclass

__all__ = ["PathGroup", "TimingPath", "slow_groups", "worst_paths"]


@dataclass(frozen=True)
class TimingPath:
    """A register-to-register path.

    Attributes
    ----------
    delay_ns : float
        Its delay: clock-to-output, logic and routing, and the endpoint's setup time.
    start, end : tuple of str
        ``(unit, signal)`` of the launching and of the capturing register
        (:class:`~stepforge.boards.netlist.UnitNamer`).
    start_cell, end_cell : str
        Their cell names in the routed design.
    cells : int
        Cells on the path, both registers included.
    source : str
        ``"nextpnr"`` for nextpnr's critical path, ``"sdf"`` for one found by
        :mod:`~stepforge.boards.sta`.
    """
    delay_ns: float
    start: tuple
    end: tuple
    start_cell: str
    end_cell: str
    cells: int
    source: str

    def to_dict(self):
        return {"delay_ns": round(self.delay_ns, 3), "start": "/".join(self.start),
                "end": "/".join(self.end), "start_cell": self.start_cell,
                "end_cell": self.end_cell, "cells": self.cells, "source": self.source}


def worst_paths(critical, timing, namer, count=3):
    """Up to ``count`` worst paths with distinct endpoints (unit and signal).

    nextpnr's ``critical`` path (its report's segments; may be empty) comes first, then the
    worst paths of ``timing`` (:func:`stepforge.boards.sta.analyse`, may be None) that end
    elsewhere. When ``timing`` timed a constant-clocked DSP as logic, its paths through it are
    ones nextpnr did not time, and all paths are ordered by delay.
    """
    paths, seen = [], set()
    if critical:
        start, end = critical[0]["from"]["cell"], critical[-1]["to"]["cell"]
        cells = [start] + [s["to"]["cell"] for s in critical if s["type"] == "routing"]
        paths.append(TimingPath(sum(s["delay"] for s in critical), namer.split(start),
                                namer.split(end), start, end, len(dict.fromkeys(cells)),
                                "nextpnr"))
        seen.add(namer.split(end))
    found = 0
    for _, cell, port in (timing.endpoints if timing else ()):
        if found >= count:
            break
        end = namer.split(cell)
        if end in seen:
            continue
        seen.add(end)
        p = timing.path(cell, port)
        paths.append(TimingPath(p.delay_ns, namer.split(p.start[0]), end, p.start[0], cell,
                                len(p.cells), "sdf"))
        found += 1
    if timing is not None and timing.constant_clocked:
        paths.sort(key=lambda p: -p.delay_ns)
    return paths[:count]


@dataclass(frozen=True)
class PathGroup:
    """The register inputs that miss a clock, grouped by where their worst path starts and ends.

    Attributes
    ----------
    start, end : tuple of str
        ``(unit, signal)`` of the launching and of the capturing register.
    endpoints : int
        Register inputs (bits) of ``end`` whose worst path starts at ``start`` and misses.
    delay_ns : float
        The worst of them.
    cells : int
        Cells on that worst path, both registers included.
    """
    start: tuple
    end: tuple
    endpoints: int
    delay_ns: float
    cells: int


def slow_groups(timing, namer, limit_ns):
    """Every register input whose worst path is over ``limit_ns``, as :class:`PathGroup` s
    (worst first): a design far from its clock has hundreds of such inputs, a few dozen
    registers in a few units, and the groups say which decisions to move."""
    worst, count = {}, {}
    for delay, cell, port in timing.endpoints:     # worst first: a group's first is its worst
        if delay <= limit_ns:
            break
        p = timing.path(cell, port)
        key = (namer.split(p.start[0]), namer.split(cell))
        worst.setdefault(key, (delay, len(p.cells)))
        count[key] = count.get(key, 0) + 1
    return [PathGroup(start, end, count[start, end], delay, cells)
            for (start, end), (delay, cells) in worst.items()]
