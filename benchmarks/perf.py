"""The performance model against Verilator, and the LP FIFO sizing against the rule (issue 11).

    python benchmarks/perf.py                 # every point: model vs RTL, then FIFO sizing
    python benchmarks/perf.py --only swiglu   # points whose name contains "swiglu"
    python benchmarks/perf.py --no-sizing     # the validation table only

Validation: each point is lowered (the default FIFO sizing), run in Verilator (cached builds;
``run_rtl``) and predicted by :func:`stepforge.perf.predict` on the same lowered program.
Printed per point: measured and predicted cycles, the error, the model's time (wall, and the
process's CPU time: the machine may be loaded) and Verilator's, their ratio, and the ratio of
the Verilated run alone (no simulator start-up) to the model's time; the CPU time of the
simulator process (``verilator.run``'s children) against the model's CPU time; then Pearson r,
mean and max absolute error, and the targets.

What is timed on each side is what a point costs once its program is compiled (lowering and
Verilog excluded on both sides, and Verilator's build): for Verilator the simulator process
(start-up, preload, run, read-back; its in-simulator run alone is beside it); for the model the
interpreter's run cut to what the model reads when some beats depend on the data (``run_for``:
routers' selectors, data-dependent shapes; ``perf/framing.py``) plus
:func:`~stepforge.perf.predict`. The model's time is the median of
5 after a warm-up, each after a garbage collection (the lowering's and the Verilog's garbage is
not the model's; the Verilator side runs in a process of its own).

The SwiGLU sweep is 15 points: tiles t = 4, 8, 16 (t > 4 is hierarchically tiled onto the 4x4
hardware tile) at five shapes (B, H, I) around batch 16, small enough that every Verilator run
takes a second or less (the paper's sweep is at B64 H256 I512: 558,029 cycles here at t = 4).

FIFO sizing: every example lowered with the rule and with the integer program (throughput 1);
total FIFO bits, the sizing time (the integer program's own, ``fifo_sizing["seconds"]``, and the
whole ``lower()`` beside it), the static check, and the cycles of both in Verilator (each
method's depths pinned through ``run_rtl(depths=...)``), bit-exact against the interpreter.
"""

import argparse
import gc
import resource
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from stepforge.compiler.lower import lower
from stepforge.loader import load, load_trace
from stepforge.perf import needs_run, predict
from stepforge.perf.model import run_for
from stepforge.sim.ref.interpreter import run
from stepforge.sim.rtl import run_rtl

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TRACE = ROOT / "traces" / "moe_skewed_t32_e4_top2.json"

SHAPES = [(16, 32, 64), (16, 64, 32), (32, 32, 32), (16, 16, 128), (32, 64, 64)]
POINTS = ([("swiglu", {"B": B, "H": H, "I": I, "t": t}, None)
           for B, H, I in SHAPES for t in (4, 8, 16)]
          + [("matmul", {"M": 32, "K": 32, "N": 32}, None),
             ("gemv", {"K": 128, "N": 128}, None),
             ("elementwise", {"M": 32, "N": 32}, None),
             ("moe", {"tiling": "dynamic"}, TRACE),
             ("moe", {"tiling": "static"}, TRACE)])

SIZING = [("matmul", {}, None), ("gemv", {}, None), ("elementwise", {}, None),
          ("swiglu", {"B": 16, "H": 32, "I": 64}, None), ("moe", {"T": 10}, None),
          ("moe", {"T": 10, "tiling": "static"}, None)]


def label(name, params, trace):
    text = name + " " + " ".join(f"{k}={v}" for k, v in params.items())
    return text + (" (trace)" if trace else "")


def prepare(name, params, trace):
    pf = load(EXAMPLES / f"{name}.py")
    tr = load_trace(trace) if trace else None
    params = {**(tr.get("params", {}) if tr else {}), **params}
    program = pf.build(**params)
    data = pf.data(program, seed=1, trace=tr)
    return program, data.get("tensors", {}), data.get("inputs", {})


def model(program, tensors, inputs, **lower_kw):
    """``(result, hw, seconds, interpreter seconds, CPU seconds)``: the prediction of the lowered
    program and the median time of a point through the model: the interpreter (when the beats
    need it) and :func:`predict` (module doc); wall time, and the process's CPU time beside it
    (the machine may be loaded)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hw = lower(program, **lower_kw)

    def once():
        # the garbage of the lowering and of run_rtl's Verilog (the Verilator side runs in a
        # process of its own) is collected first, as timeit would; what the run allocates counts
        gc.collect()
        c0 = time.process_time()
        t0 = time.perf_counter()
        ref = run_for(hw, tensors, inputs)
        t1 = time.perf_counter()
        res = predict(hw, ref)
        return res, time.perf_counter() - t0, t1 - t0, time.process_time() - c0

    res = once()[0]                                             # warm-up
    samples = [once()[1:] for _ in range(5)]
    took, interp, _ = sorted(samples)[len(samples) // 2]
    cpu = sorted(c for *_, c in samples)[len(samples) // 2]
    return res, hw, took, interp, cpu


def _children_cpu():
    """CPU seconds (user + system) of this process's finished child processes."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed_simulator():
    """Wrap ``verilator.run`` (the simulator process, which ``run_rtl`` starts after the Verilog
    and the build) so that the CPU time of its child processes is recorded in ``SIM_CPU``: the
    conversion and the build also run child processes (Yosys, Verilator, the C++ compiler)."""
    from stepforge.sim.rtl import verilator
    plain = verilator.run

    def run(*args, **kwargs):
        c0 = _children_cpu()
        try:
            return plain(*args, **kwargs)
        finally:
            SIM_CPU.append(_children_cpu() - c0)
    verilator.run = run


