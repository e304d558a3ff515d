"""Fault-injection harness: kill a process at a named step, then check what it left behind.

Reusable by any test that crashes a lakecore process (writer, compactor, committer, expirer):

* ``run_child(module, args, crash_at)`` runs ``python -m <module> <json args>`` with
  ``LAKECORE_FAULT_CRASH_AT`` set (see ``lakecore.utils.faults``) and returns its result;
* ``metadata_files(table)`` is the table metadata no snapshot references: schemas, hints,
  the commit-user index and lakecore's own bookkeeping;
* ``referenced_files(table)`` is every file the table needs: metadata, and the closure of
  every snapshot (optionally only those from ``since`` on) and of every tag (manifests, data
  files, the index manifest and the index files it lists);
* ``unreferenced_files(table)`` is everything else on disk: what a crash may leave behind;
* ``check_history(table)`` asserts contiguous ids, unique (user, identifier, kind) and that each
  snapshot was built on the one before (a linear history);
* ``snapshot_rows(table)`` / ``tag_rows(table)`` read every snapshot / tag, to prove a crash
  changed none of them.

``since`` (a snapshot id) restricts the checks to the snapshots an interrupted expiry keeps:
the ones below it may already have lost files, which is what expiry is for.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lakecore.format.manifest import ManifestEntry
from lakecore.format.snapshot import Snapshot
from lakecore.store.index_paths import index_file_path
from lakecore.store.manifest_io import merge_entries
from lakecore.table import FileStoreTable
from lakecore.utils.faults import ENV_VAR, IO_ERROR_ENV_VAR, CrashStep, IOFaultStep, parse_target
from tests.lock.backends import REPO_ROOT, child_env

Row = dict[str, Any]

# Directories of table metadata under the table path, kept whole (no snapshot names them):
# ``commit-user`` / ``_lakecore/commit-users`` hold the commit-user index (one marker per commit
# user), ``_lakecore`` also lakecore's expired-partition records, ``consumer`` Paimon's
# streaming consumers.
METADATA_DIRS = ("commit-user", "_lakecore", "consumer")


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
              timeout: float = 120, io_error_at: str | None = None) -> ChildResult:
    """Run ``module`` with ``args`` (JSON) in a child process, killed at ``crash_at`` and/or
    given one transient ``OSError`` at ``io_error_at`` (``lakecore.utils.faults``)."""
    env = child_env()
    if io_error_at is not None:
        IOFaultStep(io_error_at.partition("@")[0])  # a misspelt step would never fire
        env[IO_ERROR_ENV_VAR] = io_error_at
    if crash_at is not None:
        target = crash_at.value if isinstance(crash_at, CrashStep) else crash_at
        parse_target(target)  # a misspelt step would never fire: refuse it here
        env[ENV_VAR] = target
    proc = subprocess.run([sys.executable, "-m", module, json.dumps(dict(args))], env=env,
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)
    return ChildResult(proc.returncode, proc.stdout, proc.stderr)


# -- what is on disk and what is needed ---------------------------------------------------
def all_files(table: FileStoreTable) -> set[str]:
    return {s.path for s in table.file_io.list_status(table.table_path, recursive=True)
            if not s.is_dir}


def relative(table: FileStoreTable, paths: Iterable[str]) -> set[str]:
    """Paths relative to the table directory (to compare copies of one table)."""
    base = table.table_path.rstrip("/") + "/"
    return {p[len(base):] if p.startswith(base) else p for p in paths}


def metadata_files(table: FileStoreTable) -> set[str]:
    """Table metadata (not reached from any snapshot, but needed): every schema file, the
    LATEST and EARLIEST hints (listed even when absent) and everything under
    ``<table>/commit-user/`` (the commit-user index), ``<table>/_lakecore/`` and
    ``<table>/consumer/``."""
    fio, paths = table.file_io, table.paths
    out = {s.path for s in fio.list_status(paths.schema_dir) if not s.is_dir}
    out |= {paths.latest_hint, paths.earliest_hint}
    for d in METADATA_DIRS:
        out |= {s.path for s in fio.list_status(f"{table.table_path}/{d}", recursive=True)
                if not s.is_dir}
    return out


def _entry_files(table: FileStoreTable, e: ManifestEntry) -> set[str]:
    part = table.partition_codec.decode(e.partition)
    paths = table.paths
    out = {paths.data_file_path(part, e.bucket, e.file.file_name, e.file.external_path)}
    out |= {paths.data_file_path(part, e.bucket, name) for name in e.file.extra_files}
    return out


def _index_files(table: FileStoreTable, snap: Snapshot) -> set[str]:
    """The index files ``snap``'s index manifest lists (where Paimon puts them)."""
    in_data_dir = table.options.index_file_in_data_file_dir
    return {index_file_path(table.paths, table.partition_codec.decode(e.partition), e.bucket,
                            e.index_file, in_data_dir)
            for e in table.manifest_io().read_index_manifest(snap.index_manifest)}


