"""``stepforge run --level perf``: the model's prediction as a report shaped like ``stepforge run``'s.

The program file object (``pf``: ``build``, ``data``, ``name``) comes from the front end's loader;
this module only needs what it provides.
"""

import time

from .model import Deadlock, predict_program

__all__ = ["run_perf", "text_table"]


def text_table(rows, header):
    """Rows as an aligned text table (the layout of ``stepforge run``'s tables)."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max([len(str(h))] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    out = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths)),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


def run_perf(pf, *, params=None, seed=0, trace=None, config=None, fifo_sizing=None,
             throughput=1.0, out=print):
    """Predict ``pf``'s Verilated run with the performance model and report it; whether the
    model found a schedule (no deadlock, static or dynamic)."""
    program = pf.build(**(params or {}))
    data = pf.data(program, seed=seed, trace=trace)
    tensors, inputs = data.get("tensors", {}), data.get("inputs", {})
    t0 = time.perf_counter()
    try:
        res, hw, ref = predict_program(program, tensors, inputs, config=config,
                                       fifo_sizing=fifo_sizing, throughput=throughput)
    except Deadlock as e:
        out(f"{program.name}: the model's schedule does not settle: {e}")
        for name, depth, beats in e.edges:
            out(f"  {name}: depth {depth}, {beats} beats")
        return False
    total = time.perf_counter() - t0
    cycles = res.cycles
    out(f"{program.name}: perf model, {cycles} cycles predicted (model {res.seconds * 1e3:.1f} ms, "
        f"{res.rounds} rounds; lowering{' and interpreter' if ref is not None else ''} "
        f"{total - res.seconds:.2f} s)")
    sizing = hw.fifo_sizing
    out(f"FIFO sizing: {sizing.get('method')}, {sizing.get('bits')} bits in {len(hw.edges)} FIFOs")
    for finding in hw.deadlocks:
        out(finding)
    rows = [[name, u["kind"], f"{u['busy']:.2f}", f"{u['stall_in']:.2f}", f"{u['stall_out']:.2f}"]
            for name, u in res.units.items()]
    out("")
    out(text_table(rows, ["unit", "hardware", "busy", "stalled in", "stalled out"]))
    rows = [[name, f["depth"], f["high_water"]] for name, f in res.fifos.items()]
    out("")
    out(text_table(rows, ["fifo", "depth", "high water"]))
    ok = not hw.deadlocks
    out("")
    out("PASS" if ok else "FAIL")
    return ok
