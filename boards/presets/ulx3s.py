"""ULX3S 85F (Radiona): Lattice ECP5 LFE5U-85F, CABGA381, speed 6, 25 MHz oscillator, FT231X.

* **Clock:** 50 MHz from the 25 MHz oscillator through an ``EHXPLLL`` (the ECP5 preset's
  clock; generated GEMV and GEMM place and route at about 90-115 MHz).
* **Host link:** the FT231X USB UART (the board's only USB serial port, also its JTAG cable)
  on pins M1 (FPGA receive) and L4 (FPGA transmit), ``uart`` of the amaranth-boards platform;
  1 Mbaud (50 clocks per bit; 3 MHz / 3 at the FTDI).
* **Status LEDs:** LEDs 0-3 (B2, C2, C1, D2).
* **Machine:** :meth:`HardwareConfig.ecp5_85f` (4x4 tiles, 16 MULT18X18D per PCU, tensors in
  DP16KD block RAM).
* **Flashing:** ``openFPGALoader -b ulx3s`` loads the SRAM through the FT231X's JTAG bit-bang
  mode (USB 0403:6015); lost at power-off (``--write-flash`` by hand keeps it).

``ulx3s-85f-sdram`` is the same board with the tensors in its 32 MB SDRAM
(:meth:`HardwareConfig.ulx3s_sdram`, 100 MHz from the PLL; the chip's pins from the board's
``sdram`` resource, its clock the design clock inverted: ``docs/sdram.md``, "The board"), for
programs whose tensors exceed the block RAM (SwiGLU at the paper's size).
"""

from dataclasses import replace

from amaranth_boards.ulx3s import ULX3S_85F_Platform

from ...hdl.config import HardwareConfig
from ..devices import ECP5_85F
from .board import Board, Loader, PinRef

__all__ = ["ULX3S_85F", "ULX3S_85F_SDRAM"]

ULX3S_85F = Board(
    name="ulx3s-85f",
    title="ULX3S 85F (Lattice ECP5 LFE5U-85F, CABGA381, speed 6)",
    platform=ULX3S_85F_Platform,
    device=replace(ECP5_85F, pack_args=("--compress", "{config}", "{bitstream}")),
    clock_hz=50_000_000,
    pll=True,
    uart_rx=PinRef("uart", 0, "rx"),
    uart_tx=PinRef("uart", 0, "tx"),
    baud=1_000_000,
    leds=tuple(PinRef("led", i) for i in range(4)),
    config=HardwareConfig.ecp5_85f,
    loader=Loader(args=("-b", "ulx3s"), cable="FT231X (USB 0403:6015)", target="sram"),
    notes="The FT231X is both the JTAG cable and the UART: flash first, then open the port.",
)

ULX3S_85F_SDRAM = replace(
    ULX3S_85F,
    name="ulx3s-85f-sdram",
    title="ULX3S 85F with its 32 MB SDRAM (Lattice ECP5 LFE5U-85F, CABGA381, speed 6)",
    clock_hz=100_000_000,
    config=HardwareConfig.ulx3s_sdram,
    notes=ULX3S_85F.notes + " The tensors live in the SDRAM (100 MHz; the chip's clock phase "
                            "is the design clock inverted, not yet tried on a board).",
)
