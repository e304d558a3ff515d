"""Fault-injection harness: kill a committer at a named step, then check what it left behind.

Reusable by any test that crashes a lakecore process (writer, compactor, committer, expirer):

* ``run_child(module, args, crash_at)`` runs ``python -m <module> <json args>`` with
  ``LAKECORE_FAULT_CRASH_AT`` set (see ``lakecore.testing.faults``) and returns its result;
* ``referenced_files(table)`` is every file some snapshot (or the table's metadata) needs;
* ``unreferenced_files(table)`` is everything else on disk: what a crash may leave behind;
* ``check_history(table)`` asserts contiguous ids, unique (user, identifier) and that each
  snapshot was built on the one before (a linear history);
* ``snapshot_rows(table)`` reads every snapshot, to prove a crash changed none of them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakecore.format.manifest import ManifestEntry
from lakecore.format.snapshot import Snapshot
from lakecore.manifest_io import merge_entries
from lakecore.table import FileStoreTable
from lakecore.testing.faults import ENV_VAR, CrashStep
from tests.lock.backends import REPO_ROOT, child_env

Row = dict[str, Any]


@dataclass(frozen=True)
class ChildResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def killed(self) -> bool:
        return self.returncode == -9

    def json(self) -> Any:
        return json.loads(self.stdout.strip().splitlines()[-1])


def run_child(module: str, args: Mapping[str, Any], crash_at: CrashStep | str | None = None,
              timeout: float = 120) -> ChildResult:
    env = child_env()
    if crash_at is not None:
        env[ENV_VAR] = crash_at.value if isinstance(crash_at, CrashStep) else crash_at
    proc = subprocess.run([sys.executable, "-m", module, json.dumps(dict(args))], env=env,
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)
    return ChildResult(proc.returncode, proc.stdout, proc.stderr)


# -- what is on disk and what is needed ---------------------------------------------------
def all_files(table: FileStoreTable) -> set[str]:
    return {s.path for s in table.file_io.list_status(table.table_path, recursive=True)
            if not s.is_dir}


def _entry_files(table: FileStoreTable, e: ManifestEntry) -> set[str]:
    part = table.partition_codec.decode(e.partition)
    paths = table.paths
    out = {paths.data_file_path(part, e.bucket, e.file.file_name, e.file.external_path)}
    out |= {paths.data_file_path(part, e.bucket, name) for name in e.file.extra_files}
    return out


def snapshot_files(table: FileStoreTable, snap: Snapshot) -> set[str]:
    """The snapshot file and everything it reaches: manifest lists, manifests, data files."""
    mio, paths = table.manifest_io(), table.paths
    out = {paths.snapshot_path(snap.id)}
    for name in (snap.base_manifest_list, snap.delta_manifest_list,
                 snap.changelog_manifest_list, snap.index_manifest):
        if not name:
            continue
        out.add(paths.manifest_path(name))
        if name == snap.index_manifest:
            continue
        for meta in mio.read_manifest_list(name):
            out.add(paths.manifest_path(meta.file_name))
            for entry in mio.read_manifest(meta.file_name):
                out |= _entry_files(table, entry)
    return out


def referenced_files(table: FileStoreTable) -> set[str]:
    """Files the table needs: every snapshot's closure, schemas, the two hints and the
    commit-user markers (lakecore.commit.commit_users)."""
    out = {s.path for s in table.file_io.list_status(table.paths.schema_dir)}
    out |= {table.paths.latest_hint, table.paths.earliest_hint}
    out |= {s.path for s in table.file_io.list_status(
        f"{table.table_path}/_lakecore/commit-users") if not s.is_dir}
    for snap in table.snapshot_manager.snapshots():
        out |= snapshot_files(table, snap)
    return out


def unreferenced_files(table: FileStoreTable) -> set[str]:
    return all_files(table) - referenced_files(table)


def missing_files(table: FileStoreTable) -> set[str]:
    """Referenced but absent (the hints may legitimately be missing): must stay empty."""
    hints = {table.paths.latest_hint, table.paths.earliest_hint}
    return referenced_files(table) - all_files(table) - hints


# -- reading ------------------------------------------------------------------------------
def read_rows(table: FileStoreTable, snapshot_id: int | None = None) -> list[Row]:
    t = table if snapshot_id is None else table.copy({"scan.snapshot-id": str(snapshot_id)})
    rb = t.new_read_builder()
    rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
    return sorted(rows, key=lambda r: tuple(str(v) for v in r.values()))


def snapshot_rows(table: FileStoreTable) -> dict[int, list[Row]]:
    return {s.id: read_rows(table, s.id) for s in table.snapshot_manager.snapshots()}


# -- history ------------------------------------------------------------------------------
def check_history(table: FileStoreTable) -> list[Snapshot]:
    """Contiguous ids, each (commit user, identifier) once, and each snapshot's base equal to
    the live files of the snapshot before it: no commit was built on a stale view."""
    sm, mio = table.snapshot_manager, table.manifest_io()
    snaps = list(sm.snapshots())
    ids = [s.id for s in snaps]
    if ids:
        assert ids == list(range(ids[0], ids[0] + len(ids))), f"gaps in {ids}"
    assert sm.latest_id() == (ids[-1] if ids else None)
    pairs = Counter((s.commit_user, s.commit_identifier) for s in snaps)
    twice = [p for p, n in pairs.items() if n > 1]
    assert not twice, f"committed twice: {twice}"
    cache: dict[str, list[ManifestEntry]] = {}  # manifests are immutable: read each once

    def entries(list_name: str) -> list[ManifestEntry]:
        out: list[ManifestEntry] = []
        for meta in mio.read_manifest_list(list_name):
            if meta.file_name not in cache:
                cache[meta.file_name] = mio.read_manifest(meta.file_name)
            out += cache[meta.file_name]
        return out

    previous: set[tuple] | None = set() if ids and ids[0] == 1 else None  # None: expired
    for s in snaps:
        base = merge_entries(entries(s.base_manifest_list))
        if previous is not None:
            assert set(base) == previous, f"snapshot {s.id} is not based on snapshot {s.id - 1}"
        live = merge_entries([*base.values(), *entries(s.delta_manifest_list)])
        assert sum(e.file.row_count for e in live.values()) == s.total_record_count, s.id
        previous = set(live)
    return snaps
