"""The result of a build: resources in total and per unit, Fmax over seeds, the worst paths."""

import json
import statistics
from dataclasses import dataclass, field

from .netlist import PINS, unit_order

__all__ = ["SeedResult", "BuildReport"]


@dataclass(frozen=True)
class SeedResult:
    """One place-and-route run.

    Attributes
    ----------
    seed : int
    fmax_mhz : float
        The clock's Fmax: nextpnr's, or lower if a path through a constant-clocked DSP is
        slower (``sta_fmax_mhz``).
    nextpnr_fmax_mhz : float
        nextpnr's Fmax of the clock.
    sta_fmax_mhz : float or None
        The Fmax of the build's own timing of the routed design (:mod:`~stepforge.boards.sta`).
    seconds : float
        Wall-clock time of the run.
    """
    seed: int
    fmax_mhz: float
    nextpnr_fmax_mhz: float
    sta_fmax_mhz: object
    seconds: float


@dataclass
class BuildReport:
    """What ``stepforge build`` measured (see ``docs/fpga.md``).

    Attributes
    ----------
    device : stepforge.boards.devices.Device
    name : str
        The design's name in the report.
    top : str
        The design's top module.
    out_dir : str
    pins : dict
        ``{"mode": "direct" or "wrapped", "port_bits": ..., "used": ..., "available": ...}``.
    totals : dict of str to int
        Every kind of the device (:attr:`Device.kinds`) -> how many the whole build uses
        (the synthesized netlist; a kind without cell types, the iCE40 logic cell, from the
        placed design).
    units : dict of str to dict
        Unit -> ``{kind: count}``, in unit order; the rows add up to ``totals``.
    placed : dict of str to list
        nextpnr's bel -> ``[used, available]`` of the median seed (after packing).
    seeds : list of SeedResult
    median_seed : int
        The seed whose Fmax is the median (the lower middle one for an even count): its
        design is the one packed, timed and reported.
    target_mhz : float
        The clock target that nextpnr was given (``--freq``, or its default).
    constant_clocked : int
        Cells (iCE40 MAC16) that nextpnr clocks by a constant and the build timed as
        combinational logic.
    paths : list of stepforge.boards.paths.TimingPath
    bitstream : str or None
    seconds : dict of str to float
        Wall-clock seconds of ``synthesis``, ``place_and_route`` (all seeds), ``timing`` and
        ``pack``, and ``total``.
    synthesis : str
        The synthesis command that made the netlist (the device's, or its fallback script
        when that failed).
    failed_seeds : dict of int to str
        Seeds whose placement failed within the device's capacity, with the placer's error
        (:func:`~stepforge.boards.nextpnr.placer_gave_up`); :attr:`seeds` holds the others.
    """
    device: object
    name: str
    top: str
    out_dir: str
    pins: dict
    totals: dict
    units: dict
    placed: dict
    seeds: list
    median_seed: int
    target_mhz: float
    constant_clocked: int = 0
    paths: list = field(default_factory=list)
    bitstream: object = None
    seconds: dict = field(default_factory=dict)
    synthesis: str = ""
    failed_seeds: dict = field(default_factory=dict)

    @property
    def fmax_mhz(self):
        """The median Fmax over the seeds."""
        return statistics.median(s.fmax_mhz for s in self.seeds)

    @property
    def fmax_range(self):
        """``(lowest, highest)`` Fmax over the seeds."""
        values = [s.fmax_mhz for s in self.seeds]
        return min(values), max(values)

    @property
    def met(self):
        """Whether the median Fmax reaches the target clock."""
        return self.fmax_mhz >= self.target_mhz

    def design_totals(self):
        """:attr:`totals` without the pin wrapper's cells."""
        pins = self.units.get(PINS, {})
        return {k: v - pins.get(k, 0) for k, v in self.totals.items()}

    def to_dict(self):
        lo, hi = self.fmax_range
        return {
            "name": self.name, "device": self.device.name, "part": self.device.title,
            "top": self.top,
            "out_dir": self.out_dir, "pins": self.pins,
            "fmax_mhz": round(self.fmax_mhz, 2), "fmax_range_mhz": [round(lo, 2), round(hi, 2)],
            "target_mhz": self.target_mhz, "met": self.met,
            "seeds": [{"seed": s.seed, "fmax_mhz": round(s.fmax_mhz, 2),
                       "nextpnr_fmax_mhz": round(s.nextpnr_fmax_mhz, 2),
                       "sta_fmax_mhz": None if s.sta_fmax_mhz is None else round(s.sta_fmax_mhz, 2),
                       "seconds": round(s.seconds, 1)} for s in self.seeds],
            "median_seed": self.median_seed,
            "resources": {k.name: {"used": self.totals.get(k.name, 0), "capacity": k.capacity,
                                   "design": self.design_totals().get(k.name, 0)}
                          for k in self.device.kinds},
            "units": self.units, "placed": self.placed,
            "constant_clocked": self.constant_clocked,
            "paths": [p.to_dict() for p in self.paths],
            "bitstream": self.bitstream,
            "seconds": {k: round(v, 1) for k, v in self.seconds.items()},
            "synthesis": self.synthesis,
            "failed_seeds": {str(k): v for k, v in sorted(self.failed_seeds.items())},
        }

    def write_json(self, path):
        with open(path, "w") as f:
            json.dump(self.to_dict(), f, indent=1)

    def text(self):
        """The report as ``stepforge build`` prints it."""
        d = self.device
        lo, hi = self.fmax_range
        lines = [f"{self.name} on {d.name} ({d.title})"]
        seeds = ", ".join(f"{s.seed}: {s.fmax_mhz:.1f}" for s in self.seeds)
        verdict = "met" if self.met else "NOT met"
        lines.append(f"  Fmax {self.fmax_mhz:.1f} MHz median of {len(self.seeds)} seed"
                     f"{'s' if len(self.seeds) != 1 else ''} (range {lo:.1f} - {hi:.1f}; "
                     f"seed {seeds}); target {self.target_mhz:g} MHz: {verdict}")
        for seed, error in sorted(self.failed_seeds.items()):
            lines.append(f"  seed {seed}: placement failed within the device's capacity ({error})")
        if self.constant_clocked:
            lines.append(f"  ({self.constant_clocked} constant-clocked DSP cells timed as "
                         "combinational logic; see docs/fpga.md)")
        wrapped = self.pins["mode"] == "wrapped"
        lines.append("")
        head = ["resource", "used", "capacity", "%"] + (["design"] if wrapped else [])
        rows = []
        design = self.design_totals()
        for k in d.kinds:
            used = self.totals.get(k.name, 0)
            row = [k.name, f"{used:,}", f"{k.capacity:,}",
                   f"{100 * used / k.capacity:.1f}" if k.capacity else "-"]
            if wrapped:
                row.append(f"{design.get(k.name, 0):,}")
            rows.append(row)
        lines += _table(rows, head, indent=2)
        if wrapped:
            lines.append(f"  pins: {self.pins['port_bits']} port bits > {self.pins['available']}"
                         f" pins of the package: the design sits in a pin wrapper "
                         f"({self.pins['used']} pins; its cells are the (pins) row)")
        else:
            lines.append(f"  pins: every port on a pin ({self.pins['used']} of "
                         f"{self.pins['available']})")
        lines.append("")
        kinds = [k.name for k in d.kinds]
        urows = [[u] + [f"{self.units[u].get(k, 0):,}" for k in kinds]
                 for u in sorted(self.units, key=unit_order)]
        lines += _table(urows, ["unit"] + kinds, indent=2)
        lines.append("")
        lines.append(f"  worst paths (seed {self.median_seed}):")
        for i, p in enumerate(self.paths, 1):
            lines.append(f"  {i}. {p.delay_ns:6.2f} ns  {'/'.join(p.start)} -> {'/'.join(p.end)}"
                         f"  ({p.cells} cells)")
        if not self.paths:
            lines.append("     (no register-to-register path)")
        lines.append("")
        s = self.seconds
        if self.synthesis:
            lines.append(f"  synthesis: {self.synthesis}")
        lines.append(f"  bitstream: {self.bitstream or '(not packed)'}")
        lines.append(f"  time: synthesis {s.get('synthesis', 0):.0f} s, place and route "
                     f"{s.get('place_and_route', 0):.0f} s, timing {s.get('timing', 0):.0f} s, "
                     f"pack {s.get('pack', 0):.0f} s; total {s.get('total', 0):.0f} s")
        return "\n".join(lines)


def _table(rows, head, indent=0):
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    pad = " " * indent

    def fmt(r):
        return pad + "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths)))
    return [fmt(head)] + [fmt(r) for r in rows]
