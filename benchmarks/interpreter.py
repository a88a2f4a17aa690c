"""Reference-interpreter speed on the SwiGLU expert (batch 64, hidden 256, intermediate 512, 16x16).

Prints beats per second (every beat of every edge counts once) and the wall time of one run.
Run: ``python benchmarks/interpreter.py [--repeat N]``.
"""

import argparse
import time
from pathlib import Path

from stepforge.contract.tokens import to_beats
from stepforge.loader import load
from stepforge.sim.ref.interpreter import run


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    pf = load(Path(__file__).resolve().parent.parent / "examples" / "swiglu.py")
    program = pf.build()
    data = pf.data(program, seed=0)
    best = None
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        res = run(program, tensors=data["tensors"], inputs=data.get("inputs", {}), keep_edges=True)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    beats = sum(len(to_beats(toks)) for toks in res.edges.values())
    print(f"swiglu B=64 H=256 I=512 t=16: {len(program.nodes)} nodes, {len(res.edges)} edges, "
          f"{beats} beats")
    print(f"best of {args.repeat}: {best:.3f} s  ->  {beats / best:,.0f} beats/s")


if __name__ == "__main__":
    main()
