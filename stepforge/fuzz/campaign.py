"""Many random programs through the interpreter and Verilator: counts, timings, reproducers.

:func:`campaign` generates the programs of seeds ``seed .. seed + count - 1`` and checks each
(:func:`~stepforge.fuzz.check.check`) without stalls and, with ``stall``, again under random
stalls: the two runs share one Verilator build (a build is keyed by the Verilog, which the data
and the stall switch do not change), as do the ``data_seeds`` runs on different host data. A
failure is shrunk (:func:`~stepforge.fuzz.shrink.shrink`) and written as a reproducer program
file, ``<out_dir>/fuzz_<seed>_<kind>.py``, that ``stepforge run`` (and :func:`load_reproducer`)
accepts. Every run is logged in ``<out_dir>/runs.jsonl`` (seed, outcome, cycles, seconds).
"""

import contextlib
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..loader import load
from . import generate
from .check import KINDS, Outcome, check, interpret
from .generator import GeneratorBug
from .program import FuzzProgram, Line
from .shrink import shrink

__all__ = ["Summary", "campaign", "write_reproducer", "load_reproducer", "quiet"]


@dataclass
class Summary:
    """What a campaign found.

    Attributes
    ----------
    programs : int
    runs : Counter
        Runs per outcome kind (a program runs once, or twice with stalls).
    failures : list of (int, Outcome, Path or None)
        Seed, outcome and reproducer file of every failing run.
    seconds : float
    operators : int
        Operators over all programs.
    """
    programs: int = 0
    runs: Counter = field(default_factory=Counter)
    failures: list = field(default_factory=list)
    seconds: float = 0.0
    operators: int = 0

    def line(self):
        counts = ", ".join(f"{k} {self.runs[k]}" for k in KINDS if self.runs[k])
        return f"{self.programs} programs, {sum(self.runs.values())} runs: {counts or 'none'}"


@contextlib.contextmanager
def quiet(log):
    """Send this process's file descriptors 1 and 2 to ``log`` (the simulator writes there)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "a") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def write_reproducer(fp, outcome, out_dir, *, data_seed, stall, original=None):
    """Write ``fp`` as ``<out_dir>/fuzz_<seed>_<kind>.py``; return the path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"outcome": outcome.kind, "signature": outcome.signature, "data_seed": data_seed,
            "stall": stall}
    if original is not None:
        meta["operators_before_shrinking"] = original.operators
    detail = "\n".join("    " + s for s in outcome.detail.strip().splitlines()[:40])
    doc = (f"A random STeP program (stepforge fuzz, seed {fp.seed}) that failed: "
           f"{outcome.kind}.\n\n"
           f"Run: stepforge run {out.name}/fuzz_{fp.seed}_{outcome.kind}.py"
           f"{' --stall' if stall else ''}\n\nWhat happened:\n\n{detail}\n")
    path = out / f"fuzz_{fp.seed}_{outcome.kind}.py"
    path.write_text(replace(fp, meta=meta).source(doc=doc.replace('"""', "'''")))
    return path


def load_reproducer(path):
    """``(FuzzProgram, FUZZ record, ProgramFile)`` of a reproducer file: the lines of its
    ``program()`` again, to check or shrink it further with the record's data seed and stall."""
    pf = load(path)
    record = dict(getattr(pf.module, "FUZZ", {}))
    body = Path(path).read_text().split("def program():\n", 1)[1].split("\n\n", 1)[0]
    stmts = [s.strip() for s in body.splitlines() if s.strip()]
    outputs = {m.group(1) for s in stmts for m in [re.match(r"p\.output\((\w+),", s)] if m}
    lines, defined = [], set()
    for s in stmts:
        if s.startswith(("p = Program(", "return p", "p.output(")):
            continue
        lhs, _, rhs = s.partition(" = ") if re.match(r"^[\w, ]+ = ", s) else ("", "", s)
        names = [n.strip() for n in lhs.split(",") if n.strip()]
        uses = tuple(dict.fromkeys(n for n in re.findall(r"\b\w+\b", rhs) if n in defined))
        kind = ("tensor" if rhs.startswith("p.tensor(") else "symbol" if rhs.startswith("p.symbol(")
                else "buffer" if rhs.startswith("Bufferize(") else "stream")
        lines.append(Line(s, tuple((n, kind) for n in names), uses))
        defined.update(names)
    used = {u for line in lines for u in line.uses}
    lines = [Line(line.text, tuple((n, "drained" if k == "stream" and n not in used | outputs
                                    else k) for n, k in line.defines), line.uses)
             for line in lines]
    fp = FuzzProgram(pf.module.program().name, record.get("seed", 0), lines,
                     dict(getattr(pf.module, "HINTS", {})), record)
    return fp, record, pf


