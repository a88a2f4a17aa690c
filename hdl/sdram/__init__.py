"""The SDRAM of a board: a controller for bursts of consecutive words and a cycle-accurate
chip model that checks it (``docs/sdram.md``).

* :class:`SDRAMTiming` (with the :data:`ULX3S_SDRAM` preset, and :data:`MACHINE_SDRAM`, the
  same chip addressed as a ``memory="sdram"`` machine does): the chip's geometry, address map
  and timings, in ns and in cycles of a clock;
* :class:`SDRAMController`: ``cmd`` / ``wdata`` / ``rdata`` streams to the chip's pins
  (:class:`SDRAMPinSignature`), every pin a register, one word per cycle within a row;
* :class:`SDRAMChipModel`: the chip in Amaranth, storing words and flagging the first broken
  rule (:class:`SDRAMViolation`).
"""

from .chip_model import SDRAM_STORAGE_VERILOG, SDRAMChipModel, SDRAMViolation
from .controller import SDRAMController, SDRAMPinSignature, mode_register
from .timing import ADDRESS_MAPS, MACHINE_SDRAM, MAX_CLK_HZ, ULX3S_SDRAM, SDRAMCycles, SDRAMTiming

__all__ = ["SDRAMTiming", "SDRAMCycles", "ULX3S_SDRAM", "MACHINE_SDRAM", "ADDRESS_MAPS",
           "MAX_CLK_HZ", "SDRAMPinSignature",
           "SDRAMController", "mode_register", "SDRAMChipModel", "SDRAMViolation",
           "SDRAM_STORAGE_VERILOG"]
