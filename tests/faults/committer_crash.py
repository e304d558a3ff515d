"""One scenario shared by the local and the S3 crash tests: kill a committer at a commit step,
check the table it leaves, rerun the same commit and check it committed exactly once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lakecore.table import FileStoreTable
from lakecore.utils.faults import CrashStep
from tests.faults import committer
from tests.faults.harness import (
    all_files,
    check_history,
    missing_files,
    read_rows,
    run_child,
    snapshot_rows,
    unreferenced_files,
)

USER = "ingest-dag.load.run-2026-11-03"
PUBLISHED = {CrashStep.AFTER_SNAPSHOT_BEFORE_HINT, CrashStep.AFTER_COMMIT}
# what a crash at each step leaves behind, by file-name prefix
LEFTOVER_KINDS = {
    CrashStep.AFTER_DATA_FILES: {"data"},
    CrashStep.AFTER_MANIFESTS: {"data", "manifest"},
    CrashStep.AFTER_MANIFEST_LIST: {"data", "manifest", "manifest-list"},
    CrashStep.AFTER_SNAPSHOT_BEFORE_HINT: set(),
    CrashStep.AFTER_COMMIT: set(),
}


def file_kind(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return "manifest-list" if name.startswith("manifest-list-") else name.split("-", 1)[0]


def rows(lo: int, hi: int) -> dict[str, list]:
    return {"id": list(range(lo, hi)), "v": [f"v{i}" for i in range(lo, hi)]}


def kill_committer_then_rerun(
    table: FileStoreTable, options: dict[str, str], step: CrashStep,
    after_crash: Callable[[FileStoreTable], Any] = lambda table: None,
) -> None:
    """Two commits, a third killed at ``step``, then the third rerun with the same commit user
    and identifier. ``after_crash`` adds checks on the crashed table (e.g. no temporary
    objects, the lock still held)."""
    args = {"catalog": options, "table": "db.t", "user": USER}
    for ident, (lo, hi) in enumerate([(0, 10), (10, 20)], start=1):
        assert committer.main({**args, "identifier": ident, "rows": rows(lo, hi)})[
            "snapshot_ids"] == [ident]
    before, files_before = snapshot_rows(table), all_files(table)

    crashed = run_child("tests.faults.committer",
                        {**args, "identifier": 3, "rows": rows(20, 30)}, crash_at=step)
    assert crashed.killed, crashed.stderr

    # the table after the crash: committed snapshots unchanged, nothing referenced missing
    assert missing_files(table) == set()
    after = snapshot_rows(table)
    assert {sid: after[sid] for sid in before} == before
    expected = read_rows(table, 2) + [{"id": i, "v": f"v{i}"} for i in range(20, 30)]
    expected.sort(key=lambda r: (str(r["id"]), r["v"]))
    if step in PUBLISHED:
        assert table.snapshot_manager.latest_id() == 3  # found without the LATEST hint
        assert after[3] == expected
    else:
        assert table.snapshot_manager.latest_id() == 2
    leftovers = unreferenced_files(table)
    assert leftovers <= all_files(table) - files_before  # only what the dead process wrote
    assert {file_kind(p) for p in leftovers} == LEFTOVER_KINDS[step]
    after_crash(table)

    # the rerun: same user and identifier, same rows, freshly written files
    rerun = committer.main({**args, "identifier": 3, "rows": rows(20, 30)})
    assert rerun["skipped"] == (step in PUBLISHED)
    assert rerun["snapshot_ids"] == ([] if step in PUBLISHED else [3])
    snaps = check_history(table)
    assert [(s.commit_user, s.commit_identifier) for s in snaps] == [(USER, 1), (USER, 2),
                                                                      (USER, 3)]
    assert read_rows(table) == expected  # every row exactly once
    assert unreferenced_files(table) == leftovers  # the rerun left nothing of its own
