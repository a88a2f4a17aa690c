"""LUT levels between registers in a synthesized iCE40 or ECP5 netlist, grouped by unit.

Place and route moves Fmax by 10-25 % from seed to seed on a nearly full UP5K; the number of
LUT levels on each register-to-register path does not move, so it is the figure to watch while
changing hardware (at the UP5K's 2.6-3.5 ns per level, 60 MHz allows about four). Usage::

    stepforge build examples/gemv.py --device up5k --tile 4x4 --seeds 1 -o build/gemv-up5k
    python benchmarks/lut_depth.py build/gemv-up5k/synth.json [--min 4] [--show 30]

prints the number of endpoints (flip-flop, block RAM and DSP inputs) at each depth, the
endpoints at ``--min`` levels or more by unit, and for each group of them (same endpoint
register, same port) the chain of cells from the register that starts it. Carry cells count as
no level. Names come from the netlist (``stepforge.boards.netlist``): Yosys names a LUT after a
net near it, so a chain's inner names are hints, its ends are exact.
"""

import argparse
import collections
import json
import re
import sys

from stepforge.boards.netlist import UnitNamer, instances, load_module

COMBINATIONAL = {"SB_LUT4", "SB_CARRY", "LUT4", "CCU2C", "PFUMX", "L6MUX21"}
LEVEL = {"SB_LUT4", "LUT4", "PFUMX", "L6MUX21"}


def depths(module):
    """``(endpoints, levels)``: ``endpoints`` a list of ``(levels, cell, port, last LUT)``,
    deepest first; ``levels[cell] = (levels, predecessor)`` for every combinational cell."""
    cells = module["cells"]
    driver = {}
    for name, cell in cells.items():
        for port, direction in cell["port_directions"].items():
            if direction == "output":
                for bit in cell["connections"][port]:
                    if isinstance(bit, int):
                        driver[bit] = name
    levels = {}

    def inputs(name):
        cell = cells[name]
        for port, direction in cell["port_directions"].items():
            if direction == "input":
                for bit in cell["connections"][port]:
                    if isinstance(bit, int) and bit in driver:
                        yield port, driver[bit]

    def level(name):
        if name not in levels:
            levels[name] = (0, None)        # cuts a combinational loop, if there is one
            best = (0, None)
            for _, source in inputs(name):
                if cells[source]["type"] in COMBINATIONAL and level(source)[0] > best[0]:
                    best = (levels[source][0], source)
            levels[name] = (best[0] + (cells[name]["type"] in LEVEL), best[1])
        return levels[name]

    endpoints = []
    for name, cell in cells.items():
        if cell["type"] in COMBINATIONAL:
            continue
        by_port = {}
        for port, source in inputs(name):
            if cells[source]["type"] in COMBINATIONAL:
                d = level(source)[0]
                if d > by_port.get(port, (0, None))[0]:
                    by_port[port] = (d, source)
        endpoints += [(d, name, port, source) for port, (d, source) in by_port.items()]
    endpoints.sort(key=lambda e: -e[0])
    return endpoints, levels


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("netlist", help="synth.json of a build folder")
    parser.add_argument("--top", default=None, help="the top module (default: the largest)")
    parser.add_argument("--min", type=int, default=4, help="list endpoints this deep or deeper")
    parser.add_argument("--show", type=int, default=30, help="groups to list")
    args = parser.parse_args(argv)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 100_000))
    with open(args.netlist) as f:
        modules = json.load(f)["modules"]
    top = args.top or max(modules, key=lambda k: len(modules[k]["cells"]))
    module = load_module(args.netlist, top)
    prefix = "dut." if any(n.startswith("dut.") for n in module["cells"]) else ""
    namer = UnitNamer(instances(module, prefix), prefix)
    endpoints, levels = depths(module)

    def name(cell):
        return re.sub(r"\$\d+|_SB_\w+|\[\d+\]", "", "/".join(namer.split(cell)))

    histogram = collections.Counter(d for d, *_ in endpoints)
    print("endpoints by LUT levels:", ", ".join(f"{d}: {n}" for d, n in sorted(histogram.items(),
                                                                               reverse=True)))
    deep = [e for e in endpoints if e[0] >= args.min]
    units = collections.Counter(name(cell).split("/")[0] for _, cell, _, _ in deep)
    print(f"{len(deep)} endpoints at {args.min} or more levels:",
          ", ".join(f"{u} {n}" for u, n in units.most_common()))
    groups = collections.OrderedDict()
    for d, cell, port, source in deep:
        key = (name(cell), port)
        if key not in groups:
            chain, c = [], source
            while c is not None:
                chain.append(name(c))
                c = levels[c][1]
            groups[key] = [d, 0, chain]
        groups[key][1] += 1
    for (cell, port), (d, n, chain) in list(groups.items())[:args.show]:
        print(f"{d:3d} x{n:4d}  {cell}.{port}\n           <- " + " <- ".join(chain))
    return 0


if __name__ == "__main__":
    sys.exit(main())
