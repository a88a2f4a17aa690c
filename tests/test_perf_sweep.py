"""``stepforge sweep``: a parameter grid through the model, serially and on a local Dask cluster of
two workers (about 10 s: the workers' start-up)."""

import json

from stepforge.cli import main
from stepforge.loader import load
from stepforge.perf.sweep import evaluate, parse_grid, sweep

from .helpers import EXAMPLES

MATMUL = EXAMPLES / "matmul.py"


def test_grid_is_the_product_of_the_lists_over_the_fixed_parameters():
    assert parse_grid(["M=8,16", "N=8"], {"K": 8}) == [{"K": 8, "M": 8, "N": 8},
                                                        {"K": 8, "M": 16, "N": 8}]


def test_a_point_through_the_model():
    row = evaluate(str(MATMUL), {"M": 8, "K": 8, "N": 8}, load=load)
    assert row["status"] == "done" and row["M"] == 8
    assert row["cycles"] == 50              # Verilator: 51 (load units since 1a6b7ea)


def test_sweep_on_two_dask_workers_matches_the_serial_run(tmp_path, capsys):
    points = parse_grid(["M=8,16", "N=8,16"], {"K": 8})
    serial = sweep(MATMUL, points, load=load, workers=0, progress=lambda msg: None)
    assert main(["sweep", str(MATMUL), "-p", "M=8,16", "-p", "K=8", "-p", "N=8,16",
                 "--workers", "2", "-o", str(tmp_path / "mm")]) == 0
    out = capsys.readouterr().out
    assert "[4/4]" in out and "wrote" in out
    rows = json.loads((tmp_path / "mm.json").read_text())
    assert [(r["M"], r["N"], r["cycles"]) for r in rows] == \
        [(p["M"], p["N"], s["cycles"]) for p, s in zip(points, serial)]
    assert [r["cycles"] for r in serial] == [50, 82, 82, 146]
    assert (tmp_path / "mm.csv").read_text().startswith("M,K,N,cycles,status")
    assert (tmp_path / "mm.svg").read_text().startswith("<svg")
