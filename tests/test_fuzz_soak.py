"""The soak switch (``tests/conftest.py``): every property test's example count raised."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import Phase, given, settings, strategies as st

from . import conftest
from .conftest import SOAK_EXAMPLES, soak_examples

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(not os.environ.get("STEPFORGE_SOAK_PROBE"), reason="run by the test below")
@settings(deadline=None, max_examples=5)
@given(st.integers())
def test_probe(x):
    with open(os.environ["STEPFORGE_SOAK_PROBE"], "a") as f:
        f.write(f"{x}\n")


def _examples(tmp_path, env, *args):
    probe = tmp_path / "probe.txt"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          f"{Path(__file__).relative_to(ROOT)}::test_probe", *args],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "STEPFORGE_SOAK_PROBE": str(probe), **env})
    assert run.returncode == 0, run.stdout + run.stderr
    return len(probe.read_text().splitlines())


class _Item:
    def __init__(self, obj):
        self.obj = obj


def test_without_the_switch_a_test_keeps_its_own_count(monkeypatch):
    @settings(max_examples=7)
    @given(st.integers())
    def prop(x):
        pass
    monkeypatch.delenv("STEPFORGE_SOAK", raising=False)
    conftest.pytest_collection_modifyitems(None, [_Item(prop)])
    assert prop._hypothesis_internal_use_settings.max_examples == 7
    monkeypatch.setenv("STEPFORGE_SOAK", "1")
    conftest.pytest_collection_modifyitems(None, [_Item(prop), _Item(len)])
    assert prop._hypothesis_internal_use_settings.max_examples == 10_000
    assert prop._hypothesis_internal_use_settings.derandomize is False
    # a soak failure is shrunk and printed with the blob that replays it
    assert Phase.shrink in prop._hypothesis_internal_use_settings.phases
    assert prop._hypothesis_internal_use_settings.print_blob is True


def test_the_switch_raises_the_count_over_the_tests_own_settings(tmp_path):
    assert _examples(tmp_path, {"STEPFORGE_SOAK": "137"}) >= 137


def test_the_switch_and_the_profile_mean_ten_thousand():
    assert SOAK_EXAMPLES == 10_000
    assert soak_examples({"STEPFORGE_SOAK": "1"}) == 10_000
    assert soak_examples({"STEPFORGE_SOAK": "yes"}) == 10_000
    assert soak_examples({"STEPFORGE_SOAK": "25000"}) == 25_000
    assert soak_examples({}, profile="soak") == 10_000
    assert soak_examples({"STEPFORGE_SOAK": "0"}, profile="dev") is None
    assert soak_examples({}, profile="ci") is None
    assert settings.get_profile("soak").max_examples == 10_000


# -- benchmarks/soak.py ------------------------------------------------------------------------

def _soak_script():
    import importlib.util
    spec = importlib.util.spec_from_file_location("soak_script", ROOT / "benchmarks" / "soak.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_soak_plan_reaches_the_streams_of_every_kind():
    soak = _soak_script()
    for kind, tests in soak.KINDS.items():
        examples = soak.plan(kind, 10_000)
        streams = sum(examples[node] * s for node, s in tests)
        assert 10_000 <= streams < 10_000 + sum(s for _, s in tests), kind
    assert soak.plan("pcu", 10_000)["tests/test_hdl_pcu.py::test_map_unary"] == 477  # 21 / ex
    # the split and block-RAM FIFO tests drive one stream through two FIFOs: 1 stream each,
    # 2,000 x 5 tests
    assert set(soak.plan("fifo", 10_000).values()) == {2_000}
    assert soak.plan("memory", 10_000) == {
        "tests/test_hdl_memory.py::test_random_bursts_match_a_flat_memory": 10_000}


def test_the_soak_covers_every_unit_property_test():
    """Every Hypothesis test of a hardware unit is in one unit kind of the soak, and only those."""
    import importlib
    soak = _soak_script()
    listed = [node for tests in soak.KINDS.values() for node, _ in tests]
    assert len(listed) == len(set(listed))
    found = []
    for path in sorted((ROOT / "tests").glob("test_hdl_*.py")):
        module = importlib.import_module(f"tests.{path.stem}")
        found += [f"tests/{path.name}::{name}" for name, fn in vars(module).items()
                  if name.startswith("test_") and getattr(fn, "is_hypothesis_test", False)
                  and fn.__module__ == module.__name__]
    assert sorted(listed) == sorted(found)


def test_the_soak_reads_the_hypothesis_statistics():
    soak = _soak_script()
    output = """tests/test_x.py::test_f:

  - during reuse phase (0.01 seconds):
    - Typical runtimes: < 1ms, of which < 1ms in data generation
    - 0 passing, 1 failing, and 0 invalid test cases

  - during generate phase (12.50 seconds):
    - Typical runtimes: ~ 5-182 ms, of which ~ 0-4 ms in data generation
    - 973 passing, 0 failing, and 41 invalid test cases

  - during shrink phase (0.28 seconds):
    - Typical runtimes: < 1ms, of which < 1ms in data generation
    - 164 passing, 153 failing, and 0 invalid test cases
    - Tried 317 shrinks of which 152 were successful

  - Stopped because settings.max_examples=1000
"""
    assert soak.parse_statistics(output) == dict(passing=973, failing=1, invalid=41,
                                                 seconds=12.5,
                                                 stopped="settings.max_examples=1000")
    assert soak.parse_statistics("1 failed") == dict(passing=0, failing=0, invalid=0,
                                                     seconds=0.0, stopped="")


def test_the_soak_summary_counts_a_corrected_minimum(tmp_path):
    """A log written while a test's minimum was too high is counted by the corrected one."""
    soak = _soak_script()
    node = "tests/test_hdl_fifo.py::test_split_data_keeps_timing"
    records = [dict(start=True, chunk="1-1", pid=1, kind="fifo", test=node, requested=1000,
                    commit="abc"),
               dict(kind="fifo", test=node, chunk="1-1", requested=1000, streams_per_example=2,
                    commit="abc", passing=1000, failing=0, invalid=7, seconds=20.0, wall=21.0,
                    rc=0),
               dict(kind="fifo", test="tests/test_hdl_fifo.py::test_random_streams", chunk="1-2",
                    requested=600, streams_per_example=1, commit="abc", passing=600, failing=0,
                    invalid=0, seconds=6.0, wall=6.5, rc=0)]
    (tmp_path / "log-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    [row] = soak.summarize([tmp_path])
    assert (row["kind"], row["tests"], row["of"], row["examples"], row["streams"],
            row["failing"], row["done"]) == ("fifo", 2, 5, 1_600, 1_600, 0, False)
    assert row["per_test"][node]["streams"] == 1_000
