"""Text reports printed by the command line."""

from .compiler.dims import fmt_shape
from .compiler.metrics import metrics

__all__ = ["table", "check_report", "metrics_report"]


def table(rows, header):
    """Rows of strings as an aligned text table."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(header)]
    line = "  ".join(str(h).ljust(w) for h, w in zip(header, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


def check_report(program):
    """Every edge's symbolic shape, the program's symbols and its symbolic metrics."""
    cons = program.consumers()
    rows = []
    for s in program.streams:
        readers = ", ".join(f"{n.name}.{n.input_names[i]}" for n, i in cons[s]) or "(unread)"
        rows.append([s.name, fmt_shape(s.shape), repr(s.dtype), readers])
    out = [f"program {program.name}: {len(program.nodes)} nodes, {len(rows)} streams", "",
           table(rows, ["stream", "shape", "element", "read by"]), ""]
    sym_rows = []
    for sym in program.symbols:
        info = program.symbols.info(sym)
        sym_rows.append([sym, info.kind, "-" if info.bound is None else info.bound, info.origin])
    if sym_rows:
        out += [table(sym_rows, ["symbol", "kind", "bound", "from"]), ""]
    out.append(metrics_report(metrics(program)))
    return "\n".join(out)


def metrics_report(m, measured=None):
    """Symbolic metrics, and beside them measured values when given (a dict with the same keys)."""
    rows = []
    for key, label in (("offchip_read", "off-chip bytes read"), ("offchip_write", "off-chip bytes written"),
                       ("onchip", "on-chip bytes (paper model)"), ("flops", "operations")):
        row = [label, getattr(m, key)]
        if measured is not None:
            row.append(measured.get(key, "-"))
        rows.append(row)
    header = ["metric", "symbolic"] + (["measured"] if measured is not None else [])
    return table(rows, header)
