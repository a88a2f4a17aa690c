"""Parameter sweeps: a grid of a program's parameters through the model or Verilator, on Dask.

``stepforge sweep PROGRAM -p t=4,8,16 -p B=16,32 [--level perf|rtl]`` runs every point of the
grid (the product of the ``-p`` lists) and writes a table (CSV and JSON) and a plot (SVG). The
points run on :mod:`dask.distributed`: a local cluster of ``workers`` processes by default, or
the scheduler at ``scheduler`` (``tcp://host:8786``) so that a user with several machines sweeps
on all of them; ``workers=0`` runs them one after another in this process.

The front end passes what this layer may not import: the program loader (``load``, a function
of a path) and, for ``level="rtl"``, the Verilator runner (``rtl``: ``run_rtl``). Both are
module-level functions, so Dask sends them to the workers by name.
"""

import csv
import itertools
import json
import time
from pathlib import Path

from .model import Deadlock, predict_program

__all__ = ["grid", "parse_grid", "evaluate", "sweep", "write_results"]


def parse_grid(items, base=None):
    """``["t=4,8,16", "B=16"]`` (and fixed ``base`` parameters) as a list of parameter dicts."""
    axes = {}
    for item in items or []:
        key, sep, values = item.partition("=")
        if not sep or not key or not values:
            raise ValueError(f"a sweep parameter must be KEY=V1,V2,..., not {item!r}")
        axes[key] = [_value(v) for v in values.split(",") if v != ""]
    return grid(axes, base)


def _value(text):
    try:
        return int(text)
    except ValueError:
        return text


def grid(axes, base=None):
    """Every combination of ``axes`` (``{name: [values]}``), each merged over ``base``."""
    names = list(axes)
    points = []
    for combo in itertools.product(*(axes[n] for n in names)):
        points.append({**(base or {}), **dict(zip(names, combo))})
    return points


def evaluate(path, params, *, level="perf", load=None, rtl=None, fpga=None, seed=0, trace=None,
             config=None, fifo_sizing=None):
    """One point: ``{**params, "cycles", "status", "seconds", ...}`` (runs on a worker).

    ``level="fpga"``: the model's cycles and ``fpga(program, name)``'s figures (a
    place-and-route build of the point, ``name`` naming it: ``t4-B16``)."""
    t0 = time.perf_counter()
    pf = load(path)
    program = pf.build(**params)
    data = pf.data(program, seed=seed, trace=trace)
    tensors, inputs = data.get("tensors", {}), data.get("inputs", {})
    row = dict(params)
    if level in ("perf", "fpga"):
        try:
            res, hw, _ = predict_program(program, tensors, inputs, config=config,
                                         fifo_sizing=fifo_sizing)
            row.update(cycles=res.cycles, status="deadlock" if hw.deadlocks else "done",
                       model_seconds=round(res.seconds, 4), fifo_bits=hw.fifo_sizing["bits"])
        except Deadlock:
            row.update(cycles=None, status="deadlock")
        if level == "fpga":
            figures = fpga(program, "-".join(f"{k}{v}" for k, v in params.items()) or "default")
            row.update(figures)
            if not figures.get("fits", True):
                row["status"] = "does not fit"
    elif level == "rtl":
        res = rtl(program, tensors, inputs, config=config)
        row.update(cycles=res.cycles, status=res.status,
                   simulate_seconds=round(res.timings.get("simulate", 0.0), 3),
                   build_seconds=round(res.timings.get("build", 0.0), 2))
    else:
        raise ValueError(f"level must be 'perf', 'rtl' or 'fpga', not {level!r}")
    row["seconds"] = round(time.perf_counter() - t0, 3)
    return row


def sweep(path, points, *, level="perf", load, rtl=None, fpga=None, workers=2, scheduler=None,
          seed=0, trace=None, config=None, fifo_sizing=None, progress=print):
    """Run ``points`` (parameter dicts) of the program at ``path``; the rows in point order."""
    if level == "fpga" and fpga is None:
        raise ValueError("sweep: level 'fpga' needs the fpga function (the front end's)")
    kw = dict(level=level, load=load, rtl=rtl, fpga=fpga, seed=seed, trace=trace, config=config,
              fifo_sizing=fifo_sizing)
    path = str(Path(path).resolve())
    rows = [None] * len(points)
    t0 = time.perf_counter()

    def report(k, row, done):
        progress(f"[{done}/{len(points)}] {_fmt(points[k])}: {row.get('status')} "
                 f"{row.get('cycles')} cycles ({time.perf_counter() - t0:.1f} s)")

    if not scheduler and not workers:
        for k, p in enumerate(points):
            rows[k] = evaluate(path, p, **kw)
            report(k, rows[k], k + 1)
        return rows
    # deferred: Dask and its scheduler take a second or two to import, and only a sweep uses them
    from dask.distributed import Client, LocalCluster, as_completed
    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    try:
        futures = {client.submit(evaluate, path, p, pure=False, **kw): k
                   for k, p in enumerate(points)}
        for done, fut in enumerate(as_completed(futures), 1):
            k = futures[fut]
            rows[k] = fut.result()
            report(k, rows[k], done)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return rows


def _fmt(params):
    return " ".join(f"{k}={v}" for k, v in params.items())


def write_results(rows, prefix):
    """``PREFIX.csv``, ``PREFIX.json`` and ``PREFIX.svg`` (cycles per point); their paths."""
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    keys = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(prefix.with_suffix(".csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    prefix.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    prefix.with_suffix(".svg").write_text(_svg(rows))
    return [prefix.with_suffix(s) for s in (".csv", ".json", ".svg")]


def _svg(rows):
    """A bar chart of cycles per point, as plain SVG (no plotting library needed)."""
    vals = [r.get("cycles") or 0 for r in rows]
    top = max(vals + [1])
    bar, gap, height, left = 22, 6, 240, 60
    width = left + len(rows) * (bar + gap) + 20
    fixed = {k for k in rows[0]} if rows else set()
    varying = [k for k in fixed if len({str(r.get(k)) for r in rows}) > 1
               and k not in ("cycles", "seconds", "model_seconds", "simulate_seconds",
                             "build_seconds", "status", "fifo_bits")]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 90}" '
           f'font-family="sans-serif" font-size="10">',
           f'<text x="{left}" y="14">cycles per point (max {top})</text>']
    for k, (r, v) in enumerate(zip(rows, vals)):
        h = height * v / top
        x = left + k * (bar + gap)
        out.append(f'<rect x="{x}" y="{20 + height - h:.1f}" width="{bar}" height="{h:.1f}" '
                   f'fill="#4878a8"><title>{_fmt({n: r.get(n) for n in varying})}: {v}</title></rect>')
        label = ",".join(str(r.get(n)) for n in varying)
        out.append(f'<text x="{x + bar / 2}" y="{height + 34}" text-anchor="end" '
                   f'transform="rotate(-60 {x + bar / 2} {height + 34})">{label}</text>')
    out.append(f'<text x="{left}" y="{height + 86}">points: {", ".join(varying)}</text>')
    out.append("</svg>")
    return "\n".join(out)
