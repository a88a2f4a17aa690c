"""iCEBreaker (1BitSquared): Lattice iCE40 UP5K, SG48, 12 MHz oscillator, FT2232H on USB.

* **Clock:** the 12 MHz oscillator, no PLL (the UP5K preset's clock; generated GEMV places at
  about 27 MHz, so a PLL could give more, but the preset keeps the board's own clock).
* **Host link:** the FT2232H's second interface (B) is a UART on pins 6 (FPGA receive) and 9
  (FPGA transmit), ``uart`` of the amaranth-boards platform; 1 Mbaud (12 clocks per bit, and
  3 MHz / 3 at the FTDI: exact on both sides).
* **Status LEDs:** the red (pin 11) and green (pin 37) LEDs, active low.
* **Machine:** :meth:`HardwareConfig.ice40_up5k` (2x2 tiles, the 8 MAC16, tensors in SPRAM).
* **Flashing:** ``openFPGALoader -b ice40_generic`` writes the SPI flash through interface A of
  the FT2232H (USB 0403:6010), as ``iceprog`` does; the FPGA boots from it (kept at power-off).
"""

from amaranth_boards.icebreaker import ICEBreakerPlatform

from ...hdl.config import HardwareConfig
from ..devices import UP5K
from .board import Board, Loader, PinRef

__all__ = ["ICEBREAKER"]

ICEBREAKER = Board(
    name="icebreaker",
    title="iCEBreaker (Lattice iCE40 UP5K, SG48)",
    platform=ICEBreakerPlatform,
    device=UP5K,
    clock_hz=12_000_000,
    uart_rx=PinRef("uart", 0, "rx"),
    uart_tx=PinRef("uart", 0, "tx"),
    baud=1_000_000,
    leds=(PinRef("led_r"), PinRef("led_g")),
    config=HardwareConfig.ice40_up5k,
    loader=Loader(args=("-b", "ice40_generic"), cable="FT2232H (USB 0403:6010)",
                  target="flash"),
    notes="The UART is the FT2232H's interface B: the second /dev/ttyUSB of the board.",
)
