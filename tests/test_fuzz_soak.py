"""The soak switch (``tests/conftest.py``): every property test's example count raised."""

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
