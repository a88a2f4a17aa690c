"""FPGA figures per example and device, against the hand-written reference designs of issue 8.

For each example (at the sizes below) and each device (ECP5-85F, iCE40 UP5K), compiles the
board target (``compile_program(..., target="board")``) with the device's preset
(``HardwareConfig.ecp5_85f()``, ``HardwareConfig.ice40_up5k(int8)``), builds it with
:func:`stepforge.boards.build` (Yosys, nextpnr over ``--seeds`` seeds, the median seed's
bitstream; ``docs/fpga.md``), and runs the same program and preset in Verilator for its cycles
(``--no-cycles`` skips that). Prints per row: cycles, Fmax (median of the seeds), logic, block
RAM, DSP and MACs per second (MACs x Fmax / cycles), and their ratios to the hand-written
reference designs of issue 8 where there is one (generated / reference: a cycles, logic, RAM or
DSP ratio above 1 and an Fmax or MACs/s ratio below 1 are worse than the reference). A design
that does not fit says which resource and by how much.

Logic is LUT4 on the ECP5 (LUT4 cells plus two per CCU2C carry cell, the pin wrapper left out)
and placed logic cells (LC) on the UP5K; RAM is DP16KD on the ECP5 and EBR + SPRAM blocks on
the UP5K; DSP is MULT18X18D or MAC16. Issue 8 gives the ECP5 references' logic as "cells"
without saying which cells; the logic ratio on the ECP5 compares LUT4 with that figure.

Run: ``python benchmarks/fpga.py [--only NAME] [--device D] [--seeds N] [--small]
[--no-cycles] [--markdown] [--out DIR]`` (the full set takes hours on two cores; a GEMV
256x256 ECP5 build is a few minutes per seed).
"""

import argparse
import time
import traceback
from pathlib import Path

from stepforge.boards import BuildError, DoesNotFit, build
from stepforge.fpga import DEVICES, device_config
from stepforge.loader import load, load_trace
from stepforge.sim.rtl import compile_program, run_rtl

ROOT = Path(__file__).resolve().parent.parent
MOE_TRACE = ROOT / "traces" / "moe_skewed_t32_e4_top2.json"

FULL = {
    "gemv": {"K": 256, "N": 256},
    "matmul": {"M": 64, "K": 64, "N": 64},
    "swiglu": {"B": 64, "H": 256, "I": 512},
    "moe": {},                                    # the trace's parameters (T=32, E=4, k=2)
}
SMALL = {
    "gemv": {"K": 16, "N": 16},
    "matmul": {"M": 8, "K": 8, "N": 8},
    "swiglu": {"B": 8, "H": 8, "I": 8},
    "moe": {"T": 6},
}

#: hardware tiles other than the device preset's (``stepforge build --tile``): on the UP5K a
#: GEMV beat of a 4x4 tile (16 products, ii 2) keeps the 8 MAC16 busy where the preset's 2x2
#: tile uses 4 (GEMM 64^3 with 4x4 tiles does not fit the UP5K: 6,587 of 5,280 LC)
TILES = {("gemv", "up5k"): (4, 4)}

#: where the tensors live when not in block RAM (``stepforge build --memory``): SwiGLU at the
#: paper's size has 592 KB of tensors against the ECP5-85F's 468 KB of block RAM, so it keeps
#: them in the ULX3S's SDRAM (``docs/sdram.md``); its cycles are then the chip's 2 bytes a cycle
MEMORY = {("swiglu", "ecp5-85f"): "sdram"}

#: issue 8's hand-written int8 designs (inferred memories and multipliers)
REFERENCE = {
    ("gemv", "ecp5-85f"): {"cycles": 4120, "fmax": 113.0, "logic": 1710, "ram": 33, "dsp": 16},
    ("matmul", "ecp5-85f"): {"cycles": 16409, "fmax": 117.5, "logic": 1687, "ram": 8, "dsp": 16},
    ("gemv", "up5k"): {"cycles": 8237, "fmax": 76.0, "logic": 619, "ram": 5, "dsp": 8},
    ("matmul", "up5k"): {"cycles": 33294, "fmax": 92.0, "logic": 466, "ram": 16, "dsp": 8},
}


