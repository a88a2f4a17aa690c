"""The register inputs that miss a clock in a routed build, grouped by start and end register.

A build's report names its three worst paths; a design far from its clock has hundreds of
inputs that miss it, and what to change is which decisions they come from. Usage::

    stepforge build examples/gemv.py --device up5k --tile 4x4 --seeds 1 -o build/gemv-up5k
    python benchmarks/slow_paths.py build/gemv-up5k [--mhz 60] [--unit memory] [--show 30] [--seed N]

times the routed design of the build's median seed (or of ``--seed``, whose SDF a build writes
while it runs; a seed without one is an error naming the SDFs the folder has) again from its SDF
(``stepforge.boards.sta``), prints the inputs slower than ``1000 / mhz`` ns by the unit of their
register, then one line per group (start register -> end register: inputs, worst delay, cells
on its path, both registers included), worst first. Only the median seed's SDF is kept by a
build; its timing does not move with the machine's load.
"""

import argparse
import collections
import json
import sys
from pathlib import Path

from stepforge.boards.netlist import BOARD, UnitNamer, instances, load_module
from stepforge.boards.paths import slow_groups
from stepforge.boards.sta import analyse, read_sdf


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("build", help="a build folder (stepforge build -o)")
    parser.add_argument("--mhz", type=float, default=60.0, help="the clock to meet (default 60)")
    parser.add_argument("--unit", default=None, help="only groups that end in this unit")
    parser.add_argument("--show", type=int, default=30, help="groups to list")
    parser.add_argument("--seed", type=int, default=None,
                        help="the seed to time (default: the build's median seed)")
    args = parser.parse_args(argv)
    out = Path(args.build)
    seed = args.seed
    if seed is None:
        seed = json.loads((out / "build.json").read_text())["median_seed"]
    sdf = out / f"seed{seed}.sdf"
    if not sdf.is_file():
        kept = sorted(p.stem for p in out.glob("seed*.sdf"))
        parser.error(f"{sdf} does not exist: a build keeps only its median seed's SDF "
                     f"({', '.join(kept) or 'none here'})")
    timing = analyse(*read_sdf(sdf))
    module = load_module(out / "synth.json", "top")
    for prefix in ("link.system.", "dut.", ""):
        units = instances(module, prefix)
        if units:
            break
    namer = UnitNamer(units, prefix=prefix, outside=BOARD)
    limit = 1000.0 / args.mhz
    groups = slow_groups(timing, namer, limit)
    by_unit = collections.Counter()
    for g in groups:
        by_unit[g.end[0]] += g.endpoints
    print(f"Fmax {timing.fmax_mhz:.1f} MHz (seed {seed}); {sum(by_unit.values())} register "
          f"inputs over {limit:.2f} ns:",
          ", ".join(f"{u} {n}" for u, n in by_unit.most_common()))
    shown = [g for g in groups if args.unit in (None, g.end[0])][:args.show]
    for g in shown:
        print(f"{g.delay_ns:7.2f} ns x{g.endpoints:4d} {g.cells:3d} cells  "
              f"{'/'.join(g.start)} -> {'/'.join(g.end)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
