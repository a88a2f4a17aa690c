"""Running a program file end to end at a chosen level and reporting the result."""

import time

import numpy as np

from .boards.host import LinkError
from .boards.host.run import SIM, board_run
from .compiler.metrics import bind, metrics
from .compiler.types import Tile
from .contract.tokens import is_stop, to_beats
from .contract.values import values_equal
from .report import metrics_report, table
from .sim.ref.interpreter import run
from .sim.rtl import deadlock_report, error_report, run_rtl

__all__ = ["compare", "run_reference", "run_hardware", "run_board", "check_and_report"]


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


def _tile_shapes(program):
    shapes = {(s.dtype.rows, s.dtype.cols) for s in program.streams if isinstance(s.dtype, Tile)}
    return [f"{r}x{c}" for r, c in sorted(shapes, key=str)]


def run_reference(pf, *, params=None, seed=0, trace=None, out=print):
    """Run ``pf`` on the reference interpreter, check it against its NumPy reference, report."""

    program = pf.build(**(params or {}))
    if not pf.has_data:
        raise SystemExit(f"{pf.path}: defines no data() function, nothing to run")
    data = pf.data(program, seed=seed, trace=trace)
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


def _tokens_equal(a, b):
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if is_stop(x) or is_stop(y):
            if x != y:
                return False
        elif not values_equal(x, y):
            return False
    return True


