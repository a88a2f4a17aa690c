"""OrangeCrab r0.2 85F (Good Stuff Department): Lattice ECP5 LFE5U-85F, CSFBGA285, speed 8.

* **Clock:** the 48 MHz oscillator, no PLL (generated GEMV and GEMM place and route at about
  90-115 MHz on the ECP5).
* **Host link, the choice:** the board's only USB port goes straight to FPGA pins; a USB-ACM
  serial port would need a USB device core in the FPGA (several thousand LUTs and a 48 MHz
  full-speed PHY, none of it on PyPI for Amaranth 0.5), so the host link is a UART on the
  Feather header instead: pin **0** (N17, FPGA receive) and pin **1** (M18, FPGA transmit),
  the Feather convention, wired to any 3.3 V USB-serial adapter (FTDI, CP2102N, CH340: TX to
  pin 0, RX to pin 1, GND to GND); 1 Mbaud (48 clocks per bit). The amaranth-boards platform
  has no UART, so this preset adds it as ``uart`` on connector ``io``.
* **Status LEDs:** the RGB LED (red, green, blue; active low).
* **Machine:** :meth:`HardwareConfig.ecp5_85f` at 48 MHz.
* **Flashing:** ``openFPGALoader -b orangeCrab`` through the DFU bootloader (USB 1209:5af0):
  hold the button while plugging the board in; the bitstream is written to flash.
"""

from dataclasses import replace

from amaranth.build import Attrs
from amaranth_boards.orangecrab_r0_2 import OrangeCrabR0_2_85FPlatform
from amaranth_boards.resources import UARTResource

from ...hdl.config import HardwareConfig
from ..devices import ECP5_85F
from .board import Board, Loader, PinRef

__all__ = ["ORANGECRAB_85F"]

ORANGECRAB_85F = Board(
    name="orangecrab-85f",
    title="OrangeCrab r0.2 85F (Lattice ECP5 LFE5U-85F, CSFBGA285, speed 8)",
    platform=OrangeCrabR0_2_85FPlatform,
    device=replace(ECP5_85F, title="Lattice ECP5 LFE5U-85F, CSFBGA285, speed 8",
                   nextpnr_args=("--85k", "--package", "CSFBGA285", "--speed", "8"),
                   io_pins=118,
                   pack_args=("--compress", "--freq", "38.8", "{config}", "{bitstream}")),
    clock_hz=48_000_000,
    uart_rx=PinRef("uart", 0, "rx"),
    uart_tx=PinRef("uart", 0, "tx"),
    baud=1_000_000,
    leds=(PinRef("rgb_led", 0, "r"), PinRef("rgb_led", 0, "g"), PinRef("rgb_led", 0, "b")),
    config=lambda: HardwareConfig.ecp5_85f().replace(clock_hz=48_000_000),
    loader=Loader(args=("-b", "orangeCrab"), cable="the OrangeCrab DFU bootloader "
                  "(USB 1209:5af0)", target="flash",
                  note="hold the button while plugging the board in to enter the bootloader"),
    extra_resources=(UARTResource(0, rx="0", tx="1", conn=("io", 0),
                                  attrs=Attrs(IO_TYPE="LVCMOS33", PULLMODE="UP")),),
    notes="The UART is on Feather header pins 0 (receive) and 1 (transmit): connect a 3.3 V "
          "USB-serial adapter.",
)
