"""The random program generator, its checker, shrinker and reproducers (``stepforge.fuzz``).

A smoke run: programs of fixed seeds through the interpreter (every one valid, every operator
family drawn), two through Verilator with and without stalls; the pieces around them with exact
expectations.
"""

import re
from collections import Counter

import numpy as np
import pytest

import stepforge.fuzz.campaign as campaign_module
from stepforge.cli import main
from stepforge.compiler.errors import StepError
from stepforge.compiler.types import Select
from stepforge.fuzz import FuzzProgram, Line, generate
from stepforge.fuzz.campaign import campaign, load_reproducer, write_reproducer
from stepforge.fuzz.check import Outcome, check
from stepforge.fuzz.data import random_data
from stepforge.fuzz.shrink import shrink, variants

#: Every operator family of issue 12's list, as the generator spells it.
FAMILIES = ["LinearOffChipLoad", "LinearOffChipStore", "RandomOffChipLoad", "RandomOffChipStore",
            "Map", "Accum", "Scan", "Promote", "Flatten", "Reshape", "RepeatStatic", "Expand",
            "Zip", "Bufferize", "Streamify", "Partition", "Reassemble", "EagerMerge",
            "Parallelize", "RetileStreamify", "Filter", "AddrGen"]

SMOKE = range(60)


def test_the_same_seed_gives_the_same_program():
    assert generate(7).source() == generate(7).source()
    assert generate(7).source() != generate(8).source()


@pytest.mark.parametrize("seed", [3, 17])
def test_programs_have_3_to_12_operators(seed):
    counts = [generate(s).operators for s in range(seed, seed + 20)]
    assert min(counts) >= 3 and max(counts) <= 14   # a sink store may follow the last motif
    assert len(set(counts)) > 3


def test_smoke_every_program_is_valid_and_runs_in_the_interpreter():
    kinds, ops = Counter(), Counter()
    for seed in SMOKE:
        fp = generate(seed)
        for line in fp.lines:
            ops.update(re.findall(r"\b([A-Z][A-Za-z]+)\(", line.text))
        for data_seed in (0, 1):
            kinds[check(fp, data_seed=data_seed, rtl=False).kind] += 1
    assert kinds == Counter({"pass": 2 * len(SMOKE)})
    assert [f for f in FAMILIES if not ops[f]] == []
    assert ops["Select"] and ops["Index"] and ops["Bool"]        # host selectors, addresses, flags


def test_host_data_respects_static_sizes_bounds_and_hints():
    fp = FuzzProgram("d", 0, [
        Line("R = p.symbol('R', bound=3, ragged=True)", (("R", "symbol"),)),
        Line("x = p.input('x', [2, R], Tile(int8, 1, 2))", (("x", "stream"),), ("R",)),
        Line("s = p.input('s', [1, 6], Select(3))", (("s", "stream"),)),
        Line("a = p.input('a', [1, 6], Index())", (("a", "stream"),))],
        hints={"s": {"onehot": True}, "a": {"below": 5}})
    program = fp.build()
    lengths = set()
    for seed in range(30):
        inputs = random_data(program, seed, fp.hints)["inputs"]
        assert len(inputs["x"]) == 2
        lengths |= {len(fibre) for fibre in inputs["x"]}
        assert all(v.shape == (1, 2) and v.dtype == np.int8 for f in inputs["x"] for v in f)
        assert all(bin(m).count("1") == 1 and m < 8 for m in inputs["s"][0])
        assert all(0 <= i < 5 for i in inputs["a"][0])
    assert lengths == {0, 1, 2, 3}                   # empty fibres and full ones
    assert isinstance(program.inputs[1].outputs[0].dtype, Select)


def _planted():
    """A program whose failure is planted: Scan of a Map (the 'bug') behind two other steps."""
    return FuzzProgram("planted", 5, [
        Line("T0 = p.tensor('T0', (4, 4), int16)", (("T0", "tensor"),), (), 1),
        Line("s0 = LinearOffChipLoad(T0, (2, 2), out_shape=(2, 2), stride=(2, 1))",
             (("s0", "stream"),), ("T0",), 1),
        Line("s1 = Map(lambda a: a + 1, s0)", (("s1", "stream"),), ("s0",), 2),
        Line("s2 = Promote(s1)", (("s2", "stream"),), ("s1",), 3),
        Line("s3 = Scan(lambda acc, a: acc + a, Tile(int16, 2, 2), s2, b=1)",
             (("s3", "stream"),), ("s2",), 4),
        Line("s4 = RepeatStatic(s0, 2)", (("s4", "stream"),), ("s0",), 5)])


