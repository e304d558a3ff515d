"""Hypothesis profiles of the model test, chosen by ``LAKECORE_MODEL_PROFILE``.

* ``fast`` (default, CI): derandomized (a fixed seed per test), so every run does the same
  operations and a failure reproduces by running the test again.
* ``soak`` (``make soak``): 3000 examples (13x ``fast``) and 1000 instead of 60 commits per
  writer of the multi-process test, freshly random on every run; a
  failure prints ``@reproduce_failure(...)`` and the steps, and ``LAKECORE_MODEL_SEED=<n>``
  replays a run whose seed was printed.

The profiles are registered under the names ``fast`` and ``soak`` but never loaded globally:
the model tests apply them explicitly, so other hypothesis tests in the session keep their own
settings.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE = os.environ.get("LAKECORE_MODEL_PROFILE", "fast")
SEED = os.environ.get("LAKECORE_MODEL_SEED")
SCALE = {"fast": 1, "soak": 10}.get(PROFILE)
if SCALE is None:
    raise ValueError(f"LAKECORE_MODEL_PROFILE must be 'fast' or 'soak', got {PROFILE!r}")

# Sizes: the fast profile is CI's. At 225 examples every operation kind still runs dozens of
# times (the counts pytest prints); below ~200 hypothesis draws shorter examples and some kinds
# (a write into an expired partition) stop appearing. The soak profile keeps the breadth.
FAST_EXAMPLES = 225  # examples of the single-process machine in the fast profile
SOAK_EXAMPLES = 3000
STEPS = 25  # operations per example at most (hypothesis may stop an example earlier)
MP_ROUNDS = {"fast": 60, "soak": 1000}[PROFILE]  # commits per writer process

_common = {
    "deadline": None,
    "database": None,
    "print_blob": True,
    "stateful_step_count": STEPS,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large,
                              HealthCheck.filter_too_much],
}
settings.register_profile("fast", max_examples=FAST_EXAMPLES, derandomize=SEED is None,
                          **_common)
settings.register_profile("soak", max_examples=SOAK_EXAMPLES, derandomize=False, **_common)

MODEL_SETTINGS = settings.get_profile(PROFILE)
