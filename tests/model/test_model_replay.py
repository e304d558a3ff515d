"""A bug in the merge is found, shrunk to a few steps, and replayed from its blob (issue 36).

The model test is only worth its examples if a failure can be reproduced: hypothesis shrinks a
failing example by replaying variations of its choices, and prints ``@reproduce_failure`` with
the blob of the shrunk one. Both need the machine to see the same table for the same choices
(``test_model_determinism``). Here a bug is injected into the merge of a partial-update table
(whose merges all go through ``merge_sorted``; deduplicate has fast paths of its own): a key
with several records keeps its oldest one instead of folding them. The machine must find it,
shrink it to a short example, and fail again the same way when the printed blob is replayed.
"""

from __future__ import annotations

import ast
import dataclasses
import re

import numpy as np
import pytest
from hypothesis import Phase, reproduce_failure, settings
from hypothesis.stateful import run_state_machine_as_test

from lakecore.format.kv import VALUE_KIND
from lakecore.merge import functions
from tests.model.machine import machine_for
from tests.model.model import Engine, TableConfig
from tests.model.profiles import _common

BLOB = re.compile(r"@reproduce_failure\((?P<version>'[^']+'), (?P<blob>b'[^']*')\)")


def _keeps_the_oldest(real):  # type: ignore[no-untyped-def]
    """``_assemble`` with the bug: a key with several records keeps its oldest one, whole."""
    def assemble(table, spec, groups, result, drop_retracts):  # type: ignore[no-untyped-def]
        rows = np.where(groups.sizes > 1, groups.starts, result.rows)
        kinds = table.column(VALUE_KIND).to_numpy().astype(np.int8)[rows]
        result = dataclasses.replace(result, rows=rows, kinds=kinds,
                                     use_merged=np.zeros(len(rows), dtype=bool))
        return real(table, spec, groups, result, drop_retracts)
    return assemble


@pytest.mark.slow
def test_an_injected_merge_bug_is_found_shrunk_and_replayed(monkeypatch) -> None:
    monkeypatch.setattr(functions, "_assemble", _keeps_the_oldest(functions._assemble))
    machine = machine_for(TableConfig(Engine.PARTIAL_UPDATE, 1, True))
    # ten steps an example at most: the bug shows in two, and shrinking costs less; the bug
    # fails several checks, and hypothesis reports the simplest of them
    # hypothesis's "explain" phase (which parts of the example matter) replays it many times
    # over and tells nothing this test checks: generate and shrink only
    run = settings(max_examples=200, derandomize=True, report_multiple_bugs=False,
                   phases=[Phase.generate, Phase.shrink],
                   **{**_common, "stateful_step_count": 10})

    with pytest.raises(AssertionError) as found:
        run_state_machine_as_test(machine, settings=run)
    notes = "\n".join(getattr(found.value, "__notes__", []))
    steps = [line for line in notes.splitlines() if line.startswith("state.")
             and not line.startswith("state.teardown")]
    assert 1 <= len(steps) <= 4, notes  # shrunk: a write or two and a read
    match = BLOB.search(notes)
    assert match, notes
    version, blob = ast.literal_eval(match["version"]), ast.literal_eval(match["blob"])

    with pytest.raises(AssertionError) as replayed:
        run_state_machine_as_test(reproduce_failure(version, blob)(machine), settings=run)
    assert str(replayed.value).splitlines()[0] == str(found.value).splitlines()[0]
