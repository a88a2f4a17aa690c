"""Running a program file end to end at a chosen level and reporting the result."""

import time

import numpy as np

from .compiler.metrics import bind, metrics
from .report import metrics_report, table

__all__ = ["compare", "run_reference"]


def compare(name, got, want):
    """``(ok, detail)``: integers must match bit for bit, floats within the tolerance of their dtype."""
    if isinstance(want, np.ndarray) or isinstance(got, np.ndarray):
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape:
            return False, f"shape {list(got.shape)} != expected {list(want.shape)}"
        if np.issubdtype(want.dtype, np.integer) and np.issubdtype(got.dtype, np.integer):
            bad = int(np.count_nonzero(got.astype(np.int64) != want.astype(np.int64)))
            return bad == 0, "bit-exact" if bad == 0 else f"{bad} of {got.size} elements differ"
        g, w = got.astype(np.float64), want.astype(np.float64)
        err = float(np.max(np.abs(g - w))) if g.size else 0.0
        scale = float(np.max(np.abs(w))) if w.size else 0.0
        tol = 1e-2 if "bfloat16" in str(got.dtype) else 1e-4
        ok = err <= tol * max(1.0, scale)
        return ok, f"max abs error {err:.3g} (tolerance {tol:g} x {max(1.0, scale):.3g})"
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return False, f"length {len(got) if isinstance(got, (list, tuple)) else '?'} != expected {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            ok, detail = compare(name, g, w)
            if not ok:
                return False, f"[{i}] {detail}"
        return True, "exact"
    return (got == want), ("exact" if got == want else f"{got!r} != expected {want!r}")


def run_reference(pf, *, params=None, seed=0, out=print):
    """Run ``pf`` on the reference interpreter, check it against its NumPy reference, report."""
    from .sim.interpreter import run

    program = pf.build(**(params or {}))
    if not pf.has_data:
        raise SystemExit(f"{pf.path}: defines no data() function, nothing to run")
    data = pf.data(program, seed=seed)
    tensors, inputs = data.get("tensors", {}), data.get("inputs", {})
    t0 = time.perf_counter()
    result = run(program, tensors=tensors, inputs=inputs)
    elapsed = time.perf_counter() - t0
    expected = pf.reference(program, tensors, inputs) or {}
    rows, ok = [], True
    for name, want in expected.items():
        got = result.tensors[name] if name in result.tensors else result.outputs.get(name)
        good, detail = compare(name, got, want)
        ok &= bool(good)
        rows.append([name, "ok" if good else "MISMATCH", detail])
    out(f"{program.name}: reference interpreter, {len(program.nodes)} nodes, {elapsed:.3f} s")
    if rows:
        out(table(rows, ["result", "check", "detail"]))
    m = metrics(program)
    values = bind(program, result.trace)
    bound = m.subs(values)
    measured = {"offchip_read": sum(result.offchip_read.values()),
                "offchip_write": sum(result.offchip_written.values())}
    out("")
    out(metrics_report(bound, measured))
    if measured["offchip_read"] != bound.offchip_read or measured["offchip_write"] != bound.offchip_write:
        out("off-chip traffic: measured differs from the symbolic model")
        ok = False
    out("")
    out("PASS" if ok else "FAIL")
    return ok
