"""The randomized model test (single process): see ``tests/model/machine.py``.

Reproducing a failure: the fast profile is derandomized, so rerunning
``.venv/bin/python -m pytest tests/model/test_model_random.py -q -x`` repeats it (hypothesis
prints the shrunk steps). The soak profile is random: rerun with the printed blob as
``LAKECORE_MODEL_REPRODUCE='<blob inside b'...'>'`` (or ``LAKECORE_MODEL_SEED=<seed>``).
"""

from __future__ import annotations

import os

import hypothesis
import pytest
from hypothesis import reproduce_failure, seed, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.compat.pypaimon_runner import SKIP_REASON, paimon_available
from tests.maintenance.helpers import paimon_reads
from tests.model.machine import OPS, PAIMON_QUEUE, ModelMachine, PaimonCheck, release
from tests.model.profiles import MODEL_SETTINGS, SEED

BLOB = os.environ.get("LAKECORE_MODEL_REPRODUCE")
if SEED is not None:
    ModelMachine = seed(int(SEED))(ModelMachine)  # type: ignore[misc]
if BLOB:
    ModelMachine = reproduce_failure(hypothesis.__version__, BLOB.encode())(  # type: ignore[misc]
        ModelMachine)


def test_random_operations_match_the_model() -> None:
    run_state_machine_as_test(ModelMachine, settings=MODEL_SETTINGS)


@pytest.mark.compat
@pytest.mark.skipif(not paimon_available(), reason=SKIP_REASON)
def test_pypaimon_reads_every_model_table() -> None:
    """pypaimon reads the final state of every table the model test made (queued by the
    machine's teardown), all in one process. Each table was fully compacted first: pypaimon
    2.1 shows the -D rows of a lone level-0 file as live rows (the strict-xfail canary in
    tests/compat/test_driver_selfcheck.py), and first-row scans skip level 0, so only a table
    without level-0 files and without -D rows has one meaning for both readers."""
    if not PAIMON_QUEUE:  # run on its own: make a few tables first
        run_state_machine_as_test(ModelMachine, settings=settings(MODEL_SETTINGS,
                                                                  max_examples=5))
    checks, bad = list(PAIMON_QUEUE), []
    PAIMON_QUEUE.clear()
    for i in range(0, len(checks), 200):
        chunk = checks[i:i + 200]
        got = paimon_reads([{"warehouse": c.warehouse, "table": c.table} for c in chunk])
        bad += [_diff(c, rows) for c, rows in zip(chunk, got, strict=True)
                if _tuples(c, rows) != list(c.expected)]
        OPS["pypaimon read of a model table"] += len(chunk)
        release(chunk)
    assert not bad, "\n".join(bad)


def _tuples(c: PaimonCheck, rows: list[dict]) -> list[tuple]:
    assert all(r["rk"] == "+I" for r in rows), rows
    v1, v2 = c.names  # after the model's ALTERs
    return [(r["dt"], r["id"], r[v1], r[v2]) for r in rows]


def _diff(c: PaimonCheck, rows: list[dict]) -> str:
    got, exp = set(_tuples(c, rows)), set(c.expected)
    return (f"{c.describe} at {c.warehouse}: only in pypaimon {sorted(got - exp, key=repr)}, "
            f"only in the model {sorted(exp - got, key=repr)}")
