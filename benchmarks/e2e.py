"""End-to-end figures per example: cycles against the roofline, simulation speed, compile time.

For each example (at the sizes given below), runs the whole flow once — STeP program, lowering,
Verilog, Verilator, cocotb — and prints measured cycles, the roofline bound
max(compute, off-chip, on-chip) on the simulation machine, their ratio (bound / cycles; 1.0 is
the roofline), Verilator's simulation speed in cycles per second (the run alone, without preload
and read-back), and the STeP-to-Verilog compile time (``compile_program``) twice: *cold*, with an
empty unit cache (a fresh temporary folder: every unit, FIFO and the memory is converted), and
*warm*, the same program again with that cache filled (only the top is converted). Targets
(issue 4): ratio >= 0.85 on GEMM, GEMV and SwiGLU; >= 1,000,000 cycles/s on SwiGLU; compile
<= 2 s on SwiGLU. A cold compile generates the missing modules in forked child processes, one
per CPU at once. ``--compile-only`` measures the compile times alone (after one compile that
warms the process up, as the full run's Verilator run does), and the cold compile once more in
one process (``jobs=1``) for the ratio.

Run: ``python benchmarks/e2e.py [--only NAME] [--small] [--compile-only]``.
"""

import argparse
import tempfile
import time
from pathlib import Path

from stepforge.loader import load
from stepforge.runner import roofline
from stepforge.sim.ref.interpreter import run
from stepforge.sim.rtl import compile_program, run_rtl

ROOT = Path(__file__).resolve().parent.parent
FULL = {
    "matmul": {"M": 64, "K": 64, "N": 64},
    "gemv": {"K": 256, "N": 256},
    "elementwise": {"M": 64, "N": 64},
    "swiglu": {"B": 64, "H": 256, "I": 512},
    "moe": {},
}
SMALL = {
    "matmul": {"M": 16, "K": 16, "N": 16},
    "gemv": {"K": 64, "N": 16},
    "elementwise": {"M": 16, "N": 16},
    "swiglu": {"B": 16, "H": 32, "I": 32},
    "moe": {"T": 6},
}


def compile_times(pf, params, jobs=None):
    """Seconds of ``compile_program`` with an empty unit cache (cold), then with it full (warm);
    ``jobs`` modules are generated at once (default: the CPU count)."""
    with tempfile.TemporaryDirectory(prefix="stepforge-units-") as units:
        times = []
        for _ in ("cold", "warm"):
            t0 = time.perf_counter()
            compile_program(pf.build(**params), unit_cache=units, jobs=jobs)
            times.append(time.perf_counter() - t0)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append")
    ap.add_argument("--small", action="store_true", help="small sizes (a quick check)")
    ap.add_argument("--compile-only", action="store_true", help="only the compile times")
    args = ap.parse_args()
    sizes = SMALL if args.small else FULL
    selected = [(n, p) for n, p in sizes.items() if not args.only or n in args.only]
    if args.compile_only:
        compile_times(load(ROOT / "examples" / f"{selected[0][0]}.py"), selected[0][1])
        for name, params in selected:
            pf = load(ROOT / "examples" / f"{name}.py")
            cold, warm = compile_times(pf, params)
            serial, _ = compile_times(pf, params, jobs=1)
            print(f"{name}: compile {cold:.2f} s cold, {warm:.2f} s warm; cold in one process "
                  f"{serial:.2f} s ({serial / cold:.2f}x)", flush=True)
        return
    rows = []
    for name, params in selected:
        pf = load(ROOT / "examples" / f"{name}.py")
        program = pf.build(**params)
        data = pf.data(program, seed=0)
        res = run_rtl(program, data["tensors"], data.get("inputs", {}))
        ref = run(program, data["tensors"], data.get("inputs", {}), keep_edges=True)
        bound = roofline(res.hw, ref)
        compile_s = compile_times(pf, params)
        cycles = res.cycles
        speed = cycles / res.timings["run"] if res.timings.get("run") else float("nan")
        rows.append((name, res.status, cycles, bound["bound"], bound["compute"], bound["offchip"],
                     bound["onchip"], bound["bound"] / cycles if cycles else 0.0, speed, compile_s,
                     res.timings["build"]))
        print(f"{name}: {res.status}, {cycles} cycles, bound {bound['bound']}, "
              f"ratio {rows[-1][7]:.2f}, {speed:,.0f} cycles/s, compile {compile_s[0]:.2f} s cold, "
              f"{compile_s[1]:.2f} s warm", flush=True)
    print()
    hdr = ("example", "status", "cycles", "bound", "compute", "off-chip", "on-chip", "ratio",
           "cycles/s", "cold s", "warm s", "build s")
    print("  ".join(f"{h:>10}" for h in hdr))
    for r in rows:
        print("  ".join([f"{r[0]:>10}", f"{r[1]:>10}"] + [f"{v:>10}" for v in r[2:7]]
                        + [f"{r[7]:>10.2f}", f"{r[8]:>10,.0f}", f"{r[9][0]:>10.2f}",
                           f"{r[9][1]:>10.2f}", f"{r[10]:>10.1f}"]))


if __name__ == "__main__":
    main()