SIM_CPU = []


def validate(points, sizing):
    _timed_simulator()
    rows, meas, pred, speed, cpu_speed = [], [], [], [], []
    for name, params, trace in points:
        program, tensors, inputs = prepare(name, params, trace)
        res, hw, took, interp, cpu = model(program, tensors, inputs, fifo_sizing=sizing)
        # the same hardware in Verilator: the lowered (tiled) program with the same FIFO depths
        pins = {e.stream: e.depth for e in hw.edges}
        SIM_CPU.clear()
        rtl = run_rtl(hw.program, tensors, inputs, depths=pins)
        sim_cpu = sum(SIM_CPU)
        if rtl.status != "done":
            print(f"{label(name, params, trace)}: Verilator run {rtl.status}", file=sys.stderr)
            continue
        m, p = rtl.cycles, res.cycles
        sim = rtl.timings["simulate"]
        meas.append(m)
        pred.append(p)
        speed.append(sim / took)
        cpu_speed.append(sim_cpu / cpu)
        rows.append([label(name, params, trace), m, p, f"{100 * (p - m) / m:+.1f}%",
                     f"{took * 1e3:.1f}", f"{interp * 1e3:.1f}" if needs_run(hw) else "-",
                     f"{cpu * 1e3:.1f}", f"{sim:.2f}", f"{sim_cpu:.2f}",
                     f"{rtl.timings['run'] * 1e3:.1f}", f"{sim / took:,.0f}x",
                     f"{sim_cpu / cpu:,.0f}x", f"{rtl.timings['run'] / took:.1f}x"])
        print(" | ".join(map(str, rows[-1])), flush=True)
    meas, pred = np.array(meas, float), np.array(pred, float)
    err = np.abs(pred - meas) / meas
    r = float(np.corrcoef(meas, pred)[0, 1]) if len(meas) > 1 else float("nan")
    print()
    print("| point | measured | predicted | error | model ms | (of it interpreter ms) "
          "| model CPU ms | Verilator s | Verilator CPU s | (run only ms) | speed-up "
          "| CPU speed-up | vs run only |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for row in rows:
        print("| " + " | ".join(map(str, row)) + " |")
    print()
    print(f"points {len(meas)}; Pearson r {r:.4f} (target >= 0.99); mean abs error "
          f"{100 * err.mean():.2f} % (<= 5 %); max {100 * err.max():.2f} % (<= 10 %); model "
          f"(interpreter when needed + predict) vs Verilator's simulator process: min "
          f"{min(speed):,.0f}x, median {float(np.median(speed)):,.0f}x (>= 100x), "
          f"{sum(x >= 100 for x in speed)} of {len(speed)} points >= 100x; CPU time against "
          f"CPU time: min {min(cpu_speed):,.0f}x, median {float(np.median(cpu_speed)):,.0f}x, "
          f"{sum(x >= 100 for x in cpu_speed)} of {len(cpu_speed)} points >= 100x")
    return r, err


def sizing(points):
    rows = []
    for name, params, trace in points:
        result = {}
        for method in ("rule", "lp"):
            program, tensors, inputs = prepare(name, params, trace)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                hw = lower(program, fifo_sizing=method)
                took = time.perf_counter() - t0
            pins = {e.stream: e.depth for e in hw.edges}
            if hw.program is not program:
                print(f"{label(name, params, trace)}: tiled; the LP depths cannot be pinned",
                      file=sys.stderr)
                break
            # the same program object: lower() inserts its broadcasts in place, so the pinned
            # streams are the ones run_rtl lowers again
            rtl = run_rtl(program, tensors, inputs, depths=pins)
            ref = run(program, tensors=tensors, inputs=inputs)
            exact = all(np.array_equal(rtl.tensors[k], ref.tensors[k]) for k in rtl.tensors)
            result[method] = (hw.fifo_sizing["bits"], took, rtl.status, rtl.cycles, exact,
                              len(hw.deadlocks), hw.fifo_sizing.get("seconds"))
        if len(result) < 2:
            continue
        (rb, _, _, rc, rx, _, _), (lb, lt, ls, lc, lx, ld, lsz) = result["rule"], result["lp"]
        rows.append([label(name, params, trace), rb, lb, f"{lb / rb:.2f}", f"{lsz:.2f}",
                     f"{lt:.2f}", ls, rc, lc, f"{100 * (lc - rc) / rc:+.1f}%",
                     "yes" if rx and lx else "NO", ld])
        print(" | ".join(map(str, rows[-1])), flush=True)
    print()
    print("| example | rule bits | LP bits | ratio | sizing s | lower() s | LP run | rule cycles "
          "| LP cycles | change | bit-exact | static findings |")
    print("|---|--:|--:|--:|--:|--:|---|--:|--:|--:|---|--:|")
    for row in rows:
        print("| " + " | ".join(map(str, row)) + " |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", help="points whose label contains this")
    ap.add_argument("--no-sizing", action="store_true")
    ap.add_argument("--no-validation", action="store_true")
    ap.add_argument("--sizing", choices=["lp", "rule"], default="lp",
                    help="the FIFO sizing of the validated designs (default: the compiler's)")
    args = ap.parse_args(argv)
    pick = (lambda pts: [p for p in pts if any(o in label(*p) for o in args.only)]) \
        if args.only else (lambda pts: pts)
    if not args.no_validation:
        validate(pick(POINTS), args.sizing)
    if not args.no_sizing:
        print()
        sizing(pick(SIZING))
    return 0


if __name__ == "__main__":
    sys.exit(main())
