"""The paper's evaluation in RTL (issue 10): MoE dynamic vs static tiling, measured in Verilator.

    python benchmarks/paper.py                  # sweep both layers (cached builds), table, plots
    python benchmarks/paper.py --only mixtral   # one layer
    python benchmarks/paper.py --table          # table and plots from the saved results only
    python benchmarks/paper.py --tm             # configuration time-multiplexing sweep, table, plot
    python benchmarks/paper.py --tm --only qwen3   # the same on the Qwen3-like layer
    python benchmarks/paper.py --attention      # decode attention: 3 dispatch modes x 3 classes
    python benchmarks/paper.py --attention --variant region   # on the region-bound machine only

Each configuration of ``examples/moe.py`` (static tiles of ``rows``, dynamic tiling, bounded
dynamic tiles of at most ``rows``, and ``stream``: bounded tiles with each expert's weight read
once and held in a PMU) runs on a synthetic routing trace (``traces/paper_*.json``,
``benchmarks/paper_traces.py``) in Verilator, bit-exact against the interpreter and NumPy, on
:data:`MACHINE`. Per configuration it records:

* **cycles**: the system's cycle counter, start to done;
* **on-chip bytes** (``onchip``, what the Pareto frontier uses): what the run actually held, the
  sum over every FIFO of its high-water mark (beats) times the largest payload that crossed it
  (a dynamic tile counted at its actual rows, ``rows x cols x element bytes``; stop and row-count
  fields not counted), plus the accumulator tile every Accum PCU holds, at the largest actual
  size it reached, plus, for every PMU (only ``stream`` tiling has one: each expert's weight),
  its allocator's high-water mark of blocks times a block's entries times the largest element
  stored (:func:`pmu_bytes`);
* **allocated bytes** (``alloc``): what the hardware is built with, the FIFOs' depth times their
  beat width (stop and row fields included, dynamic tiles at their bound) plus the Accum
  accumulators at their bound, plus every PMU's blocks at the width of an entry (data and
  stop);
* **paper-model bytes** (``model``): the paper's symbolic on-chip formula
  (``compiler/metrics.py``) with the trace's symbols bound;
* **off-chip bytes** read and written by the tensor operators (the memory's counters).

The Pareto frontier is taken over the static configurations (cycles vs on-chip bytes) and every
dynamic configuration gets the paper's Pareto Improvement Distance :func:`pid`.

``--tm`` is the configuration time-multiplexing study (issue 10 item 3, section "Configuration
time-multiplexing" below): a layer's experts sharing ``R`` matmul regions (``examples/moe.py -p
regions=R``; the Mixtral-like layer, or ``--only qwen3``), the compute utilization
:func:`compute_utilization` and the cycles against the program with one region per expert.
"""

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from stepforge.compiler.metrics import bind, metrics
from stepforge.hdl.config import HardwareConfig
from stepforge.hdl.pmu import PMU
from stepforge.loader import load, load_trace
from stepforge.report import table
from stepforge.sim.ref.interpreter import run
from stepforge.sim.rtl import deadlock_report, error_report, run_rtl

ROOT = Path(__file__).resolve().parent.parent
MOE = ROOT / "examples" / "moe.py"
TRACES = ROOT / "traces"
OUT = ROOT / "docs" / "paper"

#: The machine: the simulation preset with the off-chip bandwidth cut to 2 bytes per cycle.
#: The paper's machine moves about 0.04 off-chip bytes per multiplier-cycle (Mixtral: 1,024
#: B/cycle for 8 experts x 3,200 multipliers; Qwen3 0.0025); the preset 4 (64 B/cycle for one
#: PCU's 16 multipliers), here 0.016 for 8 experts. At 8 B/cycle and these hidden sizes the
#: weights take less time to read than the selector takes to stream in (about 8 cycles per
#: token), so no tiling changes the cycles; with the preset every configuration is
#: compute-bound and static tiles never pay for reloading weights, the cost dynamic tiling removes.
MACHINE = HardwareConfig.sim().replace(mem_channels=1, mem_bytes_per_channel=2)

#: Hidden sizes: a token is a [1, D] row, an expert a [D, N] weight in [D, n] column tiles.
SHAPE = {"D": 4, "N": 4, "n": 4}

#: layer -> (trace file, the paper's PID at batch 64, configurations (tiling, rows)).
LAYERS = {
    "mixtral": ("paper_mixtral_t64_e8_top2.json", 1.33,
                [("static", 4), ("dynamic", 64), ("static", 16), ("static", 64), ("bounded", 16),
                 ("static", 8), ("static", 32), ("stream", 16), ("stream", 4), ("stream", 8)]),
    "qwen3": ("paper_qwen3_t64_e16_top1.json", 2.11,
              [("static", 4), ("static", 16), ("bounded", 16), ("static", 64), ("dynamic", 64),
               ("static", 8), ("static", 32), ("stream", 16), ("stream", 4), ("stream", 8)]),
}


