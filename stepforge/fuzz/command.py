"""``stepforge fuzz``: random programs through the interpreter and Verilator, counted by outcome.

``stepforge fuzz --count N --seed S [--stall]`` checks the programs of seeds ``S .. S + N - 1``
(:func:`~stepforge.fuzz.campaign.campaign`), prints a progress line per program and, at the end,
the runs per outcome and every failure with its reproducer file. Exit status 0 when every run
passed, 1 otherwise.
"""

import sys

__all__ = ["add_arguments", "run_command"]


def add_arguments(parser):
    """The options of ``stepforge fuzz`` on ``parser``."""
    parser.add_argument("--count", type=int, default=10, metavar="N",
                        help="number of random programs (default 10)")
    parser.add_argument("--seed", type=int, default=0, metavar="S",
                        help="seed of the first program; program i has seed S + i (default 0)")
    parser.add_argument("--stall", action="store_true",
                        help="run every program again under random stalls (the same build)")
    parser.add_argument("--level", choices=["rtl", "ref"], default="rtl",
                        help="rtl: interpreter and Verilator (default); ref: the interpreter only")
    parser.add_argument("--data-seeds", type=int, default=1, metavar="K",
                        help="host data sets per program (default 1; they share the build)")
    parser.add_argument("--shrink", type=int, default=30, metavar="CHECKS",
                        help="checks spent shrinking a failure (default 30; 0: keep it whole)")
    parser.add_argument("--watchdog", type=int, default=10_000,
                        help="cycles without progress = deadlock (default 10000)")
    parser.add_argument("-o", "--output", default="fuzz-failures", metavar="DIR",
                        help="where reproducers are written (default fuzz-failures/)")


def _positive(name, value):
    if value < 1:
        raise SystemExit(f"stepforge fuzz: {name} must be at least 1, not {value}")


def run_command(args, out=None):
    """Run the campaign ``args`` describes; return the exit status."""
    # deferred: the campaign imports the RTL harness (Amaranth), which `stepforge --help` skips
    from .campaign import campaign
    out = out or sys.stdout
    _positive("--count", args.count)
    _positive("--data-seeds", args.data_seeds)
    if args.shrink < 0:
        raise SystemExit(f"stepforge fuzz: --shrink must be 0 or more, not {args.shrink}")
    tty = out.isatty()
    what = "interpreter" if args.level == "ref" else \
        "interpreter and Verilator" + (", with and without stalls" if args.stall else "")
    print(f"stepforge fuzz: {args.count} programs from seed {args.seed} ({what})", file=out)

    per_program = args.data_seeds * (2 if args.stall and args.level == "rtl" else 1)
    seen = {}

    def progress(summary, index, seed, outcome):
        seen[seed] = seen.get(seed, 0) + 1
        last = seen[seed] == per_program or outcome.kind in ("rejected", "invalid", "interp-crash")
        if not (tty or last or outcome.failed):
            return          # in a log: one line per program, and every failure
        rate = summary.seconds / max(1, summary.programs)
        eta = rate * (args.count - summary.programs)
        text = (f"[{summary.programs:>{len(str(args.count))}}/{args.count}] seed {seed}: "
                f"{outcome.kind:<8} | {summary.line()} | {rate:.1f} s/program, "
                f"{eta / 60:.0f} min left")
        if tty and not outcome.failed:
            print("\r" + text[:150].ljust(150), end="", file=out, flush=True)
        else:
            print(("\r" if tty else "") + text, file=out, flush=True)

    summary = campaign(args.count, args.seed, stall=args.stall, rtl=args.level == "rtl",
                       data_seeds=args.data_seeds, out_dir=args.output,
                       shrink_budget=args.shrink, watchdog=args.watchdog, progress=progress)
    if tty:
        print(file=out)
    print(f"\n{summary.line()}; {summary.operators} operators; {summary.seconds:.0f} s", file=out)
    for seed, outcome, path in summary.failures:
        first = outcome.detail.strip().splitlines()[0] if outcome.detail.strip() else ""
        print(f"  seed {seed}: {outcome.kind}: {first[:200]}"
              + (f"\n    reproducer: {path}" if path else ""), file=out)
    return 0 if not summary.failures else 1
