"""Reading what nextpnr says: device utilisation, Fmax, the critical path, and why a design
does not fit.

nextpnr writes a log (``Device utilisation`` after packing, ``Max frequency for clock``
after placement and again after routing) and, with ``--report``, a JSON report with the final
``utilization``, ``fmax`` and ``critical_paths``: one path per clock
(:mod:`~stepforge.boards.sta` finds the next ones).

nextpnr's Fmax of a clock covers the register-to-register paths of its domain. Its iCE40 model
times a combinational MAC16 (no input, pipeline or output register) as if a constant clock
clocked it: register -> MAC16 -> register is two cross-domain paths that the Fmax leaves out;
the build's own timing (:mod:`~stepforge.boards.sta`) joins them.
"""

import re
from dataclasses import dataclass

from .tools import BuildError

__all__ = ["DoesNotFit", "Resource", "ClockTiming", "parse_utilisation", "log_errors",
           "clock_timing", "placement_failure", "placer_gave_up"]

_UTIL = re.compile(r"^Info:\s+([A-Za-z0-9_]+):\s+(\d+)/\s*(\d+)\s+\d+%", re.M)
_PLACE_FAIL = re.compile(r"Unable to (?:place|find a placement location|find legal placement)|"
                         r"no BELs remaining|failed to route|Failed to expand region", re.I)


@dataclass(frozen=True)
class Resource:
    """One over-used (or unplaceable) resource: ``name`` (the report's kind or nextpnr's bel),
    ``used`` and ``available``."""
    name: str
    used: int
    available: int

    def __str__(self):
        pct = 100 * self.used / self.available if self.available else float("inf")
        over = self.used - self.available
        return (f"{self.name} {self.used:,} of {self.available:,} ({pct:.0f} %"
                + (f", {over:,} over" if over > 0 else "") + ")")


class DoesNotFit(BuildError):
    """The design does not fit the device.

    Attributes
    ----------
    device : str
    resources : list of Resource
        The resources that are over-used (or, when nextpnr could not place at under 100 %,
        the one it failed on).
    detail : str
        nextpnr's error, if it came from nextpnr.
    """

    def __init__(self, device, resources, detail=""):
        self.device = device
        self.resources = list(resources)
        self.detail = detail
        text = f"the design does not fit the {device}: " + "; ".join(map(str, self.resources))
        if detail:
            text += f" ({detail})"
        super().__init__(text)


def parse_utilisation(log):
    """``{bel: (used, available)}`` from the first ``Device utilisation`` section of a log."""
    start = log.find("Device utilisation:")
    if start < 0:
        return {}
    out = {}
    for line in log[start:].splitlines()[1:]:
        m = _UTIL.match(line)
        if m is None:
            break
        out[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return out


def log_errors(log):
    """The ``ERROR:`` lines of a log."""
    return [line.strip() for line in log.splitlines() if line.startswith("ERROR:")]


def placement_failure(log, device_name):
    """A :class:`DoesNotFit` for a failed nextpnr log that ran out of room, else None.

    Over-used bels in ``Device utilisation`` name the resources; a placement error below
    100 % names the bel of the cell it could not place.
    """
    util = parse_utilisation(log)
    over = [Resource(b, u, a) for b, (u, a) in util.items() if u > a]
    errors = log_errors(log)
    if over:
        return DoesNotFit(device_name, over, errors[0][len("ERROR: "):] if errors else "")
    failed = _placement_errors(errors)
    if not failed:
        return None
    types = [m.group(1) for m in (re.search(r"cell type '([^']+)'", e) for e in failed) if m]
    bel = types[0] if types else None
    res = [Resource(bel, *util[bel])] if bel in util else [
        Resource(b, u, a) for b, (u, a) in util.items() if a and u / a >= 0.9]
    return DoesNotFit(device_name, res, failed[0][len("ERROR: "):])


def placer_gave_up(log):
    """The placer's error when it failed with every resource within the device's capacity, else
    None.

    Such a failure (``Unable to find legal placement ...`` on a device 80-90 % full: the cells
    sharing a logic block's clock, enable and reset could not all be legalized) belongs to one
    seed's placement: another seed of the same netlist may place and route.
    """
    if any(u > a for u, a in parse_utilisation(log).values()):
        return None
    failed = _placement_errors(log_errors(log))
    return failed[0][len("ERROR: "):] if failed else None


def _placement_errors(errors):
    """The lines of ``errors`` (:func:`log_errors`) that say the placer or router ran out."""
    return [e for e in errors if _PLACE_FAIL.search(e)]


@dataclass(frozen=True)
class ClockTiming:
    """The timing of the design's clock after routing.

    Attributes
    ----------
    clock : str
        nextpnr's name of the clock net.
    fmax_mhz : float
        nextpnr's Fmax of the clock (register-to-register paths in its domain).
    target_mhz : float
        The clock constraint (``--freq``, or nextpnr's default).
    critical : list of dict
        nextpnr's critical path of the clock: its segments as in the report.
    """
    clock: str
    fmax_mhz: float
    target_mhz: float
    critical: list


def _is_constant(clock):
    return clock.startswith("$PACKER_GND") or clock.startswith("$PACKER_VCC")


def clock_timing(report, clock="clk"):
    """The :class:`ClockTiming` of the design's clock in a nextpnr JSON ``report``: the clock
    named after port ``clock`` (or the slowest of the non-constant clocks); None if the design
    has no clocked path."""
    fmax = {k: v for k, v in report.get("fmax", {}).items() if not _is_constant(k)}
    if not fmax:
        return None
    named = {k: v for k, v in fmax.items() if clock in re.split(r"[$.]", k)}
    name, value = min((named or fmax).items(), key=lambda kv: kv[1]["achieved"])
    event = f"posedge {name}"
    critical = next((p["path"] for p in report.get("critical_paths", [])
                     if p["from"] == event and p["to"] == event), [])
    return ClockTiming(name, float(value["achieved"]), float(value["constraint"]), critical)