def pareto(points):
    """Indices of the points ``(cycles, bytes)`` that no other point dominates (as small or
    smaller in both, smaller in one), sorted by cycles."""
    front = []
    for i, (c, m) in enumerate(points):
        if not any((c2 <= c and m2 <= m) and (c2 < c or m2 < m) for c2, m2 in points):
            front.append(i)
    return sorted(front, key=lambda i: points[i])


def pid(point, frontier):
    """Pareto Improvement Distance of ``point = (cycles, bytes)`` from the baseline's Pareto
    points: ``min over q of max(cycles(q) / cycles(p), bytes(q) / bytes(p))`` (the paper's
    definition, ``step-paper-notes.md`` 4.2). Above 1 the point lies beyond the frontier: it
    beats every baseline point by that factor in cycles or in memory."""
    c, m = point
    return min(max(cq / c, mq / m) for cq, mq in frontier)


def onchip_bytes(hw, ref, csrs):
    """``(used, allocated)`` on-chip bytes of a run (module docstring)."""
    used = alloc = 0
    for e in hw.edges:
        width = -(-e.layout.size // 8)
        alloc += e.depth * width
        used += csrs[f"fifo.{e.name}.high_water"] * _largest(ref.edges.get(e.stream, []), width)
    for u in hw.units:
        if u.node.op == "Accum":
            out = u.node.outputs[0]
            width = next((-(-e.layout.size // 8) for e in hw.edges if e.stream is out), 0)
            alloc += width
            used += _largest(ref.edges.get(out, []), width)
        elif isinstance(u.component, PMU) and not u.shared:
            used_b, alloc_b = pmu_bytes(u, ref, csrs)
            used += used_b
            alloc += alloc_b
    return used, alloc


def pmu_bytes(u, ref, csrs):
    """``(used, allocated)`` bytes of the PMU of unit ``u`` (a Bufferize and its Streamify
    nodes): its allocator's high-water mark of blocks (``pmu.<unit>.blocks_high_water``) times
    the block's entries times the largest element that entered it, and every block at the
    width of one entry of its data and stop memories."""
    pmu = u.component
    entry = pmu.params.entry_layout().size + pmu.params.stop_shape().width
    width = -(-entry // 8)
    peak = csrs[f"pmu.{u.name}.blocks_high_water"]
    elem = _largest(ref.edges.get(u.node.inputs[0], []), width)
    return peak * pmu.block_size * elem, pmu.blocks * pmu.block_size * width


def _largest(tokens, width):
    """Bytes of the largest data value among ``tokens`` (``width`` for values without a size)."""
    sizes = [getattr(t, "nbytes", None) for t in tokens if type(t).__name__ != "Stop"]
    sizes = [s for s in sizes if s is not None]
    return max(sizes) if sizes else (width if tokens else 0)


def measure(layer, tiling, rows, *, trace=None, seed=0, stall=False, config=MACHINE, shape=SHAPE,
            regions=None):
    """Run one configuration in Verilator (``regions``: that many time-multiplexed matmul
    regions, ``None`` one per expert); a dict of what it measured (``ok``: bit-exact)."""
    trace = trace or load_trace(TRACES / LAYERS[layer][0])
    pf = load(MOE)
    params = dict(trace["params"], **shape, tiling=tiling, rows=rows)
    if regions is not None:
        params["regions"] = regions
    program = pf.build(**params)
    data = pf.data(program, seed=seed, trace=trace)
    tensors, inputs = data["tensors"], data["inputs"]
    t0 = time.perf_counter()
    res = run_rtl(program, tensors, inputs, config=config, stall=stall)
    wall = time.perf_counter() - t0
    if res.status != "done":
        raise SystemExit(deadlock_report(res) if res.status == "deadlock" else error_report(res))
    ref = run(res.hw.program, tensors=tensors, inputs=inputs, keep_edges=True)
    want = pf.reference(program, tensors, inputs)["Y"]
    ok = bool(np.array_equal(res.tensors["Y"], want) and np.array_equal(ref.tensors["Y"], want))
    used, alloc = onchip_bytes(res.hw, ref, res.csrs)
    m = metrics(res.hw.program).subs(bind(res.hw.program, ref.trace))
    # the row symbol of an idle expert's tile is never bound: that tile never exists
    onchip_model = m.onchip
    if not isinstance(onchip_model, int):
        onchip_model = onchip_model.subs({sym: 0 for sym in onchip_model.free_symbols})
    return {"layer": layer, "tiling": tiling, "rows": rows, "ok": ok, "cycles": res.cycles,
            "bytes_per_cycle": config.mem_bytes_per_cycle,
            "onchip": used, "alloc": alloc, "model": int(onchip_model),
            "read": res.tensor_bytes_read, "written": res.tensor_bytes_written,
            "model_read": int(m.offchip_read), "seconds": round(wall, 1),
            "build_seconds": round(res.timings["compile"] + res.timings["build"], 1),
            "regions": regions, **compute_utilization(res, ref)}


def label(r):
    return {"static": f"static {r['rows']}", "bounded": f"bounded {r['rows']}",
            "stream": f"stream {r['rows']}", "dynamic": "dynamic"}[r["tiling"]]


def summarize(layer, results, paper_pid, out=print):
    """Print one layer's table, frontier, PIDs and ratios; return the figures."""
    rs = [r for r in results if r["layer"] == layer]
    static = [r for r in rs if r["tiling"] == "static"]
    if not static:
        return {}
    figures = {}
    for key, what in (("onchip", "on-chip bytes used"), ("alloc", "on-chip bytes allocated"),
                      ("model", "paper-model on-chip bytes")):
        pts = [(r["cycles"], r[key]) for r in static]
        front = [pts[i] for i in pareto(pts)]
        figures[key] = {label(r): pid((r["cycles"], r[key]), front)
                        for r in rs if r["tiling"] != "static"}
        figures[key + "_front"] = [label(static[i]) for i in pareto(pts)]
    best = min(static, key=lambda r: (r["cycles"], r["onchip"]))
    rows = []
    for r in rs:
        dyn = r["tiling"] != "static"
        rows.append([label(r), "ok" if r["ok"] else "MISMATCH", r["cycles"], r["onchip"], r["alloc"],
                     r["model"], r["read"], r["written"],
                     "frontier" if label(r) in figures["onchip_front"] else "",
                     f"{figures['onchip'][label(r)]:.2f}" if dyn else "",
                     f"{best['cycles'] / r['cycles']:.2f}", f"{best['onchip'] / r['onchip']:.2f}"])
    out(f"\n{layer}-like layer ({LAYERS[layer][0]}), D={SHAPE['D']} N={SHAPE['N']} n={SHAPE['n']}, "
        f"{rs[0].get('bytes_per_cycle', 8)} B/cycle off chip; best static tile: {label(best)}")
    out(table(rows, ["config", "check", "cycles", "on-chip B", "allocated B", "model B", "read B",
                     "written B", "static Pareto", "PID", "speedup vs best static", "x less on-chip vs best"]))
    for key, what in (("onchip", "on-chip bytes used"), ("alloc", "on-chip bytes allocated"),
                      ("model", "paper-model on-chip bytes")):
        pids = ", ".join(f"{k} {v:.2f}" for k, v in figures[key].items())
        out(f"PID over {what}: {pids} (paper: {paper_pid}); frontier {figures[key + '_front']}")
    return figures


def plot(layer, results, path):
    """A PNG of cycles vs on-chip bytes (used and allocated), the static frontier drawn; None
    if matplotlib is missing."""
    try:
        import matplotlib          # optional: only the plots need it (the dev extra has it)
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rs = [r for r in results if r["layer"] == layer]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, what in ((axes[0], "onchip", "on-chip bytes used (FIFO high water + accumulators)"),
                          (axes[1], "alloc", "on-chip bytes allocated (FIFO depth x width)")):
        static = [r for r in rs if r["tiling"] == "static"]
        pts = [(r[key], r["cycles"]) for r in static]
        front = sorted(pts[i] for i in pareto([(c, m) for m, c in pts]))
        ax.step([m for m, _ in front], [c for _, c in front], where="post", color="grey",
                label="static Pareto frontier")
        for r in rs:
            style = {"static": "o", "bounded": "s", "stream": "D", "dynamic": "*"}[r["tiling"]]
            ax.plot(r[key], r["cycles"], style, markersize=11 if style == "*" else 7,
                    label=label(r))
            ax.annotate(label(r), (r[key], r["cycles"]), fontsize=7, xytext=(4, 4),
                        textcoords="offset points")
        ax.set_xscale("log")
        ax.set_xlabel(what)
        ax.set_ylabel("cycles (Verilator)")
        ax.grid(alpha=0.3)
    bw = rs[0].get("bytes_per_cycle", 8) if rs else "?"
    axes[0].set_title(f"MoE {layer}-like, batch 64, {bw} B/cycle: dynamic vs static tiles (RTL)",
                      fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# --- Configuration time-multiplexing (issue 10 item 3) ---------------------------------------

#: The sweep: static tiles of 16 rows (the Mixtral-like layer's best static point above), a
#: layer's experts on ``R`` matmul regions; ``None`` is the program without regions (one per
#: expert, per-expert linear weight loads), the baseline of every ratio. Layer -> regions; the
#: Qwen3-like layer (16 experts, half of them idle: the paper's case) with fewer points, its
#: designs being the largest.
TM_ROWS = 16
TM_REGIONS = {"mixtral": (None, 8, 4, 2, 1), "qwen3": (None, 4, 1)}

#: The paper's time-multiplexing figures (``step-paper-notes.md`` 4.3; Qwen3 at batch 64, 128
#: experts on 128 .. 4 regions): compute utilization gain and the cycles it costs.
TM_PAPER = {"static": (2.64, "< 1 %"), "dynamic": (2.51, "about 5 %")}


def compute_utilization(res, ref):
    """The compute utilization of a run, from its matmul PCUs (the Map units of ``matmul``).

    * ``busy_util``: the PCUs' ``busy`` counters (cycles in which a PCU holds or works on a
      beat: an input offered, a step in flight or a result waiting) summed, over ``regions x
      cycles``;
    * ``mac_util``: the cycles the multipliers need for the beats the PCUs multiplied, summed
      over every beat of their outputs (``PCU.cycles(rows)``: ``ceil(rows x D x n /
      multipliers)``, the PCU's initiation interval for that tile), over ``regions x cycles``.

    ``regions`` is the number of matmul PCUs (``E`` without time-multiplexing); ``cycles`` the
    system's cycle counter. ``busy_util`` counts the waits of a PCU that has a beat, so it is
    the larger of the two.
    """
    units = [u for u in res.hw.units if u.node.op == "Map" and u.node.fn.name == "matmul"]
    busy = sum(res.csrs[f"unit.{u.name}.busy"] for u in units)
    mac = sum(u.component.cycles(t.shape[0]) for u in units
              for t in ref.edges[u.node.outputs[0]] if type(t).__name__ != "Stop")
    scale = len(units) * res.cycles
    return {"matmul_pcus": len(units), "busy": busy, "mac_cycles": mac,
            "busy_util": busy / scale, "mac_util": mac / scale}


def tm_summarize(layer, results, out=print):
    """Print ``layer``'s time-multiplexing table against the program without regions; return
    the rows as dicts (with ``experts_per_region``, ``mac_gain``, ``busy_gain`` and
    ``slowdown``)."""
    rows, figures = [], []
    for tiling in ("static", "dynamic"):
        rs = [r for r in results if r["tiling"] == tiling and r["layer"] == layer]
        base = next((r for r in rs if r["regions"] is None), None)
        if base is None:
            continue
        for r in sorted(rs, key=lambda r: (r["regions"] is not None, -(r["regions"] or 0))):
            f = dict(r, experts_per_region=base["matmul_pcus"] // r["matmul_pcus"],
                     mac_gain=r["mac_util"] / base["mac_util"],
                     busy_gain=r["busy_util"] / base["busy_util"],
                     slowdown=r["cycles"] / base["cycles"] - 1)
            figures.append(f)
            rows.append([tiling, "none" if r["regions"] is None else r["regions"],
                         f["experts_per_region"], "ok" if r["ok"] else "MISMATCH", r["cycles"],
                         f"{100 * f['slowdown']:+.2f} %", f"{r['mac_util']:.3f}",
                         f"{f['mac_gain']:.2f}", f"{r['busy_util']:.3f}", f"{f['busy_gain']:.2f}",
                         r["read"], r["onchip"], r["alloc"]])
    bw = figures[0]["bytes_per_cycle"] if figures else "?"
    out(f"\nconfiguration time-multiplexing, {layer}-like layer ({LAYERS[layer][0]}), static "
        f"tiles of {TM_ROWS}, D={SHAPE['D']} N={SHAPE['N']} n={SHAPE['n']}, {bw} B/cycle off chip")
    out(table(rows, ["tiling", "regions", "experts/region", "check", "cycles", "slowdown",
                     "MAC util", "MAC gain", "busy util", "busy gain", "read B", "on-chip B",
                     "allocated B"]))
    for tiling, (gain, cost) in TM_PAPER.items():
        out(f"paper ({tiling} tiles, Qwen3 b64): compute utilization x{gain}, {cost} slower")
    return figures


def tm_plot(layer, figures, path):
    """A PNG against experts per region: the utilization gains (the paper's drawn as lines),
    the slowdown, and the on-chip bytes used and allocated, each relative to the program
    without regions (its point drawn apart, a star at 1 expert per region); None if matplotlib
    is missing."""
    try:
        import matplotlib          # optional: only the plots need it (the dev extra has it)
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    panels = ((axes[0], (("mac_gain", "s--", "MAC cycles"), ("busy_gain", "o-", "busy counters")),
               "compute utilization / without time-multiplexing"),
              (axes[1], (("slowdown", "o-", "cycles"),), "cycles / without time-multiplexing - 1"),
              (axes[2], (("onchip", "o-", "on-chip bytes used"), ("alloc", "s--", "allocated")),
               "on-chip bytes / without time-multiplexing"))
    for tiling in ("static", "dynamic"):
        fs = [f for f in figures if f["tiling"] == tiling]
        if not fs:
            continue
        base, tm = fs[0], fs[1:]
        for ax, series, _ in panels:
            for key, style, what in series:
                def value(f):
                    return f[key] / base[key] if key in ("onchip", "alloc") else f[key]
                line = ax.plot([f["experts_per_region"] for f in tm], [value(f) for f in tm],
                               style, label=f"{tiling}: {what}")[0]
                ax.plot(1, value(base), "*", markersize=11, color=line.get_color())
        axes[0].axhline(TM_PAPER[tiling][0], color="grey", linestyle=":",
                        label=f"paper, {tiling} tiles (Qwen3 b64)")
    for ax, _, ylabel in panels:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("experts per matmul region (star: without)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[1].yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    axes[0].set_title(f"MoE {layer}-like, batch 64, static {TM_ROWS}: time-multiplexed "
                      f"experts (RTL)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def tm_main(args):
    """The ``--tm`` sweep of the layers ``--only`` names (default: the Mixtral-like one), cached
    per configuration in ``docs/paper/tm_results.json``; its tables and plots; 0 if every run
    is bit-exact."""
    path = args.results.parent / "tm_results.json"
    results = json.loads(path.read_text()) if path.exists() else []
    layers = args.only or ["mixtral"]
    for layer in [] if args.table else layers:
        for regions in TM_REGIONS[layer]:
            key = (layer, regions)
            if not args.rerun and any((r["layer"], r["regions"]) == key for r in results):
                continue
            print(f"[paper] time-multiplexing: {layer} regions {regions} ...", flush=True)
            r = measure(layer, "static", TM_ROWS, regions=regions)
            print(f"[paper]   {r}", flush=True)
            results = [x for x in results if (x["layer"], x["regions"]) != key] + [r]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(results, indent=1) + "\n")
    for layer in layers:
        figures = tm_summarize(layer, results)
        if figures:
            png = tm_plot(layer, figures, path.parent / f"moe_{layer}_tm.png")
            print(f"plot: {png}" if png else
                  "plot: matplotlib is not installed (pip install matplotlib)")
    ok = all(r["ok"] for r in results)
    print("\nPASS (every run bit-exact)" if ok else "\nFAIL: a run differs from the reference")
    return 0 if ok else 1


ATTN = ROOT / "examples" / "decode_attention.py"
ATTN_CLASSES = ("low", "medium", "high")
ATTN_MODES = ("dynamic", "interleaved", "coarse")
#: the machines of the decode-attention sweep: program parameters (P regions, head dim d; the
#: batch and the maximum KV length are the trace's) and the HardwareConfig changes from the
#: simulation preset. ``default``: the preset, where the shared memory (one 64-byte line per
#: cycle; a key costs 3 lines: its address, its key and its value) is the bound once the host
#: stream reader is pipelined. ``region``: slower regions (d = 32 on 4-multiplier PCUs: a
#: region's score Map takes about 8 cycles per key, the perf model says), so that the regions'
#: work, which the dispatch balances in the paper, weighs as much as the memory: its busiest PCU
#: is busy 80-89 % of the run and the memory moves 0.57-0.61 lines per cycle (B = 32).
ATTN_VARIANTS = {"default": ({"P": 4, "d": 4}, {}),
                 "region": ({"P": 4, "d": 32}, {"pcu_multipliers": 4})}
#: the paper's speedups of dynamic parallelization (notes 4.4)
#: the paper's static coarse-grained baseline: 16 requests per region, whatever the batch (at
#: B = 16 one region serves them all); the region-addressed sweep runs it beside the even split
#: of ``ceil(B / P)`` requests per region
ATTN_PAPER_BLOCK = 16
ATTN_PAPER = {"interleaved": "1.14-1.26x (low variance), 1.47-1.57x (high), B=64; geomean 1.36x",
              "coarse": "2.72x at B=16 (idle regions), 1.43x at B=64; geomean 1.85x",
              "both": "1.5x geomean over the Revet-expressible designs"}


def attn_config(variant):
    """The HardwareConfig of an attention variant."""
    return HardwareConfig.sim().replace(**ATTN_VARIANTS[variant][1])


def attn_measure(variance, mode, *, variant="default", stall=False, batch=32, lmax=32,
                 addressing="host", block=None):
    """One decode-attention configuration in Verilator on ``traces/attn_<variance>_b<batch>_
    l<lmax>.json`` on the machine ``variant`` (:data:`ATTN_VARIANTS`) with the KV addresses
    ``addressing`` (``"host"``: a host stream, one beat per key; ``"region"``: each region
    generates them from the request's length): cycles, bit-exactness against the interpreter
    and NumPy, and where the cycles go. ``block``: the coarse block (default ``ceil(B / P)``)."""
    trace = load_trace(TRACES / f"attn_{variance}_b{batch}_l{lmax}.json")
    pf = load(ATTN)
    program = pf.build(**dict(trace["params"], **ATTN_VARIANTS[variant][0], mode=mode,
                              addressing=addressing, block=block))
    data = pf.data(program, seed=0, trace=trace)
    tensors, inputs = data["tensors"], data["inputs"]
    t0 = time.perf_counter()
    res = run_rtl(program, tensors, inputs, config=attn_config(variant), stall=stall)
    wall = time.perf_counter() - t0
    if res.status != "done":
        raise SystemExit(deadlock_report(res) if res.status == "deadlock" else error_report(res))
    ref = run(res.hw.program, tensors=tensors, inputs=inputs)
    want = pf.reference(program, tensors, inputs)["O"]
    ok = bool(np.array_equal(res.tensors["O"], want) and np.array_equal(ref.tensors["O"], want))
    lengths = trace["kv_lengths"]
    c, cyc = res.csrs, max(res.cycles, 1)
    loads = [u.name for u in res.hw.units if u.kind == "RandomLoadUnit"
             and f"unit.{u.name}.stall_in" in c]
    # the regions' first PCU (the score Map of region 0 .. P-1): cycles at work
    pcus = [u.name for u in res.hw.units if u.kind == "PCU" and f"unit.{u.name}.busy" in c]
    # the host stream of the dispatch: every key's address, or one length per request (one
    # stream per region with a static dispatch; the busiest is shown)
    stem = "addr" if addressing == "host" else "length"
    readers = [u.name for u in res.hw.units if u.name.rstrip("0123456789") == stem
               and f"unit.{u.name}.busy" in c]
    return {"variance": variance, "mode": mode, "variant": variant, "ok": ok,
            "addressing": addressing, "block": program.block if mode == "coarse" else None,
            "cycles": res.cycles, "stall": stall, "B": len(lengths), "Lmax": lmax,
            "keys": sum(lengths),
            "std": trace["statistics"]["std"], "seconds": round(wall, 1),
            "build_seconds": round(res.timings["compile"] + res.timings["build"], 1),
            # where the cycles go: the host stream of KV addresses or lengths (a BeatReader),
            # how long the regions' key loads wait for addresses, the memory's lines
            "addr_busy": round(max(c[f"unit.{n}.busy"] for n in readers) / cyc, 3),
            "addr_stall_out": round(max(c[f"unit.{n}.stall_out"] for n in readers) / cyc, 3),
            "load_stall_in": round(sum(c[f"unit.{n}.stall_in"] for n in loads)
                                   / (len(loads) * cyc), 3),
            "memory_lines_per_cycle": round((c["bytes_read"] + c["bytes_written"])
                                            / res.hw.geometry.line_bytes / cyc, 3),
            "pcu_busy_max": round(max(c[f"unit.{n}.busy"] for n in pcus) / cyc, 3)}


def attn_balance(lengths, P, mode, block=None):
    """Keys of the busiest region under ``mode`` if every region took one cycle per key and
    nothing else limited it (a model, not a measurement): ``interleaved`` and ``coarse`` as
    :func:`examples.decode_attention.masks`; ``dynamic`` seeds request ``r < P`` to region
    ``r`` and then gives each request to the region that finishes its work first (the
    paper's dispatch, ties to the lowest region)."""
    load_ = [0] * P
    if mode == "dynamic":
        for b, n in enumerate(lengths):
            r = b if b < P else min(range(P), key=lambda i: (load_[i], i))
            load_[r] += n
        return max(load_)
    per = block or -(-len(lengths) // P)
    for b, n in enumerate(lengths):
        load_[b % P if mode == "interleaved" else b // per] += n
    return max(load_)


def _geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def attn_summarize(results, variant="default", batch=32, lmax=32, out=print, addressing="host"):
    """The decode-attention table of one machine variant, batch, maximum KV length and
    addressing: cycles per mode and class, where the cycles go, and the speedups of dynamic
    parallelization."""
    results = [r for r in results if r.get("variant", "default") == variant
               and r["B"] == batch and r.get("Lmax", 32) == lmax
               and r.get("addressing", "host") == addressing]
    rows, speed, diag, model = [], {"interleaved": [], "coarse": []}, [], []
    params, changes = ATTN_VARIANTS[variant]
    P = params["P"]
    even = -(-batch // P)
    paper_block = ATTN_PAPER_BLOCK if addressing == "region" else even
    extra = []      # the even coarse split beside the paper's 16 per region, when they differ
    for v in ATTN_CLASSES:
        mine = [r for r in results if r["variance"] == v and not r.get("stall")]
        got = {r["mode"]: r for r in mine
               if r["mode"] != "coarse" or (r.get("block") or even) == paper_block}
        if not all(m in got for m in ATTN_MODES):
            continue
        dyn = got["dynamic"]["cycles"]
        split = [r for r in mine if r["mode"] == "coarse" and (r.get("block") or even) == even]
        if paper_block != even and split:
            extra.append([v, split[0]["cycles"], f"{split[0]['cycles'] / dyn:.2f}"])
        si, sc = got["interleaved"]["cycles"] / dyn, got["coarse"]["cycles"] / dyn
        speed["interleaved"].append(si)
        speed["coarse"].append(sc)
        rows.append([v, got["dynamic"]["std"], got["dynamic"]["keys"],
                     "ok" if all(got[m]["ok"] for m in ATTN_MODES) else "FAIL",
                     dyn, got["interleaved"]["cycles"], got["coarse"]["cycles"],
                     f"{si:.2f}", f"{sc:.2f}"])
        for m in ATTN_MODES:
            r = got[m]
            diag.append([v, m, r["cycles"], f"{r['cycles'] / r['keys']:.2f}",
                         r.get("addr_busy", "-"), r.get("addr_stall_out", "-"),
                         r.get("load_stall_in", "-"), r.get("memory_lines_per_cycle", "-"),
                         r.get("pcu_busy_max", "-")])
        trace = TRACES / f"attn_{v}_b{batch}_l{lmax}.json"
        if trace.exists():
            lengths = json.loads(trace.read_text())["kv_lengths"]
            keys = {m: attn_balance(lengths, P, m, paper_block) for m in ATTN_MODES}
            model.append([v, keys["dynamic"], keys["interleaved"], keys["coarse"],
                          f"{keys['interleaved'] / keys['dynamic']:.2f}",
                          f"{keys['coarse'] / keys['dynamic']:.2f}"])
    if not rows:
        return None
    machine = ", ".join(f"{k}={v}" for k, v in changes.items()) or "the simulation preset"
    where = ("a host stream of every key's address" if addressing == "host" else
             "each region generates its request's addresses (AddrGen count=)")
    out(f"\ndecode attention, dynamic parallelization, machine '{variant}' ({P} regions, d="
        f"{params['d']}, {machine}, B={batch}, Lmax={lmax}, traces/attn_*_b{batch}_l{lmax}"
        f".json), KV addresses: {where}; cycles in Verilator")
    out(table(rows, ["KV variance", "std", "keys", "check", "dynamic", "interleaved",
                     f"coarse ({paper_block}/region)", "vs interleaved", "vs coarse"]))
    if extra:
        out(f"\nstatic coarse with an even split ({even} requests per region) beside the "
            f"paper's {paper_block}")
        out(table(extra, ["KV variance", f"coarse ({even}/region)", "vs it"]))
    out("\nwhere the cycles go (fractions of the run's cycles; addr: the host stream of KV "
        "addresses, or of the requests' lengths, a BeatReader; loads: the regions' key loads waiting for an address; memory: "
        "lines moved per cycle, at most 1; PCU: the busiest PCU)")
    out(table(diag, ["KV variance", "mode", "cycles", "cycles/key", "addr busy",
                     "addr stalled out", "loads stalled in", "memory", "PCU busy"]))
    if model:
        out(f"\nmodel, not measured: keys of the busiest region if each of the {P} regions "
            f"took one cycle per key and nothing else limited it (attn_balance)")
        out(table(model, ["KV variance", "dynamic", "interleaved", "coarse", "vs interleaved",
                          "vs coarse"]))
    geo = {k: _geomean(x) for k, x in speed.items() if x}
    geo["both"] = _geomean(speed["interleaved"] + speed["coarse"])
    for k in ("interleaved", "coarse", "both"):
        out(f"geomean speedup vs {k}: {geo[k]:.2f}x (paper: {ATTN_PAPER[k]})")
    return geo


def attn_main(args):
    """The ``--attention`` sweep on the machines ``--variant`` names (default: all) and the
    batches ``--batch`` names (default: 32), cached in ``docs/paper/attention_results.json``."""
    path = args.results.parent / "attention_results.json"
    results = json.loads(path.read_text()) if path.exists() else []
    variants = args.variant or list(ATTN_VARIANTS)
    sets = [(B, args.lmax or 32) for B in args.batch or [32]]

    addressing = args.addressing or "host"

    def key(r):
        variant = r.get("variant", "default")
        # a coarse run's block, None for the even split of ceil(B / P) requests per region
        block = r.get("block")
        if block == -(-r["B"] // ATTN_VARIANTS[variant][0]["P"]):
            block = None
        return (variant, r["B"], r.get("Lmax", 32), r["variance"], r["mode"],
                r.get("stall", False), r.get("addressing", "host"), block)
    for variant in [] if args.table else variants:
        for B, lmax in sets:
            # region addressing: the paper's coarse baseline (16 requests per region) and the
            # even split when it differs
            P = ATTN_VARIANTS[variant][0]["P"]
            even = -(-B // P)
            blocks = ([None] if addressing == "host" or even == ATTN_PAPER_BLOCK
                      else [ATTN_PAPER_BLOCK, None])
            runs = [(m, None) for m in ATTN_MODES if m != "coarse"] + [("coarse", b) for b in blocks]
            for mode, block in runs:
                for v in ATTN_CLASSES:
                    k = (variant, B, lmax, v, mode, False, addressing, block)
                    if not args.rerun and any(key(r) == k for r in results):
                        continue
                    print(f"[paper] decode attention ({variant}, B={B}, Lmax={lmax}, "
                          f"addressing={addressing}): {mode} {v}"
                          f"{'' if block is None else f' block={block}'} ...", flush=True)
                    r = attn_measure(v, mode, variant=variant, batch=B, lmax=lmax,
                                     addressing=addressing,
                                     block=block or (even if mode == "coarse" else None))
                    print(f"[paper]   {r}", flush=True)
                    results = [x for x in results if key(x) != k] + [r]
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(json.dumps(results, indent=1) + "\n")
    if args.table and not (args.batch or args.lmax):
        sets = sorted({(r["B"], r.get("Lmax", 32)) for r in results})
    kinds = ([addressing] if args.addressing or not args.table
             else sorted({r.get("addressing", "host") for r in results}))
    for kind in kinds:
        for variant in variants:
            for B, lmax in sets:
                attn_summarize(results, variant, B, lmax, addressing=kind)
    ok = all(r["ok"] for r in results)
    print("\nPASS (every run bit-exact)" if ok else "\nFAIL: a run differs from the reference")
    return 0 if ok else 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", choices=sorted(LAYERS))
    ap.add_argument("--table", action="store_true", help="no runs: the saved results only")
    ap.add_argument("--results", type=Path, default=OUT / "moe_results.json")
    ap.add_argument("--rerun", action="store_true", help="run again what the results hold")
    ap.add_argument("--config", action="append", metavar="TILING:ROWS",
                    help="only this configuration (e.g. dynamic:64); repeatable")
    ap.add_argument("--tm", action="store_true",
                    help="the configuration time-multiplexing sweep instead (issue 10 item 3)")
    ap.add_argument("--attention", action="store_true",
                    help="decode attention with dynamic parallelization (issue 10 item 4)")
    ap.add_argument("--variant", action="append", choices=sorted(ATTN_VARIANTS),
                    help="--attention: only this machine (default: all); repeatable")
    ap.add_argument("--batch", action="append", type=int, choices=(16, 32, 64),
                    help="--attention: this batch (traces/attn_*_b<B>_l<Lmax>.json; default 32); "
                         "repeatable")
    ap.add_argument("--addressing", choices=("host", "region"),
                    help="--attention: where the KV addresses come from (default host: a host "
                         "stream, one beat per key; region: each region generates them)")
    ap.add_argument("--lmax", type=int, choices=(32, 128),
                    help="--attention: the traces' maximum KV length (default 32)")
    args = ap.parse_args(argv)
    if args.tm:
        return tm_main(args)
    if args.attention:
        return attn_main(args)
    layers = args.only or list(LAYERS)
    results = json.loads(args.results.read_text()) if args.results.exists() else []
    if not args.table:
        for layer in layers:
            for tiling, rows in LAYERS[layer][2]:
                if args.config and f"{tiling}:{rows}" not in args.config:
                    continue
                if not args.rerun and any((x["layer"], x["tiling"], x["rows"]) == (layer, tiling, rows)
                                          for x in results):
                    continue
                print(f"[paper] {layer} {tiling} {rows} ...", flush=True)
                r = measure(layer, tiling, rows)
                print(f"[paper]   {r}", flush=True)
                results = [x for x in results if (x["layer"], x["tiling"], x["rows"])
                           != (layer, tiling, rows)] + [r]
                args.results.parent.mkdir(parents=True, exist_ok=True)
                args.results.write_text(json.dumps(results, indent=1) + "\n")
    ok = all(r["ok"] for r in results)
    for layer in layers:
        summarize(layer, results, LAYERS[layer][1])
        bw = next((r.get("bytes_per_cycle", 8) for r in results if r["layer"] == layer), None)
        png = plot(layer, results, args.results.parent / f"moe_{layer}_{bw}B_pareto.png")
        print(f"plot: {png}" if png else "plot: matplotlib is not installed (pip install matplotlib)")
    print("\nPASS (every run bit-exact)" if ok else "\nFAIL: a run differs from the reference")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