def macs(name, program, params, trace):
    """Multiply-accumulates of one run of the example."""
    p = params
    if name == "gemv":
        return p["K"] * p["N"]
    if name == "matmul":
        return p["M"] * p["K"] * p["N"]
    if name == "swiglu":
        return 3 * p["B"] * p["H"] * p["I"]                 # gate, up and down projections
    if name == "moe":
        T, D = program.tensors["X"].shape
        N = program.tensors["Y"].shape[1]
        routed = sum(len(e) for e in trace["routing"]) if trace else T * p.get("k", 1)
        return routed * D * N
    raise ValueError(f"no MAC count for {name!r}")


def figures(report, device):
    """``(logic, ram, dsp)`` of a build report, as the reference counts them."""
    t = report.design_totals()
    if device == "ecp5-85f":
        return t["LUT4"], t["DP16KD"], t["MULT18X18D"]
    return t["LC"], t["EBR"] + t["SPRAM"], t["MAC16"]


def measure(name, params, device, args):
    """One row: a dict of the figures, or ``{"error": ...}``."""
    pf = load(ROOT / "examples" / f"{name}.py")
    trace = None
    if name == "moe" and not args.small:
        trace = load_trace(MOE_TRACE)
        params = {**trace.get("params", {}), **params}
    full = {**pf.params(), **params}
    program = pf.build(**params)
    tile = None if args.small else TILES.get((name, device))
    memory = "bram" if args.small else MEMORY.get((name, device), "bram")
    config = device_config(device, tile, memory)
    row = {"name": name, "device": device, "params": params, "tile": tile, "memory": memory,
           "macs": macs(name, program, full, trace)}
    out = Path(args.out) / f"{name}-{device}"
    out.mkdir(parents=True, exist_ok=True)
    try:
        hw, _, text = compile_program(program, config, target="board")
    except Exception as e:                          # a preset the example cannot lower to
        return {**row, "error": f"does not compile: {type(e).__name__}: {e}"}
    (out / "top.v").write_text(text)
    freq = args.freq or config.clock_hz / 1e6
    try:
        report = build(out / "top.v", device, out_dir=out, seeds=args.seeds, freq_mhz=freq,
                       jobs=args.jobs, name=name,
                       storage_bits=hw.onchip_memory_bits,
                       progress=(lambda line: print("   ", line, flush=True)))
    except DoesNotFit as e:
        return {**row, "error": f"does not fit: {'; '.join(map(str, e.resources))}"}
    except BuildError as e:
        return {**row, "error": f"build failed: {e}"}
    logic, ram, dsp = figures(report, device)
    lo, hi = report.fmax_range
    row.update(fmax=report.fmax_mhz, fmax_lo=lo, fmax_hi=hi, target=report.target_mhz,
               met=report.met, logic=logic, ram=ram, dsp=dsp,
               worst=report.paths[0] if report.paths else None,
               build_s=report.seconds.get("total", 0.0))
    if not args.no_cycles:
        data = pf.data(program, seed=0, trace=trace) if pf.has_data else {}
        t = time.perf_counter()
        res = run_rtl(program, data.get("tensors", {}), data.get("inputs", {}), config=config)
        row["cycles"] = res.cycles if res.status == "done" else None
        row["sim_status"] = res.status
        row["sim_s"] = time.perf_counter() - t
    return row


def _device(row):
    """The device, and the hardware tile and memory when they are not the preset's."""
    tile = row.get("tile")
    return (row["device"] + (f" {tile[0]}x{tile[1]}" if tile else "")
            + (" sdram" if row.get("memory") == "sdram" else ""))


def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "-"


