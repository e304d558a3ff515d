"""Hypothesis profiles of the model test, chosen by ``LAKECORE_MODEL_PROFILE``.

* ``fast`` (default, CI): derandomized (a fixed seed per test), so every run does the same
  operations and a failure reproduces by running the test again.
* ``soak`` (``make soak``): 10x the examples of ``fast``, freshly random on every run; a
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

FAST_EXAMPLES = 300  # examples of the single-process machine in the fast profile
STEPS = 25  # operations per example at most (hypothesis may stop an example earlier)
MP_ROUNDS = 100  # commits per writer process in the fast profile

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
settings.register_profile("soak", max_examples=FAST_EXAMPLES * 10, derandomize=False, **_common)

MODEL_SETTINGS = settings.get_profile(PROFILE)
