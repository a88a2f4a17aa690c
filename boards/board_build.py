"""``stepforge build PROGRAM --board B``: a program's bitstream for a board, and its report.

The board design is the program's :class:`~stepforge.hdl.system.System` (board target,
elaborated for the board's FPGA family) inside the UART host link
(:class:`~stepforge.hdl.host_link.HostLinkTop`, at the board's clock and baud), inside
:class:`BoardTop` (the board's clock, power-on reset and pins). It is converted with the unit
library (each unit, FIFO and the memory a cached Verilog module, as ``compile_program`` does),
its pins written as an LPF or PCF file from the board's amaranth-boards resources
(:mod:`~stepforge.boards.constraints`), and built by the same flow as ``stepforge build
--device`` (:func:`~stepforge.boards.build.build`: synthesis, place and route over seeds,
timing, the unit breakdown, the bitstream) at the board's clock.

Files in the build folder besides the flow's: ``top.lpf``/``top.pcf``, ``manifest.json`` (the
hardware graph's memory map and CSR addresses, for the host driver) and ``board.json`` (the
board, its clock and baud, the bitstream), which ``stepforge flash`` reads.
"""

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from ..compiler.lower import lower
from ..hdl.host_link import HostLinkTop
from ..hdl.memory import lane_ram_verilog
from ..hdl.platform import FamilyPlatform
from ..hdl.system import System
from ..sim.rtl.separate import UnitLibrary
from .board_top import BoardTop
from .build import build
from .constraints import constraints
from .presets import get_board
from .nextpnr import DoesNotFit
from .tools import BuildError

__all__ = ["BoardBuild", "board_design", "build_board", "main_build", "SYSTEM_PATH"]

#: The instance path of the program's system in the board design (the report's unit rows).
SYSTEM_PATH = "link.system."


def board_design(program, board, *, unit_cache=None, tile=None, wide_beats=False):
    """``(hw, system, top, verilog text)`` of ``program`` on ``board`` (module doc), with the
    hardware tile ``tile`` (``(rows, cols)``) instead of the preset's when given. Tiles larger
    than the hardware tile moved as wide beats are refused unless ``wide_beats``
    (:func:`~stepforge.compiler.lower.lower`)."""
    board = get_board(board)
    config = board.hardware_config(tile)
    if config.clock_hz != board.clock_hz:
        raise ValueError(f"board {board.name!r}: its config's clock_hz {config.clock_hz} is "
                         f"not the board's clock {board.clock_hz}")
    hw = lower(program, config, wide_beats=wide_beats)
    family = FamilyPlatform(config.family) if config.family is not None else None
    library = UnitLibrary(unit_cache, platform=family)
    system = System(hw, storage="verilog", library=library, target="board")
    top = BoardTop(board, HostLinkTop(system, clock_hz=board.clock_hz, baud=board.baud))
    text = library.convert(top, "top")
    return hw, system, top, text + lane_ram_verilog(zero_init=False, family=config.family,
                                                primitives=config.family == "ecp5")


@dataclass
class BoardBuild:
    """A board build: the ``board``, the flow's :class:`~stepforge.boards.report.BuildReport`
    and the build folder."""
    board: object
    report: object
    out_dir: Path

    @property
    def met(self):
        """Whether the design meets the board's clock."""
        return self.report.met

    def text(self):
        b = self.board
        pll = (f", PLL from the {b.oscillator_hz / 1e6:g} MHz oscillator" if b.pll
               else ", the oscillator's, no PLL")
        head = [f"board {b.name}: {b.title}",
                f"  clock {b.clock_hz / 1e6:g} MHz{pll}; host link: UART "
                f"{b.pin(b.uart_rx).site} (rx) / {b.pin(b.uart_tx).site} (tx) at "
                f"{b.baud:,} baud", ""]
        r = self.report
        verdict = ("meets the board's clock" if r.met else
                   f"does NOT meet the board's clock ({r.fmax_mhz:.1f} < {r.target_mhz:g} MHz)")
        return "\n".join(head) + "\n" + r.text() + f"\n\n  {r.name} on {b.name}: {verdict}"


