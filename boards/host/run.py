"""``stepforge run PROGRAM --board B --port P``: a run on a board (or ``--port sim``).

:func:`board_run` resolves the board, lowers the program for its configuration, opens the
link (a serial device, or :class:`~stepforge.boards.host.sim_port.SimBoard` for ``"sim"``),
runs it with :func:`~stepforge.boards.host.driver.run_on_board` and returns the
:class:`~stepforge.boards.host.driver.BoardResult`; the front door checks and reports it as it
does a Verilator run.
"""

from dataclasses import dataclass

from amaranth.hdl import Fragment

from ...compiler.lower import lower
from ...hdl.config import HardwareConfig
from ...hdl.host_link import HostLinkTop
from ...hdl.system import System
from ..presets import get_board
from .driver import HostLink, LinkError, open_serial, run_on_board
from .sim_port import SimBoard

__all__ = ["BoardSpec", "resolve_board", "board_run", "SIM"]

#: The ``--port`` that runs the board's design in Verilator.
SIM = "sim"


@dataclass
class BoardSpec:
    """What a run needs of a board: its name, fitted config, clock and line rate."""
    name: str
    config: HardwareConfig
    clock_hz: int
    baud: int


def resolve_board(name, tile=None):
    """The :class:`BoardSpec` of board ``name``, from its preset
    (:func:`~stepforge.boards.presets.get_board`; ``ValueError`` for an unknown board), with
    the hardware tile ``tile`` (``(rows, cols)``) instead of the preset's when given."""
    board = get_board(name)
    return BoardSpec(board.name, board.hardware_config(tile), board.clock_hz, board.baud)


def board_run(program, tensors, inputs, *, board, port, timeout=60.0, retries=4,
              progress=None, tile=None):
    """Run ``program`` on ``board`` through ``port`` (module doc); return ``(spec, result)``.
    ``tile`` is the hardware tile the bitstream was built with, if not the preset's."""
    say = progress or (lambda msg: None)
    try:
        spec = resolve_board(board, tile)
    except ValueError as exc:
        raise LinkError(str(exc)) from exc
    if port == SIM:
        sim = SimBoard(program, spec.config, progress=say)
        try:
            link = sim.link(retries=retries)
            say(f"simulated board: {sim.work} (line at {sim.baud} baud, "
                f"{sim.clocks_per_bit} cycles a bit)")
            res = run_on_board(link, program, sim.hw, sim.csr_map, tensors, inputs,
                               timeout=timeout, progress=say)
        finally:
            sim.close()
        res.timings.update(compile=sim.compile_seconds, build=sim.build_seconds)
        return spec, res
    link = HostLink(open_serial(port, spec.baud), spec.baud, retries=retries)
    try:
        hw = lower(program, spec.config)
        top = HostLinkTop(System(hw, target="board"), clock_hz=spec.clock_hz, baud=spec.baud)
        Fragment.get(top, None)   # elaborated for the CSR map
        res = run_on_board(link, program, hw, top.system.csr_map, tensors, inputs,
                           timeout=timeout, progress=say)
    finally:
        link.port.close()
    return spec, res
