"""Reading a Yosys or nextpnr JSON netlist: cells by type, and which unit each cell belongs to.

The generated system instantiates every unit as a submodule named ``u<uid>_<name>``, every
edge FIFO as ``f<eid>_<name>``, the memory as ``memory`` and the CSR block as ``csr``. A build
synthesizes the design *flattened* (as a board build must, for timing), and Yosys names each
flattened cell after the net it drives, prefixed with its instance path
(``u2_Accum_0.acc_0_0_TRELLIS_FF_Q``); nextpnr keeps those names, adding a suffix when it
splits or packs a cell (``..._LC``, ``...$CCU2_COMB0``). So the unit of a cell is the first
component of its name, when that is one of the top module's instances (the ``$scopeinfo``
cells that flattening leaves record them). A cell named after a net of the top module itself
(start and done logic, the CSR read multiplexer, ...) counts as ``(top)``; the cells of the pin
wrapper (:mod:`~stepforge.boards.pins`) as ``(pins)``; cells that nextpnr creates without a
name of the design (constant drivers, feed-through logic cells) as ``(packer)``; in a board
design, the cells outside the system (its host link, clock and reset) as ``(board)``. A lookup
table that Yosys merged across a unit boundary counts for the unit that owns its output net.
"""

import json
import re
from collections import Counter

__all__ = ["load_module", "cells_by_type", "instances", "UnitNamer", "param_int", "signal_name",
           "unit_order", "TOP", "PINS", "PACKER", "BOARD"]

TOP, PINS, PACKER, BOARD = "(top)", "(pins)", "(packer)", "(board)"

# where a techmapped cell's name stops naming its net: "_TRELLIS_FF_Q_10_DI_LUT4_Z" etc.
_TECHMAP = re.compile(r"_(?:TRELLIS_[A-Z0-9]+|LUT4|CCU2C|PFUMX|L6MUX21|DP16KD|MULT18X18D|ALU54B"
                      r"|SB_[A-Z0-9]+|DFFLC|LC|RAM|DSP"
                      r"|DFF[A-Z]*|LUT[1-4]|ALU|MUX2_LUT[5-8]|MULT18X18|SDPB|DPB|RAM16SDP[124])"
                      r"(?=_|\$|\[|$)")
# a suffix that nextpnr appends to a cell it splits or packs: "$CCU2_COMB0", "$DPRAM_COMB2"
_PNR_SUFFIX = re.compile(r"(?<=.)\$[A-Za-z][A-Za-z0-9_]*$")


def load_module(path, top):
    """The module ``top`` of a Yosys/nextpnr JSON netlist (the only module if ``top`` is not
    found, as nextpnr calls its output's module ``top``)."""
    with open(path) as f:
        modules = json.load(f)["modules"]
    if top in modules:
        return modules[top]
    tops = [m for m in modules.values() if m.get("attributes", {}).get("top")]
    if len(tops) == 1:
        return tops[0]
    if len(modules) == 1:
        return next(iter(modules.values()))
    raise ValueError(f"{path} has no module {top!r} (modules: {', '.join(modules)})")


def cells_by_type(module):
    """``Counter({cell type: count})`` of a netlist module (``$scopeinfo`` markers excluded)."""
    return Counter(c["type"] for c in module["cells"].values() if c["type"] != "$scopeinfo")


def instances(module, prefix=""):
    """The names of the design's top-level instances that a flattened ``module`` records in its
    ``$scopeinfo`` cells (below ``prefix``, the wrapper's instance path with its dot)."""
    found = set()
    for name, cell in module["cells"].items():
        if cell["type"] == "$scopeinfo" and name.startswith(prefix):
            found.add(name[len(prefix):].split(".")[0])
    found.discard("")
    return found


def param_int(value):
    """A Yosys/nextpnr JSON parameter as an int (they are written as bit strings), or None."""
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value and set(value.strip()) <= {"0", "1"}:
        return int(value.strip(), 2)
    return None


class UnitNamer:
    """Names a cell of a flattened netlist by unit and signal.

    Parameters
    ----------
    units : set of str
        The design's top-level instance names (:func:`instances`).
    prefix : str
        The instance path of the design inside a pin wrapper (``"dut."``) or a board top
        (``"link.system."``), or ``""``.
    wrapper : str, optional
        The pin wrapper's source file: :meth:`count` counts a cell whose ``src`` attribute
        names only that file as ``(pins)`` even if it is named after a net of the design (a
        wrapper flip-flop that drives an input of the design).
    outside : str
        The unit of a cell outside ``prefix``: :data:`PINS` (a pin wrapper's) or :data:`BOARD`.
    """

    def __init__(self, units, prefix="", wrapper=None, outside=PINS):
        self.units = set(units)
        self.prefix = prefix
        self.wrapper = wrapper
        self.outside = outside

    def __repr__(self):
        return (f"UnitNamer({sorted(self.units)!r}, prefix={self.prefix!r}, "
                f"wrapper={self.wrapper!r}, outside={self.outside!r})")

    def unit(self, cell):
        """The unit that cell ``cell`` belongs to."""
        return self.split(cell)[0]

    def split(self, cell):
        """``(unit, signal)`` of cell name ``cell``: ``"u2_Accum_0.acc_0_0_TRELLIS_FF_Q"`` ->
        ``("u2_Accum_0", "acc_0_0")``."""
        if cell.startswith("$nextpnr"):
            return PACKER, cell
        if self.prefix:
            if not cell.startswith(self.prefix):
                return self.outside, signal_name(cell)
            cell = cell[len(self.prefix):]
        head, dot, rest = cell.partition(".")
        if dot and head in self.units:
            return head, signal_name(rest)
        return TOP, signal_name(cell)

    def count(self, module):
        """``{unit: Counter({cell type: count})}`` of ``module``'s cells."""
        out = {}
        for name, cell in module["cells"].items():
            if cell["type"] == "$scopeinfo":
                continue
            src = cell.get("attributes", {}).get("src", "")
            srcs = [part.split(":")[0] for part in src.split("|") if part]
            wrapped = self.wrapper and self.wrapper in srcs and all(
                f == self.wrapper or f.startswith("/") for f in srcs)
            out.setdefault(PINS if wrapped else self.unit(name), Counter())[cell["type"]] += 1
        return out


def signal_name(rest):
    """The signal a cell is named after: techmap and nextpnr suffixes removed."""
    rest = _PNR_SUFFIX.sub("", rest)
    m = _TECHMAP.search(rest)
    return rest[:m.start()] if m and m.start() > 0 else rest


def unit_order(name):
    """Sort key for units: the memory first, then units by id, FIFOs by id, then the rest."""
    m = re.fullmatch(r"([uf])(\d+)_.*", name)
    if name == "memory":
        return (0, 0, name)
    if m:
        return (1 if m[1] == "u" else 2, int(m[2]), name)
    return (3 if not name.startswith("(") else 4, 0, name)