def table(rows, markdown, small=False):
    """The rows as a text or Markdown table; no reference ratios for the ``small`` sizes."""
    head = ["example", "device", "cycles", "Fmax MHz", "logic", "RAM", "DSP", "MMAC/s",
            "cycles x", "Fmax x", "logic x", "RAM x", "DSP x", "MAC/s x"]
    body = []
    for r in rows:
        if "error" in r:
            body.append([r["name"], _device(r), r["error"]] + [""] * (len(head) - 3))
            continue
        cycles = r.get("cycles")
        rate = r["macs"] * r["fmax"] / cycles if cycles else None       # MACs per microsecond
        ref = None if small else REFERENCE.get((r["name"], r["device"]))
        fmax = f"{r['fmax']:.1f}" + ("" if r["fmax_lo"] == r["fmax_hi"]
                                     else f" ({r['fmax_lo']:.1f}-{r['fmax_hi']:.1f})")
        line = [r["name"], _device(r), f"{cycles:,}" if cycles else "-", fmax,
                f"{r['logic']:,}", str(r["ram"]), str(r["dsp"]),
                f"{rate:,.1f}" if rate else "-"]
        if ref:
            ref_rate = r["macs"] * ref["fmax"] / ref["cycles"]
            line += [ratio(cycles, ref["cycles"]), ratio(r["fmax"], ref["fmax"]),
                     ratio(r["logic"], ref["logic"]), ratio(r["ram"], ref["ram"]),
                     ratio(r["dsp"], ref["dsp"]), ratio(rate, ref_rate)]
        else:
            line += ["-"] * 6
        body.append(line)
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * 2 + ["--:"] * 12) + "|"]
        out += ["| " + " | ".join(b) + " |" for b in body]
        return "\n".join(out)
    cells = [b for b in body if b[3:] != [""] * (len(head) - 3)]
    widths = [max(len(x[i]) for x in cells + [head]) for i in range(len(head))]
    lines = []
    for line in [head] + body:
        if line in cells or line is head:
            lines.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(line, widths))))
        else:                                           # an error: its message after the names
            lines.append(f"{line[0].ljust(widths[0])}  {line[1].ljust(widths[1])}  {line[2]}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", choices=list(FULL), help="an example (repeatable)")
    ap.add_argument("--device", action="append", choices=DEVICES, help="a device (repeatable)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=1, help="place-and-route runs at once")
    ap.add_argument("--freq", type=float, help="target clock in MHz (default: the preset's)")
    ap.add_argument("--small", action="store_true", help="small sizes (a quick check)")
    ap.add_argument("--no-cycles", action="store_true", help="skip the Verilator runs")
    ap.add_argument("--markdown", action="store_true", help="print the table in Markdown")
    ap.add_argument("--out", default=str(ROOT / "build" / "fpga"), help="build folders")
    args = ap.parse_args()
    sizes = SMALL if args.small else FULL
    rows = []
    for name, params in sizes.items():
        if args.only and name not in args.only:
            continue
        for device in args.device or DEVICES:
            print(f"{name} {params or ''} on {device}:", flush=True)
            try:
                row = measure(name, dict(params), device, args)
            except Exception as e:                       # keep the other rows
                traceback.print_exc()
                row = {"name": name, "device": device, "error": f"{type(e).__name__}: {e}"}
            rows.append(row)
            if "error" in row:
                print(f"  {row['error']}", flush=True)
            else:
                worst = row["worst"]
                print(f"  Fmax {row['fmax']:.1f} MHz, logic {row['logic']:,}, RAM {row['ram']}, "
                      f"DSP {row['dsp']}, cycles {row.get('cycles', '-')}"
                      + (f"; worst path {'/'.join(worst.start)} -> {'/'.join(worst.end)} "
                         f"{worst.delay_ns:.2f} ns" if worst else ""), flush=True)
    print()
    print(table(rows, args.markdown, args.small))


if __name__ == "__main__":
    main()
