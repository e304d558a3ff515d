"""Minimal reproductions of what the model test found, kept as plain regression tests.

Overwrite with inline compaction (``write-only = false``): the overwrite's writers compacted
the files being replaced together with the new ones, and the overwrite commit dropped the
compaction. The compacted files were left behind unreferenced, and a first-row table (whose
batch scans skip level 0) read the overwritten partition as empty until some later compaction.
Paimon's overwrite writers ignore the previous files, and its overwrite commits their inline
compaction as a COMPACT snapshot after the OVERWRITE; lakecore now does the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.helpers import make_table, write
from tests.faults.harness import unreferenced_files
from tests.model.machine import read_rows
from tests.model.model import PARTITION_KEYS, PRIMARY_KEYS, SCHEMA, Rec, to_arrow

A, B = "2024-01-01", "2024-01-02"


@pytest.mark.parametrize("engine", ["first-row", "deduplicate"])
@pytest.mark.parametrize("overwrite", [{}, {"dt": A}])
def test_overwrite_commits_its_inline_compaction(tmp_path: Path, engine: str,
                                                 overwrite: dict[str, str]) -> None:
    t = make_table(str(tmp_path), SCHEMA, PRIMARY_KEYS, PARTITION_KEYS, {
        "bucket": "1", "rowkind.field": "rk", "merge-engine": engine, "write-only": "false",
        "num-sorted-run.compaction-trigger": "1"})
    write(t, to_arrow([Rec("+I", 1, A, 1, 1), Rec("+I", 2, B, 2, 2)]))
    write(t, to_arrow([Rec("+I", 1, A, 10, 10)]))
    ids = write(t, to_arrow([Rec("+I", 3, A, 3, 3)]), overwrite=overwrite)
    kinds = [t.snapshot_manager.snapshot(s).commit_kind.value for s in ids]
    # first-row lifts level 0 on every commit; deduplicate has one new file: nothing to merge
    assert kinds == (["OVERWRITE", "COMPACT"] if engine == "first-row" else ["OVERWRITE"])
    assert read_rows(t) == [(A, 3, 3, 3), (B, 2, 2, 2)]
    assert unreferenced_files(t) == set()
