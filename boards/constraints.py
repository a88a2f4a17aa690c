"""Pin constraints of a board design for nextpnr: an LPF (ECP5), PCF (iCE40) or CST (Gowin) file.

The pins, their I/O standards and pull-ups come from the board's ``amaranth-boards`` resources
(:meth:`~stepforge.boards.presets.Board.pin`), as Amaranth's own platform templates write them:
on ECP5 ``LOCATE COMP`` and ``IOBUF PORT`` with the resource's attributes; on iCE40 ``set_io``
with ``-pullup yes`` for a pulled-up input (the I/O standard of a 3.3 V bank is nextpnr's
default ``SB_LVCMOS``, the same pad setting as ``SB_LVTTL``); on Gowin ``IO_LOC`` and
``IO_PORT``. The oscillator's port gets its frequency (``FREQUENCY PORT`` / ``set_frequency``;
a Gowin build takes the clock from ``--freq``); an ECP5 PLL's output is constrained by nextpnr
from the PLL's ``FREQUENCY_PIN_*`` attributes.
"""

__all__ = ["constraints"]


def constraints(board, pins, clock_port="clk_in"):
    """``(file name, text)`` of the constraints of ``pins`` on ``board``.

    Parameters
    ----------
    board : stepforge.boards.presets.Board
    pins : list of (str, PinRef)
        Each top-level port and where it sits (:meth:`BoardTop.pins`).
    clock_port : str
        The port of the board's oscillator.
    """
    resolved = [(port, board.pin(ref)) for port, ref in pins]
    osc = board.oscillator_hz
    kind = board.device.constraints
    if kind == "lpf":
        lines = ["BLOCK ASYNCPATHS;", "BLOCK RESETPATHS;"]
        for port, pin in resolved:
            lines.append(f'LOCATE COMP "{port}" SITE "{pin.site}";')
            if pin.attrs:
                lines.append(f'IOBUF PORT "{port}" '
                             + " ".join(f"{k}={v}" for k, v in pin.attrs.items()) + ";")
        lines.append(f'FREQUENCY PORT "{clock_port}" {osc / 1e6:g} MHZ;')
        return "top.lpf", "\n".join(lines) + "\n"
    if kind == "pcf":
        lines = []
        for port, pin in resolved:
            pullup = pin.direction == "i" and pin.attrs.get("PULLUP") in ("1", "True")
            lines.append(f"set_io {'-pullup yes ' if pullup else ''}{port} {pin.site}")
        lines.append(f"set_frequency {clock_port} {osc / 1e6:g}")
        return "top.pcf", "\n".join(lines) + "\n"
    if kind == "cst":
        lines = []
        for port, pin in resolved:
            lines.append(f'IO_LOC "{port}" {pin.site};')
            if pin.attrs:
                lines.append(f'IO_PORT "{port}" '
                             + " ".join(f"{k}={v}" for k, v in pin.attrs.items()) + ";")
        return "top.cst", "\n".join(lines) + "\n"
    raise ValueError(f"device {board.device.name!r} has no constraints format")
