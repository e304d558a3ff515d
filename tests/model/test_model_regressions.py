"""Minimal reproductions of what the model test found, kept as plain regression tests.

Overwrite with inline compaction (``write-only = false``): the overwrite's writers compacted
the files being replaced together with the new ones, and the overwrite commit dropped the
compaction. The compacted files were left behind unreferenced, and a first-row table (whose
batch scans skip level 0) read the overwritten partition as empty until some later compaction.
Paimon's overwrite writers ignore the previous files, and its overwrite commits their inline
compaction as a COMPACT snapshot after the OVERWRITE; lakecore now does the same.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from lakecore.maintenance import ExpireConfig, create_tag, expire_snapshots, rollback_to
from tests.core.helpers import make_table, write
from tests.faults.harness import unreferenced_files
from tests.maintenance.helpers import missing_referenced_files
from tests.model.machine import FUTURE, read_rows
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


def test_rollback_to_a_tag_whose_changelog_expired_names_no_missing_file(tmp_path: Path) -> None:
    """Found by the soak profile (issue 36 rounds): a tag keeps no changelog (Paimon's expiry
    deletes an expired snapshot's changelog list even when a tag pins the snapshot), and a
    rollback to that tag restored the snapshot file from the tag as it was, naming the deleted
    changelog list. The restored snapshot now has no changelog; it reads as the tag did."""
    t = make_table(str(tmp_path), SCHEMA, PRIMARY_KEYS, PARTITION_KEYS, {
        "bucket": "1", "rowkind.field": "rk", "changelog-producer": "input"})
    write(t, to_arrow([Rec("+I", 1, A, 1, 1)]))
    write(t, to_arrow([Rec("+I", 2, A, 2, 2)]))
    tagged = t.snapshot_manager.latest_id()
    assert t.snapshot_manager.snapshot(tagged).changelog_manifest_list
    create_tag(t, "t0", tagged)
    write(t, to_arrow([Rec("+I", 3, B, 3, 3)]))
    write(t, to_arrow([Rec("+I", 1, A, 10, 10)]))
    expire_snapshots(t, dry_run=False, now=FUTURE,
                     config=ExpireConfig(1, 1, timedelta(0), 10))
    assert t.snapshot_manager.earliest_id() > tagged  # the tagged snapshot and its changelog
    rollback_to(t, tag="t0", dry_run=False)
    restored = t.snapshot_manager.snapshot(tagged)
    assert restored.changelog_manifest_list is None and restored.changelog_record_count == 0
    assert missing_referenced_files(t) == []
    assert read_rows(t) == [(A, 1, 1, 1), (A, 2, 2, 2)]
    write(t, to_arrow([Rec("+I", 4, B, 4, 4)]))  # and the table goes on from there
    assert read_rows(t) == [(A, 1, 1, 1), (A, 2, 2, 2), (B, 4, 4, 4)]
