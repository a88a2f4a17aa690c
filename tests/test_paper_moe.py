"""Issue 10, MoE dynamic vs static tiling (``benchmarks/paper.py``): the Pareto frontier and the
paper's Pareto Improvement Distance on exact values, the synthetic traces regenerate from their
recipes, and a CI-size MoE with an idle expert runs bit-exact in Verilator with bounded dynamic
tiles (the full dynamic tiling is ``tests/test_moe_dynamic.py``'s)."""

import importlib.util
from fractions import Fraction
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _module(name):
    # benchmarks/ is not a package: load the script by path (as test_fixedpoint does)
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


paper = _module("paper")
paper_traces = _module("paper_traces")

POINTS = [(100, 50), (80, 80), (120, 40), (90, 90), (100, 60)]


def test_pareto_keeps_the_undominated_points_sorted_by_cycles():
    assert paper.pareto(POINTS) == [1, 0, 2]          # (90, 90) and (100, 60) are dominated
    assert paper.pareto([(5, 5), (5, 5)]) == [0, 1]   # equal points do not dominate each other
    assert paper.pareto([(5, 5), (5, 6)]) == [0]


def test_pid_is_the_papers_min_max_ratio():
    front = [tuple(map(Fraction, POINTS[i])) for i in paper.pareto(POINTS)]
    # beyond the frontier: (100, 50) is 5/3 slower and 5/4 bigger; the others worse in one ratio
    assert paper.pid((Fraction(60), Fraction(40)), front) == Fraction(5, 3)
    assert paper.pid((Fraction(100), Fraction(50)), front) == 1             # on the frontier
    assert paper.pid((Fraction(200), Fraction(100)), front) == Fraction(1, 2)   # behind it
    # the paper's Mixtral b64 point: 1.33x less memory at tile 32's cycles (+0.26 %)
    assert paper.pid((Fraction(10026), Fraction(75)), [(Fraction(10000), Fraction(100))]) \
        == Fraction(4, 3)


def test_traces_regenerate_from_their_recipes(capsys):
    assert paper_traces.main(["--check"]) == 0
    out = capsys.readouterr().out
    assert out.count(": ok") == len(paper_traces.RECIPES)
    st = paper_traces.make("paper_qwen3_t64_e16_top1",
                           paper_traces.RECIPES["paper_qwen3_t64_e16_top1"])["statistics"]
    assert st["idle_experts"] == 8 and sum(st["tokens_per_expert"]) == 64


@pytest.mark.slow
def test_bounded_dynamic_tiles_bit_exact_with_an_idle_expert():
    trace = paper_traces.make("paper_mixtral_t8_e4_top2",
                              paper_traces.RECIPES["paper_mixtral_t8_e4_top2"])
    assert trace["statistics"]["tokens_per_expert"] == [4, 0, 4, 8]   # expert 1 gets no token
    r = paper.measure("mixtral", "bounded", 4, trace=trace)
    assert r["ok"]
    D, N = paper.SHAPE["D"], paper.SHAPE["N"]
    # X once; each expert's [D, N] weight once per tile of at most 4 tokens: 1 + 0 + 1 + 2
    assert r["read"] == r["model_read"] == 8 * D * 2 + 4 * D * N * 2
    assert r["written"] == 8 * N * 4
