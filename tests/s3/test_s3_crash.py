"""Kill (SIGKILL) a process at the steps that matter on S3, where there is no atomic rename.

On an object store a file is published by one PUT: it exists whole or not at all, and
lakecore writes snapshots, tags and hints in place (no temporary object to rename, so none is
left behind). What remains to prove is that every crash leaves a table that reads as before,
whose leftovers are only unreferenced files, and that the rerun completes without committing
twice: for a commit under either protocol (conditional PUT, SQL lock), and for the operations
that create or delete snapshot files outside a commit (tags, snapshot expiry, rollback).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from lakecore import CatalogFactory
from lakecore.maintenance import ExpireConfig, create_tag, expire_snapshots, rollback_to
from lakecore.utils.faults import CrashStep
from tests.faults import operations
from tests.faults.committer_crash import LEFTOVER_KINDS, kill_committer_then_rerun
from tests.faults.harness import (
    all_files,
    check_history,
    missing_files,
    read_rows,
    run_child,
    tag_rows,
    unreferenced_files,
)
from tests.faults.test_commit_crash import make_table
from tests.s3.server import MotoServer


def _options(server: MotoServer, bucket: str, protocol: str, tmp_path) -> dict[str, str]:
    base = server.catalog_options(bucket)
    if protocol == "conditional-put":
        return {**base, "commit.protocol": "conditional-put"}
    # a 1 s lock expiry: the rerun takes over a lock the killed process held
    return {**base, "lock.enabled": "true", "lock.uri": f"sqlite:///{tmp_path}/locks.db",
            "lock-expire-time": "1 s", "lock-acquire-timeout": "60 s",
            "lock-check-max-sleep": "200 ms"}


def _no_temporary_objects(table) -> None:
    names = [p.rsplit("/", 1)[-1] for p in all_files(table)]
    assert not [n for n in names if n.endswith(".tmp")], names


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["conditional-put", "lock"])
@pytest.mark.parametrize("step", list(LEFTOVER_KINDS), ids=lambda s: s.value)
def test_kill_a_committer_on_s3_then_rerun(moto_server, bucket, tmp_path, protocol, step):
    options = _options(moto_server, bucket, protocol, tmp_path)
    table = make_table(options)
    kill_committer_then_rerun(table, options, step, _no_temporary_objects)
    assert missing_files(table) == set()


def _run_op(options: dict[str, str], op: str, step: CrashStep | str) -> None:
    child = run_child("tests.faults.operations", {"catalog": options, "op": op},
                      crash_at=step)
    assert child.killed, f"{op} at {step}: exit {child.returncode}\n{child.stderr}"


@pytest.mark.slow
@pytest.mark.parametrize(("op", "step"), [
    ("create-tag", CrashStep.TAG_AFTER_CREATE),
    ("expire-snapshots", CrashStep.EXPIRE_MID_SNAPSHOTS),
    ("expire-snapshots", CrashStep.EXPIRE_AFTER_SNAPSHOTS),
    ("rollback", CrashStep.ROLLBACK_AFTER_LATEST_HINT),
    ("rollback", CrashStep.ROLLBACK_MID_SNAPSHOTS),
], ids=lambda v: v.value if isinstance(v, CrashStep) else v)
def test_kill_snapshot_and_tag_operations_on_s3_then_rerun(moto_server, bucket, op, step):
    """Tags, expiry and rollback create or delete snapshot files and move the hints outside
    a commit; killed midway, the rerun finishes the job (conditional-put table)."""
    options = {**moto_server.catalog_options(bucket), "commit.protocol": "conditional-put"}
    operations.build_history(options)
    catalog = CatalogFactory.create(options)
    t = catalog.get_table(operations.TABLE)
    tags_before = tag_rows(t)

    _run_op(options, op, step)
    operations.OPERATIONS[op](t)  # the rerun
    sm = t.snapshot_manager
    check_history(t, since=sm.earliest_id())
    if op == "create-tag":
        assert tag_rows(t)["new"] == read_rows(t)
    if op == "expire-snapshots":
        assert sm.list_ids() == list(range(8, 11))  # KEEP = 3 of 4..10
        assert sm.earliest_id() == 8
        assert tag_rows(t) == tags_before
    if op == "rollback":
        assert sm.latest_id() == 7 and "late" not in tag_rows(t)
        assert tag_rows(t)["keep"] == read_rows(t)
    operations.remove_all_orphans(t)  # also the dead writer's .tmp that build_history made
    assert unreferenced_files(t) == set()
    _no_temporary_objects(t)
    for sid in sm.list_ids():  # every kept snapshot still reads
        read_rows(t, sid)
    catalog.close()


def test_rollback_and_tag_api_on_a_conditional_table(moto_server, bucket):
    """The same operations uninterrupted, through the public functions (a sanity check for
    the crash cases above)."""
    options = {**moto_server.catalog_options(bucket), "commit.protocol": "conditional-put"}
    operations.build_history(options)
    t = CatalogFactory.create(options).get_table(operations.TABLE)
    create_tag(t, "again", ignore_if_exists=True)
    create_tag(t, "again", ignore_if_exists=True)
    expire_snapshots(t, dry_run=False, now=operations.now(),
                     config=ExpireConfig(5, 5, timedelta(0), 1000))
    rollback_to(t, tag="keep", dry_run=False)
    assert t.snapshot_manager.latest_id() == 7
