"""Shared pytest configuration: the Hypothesis profiles and the soak switch.

``dev`` (the default) and ``ci`` (when the ``CI`` variable is set) are derandomized: a run draws
the same examples every time, so a failure reproduces by running the test again. ``dev`` does
not shrink: most properties here simulate hardware for a fraction of a second per example, and
shrinking a failure takes hundreds of examples (100-330 s measured), while the first failing
example is reported in seconds. ``HYPOTHESIS_PROFILE=shrink`` runs the same examples and then
shrinks the failure to a minimal one, when the minimal example is worth the wait (``ci`` shrinks
too, so that a failure's log shows a minimal example).

**Soak.** ``STEPFORGE_SOAK=1`` (or ``--hypothesis-profile soak``) raises every property test's
example count to :data:`SOAK_EXAMPLES` (``STEPFORGE_SOAK=N``, N > 1: to N), overriding the counts
the tests' own ``@settings`` give, and draws fresh random examples on every run (not
derandomized; failures are kept in Hypothesis's example database and replayed first). A soak
failure is shrunk (a soak runs unattended, and a minimal example is the reproducer worth saving)
and printed with its ``@reproduce_failure`` blob. Without it, every test keeps its own count.
``benchmarks/soak.py`` runs a soak per unit kind and counts its examples and streams.
"""

import os

from hypothesis import Phase, settings

NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target)
#: Examples per property test in a soak run: every unit kind then sees at least this many
#: random streams.
SOAK_EXAMPLES = 10_000

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=50)
settings.register_profile("dev", derandomize=True, deadline=None, phases=NO_SHRINK,
                          report_multiple_bugs=False)
settings.register_profile("shrink", derandomize=True, deadline=None)
#: Settings a soak run puts over every property test's own: fresh random examples, a failure
#: shrunk and printed with the blob that replays it.
SOAK_SETTINGS = dict(derandomize=False, phases=NO_SHRINK + (Phase.shrink,), print_blob=True)
settings.register_profile("soak", deadline=None, max_examples=SOAK_EXAMPLES,
                          report_multiple_bugs=False, **SOAK_SETTINGS)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI")
                                                               else "dev"))


def soak_examples(environ=os.environ, profile=None):
    """Examples per property test in a soak run, or None when soaking is off."""
    value = environ.get("STEPFORGE_SOAK", "").strip().lower()
    if value and value not in ("0", "no", "off", "false"):
        if value.isdigit() and int(value) > 1:
            return int(value)
        return SOAK_EXAMPLES
    if (profile or settings.get_current_profile_name()) == "soak":
        return SOAK_EXAMPLES
    return None


def pytest_collection_modifyitems(config, items):
    n = soak_examples()
    if n is None:
        return
    for item in items:
        fn = getattr(item, "obj", None)
        fn = getattr(fn, "__func__", fn)       # a test method: its function
        if not getattr(fn, "is_hypothesis_test", False):
            continue
        # Hypothesis reads a test's settings from this attribute when the test runs
        current = fn._hypothesis_internal_use_settings
        fn._hypothesis_internal_use_settings = settings(
            current, max_examples=max(n, current.max_examples), **SOAK_SETTINGS)
