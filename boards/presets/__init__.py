"""Board presets: the boards ``stepforge build --board`` and ``stepforge flash --board`` know.

Each preset (one file per board) names the FPGA, the clock, the host link's pins and baud, a
:class:`~stepforge.hdl.config.HardwareConfig` fitted to the chip and how to flash it, on the
board's ``amaranth-boards`` platform (``docs/boards.md``).
"""

from .board import Board, Loader, Pin, PinRef
from .icebreaker import ICEBREAKER
from .orangecrab import ORANGECRAB_85F
from .tangnano9k import TANGNANO9K
from .ulx3s import ULX3S_85F, ULX3S_85F_SDRAM

__all__ = ["BOARDS", "get_board", "Board", "Loader", "Pin", "PinRef"]

#: every board by its ``--board`` name
BOARDS = {b.name: b for b in (ICEBREAKER, ULX3S_85F, ULX3S_85F_SDRAM, ORANGECRAB_85F,
                                TANGNANO9K)}


def get_board(name):
    """The :class:`Board` called ``name`` (a Board is returned as it is).

    Raises
    ------
    ValueError
        ``name`` is not a known board.
    """
    if isinstance(name, Board):
        return name
    if name not in BOARDS:
        raise ValueError(f"board must be one of {', '.join(BOARDS)}, not {name!r}")
    return BOARDS[name]
