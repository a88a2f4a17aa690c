"""Synthetic, seeded MoE routing traces for the paper's dynamic-tiling study (issue 10).

    python benchmarks/paper_traces.py            # (re)writes traces/paper_*.json
    python benchmarks/paper_traces.py --check    # fails if a saved trace differs from its recipe

The paper routes HH-RLHF requests through Mixtral-8x7B and Qwen3-30B-A3B and picks a layer whose
bin-count spread is the average one (``step-paper-notes.md`` section 4.1). Those traces are not
available here; these stand in for them and are **synthetic**: each is drawn from a stated
recipe and kept only if it has the statistics the paper's workload has.

* **Mixtral-like**: 8 experts, top-2 (as Mixtral). Every expert receives tokens (the paper does
  not time-multiplex Mixtral because all experts are active at batch 64, section 4.5), with a
  skewed popularity: the coefficient of variation of the tokens per expert in [0.35, 0.6].
* **Qwen3-like**: Qwen3 has 128 experts, top-8; scaled to 16 experts with top-1 (the same
  fraction of experts per token, 8/128 = 1/16), and exactly half of the experts idle at batch
  64 (the notes' observation, section 4.3), which gives Qwen3's mean of 8 tokens per active
  expert (64 x 8 assignments over about 64 active experts).

Recipe: expert popularity ``1 / (rank + 1) ** s`` over a seeded permutation of the experts; each
token draws its ``k`` distinct experts from it (``numpy.random.default_rng(seed).choice(...,
replace=False, p=...)``). The seed is the first in 0, 1, 2, ... whose routing meets the trace's
statistics, so a recipe always gives the same file. The CI-size traces (batch 8) use the same
recipes; the Qwen3-like one keeps half of its experts idle, the Mixtral-like one one expert idle
(the test needs an expert with no token).
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "traces"

#: name -> recipe: T tokens, E experts, top-k, Zipf exponent s, and the statistics to meet.
RECIPES = {
    "paper_mixtral_t64_e8_top2": dict(T=64, E=8, k=2, s=0.8, idle=(0, 0), cv=(0.35, 0.6),
                                      like="Mixtral-8x7B (8 experts, top-2)"),
    "paper_qwen3_t64_e16_top1": dict(T=64, E=16, k=1, s=1.2, idle=(8, 8), cv=(0.0, 9.0),
                                     like="Qwen3-30B-A3B (128 experts, top-8) scaled to 16 "
                                          "experts, top-1"),
    "paper_mixtral_t8_e4_top2": dict(T=8, E=4, k=2, s=0.8, idle=(1, 1), cv=(0.0, 9.0),
                                     like="Mixtral-like at CI size (4 experts, top-2)"),
    "paper_qwen3_t8_e4_top1": dict(T=8, E=4, k=1, s=1.2, idle=(2, 2), cv=(0.0, 9.0),
                                   like="Qwen3-like at CI size (4 experts, top-1)"),
}


def draw(T, E, k, s, seed):
    """The routing (each token's ``k`` experts, ascending) drawn from the recipe with ``seed``."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(E)
    weight = np.empty(E)
    weight[order] = 1.0 / (np.arange(E) + 1.0) ** s
    p = weight / weight.sum()
    return [sorted(int(e) for e in rng.choice(E, size=k, replace=False, p=p)) for _ in range(T)]


def statistics(routing, E):
    """Tokens per expert, idle experts, coefficient of variation and max/mean of the counts."""
    counts = np.bincount([e for experts in routing for e in experts], minlength=E)
    mean = counts.mean()
    return {"tokens_per_expert": [int(c) for c in counts], "idle_experts": int((counts == 0).sum()),
            "cv": round(float(counts.std() / mean), 3), "max_over_mean": round(float(counts.max() / mean), 3)}


def make(name, recipe):
    """The trace ``name`` as a JSON-ready dict (the first seed meeting the recipe's statistics)."""
    T, E, k, s = recipe["T"], recipe["E"], recipe["k"], recipe["s"]
    for seed in range(10_000):
        routing = draw(T, E, k, s, seed)
        st = statistics(routing, E)
        if (recipe["idle"][0] <= st["idle_experts"] <= recipe["idle"][1]
                and recipe["cv"][0] <= st["cv"] <= recipe["cv"][1]):
            break
    else:
        raise SystemExit(f"{name}: no seed below 10000 meets the recipe {recipe}")
    return {
        "name": name.replace("_", "-"),
        "description": (f"SYNTHETIC expert routing standing in for {recipe['like']}: {T} tokens to {E} experts, "
                        f"top-{k}; tokens per expert {st['tokens_per_expert']}"),
        "source": (f"synthetic, not measured from a model: benchmarks/paper_traces.py, popularity "
                   f"1/(rank+1)**{s} over a permutation, numpy default_rng({seed}); kept because "
                   f"{st['idle_experts']} experts are idle (wanted {recipe['idle'][0]}-"
                   f"{recipe['idle'][1]}) and the tokens per expert have cv {st['cv']} (wanted "
                   f"{recipe['cv'][0]}-{recipe['cv'][1]})"),
        "params": {"T": T, "E": E, "k": k},
        "statistics": st,
        "routing": routing,
    }


def text(trace):
    """The file's text: one token's routing per line."""
    head = {key: value for key, value in trace.items() if key != "routing"}
    body = json.dumps(head, indent=1)[:-2]
    rows = ",\n  ".join(json.dumps(r) for r in trace["routing"])
    return body + ',\n "routing": [\n  ' + rows + "\n ]\n}\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args(argv)
    bad = 0
    for name, recipe in RECIPES.items():
        trace = make(name, recipe)
        path = TRACES / f"{name}.json"
        if args.check:
            same = path.exists() and path.read_text() == text(trace)
            bad += not same
            print(f"{path.name}: {'ok' if same else 'DIFFERS from its recipe'}")
        else:
            path.write_text(text(trace))
            print(f"{path.name}: {trace['statistics']}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