def _closure(table: FileStoreTable, snap: Snapshot,
             cache: dict[str, list[ManifestEntry]] | None = None,
             changelog: bool = True) -> set[str]:
    """The manifest lists, manifests, data files, index manifest and index files ``snap``
    reaches (without its changelog when not ``changelog``: a tag keeps none, as Paimon's
    expiry deletes a tagged snapshot's changelog)."""
    mio, paths = table.manifest_io(), table.paths
    cache = {} if cache is None else cache
    out: set[str] = set()
    for name in (snap.base_manifest_list, snap.delta_manifest_list,
                 snap.changelog_manifest_list if changelog else None, snap.index_manifest):
        if not name:
            continue
        out.add(paths.manifest_path(name))
        if name == snap.index_manifest:
            out |= _index_files(table, snap)
            continue
        for meta in mio.read_manifest_list(name):
            out.add(paths.manifest_path(meta.file_name))
            if meta.file_name not in cache:
                cache[meta.file_name] = mio.read_manifest(meta.file_name)
            for entry in cache[meta.file_name]:
                out |= _entry_files(table, entry)
    return out


def snapshot_files(table: FileStoreTable, snap: Snapshot) -> set[str]:
    """The snapshot file and everything it reaches: manifest lists, manifests, data files."""
    return {table.paths.snapshot_path(snap.id)} | _closure(table, snap)


def tags(table: FileStoreTable) -> dict[str, Snapshot]:
    from lakecore.store.tags import read_tags

    return dict(read_tags(table))


def snapshots(table: FileStoreTable, since: int | None = None) -> list[Snapshot]:
    return [s for s in table.snapshot_manager.snapshots() if since is None or s.id >= since]


def referenced_files(table: FileStoreTable, since: int | None = None) -> set[str]:
    """Files the table needs: metadata, every snapshot's closure (from ``since`` on) and every
    tag's file and closure."""
    cache: dict[str, list[ManifestEntry]] = {}  # manifests are immutable: read each once
    out = metadata_files(table)
    for snap in snapshots(table, since):
        out.add(table.paths.snapshot_path(snap.id))
        out |= _closure(table, snap, cache)
    for name, snap in tags(table).items():
        out.add(table.paths.tag_path(name))
        out |= _closure(table, snap, cache, changelog=False)
    return out


def unreferenced_files(table: FileStoreTable, since: int | None = None) -> set[str]:
    return all_files(table) - referenced_files(table, since)


def missing_files(table: FileStoreTable, since: int | None = None) -> set[str]:
    """Referenced but absent (the hints may legitimately be missing): must stay empty."""
    hints = {table.paths.latest_hint, table.paths.earliest_hint}
    return referenced_files(table, since) - all_files(table) - hints


# -- reading ------------------------------------------------------------------------------
def _read(t: FileStoreTable) -> list[Row]:
    rb = t.new_read_builder()
    rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
    return sorted(rows, key=lambda r: tuple(str(v) for v in r.values()))


def read_rows(table: FileStoreTable, snapshot_id: int | None = None) -> list[Row]:
    return _read(table if snapshot_id is None
                 else table.copy({"scan.snapshot-id": str(snapshot_id)}))


def snapshot_rows(table: FileStoreTable, since: int | None = None) -> dict[int, list[Row]]:
    return {s.id: read_rows(table, s.id) for s in snapshots(table, since)}


def tag_rows(table: FileStoreTable) -> dict[str, list[Row]]:
    """Every tag's rows (also of tags whose snapshot has expired)."""
    return {name: _read(table.copy({"scan.tag-name": name})) for name in tags(table)}


# -- history ------------------------------------------------------------------------------
def check_history(table: FileStoreTable, since: int | None = None) -> list[Snapshot]:
    """Contiguous ids, each (commit user, identifier, kind) once, and each snapshot's base equal to
    the live files of the snapshot before it: no commit was built on a stale view. With
    ``since``, only the snapshots from that id on are checked."""
    sm, mio = table.snapshot_manager, table.manifest_io()
    snaps = snapshots(table, since)
    ids = [s.id for s in snaps]
    if ids:
        assert ids == list(range(ids[0], ids[0] + len(ids))), f"gaps in {ids}"
    assert sm.latest_id() == (ids[-1] if ids else None)
    # one commit call may make an APPEND and a COMPACT snapshot with the same identifier
    pairs = Counter((s.commit_user, s.commit_identifier, s.commit_kind) for s in snaps)
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
