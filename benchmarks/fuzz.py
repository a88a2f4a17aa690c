"""Random whole programs through the interpreter and Verilator: counts by outcome, and where the
time goes (issue 12).

Runs ``stepforge fuzz`` (:func:`stepforge.fuzz.campaign.campaign`) on the seeds
``--seed .. --seed + --count - 1`` without and (``--stall``) with random stalls, then prints
the runs per outcome, the operators drawn per family, and the median and total seconds of each
phase per program (interpreter, compile to Verilog, Verilator build, simulation) from the
campaign's ``runs.jsonl``, and the Verilator builds (runs whose build phase took over
:data:`BUILT` seconds). ``--summary DIR [DIR ...]`` prints the same from earlier campaigns'
folders (e.g. ones run side by side in the background with ``nice -n 10 stepforge fuzz ... -o
DIR``) without running.

Run: ``python benchmarks/fuzz.py --count 100 --seed 10000 --stall [-o DIR]``.
"""

import argparse
import json
import re
import statistics
import sys
from collections import Counter
from pathlib import Path

from stepforge.fuzz import generate
from stepforge.fuzz.check import KINDS
from stepforge.fuzz.command import add_arguments, run_command

PHASES = ("interpret", "compile", "build", "simulate")
#: A run's build phase longer than this many seconds built a simulator (taking one from the
#: cache hashes the Verilog: hundredths of a second).
BUILT = 1.0


def families(seeds):
    """Operator calls per operator class over the programs of ``seeds``."""
    ops = Counter()
    for s in seeds:
        for line in generate(s).lines:
            ops.update(re.findall(r"\b([A-Z][A-Za-z]+)\(", line.text))
    for name in ("Tile", "Select", "Index", "Bool", "Program"):
        ops.pop(name, None)
    return ops


def summarize(*folders):
    """Print a campaign's figures from the ``runs.jsonl`` of one folder or several (campaigns
    over other seeds, e.g. run side by side; a run logged twice counts once)."""
    runs = {}
    for folder in folders:
        for line in (Path(folder) / "runs.jsonl").read_text().splitlines():
            r = json.loads(line)
            runs.setdefault((r["seed"], r["data_seed"], r["stall"]), r)
    runs = list(runs.values())
    seeds = sorted({r["seed"] for r in runs})
    kinds = Counter(r["kind"] for r in runs)
    stalls = Counter((r["stall"], r["kind"]) for r in runs)
    print(f"{len(seeds)} programs (seeds {seeds[0]}..{seeds[-1]}), {len(runs)} runs, "
          f"{sum(r['operators'] for r in runs if not r['stall'] and r['data_seed'] == 0)} operators")
    print("outcomes: " + ", ".join(f"{k} {kinds[k]}" for k in KINDS if kinds[k]))
    for stall in (False, True):
        n = sum(v for (s, _), v in stalls.items() if s == stall)
        if n:
            print(f"  {'with' if stall else 'without'} stalls: " + ", ".join(
                f"{k} {stalls[(stall, k)]}" for k in KINDS if stalls[(stall, k)]))
    print("\nseconds per run (median / total):")
    for phase in PHASES:
        values = [r["seconds"].get(phase, 0.0) for r in runs]
        print(f"  {phase:<10} {statistics.median(values):8.2f} {sum(values):10.0f}")
    total = sum(sum(r["seconds"].get(p, 0.0) for p in PHASES) for r in runs)
    print(f"  {'all':<10} {'':8} {total:10.0f}  ({total / len(seeds):.0f} s per program)")
    built = sum(1 for r in runs if r["seconds"].get("build", 0.0) > BUILT)
    print(f"\nVerilator builds: {built} (runs whose build took over {BUILT:.0f} s; the other "
          f"{len(runs) - built} took theirs from the cache)")
    cycles = [r["cycles"] for r in runs if r["cycles"]]
    if cycles:
        print(f"\ncycles per run: median {statistics.median(cycles):.0f}, max {max(cycles)}")
    ops = families(seeds)
    print("\noperators drawn: " + ", ".join(f"{k} {v}" for k, v in ops.most_common()))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--summary", metavar="DIR", nargs="+",
                        help="summarize earlier campaigns' folders (one or more)")
    args = parser.parse_args(argv)
    if args.summary:
        summarize(*args.summary)
        return 0
    status = run_command(args)
    print()
    summarize(args.output)
    return status


if __name__ == "__main__":
    sys.exit(main())
