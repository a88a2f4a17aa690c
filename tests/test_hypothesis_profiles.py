"""The Hypothesis profile of a development run (``tests/conftest.py``): derandomized, and a
failure is reported as soon as it is found, without shrinking."""

import pytest
from hypothesis import given, settings, strategies as st


def failing_property(calls):
    @settings(settings.get_profile("dev"), max_examples=300)
    @given(st.lists(st.integers(0, 1000), max_size=20))
    def prop(xs):
        calls.append(list(xs))
        assert sum(xs) < 1500
    return prop


def test_dev_reports_the_first_failure_without_shrinking():
    calls = []
    with pytest.raises(AssertionError):
        failing_property(calls)()
    first = next(i for i, xs in enumerate(calls) if sum(xs) >= 1500)
    assert len(calls) - first <= 2  # the failing example and its final replay, no shrink steps


def test_dev_draws_the_same_examples_every_run():
    first, second = [], []
    for calls in (first, second):
        with pytest.raises(AssertionError):
            failing_property(calls)()
    assert first == second
