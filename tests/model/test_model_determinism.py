"""The same operations make the same table history (issue 36).

Hypothesis replays an example by feeding the machine the same choices again, and some
choices are drawn from what the real table did (the retained snapshots, their kinds, whether a
lookup changelog has settled). If lakecore decided anything from thread timing or the clock,
a replay would see another table and hypothesis could neither reproduce nor shrink a failure
(``FlakyStrategyDefinition``). Found that way: the dictionary and row-group judgments of a
write were shared across buckets encoding side by side, so the same rows got other encodings,
hence other file sizes, hence other compaction picks, from one run to the next.

For every kind of table the machine draws, the machine runs the same examples twice in this
process (derandomized: one seed, the same draws) and each example's full history -- snapshot
ids, kinds, record counts, every live file's level, rows, key and sequence range and size,
changelog files, tags (``tests/model/history.py``) -- must be identical.
"""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from tests.model.machine import machine_for
from tests.model.model import Engine, TableConfig
from tests.model.profiles import _common

KINDS = {
    "fixed buckets, inline compaction": TableConfig(Engine.DEDUPLICATE, 3, False),
    "fixed buckets, write-only, manifest merge": TableConfig(
        Engine.AGGREGATION, 3, True, manifest_merge=True),
    "dynamic buckets, input changelog": TableConfig(
        Engine.DEDUPLICATE, -1, False, changelog_producer="input", auto_expire=True),
    "lookup changelog": TableConfig(Engine.DEDUPLICATE, 3, False, changelog_producer="lookup"),
    "deletion vectors, write-only": TableConfig(
        Engine.PARTIAL_UPDATE, 3, True, deletion_vectors=True),
    "deletion vectors, lookup changelog, dynamic buckets": TableConfig(
        Engine.DEDUPLICATE, -1, False, changelog_producer="lookup", deletion_vectors=True),
    "first-row": TableConfig(Engine.FIRST_ROW, 1, False),
}
EXAMPLES = 6


def _histories(config: TableConfig) -> list[list[tuple]]:
    recorded: list[list[tuple]] = []
    run_state_machine_as_test(machine_for(config, recorded), settings=settings(
        max_examples=EXAMPLES, derandomize=True, **_common))
    return recorded


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_same_operations_make_the_same_history(kind: str) -> None:
    first = _histories(KINDS[kind])
    again = _histories(KINDS[kind])
    # hypothesis ran its examples (it may run a few beyond max_examples), and some of them
    # went well past their first write
    assert len(first) >= EXAMPLES
    assert max(len(h) for h in first) > 3
    for i, (a, b) in enumerate(zip(first, again, strict=True)):
        assert a == b, f"example {i} of {kind!r} made another history the second time"