def _fails_with_scan(fp):
    try:
        fp.build()
    except StepError:
        return Outcome("rejected", "", "rejected")
    bad = any("Scan(" in line.text for line in fp.live_lines())
    return Outcome("mismatch", "planted", "mismatch") if bad else Outcome("pass")


def test_shrinking_keeps_the_failure_and_drops_everything_else():
    small, checks = shrink(_planted(), Outcome("mismatch", "", "mismatch"), _fails_with_scan)
    assert [line.text for line in small.live_lines()] == [
        "T0 = p.tensor('T0', (4, 4), int16)",
        "s0 = LinearOffChipLoad(T0, (2, 2), out_shape=(2, 2), stride=(2, 1))",
        "s3 = Scan(lambda acc, a: acc + a, Tile(int16, 2, 2), s0, b=1)"]
    assert small.sinks() == ["s3"]
    assert checks <= 20


def test_variants_remove_cones_and_bypass_operators():
    fp = _planted()
    texts = [tuple(line.text for line in v.lines) for v in variants(fp)]
    without_map = fp.without({2})
    assert [line.text.split(" =")[0] for line in without_map.lines] == ["T0", "s0", "s4"]
    assert tuple(line.text for line in fp.substituted(3, "s2", "s1").lines) in texts


@pytest.mark.parametrize("seed", [11, 83])        # 83: an EagerMerge selector drained on purpose
def test_a_reproducer_is_a_program_file_that_reloads_to_the_same_program(tmp_path, capsys, seed):
    fp = generate(seed)
    path = write_reproducer(fp, Outcome("deadlock", "no beat moved\nfull FIFOs: x", "deadlock"),
                            tmp_path, data_seed=2, stall=True)
    assert path.name == f"fuzz_{seed}_deadlock.py"
    again, record, pf = load_reproducer(path)
    assert record == {"outcome": "deadlock", "signature": "deadlock", "data_seed": 2,
                      "stall": True, "seed": seed}
    assert again.body() == fp.body() and again.hints == {k: v for k, v in fp.hints.items()
                                                         if k in path.read_text()}
    assert "no beat moved" in pf.module.__doc__
    program = pf.build()
    assert pf.data(program)["inputs"].keys() == random_data(program, 2, fp.hints)["inputs"].keys()
    assert main(["run", str(path), "--level", "ref"]) == 0     # stepforge takes it as is
    assert capsys.readouterr().out.rstrip().endswith("PASS")


def test_the_fuzz_command_counts_outcomes(tmp_path, capsys):
    assert main(["fuzz", "--count", "6", "--seed", "40", "--level", "ref", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "stepforge fuzz: 6 programs from seed 40 (interpreter)" in out
    assert "[6/6] seed 45: pass" in out
    assert "6 programs, 6 runs: pass 6;" in out


def test_a_campaign_writes_a_shrunk_reproducer_for_a_failure(tmp_path, monkeypatch):
    monkeypatch.setattr(campaign_module, "check", lambda fp, **kw: _fails_with_scan(fp))
    summary = campaign(4, 100, rtl=False, out_dir=tmp_path, shrink_budget=40)
    scans = [s for s in range(100, 104) if "Scan(" in generate(s).source()]
    assert [seed for seed, _, _ in summary.failures] == scans
    assert summary.runs["mismatch"] == len(scans) and summary.runs["pass"] == 4 - len(scans)
    for seed, outcome, path in summary.failures:
        fp, record, _ = load_reproducer(path)
        assert record["outcome"] == "mismatch" and record["seed"] == seed
        assert fp.operators <= record["operators_before_shrinking"]
        assert sum("Scan(" in line.text for line in fp.lines) >= 1


@pytest.mark.slow
@pytest.mark.parametrize("seed", [24, 1])
def test_smoke_through_verilator_with_and_without_stalls(seed):
    fp = generate(seed, max_ops=4)
    calm = check(fp, data_seed=0)
    assert calm.kind == "pass", calm.detail
    stalled = check(fp, data_seed=0, stall=True)
    assert stalled.kind == "pass", stalled.detail
    assert stalled.cycles > calm.cycles            # the stalls happened
    assert stalled.seconds["build"] < 5            # the same build
