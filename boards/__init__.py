"""stepforge.boards: FPGA builds of generated designs (``stepforge build``, ``docs/fpga.md``).

:func:`build` synthesizes Verilog with YoWASP Yosys, places and routes it with YoWASP nextpnr
over several seeds, times it, packs a bitstream and returns a :class:`BuildReport`: resources
in total and per unit against the device's capacity, Fmax (median and range over the seeds),
whether the target clock is met, and the worst paths named by unit and signal.
"""

from .build import build
from .devices import DEVICES, Device, Kind, get_device
from .nextpnr import DoesNotFit, Resource
from .paths import TimingPath
from .report import BuildReport, SeedResult
from .tools import BuildError, find_tool

__all__ = ["build", "BuildReport", "SeedResult", "TimingPath", "BuildError", "DoesNotFit",
           "Resource", "DEVICES", "Device", "Kind", "get_device", "find_tool"]
