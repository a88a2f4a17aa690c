"""A program built for an FPGA device: the board target's Verilog through the YoWASP flow.

:func:`build_program` is what ``stepforge build PROGRAM --device D`` runs; :func:`fpga_point` is a
sweep's ``--level fpga`` point (``stepforge sweep``, :mod:`stepforge.perf.sweep`): the same build,
reduced to the figures of one row of the table.
"""

import warnings
from pathlib import Path

from amaranth.hdl import UnusedElaboratable

from .boards import DEVICES as BOARD_DEVICES, DoesNotFit, build
from .compiler.errors import LoweringError
from .compiler.types import int8
from .hdl.config import MEMORIES, HardwareConfig
from .sim.rtl import compile_program

__all__ = ["DEVICES", "device_config", "build_program", "fpga_point"]

#: The devices ``stepforge build --device`` takes (:data:`stepforge.boards.DEVICES`).
DEVICES = tuple(BOARD_DEVICES)


def device_config(device, tile=None, memory="bram"):
    """The :class:`~stepforge.hdl.config.HardwareConfig` preset of ``device``, with the hardware
    tile ``tile = (rows, cols)`` instead of the preset's when given (e.g. ``(4, 4)`` on the UP5K:
    a GEMV beat of 16 products keeps its 8 MAC16 busy, where the preset's 2x2 tiles use 4).
    ``memory="sdram"`` keeps the tensors in an SDRAM chip beside the FPGA
    (:meth:`~stepforge.hdl.config.HardwareConfig.ulx3s_sdram`, the ECP5-85F only)."""
    if memory not in MEMORIES:
        raise ValueError(f"memory must be {' or '.join(map(repr, MEMORIES))}, not "
                         f"{memory!r}")
    if memory == "sdram" and device != "ecp5-85f":
        raise ValueError(f"memory 'sdram' is the ULX3S's chip beside an ecp5-85f, not a "
                         f"memory of the {device}")
    if memory == "sdram":
        config = HardwareConfig.ulx3s_sdram()
    elif device == "ecp5-85f":
        config = HardwareConfig.ecp5_85f()
    elif device == "up5k":
        config = HardwareConfig.ice40_up5k(int8)
    else:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
    return config.with_tile(tile)


def build_program(program, device, out_dir, *, seeds=3, jobs=2, freq_mhz=None, name=None,
                  progress=print, pack=True, tile=None, synth_flags="", wide_beats=False,
                  memory="bram"):
    """Compile ``program`` for ``device`` (board target) and build it in ``out_dir``.

    Returns the :class:`~stepforge.boards.BuildReport`; raises
    :class:`~stepforge.boards.BuildError` (:class:`~stepforge.boards.DoesNotFit` when a resource
    runs out). ``freq_mhz`` defaults to the device preset's clock; ``progress`` gets the lines of
    progress (None: silence); ``pack=False`` skips the bitstream; ``tile`` replaces the preset's
    hardware tile (:func:`device_config`); ``synth_flags`` are appended to the device's
    synthesis command (:func:`~stepforge.boards.build.build`). A program that moves tiles
    larger than the hardware tile as wide beats raises
    :class:`~stepforge.compiler.errors.LoweringError` unless ``wide_beats``. ``memory="sdram"``:
    the tensors in the SDRAM chip beside the FPGA (:func:`device_config`); the chip's pins are
    ports of the design, and its bytes are not counted against the FPGA's storage.
    """
    config = device_config(device, tile, memory)
    hw, system, text = compile_program(program, config, target="board", wide_beats=wide_beats)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "top.v").write_text(text)
    freq = freq_mhz if freq_mhz is not None else config.clock_hz / 1e6
    say = progress or (lambda line: None)
    say(f"wrote {out}/top.v ({len(text.splitlines())} lines); target clock {freq:g} MHz"
             + ("" if freq_mhz is not None else " (the preset's clock; --freq to change)"))
    return build(out / "top.v", device, out_dir=out, seeds=seeds, freq_mhz=freq, jobs=jobs,
                 name=name or program.name, progress=progress, pack=pack,
                 storage_bits=hw.onchip_memory_bits,
                 synth_flags=synth_flags)


def fpga_point(program, point="default", *, device, out_dir, seeds=1, tile=None):
    """One sweep point at ``--level fpga``, built in ``out_dir/point``: the build's figures as a
    dict (``fmax_mhz``, each resource of the device by name, ``fits``), or ``fits=False`` and
    what does not fit."""
    # the sweep's model lowered this point only to time it; its units are never elaborated
    # (this runs in a sweep's own process or worker)
    warnings.filterwarnings("ignore", category=UnusedElaboratable)
    try:
        report = build_program(program, device, Path(out_dir) / point, seeds=seeds, jobs=1,
                               progress=None, pack=False, tile=tile)
    except (DoesNotFit, LoweringError) as e:
        return {"fits": False, "fpga_error": str(e)}
    row = {"fmax_mhz": round(report.fmax_mhz, 1), "fits": True}
    row.update(report.design_totals())
    return row
