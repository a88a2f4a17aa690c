"""Hierarchical tiling: large STeP tiles on the 4x4 hardware tile, against the roofline.

For each case, the STeP program with tiles of ``t x t`` is lowered twice: with hierarchical
tiling (streams of 4x4 hardware tiles) and without (each STeP tile one wide beat). Prints the
widest beat and the FIFO storage of both, then runs the tiled one in Verilator and prints its
cycles, the roofline bound (``stepforge.runner.roofline``) and their ratio, and checks that
the results equal the untiled STeP program's bit for bit and that the measured off-chip bytes
equal the STeP program's symbolic traffic.

Run: ``python benchmarks/tiling.py [--small] [--only NAME]``.
"""

import argparse
from pathlib import Path

import numpy as np

from stepforge.compiler.lower import lower
from stepforge.compiler.metrics import metrics
from stepforge.loader import load
from stepforge.runner import roofline
from stepforge.sim.ref.interpreter import run
from stepforge.sim.rtl import run_rtl

ROOT = Path(__file__).resolve().parent.parent
FULL = [
    ("matmul", {"M": 64, "K": 64, "N": 64, "t": 16}),
    ("gemv", {"K": 256, "N": 256, "t": 16}),
    ("swiglu", {"B": 64, "H": 256, "I": 512, "t": 16}),
]
SMALL = [
    ("matmul", {"M": 16, "K": 32, "N": 16, "t": 8}),
    ("swiglu", {"B": 16, "H": 32, "I": 32, "t": 8}),
]


def _fifo_bits(hw):
    return max(e.layout.size for e in hw.edges), sum(e.layout.size * e.depth for e in hw.edges)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="small sizes (a quick check)")
    ap.add_argument("--only", action="append", help="only this example (repeatable)")
    args = ap.parse_args()
    rows = []
    for name, params in SMALL if args.small else FULL:
        if args.only and name not in args.only:
            continue
        pf = load(ROOT / "examples" / f"{name}.py")
        wide = _fifo_bits(lower(pf.build(**params), tiling="off"))
        program = pf.build(**params)
        data = pf.data(program, seed=0)
        res = run_rtl(pf.build(**params), data["tensors"])
        assert res.status == "done", res.status
        assert res.hw.tiling == "applied", res.hw.tiling
        narrow = _fifo_bits(res.hw)
        want = run(program, data["tensors"])
        exact = all(np.array_equal(v, want.tensors[k]) for k, v in res.tensors.items())
        m = metrics(program)
        traffic = (res.tensor_bytes_read, res.tensor_bytes_written) == (m.offchip_read, m.offchip_write)
        bound = roofline(res.hw, run(res.hw.program, data["tensors"], keep_edges=True))
        ratio = bound["bound"] / res.cycles
        rows.append((name, params["t"], wide, narrow, res.cycles, bound["bound"], ratio, exact, traffic))
        print(f"{name} t={params['t']}: {res.cycles} cycles, bound {bound['bound']}, ratio {ratio:.2f}, "
              f"widest beat {wide[0]} -> {narrow[0]} bits, FIFO storage {wide[1]} -> {narrow[1]} bits, "
              f"bit-exact with the STeP program: {exact}, traffic exact: {traffic}", flush=True)
    print()
    print(f"{'example':>10} {'t':>3} {'beat bits (wide -> tiled)':>26} {'FIFO bits (wide -> tiled)':>26} "
          f"{'cycles':>9} {'bound':>9} {'ratio':>6} {'exact':>6} {'traffic':>8}")
    for name, t, wide, narrow, cycles, bound, ratio, exact, traffic in rows:
        print(f"{name:>10} {t:>3} {f'{wide[0]} -> {narrow[0]}':>26} {f'{wide[1]} -> {narrow[1]}':>26} "
              f"{cycles:>9} {bound:>9} {ratio:>6.2f} {str(exact):>6} {str(traffic):>8}")


if __name__ == "__main__":
    main()