def build_board(program, board, *, out_dir, seeds=1, jobs=2, progress=print, unit_cache=None,
                tile=None, wide_beats=False):
    """Build ``program`` for ``board``: the bitstream and the report (module doc). ``tile``
    (``(rows, cols)``) replaces the preset's hardware tile; ``board.json`` records it, and a
    run on the board must give the same (the host driver checks the design's id).

    Returns
    -------
    BoardBuild

    Raises
    ------
    DoesNotFit
        The design needs more of a resource than the board's FPGA has.
    BuildError
        A tool is missing or failed.
    """
    board = get_board(board)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda line: None)
    say(f"converting {program.name} for {board.name} ...")
    hw, system, top, text = board_design(program, board, unit_cache=unit_cache, tile=tile,
                                         wide_beats=wide_beats)
    (out / "top.v").write_text(text)
    name, pins = constraints(board, top.pins())
    (out / name).write_text(pins)
    manifest = hw.manifest()
    manifest["csrs"] = system.csr_map
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    report = build(out / "top.v", board.device, out_dir=out, seeds=seeds, jobs=jobs,
                   freq_mhz=board.clock_hz / 1e6, progress=progress, pins="direct",
                   name=program.name, constraints=out / name, design_prefix=SYSTEM_PATH,
                   storage_bits=hw.onchip_memory_bits)
    (out / "board.json").write_text(json.dumps({
        "board": board.name, "program": program.name, "clock_hz": board.clock_hz,
        "baud": board.baud, "tile": [hw.config.tile_rows, hw.config.tile_cols],
        "bitstream": Path(report.bitstream).name if report.bitstream else None,
        "fmax_mhz": round(report.fmax_mhz, 2), "met": report.met}, indent=1))
    return BoardBuild(board, report, out)


def _smaller_tile(rows, cols):
    """The hardware tile of half the elements (the larger side halved), or None for 1x1."""
    if rows * cols == 1:
        return None
    return (rows // 2, cols) if rows >= cols else (rows, cols // 2)


def main_build(program, board, *, out_dir, seeds=3, jobs=2, freq=None, tile=None,
               wide_beats=False):
    """``stepforge build --board``: build, print the report; the exit status (0: a bitstream
    that meets the board's clock; 1: it does not fit, does not meet the clock, or a tool
    failed; 2: a wrong argument)."""
    try:
        board = get_board(board)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if freq is not None:
        print(f"error: --freq does not apply to --board: {board.name}'s clock is its preset's "
              f"({board.clock_hz / 1e6:g} MHz)", file=sys.stderr)
        return 2
    try:
        result = build_board(program, board, out_dir=out_dir, seeds=seeds, jobs=jobs, tile=tile,
                             wide_beats=wide_beats)
    except BuildError as e:      # DoesNotFit is a BuildError
        print(f"error: {e}", file=sys.stderr)
        if isinstance(e, DoesNotFit):
            config = board.hardware_config(tile)
            smaller = _smaller_tile(config.tile_rows, config.tile_cols)
            if smaller:
                print(f"hint: a smaller hardware tile narrows every beat, FIFO and register: "
                      f"--tile {smaller[0]}x{smaller[1]} (this build's is "
                      f"{config.tile_rows}x{config.tile_cols}; the run on the board takes the "
                      "same --tile), and so do the program's own smaller tiles (its -p "
                      "parameters; docs/boards.md, \"What fits\")", file=sys.stderr)
        return 1
    print()
    print(result.text())
    print(f"\nwrote {result.out_dir}/board.json, manifest.json, build.json")
    if not result.met:
        print(f"error: the bitstream is written but {program.name} does not meet "
              f"{result.board.name}'s {result.board.clock_hz / 1e6:g} MHz clock: it may not "
              "work on the board", file=sys.stderr)
        return 1
    return 0
