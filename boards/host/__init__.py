"""The host side of the UART host link: the driver and the simulated serial line.

* :mod:`~stepforge.boards.host.driver`: :class:`HostLink` (requests, replies, retries),
  :func:`run_on_board` (load, start, wait, read back), :func:`open_serial`.
* :mod:`~stepforge.boards.host.sim_port`: :class:`SimBoard`, ``--port sim``: the board's design
  in Verilator behind a pseudo-terminal.
* :mod:`~stepforge.boards.host.job`: what a run loads and reads back.
"""

from .driver import BoardResult, HostLink, LinkError, open_serial, run_on_board
from .sim_port import SimBoard, line_rate

__all__ = ["HostLink", "LinkError", "BoardResult", "run_on_board", "open_serial", "SimBoard",
           "line_rate"]
