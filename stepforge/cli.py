"""The ``stepforge`` command line.

``stepforge check PROGRAM.py``   shapes of every edge, symbols and symbolic metrics
``stepforge graph PROGRAM.py``   a DOT picture of the program
``stepforge run PROGRAM.py``     run on the example's data, check against plain NumPy, report
"""

import argparse
import sys

from .loader import load


def _params(args):
    params = {}
    for item in args.param or []:
        key, _, value = item.partition("=")
        try:
            params[key] = int(value)
        except ValueError:
            params[key] = value
    return params


def cmd_check(args):
    from .report import check_report
    pf = load(args.program)
    print(check_report(pf.build(**_params(args))))
    return 0


def cmd_graph(args):
    from .compiler.dot import to_dot
    pf = load(args.program)
    text = to_dot(pf.build(**_params(args)))
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as f:
            f.write(text)
        print(f"wrote {args.output}")
    return 0


def cmd_run(args):
    from .runner import run_reference
    pf = load(args.program)
    ok = run_reference(pf, params=_params(args), seed=args.seed)
    return 0 if ok else 1


def main(argv=None):
    parser = argparse.ArgumentParser(prog="stepforge", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)

    def add(name, fn, help):
        p = sub.add_parser(name, help=help)
        p.add_argument("program", help="a STeP program file (defines program())")
        p.add_argument("-p", "--param", action="append", metavar="KEY=VALUE",
                       help="a keyword parameter of program()")
        p.set_defaults(fn=fn)
        return p

    add("check", cmd_check, "print every edge's symbolic shape and the program's metrics")
    g = add("graph", cmd_graph, "write a DOT picture of the program")
    g.add_argument("-o", "--output", help="output file (default: stdout)")
    r = add("run", cmd_run, "run the program and check it against plain NumPy")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--level", choices=["ref"], default="ref",
                   help="ref: the reference interpreter")
    args = parser.parse_args(argv)
    from .compiler.errors import StepError
    try:
        return args.fn(args)
    except StepError as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
