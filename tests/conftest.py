"""Shared pytest configuration: the Hypothesis profiles.

``dev`` (the default) and ``ci`` (when the ``CI`` variable is set) are derandomized: a run draws
the same examples every time, so a failure reproduces by running the test again. ``dev`` does
not shrink: most properties here simulate hardware for a fraction of a second per example, and
shrinking a failure takes hundreds of examples (100-330 s measured), while the first failing
example is reported in seconds. ``HYPOTHESIS_PROFILE=shrink`` runs the same examples and then
shrinks the failure to a minimal one, when the minimal example is worth the wait (``ci`` shrinks
too, so that a failure's log shows a minimal example).
"""

import os

from hypothesis import Phase, settings

NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target)

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=50)
settings.register_profile("dev", derandomize=True, deadline=None, phases=NO_SHRINK,
                          report_multiple_bugs=False)
settings.register_profile("shrink", derandomize=True, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI")
                                                               else "dev"))
