"""The crash matrix: every writing operation killed (SIGKILL) at every step boundary.

For each (operation, step) in ``MATRIX``, on a fresh copy of one table with history
(``operations.build_history``): run the operation in a child process that kills itself at the
step, then check that

1. the table opens and every snapshot and tag the operation keeps still reads the same, the
   history from the oldest kept snapshot is linear with nothing committed twice, and nothing
   those snapshots or tags reference is missing;
2. the crash deleted nothing the operation keeps, and the only unreferenced files are ones the
   table had before, the dead process wrote, or the operation deletes anyway;
3. the rerun (same commit user and identifier) completes, commits nothing twice, leaves no
   unreferenced file of its own, and ends in the same state as an uninterrupted run on a copy;
4. orphan removal then clears every unreferenced file, and the files on disk are the ones the
   uninterrupted run (plus orphan removal) keeps.

The fast profile (CI) kills each case once. ``LAKECORE_CRASH_MATRIX=full`` adds a sweep that
kills each step at its 1st, 2nd, ... occurrence until the operation no longer reaches it.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lakecore.store.partition_records import expired_partition_records
from lakecore.table import FileStoreTable
from lakecore.utils.faults import CrashStep, IOFaultStep, parse_target
from tests.faults import operations as ops
from tests.faults.harness import (
    METADATA_DIRS,
    all_files,
    check_history,
    missing_files,
    relative,
    run_child,
    snapshot_rows,
    snapshots,
    tag_rows,
    unreferenced_files,
)

S = CrashStep
COMMIT_STEPS = [S.AFTER_DATA_FILES, S.AFTER_MANIFESTS, S.AFTER_MANIFEST_LIST,
                S.AFTER_SNAPSHOT_BEFORE_HINT, S.AFTER_COMMIT]
# commits that change the index manifest (a HASH file replaced, an overwrite or a partition
# expiry dropping a partition's index entries) also stop after writing the new index manifest
INDEX_COMMIT_STEPS = [*COMMIT_STEPS[:3], S.AFTER_INDEX_MANIFEST, *COMMIT_STEPS[3:]]

# operation -> crash targets ("step" or "step@N": the N-th time the step is reached)
MATRIX: dict[str, list[CrashStep | str]] = {
    "append": [S.WRITE_MID_DATA_FILE, S.WRITE_AFTER_DATA_FILE, "write-after-data-file@3",
               *INDEX_COMMIT_STEPS],
    # one commit call, APPEND then COMPACT: @1 is the APPEND commit, @2 the COMPACT one
    "append-inline-compact": [S.WRITE_AFTER_DATA_FILE, S.COMPACT_AFTER_REWRITE,
                              "after-commit@1", "after-data-files@2", "after-manifests@2",
                              "after-snapshot-before-hint@2"],
    "overwrite": [S.WRITE_MID_DATA_FILE, S.WRITE_AFTER_DATA_FILE, *INDEX_COMMIT_STEPS],
    "compact": [S.WRITE_MID_DATA_FILE, S.WRITE_AFTER_DATA_FILE, S.COMPACT_AFTER_REWRITE,
                "compact-after-rewrite@2", S.COMPACT_BEFORE_COMMIT, *COMMIT_STEPS],
    "expire-partitions": [S.PARTITION_EXPIRE_AFTER_RECORD, *INDEX_COMMIT_STEPS],
    "expire-snapshots": [s for s in S if s.value.startswith("expire-")],
    "remove-orphan-files": [S.ORPHAN_MID_DELETE],
    "create-tag": [S.TAG_AFTER_CREATE],
    "delete-tag": [S.TAG_DELETE_AFTER_TAG_FILE, S.TAG_DELETE_MID_FILES],
    "rollback": [s for s in S if s.value.startswith("rollback-")],
    # ALTER TABLE then an append in the new schema (the rerun applies what is still missing)
    "alter": [S.ALTER_BEFORE_SCHEMA, S.ALTER_AFTER_SCHEMA, S.WRITE_AFTER_DATA_FILE,
              S.AFTER_SNAPSHOT_BEFORE_HINT],
}
CASES = [(op, t.value if isinstance(t, CrashStep) else t)
         for op, targets in MATRIX.items() for t in targets]
# Killed after the APPEND snapshot of a two-snapshot commit landed and before its COMPACT
# snapshot did (here "after-commit@1", "after-data-files@2", "after-manifests@2"): the rerun
# finds (user, identifier) committed and skips, so the compaction is lost, as in Paimon (the
# rows are all there; the next compaction redoes it). Its output files are left unreferenced
# for orphan removal.
TWO_SNAPSHOT_OPS = {"append-inline-compact"}

State = dict[str, Any]


# -- the table before, and what an uninterrupted run makes of it --------------------------
@dataclass(frozen=True)
class Base:
    root: Path
    rows: dict[int, list]  # snapshot id -> rows
    tags: dict[str, list]  # tag -> rows
    files: set[str]  # relative paths
    unreferenced: set[str]  # the dead writer's leftovers


@dataclass(frozen=True)
class Reference:
    state: State  # after the operation
    removed: set[str]  # base files the operation deletes
    files: set[str]  # after the operation and orphan removal
    new_kinds: Counter[str]  # kinds of the files it added


def end_state(table: FileStoreTable) -> State:
    """What the table says, independent of file names: snapshots (kind, user, identifier,
    rows, index entries by partition, bucket, type and row count), tags, the expired-partition
    records, the commit-user index entries and the schema versions (fields, ids and options,
    not their time)."""
    sm = table.snapshot_manager
    meta = set()
    for d in METADATA_DIRS:
        meta |= {s.path.rsplit("/", 1)[-1]
                 for s in table.file_io.list_status(f"{table.table_path}/{d}", recursive=True)
                 if not s.is_dir}
    return {
        "snapshots": [(s.id, s.commit_kind.value, s.commit_user, s.commit_identifier,
                       s.total_record_count) for s in snapshots(table)],
        "earliest": sm.earliest_id(),
        "latest": sm.latest_id(),
        "rows": snapshot_rows(table),
        "index": {s.id: sorted((e.partition, e.bucket, e.index_file.index_type,
                                e.index_file.row_count) for e in table.index_entries(s))
                  for s in snapshots(table)},
        "tags": tag_rows(table),
        "expired_partitions": sorted({tuple(sorted(p.items()))
                                      for p in expired_partition_records(table)}),
        "commit_users": sorted(n for n in meta if n.startswith("commit-user")),
        "schemas": [(s.id, [f.to_json() for f in s.fields], s.highest_field_id, s.options)
                    for s in map(table.schema_manager.schema, table.schema_manager.list_ids())],
    }


def without_last_snapshot(state: State) -> State:
    last = state["snapshots"][-1][0]
    return {**state, "snapshots": state["snapshots"][:-1], "latest": last - 1,
            "rows": {k: v for k, v in state["rows"].items() if k != last},
            "index": {k: v for k, v in state["index"].items() if k != last}}


def kinds(paths: set[str]) -> Counter[str]:
    """Files by kind (data, changelog, manifest, manifest-list, snapshot, tag), metadata
    directories left out (their file names are random)."""
    out: Counter[str] = Counter()
    for p in paths:
        if p.split("/", 1)[0] in METADATA_DIRS:
            continue
        name = p.rsplit("/", 1)[-1]
        out["manifest-list" if name.startswith("manifest-list-") else name.split("-", 1)[0]] += 1
    return out


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    root = tmp_path_factory.mktemp("crash-matrix") / "base"
    ops.build_history(ops.catalog_options(root))
    catalog, t = ops.open_table(ops.catalog_options(root))
    try:
        check_history(t)
        assert missing_files(t) == set()
        return Base(root, snapshot_rows(t), tag_rows(t), relative(t, all_files(t)),
                    relative(t, unreferenced_files(t)))
    finally:
        catalog.close()


@pytest.fixture(scope="module")
def reference(base: Base, tmp_path_factory: pytest.TempPathFactory
              ) -> Callable[[str], Reference]:
    cache: dict[str, Reference] = {}

    def get(op: str) -> Reference:
        if op not in cache:
            root = tmp_path_factory.mktemp("reference") / op
            shutil.copytree(base.root, root)
            catalog, t = ops.open_table(ops.catalog_options(root))
            try:
                ops.OPERATIONS[op](t)
                state = end_state(t)
                removed = base.files - relative(t, all_files(t))
                ops.remove_all_orphans(t)
                assert unreferenced_files(t) == set() and missing_files(t) == set()
                files = relative(t, all_files(t))
                cache[op] = Reference(state, removed, files, kinds(files - base.files))
            finally:
                catalog.close()
        return cache[op]

    return get


# -- one kill point -----------------------------------------------------------------------
def kill_and_check(base: Base, ref: Reference, root: Path, op: str, target: str) -> bool:
    """Kill ``op`` at ``target`` on a copy of the base table under ``root`` and run every
    check. False when the operation finished without reaching the step (nothing checked)."""
    shutil.copytree(base.root, root)
    options = ops.catalog_options(root)
    child = run_child("tests.faults.operations", {"catalog": options, "op": op},
                      crash_at=target)
    if child.returncode == 0:
        return False
    assert child.killed, f"{op} at {target}: exit {child.returncode}\n{child.stderr}"
    catalog, t = ops.open_table(options)
    try:
        lost_compact = (op in TWO_SNAPSHOT_OPS
                        and t.snapshot_manager.latest_id() == max(base.rows) + 1)
        # 1. the table opens; every snapshot and tag the operation keeps reads the same
        retained = sorted(set(base.rows) & set(ref.state["rows"]))
        since = retained[0] if retained else None
        rows = snapshot_rows(t, since)
        assert {i: rows.get(i) for i in retained} == {i: base.rows[i] for i in retained}
        kept_tags = set(base.tags) & set(ref.state["tags"])
        tags = tag_rows(t)
        assert {n: tags.get(n) for n in kept_tags} == {n: base.tags[n] for n in kept_tags}
        check_history(t, since)
        assert missing_files(t, since) == set()

        # 2. nothing kept was deleted; leftovers are only files nothing needs
        files = relative(t, all_files(t))
        assert base.files - files <= ref.removed
        leftovers = relative(t, unreferenced_files(t, since))
        stray = leftovers - (base.unreferenced | (files - base.files) | ref.removed)
        assert not stray, f"unexpected unreferenced files {sorted(stray)}"

        # 3. the rerun completes, commits nothing twice, leaks nothing, ends as if uninterrupted
        ops.OPERATIONS[op](t)
        check_history(t)
        assert missing_files(t) == set()
        leaked = relative(t, unreferenced_files(t)) - leftovers
        assert not leaked, f"the rerun left {sorted(leaked)} unreferenced"
        state = end_state(t)
        if lost_compact:
            expected = without_last_snapshot(ref.state)
            assert state["rows"][state["latest"]] == ref.state["rows"][ref.state["latest"]]
        else:
            expected = ref.state
        assert state == expected

        # 4. orphan removal clears the leftovers; the files kept are the uninterrupted run's
        ops.remove_all_orphans(t)
        assert unreferenced_files(t) == set()
        assert missing_files(t) == set()
        files = relative(t, all_files(t))
        assert files & base.files == ref.files & base.files
        if not lost_compact:
            assert kinds(files - base.files) == ref.new_kinds
    finally:
        catalog.close()
    return True


@pytest.mark.slow
@pytest.mark.parametrize(("op", "target"), CASES, ids=[f"{o}:{t}" for o, t in CASES])
def test_kill_at_step_then_rerun(base: Base, reference: Callable[[str], Reference],
                                 tmp_path: Path, op: str, target: str) -> None:
    assert kill_and_check(base, reference(op), tmp_path / "t", op, target), (
        f"{op} finished without reaching {target}: the case tests nothing")


# -- transient I/O errors on the snapshot write -------------------------------------------
# Paimon's FileStoreCommitImpl.tryCommitOnce: an exception while committing the snapshot means
# "commit may have succeeded"; the retry first checks whether our snapshot landed (and then
# stops), else commits again. The caller sees success either way, and the table ends exactly
# as after an uninterrupted run: one snapshot per commit, nothing committed twice, no manifest
# of the landed snapshot deleted, nothing left unreferenced after orphan removal.
IO_OPS = ["append", "append-inline-compact", "overwrite", "compact", "expire-partitions"]
IO_TARGETS = [IOFaultStep.SNAPSHOT_BEFORE_CREATE.value, IOFaultStep.SNAPSHOT_AFTER_CREATE.value]
IO_CASES = [(op, t) for op in IO_OPS for t in IO_TARGETS] + [
    # the second snapshot of a two-snapshot commit (its COMPACT)
    ("append-inline-compact", "snapshot-before-create@2"),
    ("append-inline-compact", "snapshot-after-create@2"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("op", "target"), IO_CASES, ids=[f"{o}:{t}" for o, t in IO_CASES])
def test_transient_io_error_on_the_snapshot_write_is_retried(
        base: Base, reference: Callable[[str], Reference], tmp_path: Path,
        op: str, target: str) -> None:
    ref = reference(op)
    root = tmp_path / "t"
    shutil.copytree(base.root, root)
    options = ops.catalog_options(root)
    child = run_child("tests.faults.operations", {"catalog": options, "op": op},
                      io_error_at=target)
    assert child.returncode == 0, f"{op} with an I/O error at {target}:\n{child.stderr}"
    assert "injected transient I/O error" in child.stderr, "the fault never fired"
    catalog, t = ops.open_table(options)
    try:
        check_history(t)
        assert missing_files(t) == set()
        assert end_state(t) == ref.state
        ops.remove_all_orphans(t)
        assert unreferenced_files(t) == set() and missing_files(t) == set()
        files = relative(t, all_files(t))
        assert files & base.files == ref.files & base.files
        assert kinds(files - base.files) == ref.new_kinds
    finally:
        catalog.close()


def test_every_crash_step_is_in_the_matrix() -> None:
    """A new CrashStep must come with a matrix case (and each case names a real step)."""
    covered = {parse_target(t)[0] for _, t in CASES}
    missing = [s.value for s in CrashStep if s not in covered]
    assert not missing, f"CrashSteps no operation in MATRIX is killed at: {missing}"
    assert set(MATRIX) == set(ops.OPERATIONS), "every operation has cases"
    assert len(set(CASES)) == len(CASES)


FULL = os.environ.get("LAKECORE_CRASH_MATRIX") == "full"
STEPS = sorted({(op, parse_target(t)[0].value) for op, t in CASES})

if FULL:  # `make soak`; defined only then, so the fast profile lists no skipped cases

    @pytest.mark.slow
    @pytest.mark.parametrize(("op", "step"), STEPS, ids=[f"{o}:{s}" for o, s in STEPS])
    def test_full_profile_every_occurrence(base: Base,
                                           reference: Callable[[str], Reference],
                                           tmp_path: Path, op: str, step: str) -> None:
        """Kill at the 1st, 2nd, ... occurrence of the step until the operation stops reaching it
        (at most 50 occurrences)."""
        ref = reference(op)
        n = 1
        while n <= 50 and kill_and_check(base, ref, tmp_path / str(n), op, f"{step}@{n}"):
            n += 1
        assert n > 1, f"{op} never reached {step}"