def roofline(hw, ref_result):
    """Lower bounds on the cycles of a run: ``{"compute", "offchip", "onchip"}`` and their max.

    * off-chip: bytes moved / the memory's peak bytes per cycle, or the memory lines the tiles
      take if that is more (the memory grants one line per cycle among all clients, and a narrow
      tile fills only part of a line);
    * compute: the busiest compute unit's beats x its initiation interval;
    * on-chip: the busiest stream: one beat per cycle per port (PMU replays, routers, shapes).
    """
    g = hw.geometry
    moved = sum(ref_result.offchip_read.values()) + sum(ref_result.offchip_written.values())
    offchip = -(-moved // g.line_bytes)
    beats = {s: len(to_beats(toks)) for s, toks in ref_result.edges.items()}
    lines = 0
    for u in hw.units:
        placement = getattr(u.component, "placement", None)
        if placement is None:
            continue
        data = u.node.outputs[0] if u.node.outputs and u.node.op.endswith("Load") else u.node.inputs[-1]
        tiles = sum(1 for t in ref_result.edges.get(data, []) if type(t).__name__ != "Stop")
        lines += tiles * len(placement.tile_lines)
    offchip = max(offchip, lines)
    compute = onchip = 0
    for u in hw.units:
        ins = [beats.get(s, 0) for s in u.node.inputs]
        outs = [beats.get(s, 0) for s in u.node.outputs]
        busiest = max(ins + outs + [0])
        ii = getattr(u.component, "ii", None)
        if ii is not None:
            compute = max(compute, max(ins + [0]) * ii)
        else:
            onchip = max(onchip, busiest)
    return {"compute": compute, "offchip": offchip, "onchip": onchip,
            "bound": max(compute, offchip, onchip)}


def run_hardware(pf, *, params=None, seed=0, trace=None, config=None, stall=False,
                 watchdog=10_000, waves=False, out=print):
    """Compile ``pf`` to Verilog, run it in Verilator, check it bit for bit, report."""

    program = pf.build(**(params or {}))
    data = pf.data(program, seed=seed, trace=trace)
    tensors, inputs = data.get("tensors", {}), data.get("inputs", {})
    res = run_rtl(program, tensors, inputs, config=config, stall=stall, watchdog=watchdog,
                  waves=waves, progress=lambda msg: out(f"[stepforge] {msg}"))
    out(f"{program.name}: {res.status} after {res.csrs['cycles']} cycles "
        f"(compile {res.timings['compile']:.2f} s, build {res.timings['build']:.1f} s, "
        f"simulate {res.timings['simulate']:.2f} s)")
    speed = None
    if res.timings.get("run"):
        speed = (f"Verilator: {res.csrs['cycles'] / res.timings['run']:,.0f} cycles/s over the "
                 f"run ({res.timings['run']:.2f} s, preload and read-back excluded)")
    return check_and_report(program, tensors, inputs, res, speed=speed, out=out)


def check_and_report(program, tensors, inputs, res, *, speed=None, out=print):
    """Check a hardware run ``res`` (an ``RTLResult`` or a board's ``BoardResult``) against the
    interpreter and print the report of ``stepforge run``; ``speed`` is a line printed after
    the roofline. Counters the design does not have (a board build's per-unit and per-FIFO
    ones) are left out of the report."""
    if res.status == "deadlock":
        out(deadlock_report(res))
        return False
    if res.status == "error":
        out(error_report(res))
        return False
    if res.status != "done":
        out(f"the run did not finish ({res.status})")
        return False
    # the interpreter runs the lowered program (hierarchical tiling, broadcasts and tie-offs:
    # same meaning), so its edges are the hardware's FIFOs
    ok = True
    rows = []
    if res.hw.tiling.startswith("not applied"):
        out(f"hierarchical tiling {res.hw.tiling}; the large tiles move whole, as wide beats")
    if res.hw.program is not program:
        step = run(program, tensors=tensors, inputs=inputs)
        out(f"hierarchical tiling: STeP tiles {', '.join(_tile_shapes(program))} run as "
            f"{', '.join(_tile_shapes(res.hw.program))} hardware tiles")
        for name, t in program.tensors.items():
            if t.role in ("output", "inout"):
                good, detail = compare(name, res.tensors[name], step.tensors[name])
                ok &= bool(good)
                rows.append([name, "ok" if good else "MISMATCH",
                             f"hardware vs the STeP program (untiled): {detail}"])
        program = res.hw.program
    ref = run(program, tensors=tensors, inputs=inputs, keep_edges=True)
    for name, t in program.tensors.items():
        if t.role in ("output", "inout"):
            good, detail = compare(name, res.tensors[name], ref.tensors[name])
            ok &= bool(good)
            rows.append([name, "ok" if good else "MISMATCH", f"hardware vs interpreter: {detail}"])
    for node in program.outputs:
        good = _tokens_equal(res.outputs.get(node.name, []), ref.edges[node.inputs[0]])
        ok &= good
        rows.append([node.name, "ok" if good else "MISMATCH", "stream tokens, hardware vs interpreter"])
    out(table(rows, ["result", "check", "detail"]))

    m = metrics(program).subs(bind(program, ref.trace))
    measured = {"offchip_read": res.tensor_bytes_read, "offchip_write": res.tensor_bytes_written}
    out("")
    out(metrics_report(m, measured))
    if measured["offchip_read"] != m.offchip_read or measured["offchip_write"] != m.offchip_write:
        out("off-chip traffic: the hardware's counters differ from the symbolic model")
        ok = False
    bound = roofline(res.hw, ref)
    cycles = res.csrs["cycles"]
    out("")
    out(f"cycles {cycles}; roofline bound {bound['bound']} (compute {bound['compute']}, off-chip "
        f"{bound['offchip']}, on-chip {bound['onchip']}); efficiency "
        f"{bound['bound'] / cycles if cycles else 0:.2f}")
    if speed:
        out(speed)
    unit_rows = []
    for u in res.hw.units:
        if u.shared or f"unit.{u.name}.busy" not in res.csrs:
            continue
        c = res.csrs
        busy, sin, sout = (c[f"unit.{u.name}.{k}"] for k in ("busy", "stall_in", "stall_out"))
        unit_rows.append([u.name, u.kind, f"{busy / cycles:.2f}" if cycles else "-",
                          f"{sin / cycles:.2f}" if cycles else "-", f"{sout / cycles:.2f}" if cycles else "-"])
    if unit_rows:
        out("")
        out(table(unit_rows, ["unit", "hardware", "busy", "stalled in", "stalled out"]))
    fifo_rows = [[e.name, e.depth, e.storage, res.csrs[f"fifo.{e.name}.high_water"]]
                 for e in res.hw.edges if f"fifo.{e.name}.high_water" in res.csrs]
    if fifo_rows:
        out("")
        out(table(fifo_rows, ["fifo", "depth", "storage", "high water"]))
    out("")
    out("PASS" if ok else "FAIL")
    return ok


def run_board(pf, *, board, port, params=None, seed=0, trace=None, timeout=60.0, out=print,
              tile=None):
    """Run ``pf`` on ``board`` over the UART host link and check it bit for bit as
    :func:`run_hardware` does, with the board's clock and the wall time. ``port`` is a serial
    device, or ``"sim"``: the board's own design (bridge included) in Verilator behind a
    simulated serial line. ``tile`` is the hardware tile of the build, if not the preset's."""
    program = pf.build(**(params or {}))
    data = pf.data(program, seed=seed, trace=trace)
    tensors, inputs = data.get("tensors", {}), data.get("inputs", {})
    try:
        spec, res = board_run(program, tensors, inputs, board=board, port=port, timeout=timeout,
                              progress=lambda msg: out(f"[stepforge] {msg}"), tile=tile)
    except (LinkError, OSError) as exc:
        out(f"error: {exc}")
        return False
    t, cycles, clock = res.timings, res.csrs["cycles"], spec.clock_hz
    where = "simulated in Verilator" if port == SIM else port
    built = (f"; compile {t['compile']:.2f} s, Verilator build {t['build']:.1f} s"
             if "build" in t else "")
    out(f"{program.name}: {res.status} after {cycles} cycles on {spec.name} ({where}): "
        f"{cycles / clock * 1e3:.3f} ms at the board's {clock / 1e6:g} MHz; wall time "
        f"{t['wall']:.2f} s (load {t['load']:.2f} s, run {t['run']:.2f} s, read back "
        f"{t['read']:.2f} s){built}")
    st = res.stats
    speed = (f"host link: {res.info.baud} baud, {st.frames} frames ({st.sent} bytes out, "
             f"{st.received} in), {st.retries} retried")
    return check_and_report(program, tensors, inputs, res, speed=speed, out=out)