def campaign(count, seed=0, *, stall=False, rtl=True, data_seeds=1, out_dir="fuzz-failures",
             shrink_budget=30, watchdog=10_000, progress=None, log=None):
    """Run ``count`` random programs; see the module docstring.

    Parameters
    ----------
    count, seed : int
        The seeds ``seed .. seed + count - 1``.
    stall : bool
        Run every program again under random stalls (the same build).
    rtl : bool
        Verilator runs (else the interpreter only).
    data_seeds : int
        Host data sets per program.
    out_dir : path-like
        Where reproducers go.
    shrink_budget : int
        Checks spent shrinking each failure (0: write it unshrunk).
    progress : callable, optional
        ``progress(summary, index, seed, outcome)`` after every run.
    log : path-like, optional
        Where the simulator's own output goes (default: a temporary file).
    """
    log = log or Path(tempfile.gettempdir()) / f"stepforge-fuzz-{os.getpid()}.log"
    summary = Summary()
    t0 = time.perf_counter()
    for index in range(count):
        s = seed + index
        summary.programs += 1
        try:
            fp = generate(s)
        except GeneratorBug as e:
            out = Outcome("rejected", str(e), "rejected")
            summary.runs[out.kind] += 1
            summary.failures.append((s, out, None))
            if progress:
                progress(summary, index, s, out)
            continue
        summary.operators += fp.operators
        modes = [(d, False) for d in range(data_seeds)]
        if stall and rtl:
            modes += [(d, True) for d in range(data_seeds)]
        design = {}     # the program's Verilog, converted once for all its runs
        for data_seed, stalled in modes:
            t1 = time.perf_counter()
            ref = interpret(fp, data_seed)
            t1 = time.perf_counter() - t1
            with quiet(log):
                out = check(fp, data_seed=data_seed, stall=stalled, rtl=rtl, watchdog=watchdog,
                            ref=ref, design=design)
            out.seconds["interpret"] = t1
            summary.runs[out.kind] += 1
            _record(out_dir, {"seed": s, "data_seed": data_seed, "stall": stalled,
                              "operators": fp.operators, "kind": out.kind, "cycles": out.cycles,
                              "seconds": {k: round(v, 2) for k, v in out.seconds.items()}})
            path = None
            if out.failed:
                path = _report(fp, out, data_seed, stalled, rtl, watchdog, out_dir,
                               shrink_budget, log)
                summary.failures.append((s, out, path))
            summary.seconds = time.perf_counter() - t0
            if progress:
                progress(summary, index, s, out)
            if out.failed and out.kind in ("rejected", "invalid", "interp-crash"):
                break           # the program itself is wrong: its other runs say nothing new
    summary.seconds = time.perf_counter() - t0
    return summary


def _record(out_dir, entry):
    """Append one run to ``<out_dir>/runs.jsonl`` (seed, outcome, cycles, seconds per phase)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "runs.jsonl", "a") as f:
        f.write(json.dumps(entry) + "\n")


def _report(fp, out, data_seed, stalled, rtl, watchdog, out_dir, budget, log):
    def recheck(cand):
        with quiet(log):
            return check(cand, data_seed=data_seed, stall=stalled, rtl=rtl, watchdog=watchdog)
    small = fp
    if budget:
        small, _ = shrink(fp, out, recheck, budget=budget)
    return write_reproducer(small, out, out_dir, data_seed=data_seed, stall=stalled, original=fp)
