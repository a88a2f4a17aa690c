"""Shrinking a failing program: drop operators, bypass them, shorten its host streams.

:func:`shrink` tries smaller variants of a program, each checked again, and keeps one whenever it
fails the same way (same :attr:`~stepforge.fuzz.check.Outcome.signature`: the kind of failure,
and the exception type or the unit kind and error code). Variants, largest cut first:

1. a whole generator step removed (with every line that reads what it made);
2. one line removed (with what reads it);
3. one operator bypassed: its output replaced by one of its inputs in the lines that read it
   (a variant the language rejects is simply not kept);
4. every host stream capped at one element per symbolic dimension, then at none.

Every Verilator check of a variant costs a build, so the number of checks is bounded.
"""

from dataclasses import replace

__all__ = ["shrink", "variants"]


def variants(fp):
    """Smaller programs than ``fp``, largest cut first (a generator: computed lazily)."""
    groups = sorted({line.group for line in fp.lines}, reverse=True)
    for grp in groups:
        drop = {i for i, line in enumerate(fp.lines) if line.group == grp}
        yield fp.without(drop)
    for i in reversed(range(len(fp.lines))):
        if fp.lines[i].uses:
            yield fp.without({i})
    streams = {v for line in fp.lines for v, kind in line.defines if kind == "stream"}
    for i in reversed(range(len(fp.lines))):
        line = fp.lines[i]
        outs = [v for v, kind in line.defines if kind == "stream"]
        if len(outs) != 1:
            continue
        for u in line.uses:
            if u in streams:
                yield fp.substituted(i, outs[0], u)
    for cap in (1, 0):
        hints = {}
        for line in fp.lines:
            if ".input(" in line.text:
                name = line.defines[0][0]
                hints[name] = dict(fp.hints.get(name, {}), max_len=cap)
        if hints and any(fp.hints.get(k, {}).get("max_len", 99) > cap for k in hints):
            yield replace(fp, hints={**fp.hints, **hints})


def shrink(fp, outcome, recheck, *, budget=40, say=None):
    """A smaller program that still fails like ``outcome``.

    Parameters
    ----------
    fp : FuzzProgram
    outcome : Outcome
        The failure to keep.
    recheck : callable
        ``recheck(program) -> Outcome`` (the same data seed and stall setting as the failure).
    budget : int
        At most this many checks.
    say : callable, optional
        Called with a line of progress.

    Returns
    -------
    (FuzzProgram, int)
        The smallest failing program found and the number of checks made.
    """
    say = say or (lambda msg: None)
    current, checks = fp, 0
    seen = {fp.source()}
    progress = True
    while progress and checks < budget:
        progress = False
        for cand in variants(current):
            text = cand.source()
            if text in seen or not cand.sinks() and not _has_store(cand):
                continue
            seen.add(text)
            if checks >= budget:
                break
            checks += 1
            got = recheck(cand)
            if got.signature == outcome.signature:
                say(f"shrunk to {cand.operators} operators ({checks} checks)")
                current, progress = cand, True
                break
    return current, checks


def _has_store(fp):
    return any("Store(" in line.text for line in fp.lines)
