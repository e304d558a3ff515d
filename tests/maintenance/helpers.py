"""Helpers for maintenance tests: tables with history, reading any snapshot or tag with
lakecore (even an expired tagged snapshot) and with pypaimon, and checking referenced files."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa

from lakecore.format.snapshot import Snapshot
from lakecore.maintenance.refs import DataPaths, live_entries, metadata_names
from lakecore.read.scan import TableScan
from lakecore.store.tags import read_tags
from lakecore.table import FileStoreTable
from tests.compat.pypaimon_runner import PAIMON_PYTHON, canonical, read_ipc
from tests.core.helpers import make_table, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False),
                    ("v", pa.int64())])
READER = Path(__file__).with_name("paimon_reads.py")
HOUR_MS = 3_600_000


def pk_table(tmp_path: Any, name: str = "db.t", **opts: str) -> FileStoreTable:
    """A primary-key table partitioned by ``dt``. ``write-only`` by default, so that neither
    inline compaction nor automatic expiry after commits changes the history a test builds;
    maintenance is then only what the test calls."""
    return make_table(str(tmp_path), SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                      options={"bucket": "1", "write-only": "true", **opts}, name=name)


def rows(ids: list[int], dt: str, v: int) -> pa.Table:
    return pa.table({"id": ids, "dt": [dt] * len(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def commit_n(table: FileStoreTable, n: int, start: int = 0, dt: str = "2024-01-01") -> None:
    """``n`` commits, each upserting a few keys (so later snapshots delete nothing yet)."""
    for i in range(start, start + n):
        write(table, rows([i % 7, 100 + i], dt, i))


def set_times(table: FileStoreTable, times: dict[int, int]) -> None:
    """Rewrite snapshots' ``timeMillis`` (Paimon's tests do the same: rewriteSnapshotTime)."""
    for sid, millis in times.items():
        path = table.paths.snapshot_path(sid)
        snap = table.snapshot_manager.snapshot(sid)
        table.file_io.overwrite_atomic(path, dataclasses.replace(snap, time_millis=millis)
                                       .to_json().encode())


def read_snapshot(table: FileStoreTable, snap: Snapshot) -> list[dict[str, Any]]:
    """Rows of ``snap`` through lakecore's scan + merge read (works for expired tags too)."""
    scan = TableScan(table)
    scan._snapshot = lambda: snap  # type: ignore[method-assign]
    data = table.new_read_builder().new_read().to_arrow(scan.plan().splits())
    return canonical(data, ["dt", "id"])


def retained_views(table: FileStoreTable) -> dict[tuple[str, Any], Snapshot]:
    views: dict[tuple[str, Any], Snapshot] = {
        ("snapshot", s.id): s for s in table.snapshot_manager.snapshots()}
    views.update({("tag", name): s for name, s in read_tags(table)})
    return views


def read_views(table: FileStoreTable) -> dict[tuple[str, Any], list[dict[str, Any]]]:
    return {k: read_snapshot(table, s) for k, s in retained_views(table).items()}


def missing_referenced_files(table: FileStoreTable) -> list[str]:
    """Files a retained snapshot or tag needs (manifests, lists, data) that are gone. A tag
    needs no changelog (Paimon's expiry deletes an expired snapshot's, tagged or not)."""
    mio, fio, paths = table.manifest_io(), table.file_io, DataPaths(table)
    gone = []
    for (kind, _), s in retained_views(table).items():
        for name in metadata_names(mio, s, changelog=kind == "snapshot"):
            if not fio.exists(table.paths.manifest_path(name)):
                gone.append(name)
        for e in live_entries(mio, s).values():
            for ref in paths.refs(e.partition, e.bucket, e.file):
                if not fio.exists(ref.path):
                    gone.append(ref.path)
    return sorted(set(gone))


def paimon_reads(requests: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """pypaimon reads of several (warehouse, table, snapshot_id | tag), one process."""
    with tempfile.TemporaryDirectory(prefix="paimon-reads-") as tmp:
        reqs = [{**r, "warehouse": str(r["warehouse"]), "out": f"{tmp}/{i}.arrow"}
                for i, r in enumerate(requests)]
        spec = Path(tmp) / "requests.json"
        spec.write_text(json.dumps(reqs), encoding="utf-8")
        done = subprocess.run([str(PAIMON_PYTHON), str(READER), str(spec)],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise AssertionError(f"pypaimon read failed:\n{done.stderr}")
        return [canonical(read_ipc(r["out"]), ["dt", "id"]) for r in reqs]


def assert_paimon_agrees(table: FileStoreTable, warehouse: Any) -> None:
    """pypaimon reads the latest snapshot, every retained snapshot and every tag like we do."""
    views = retained_views(table)
    reqs: list[dict[str, Any]] = [{"warehouse": warehouse, "table": table.identifier}]
    keys: list[tuple[str, Any]] = [("latest", None)]
    for kind, ref in views:
        reqs.append({"warehouse": warehouse, "table": table.identifier,
                     "snapshot_id" if kind == "snapshot" else "tag": ref})
        keys.append((kind, ref))
    got = paimon_reads(reqs)
    latest = table.snapshot_manager.latest()
    for key, paimon_rows in zip(keys, got, strict=True):
        snap = latest if key[0] == "latest" else views[key]
        assert snap is not None
        assert paimon_rows == read_snapshot(table, snap), key


def _live_by_bucket(table: FileStoreTable) -> dict[tuple[bytes, int], list[Any]]:
    latest = table.snapshot_manager.latest()
    assert latest is not None
    groups: dict[tuple[bytes, int], list[Any]] = {}
    for e in live_entries(table.manifest_io(), latest).values():
        groups.setdefault((e.partition, e.bucket), []).append(e.file)
    return groups


def full_compact(table: FileStoreTable, level: int = 5) -> tuple[int, ...]:
    """A COMPACT commit that rewrites every bucket into new files at ``level`` (what a full
    compaction does; lakecore.compact is built elsewhere)."""
    from lakecore.commit.file_store_commit import FileStoreCommit
    from lakecore.commit.message import CommitMessage
    from lakecore.write.table_write import TableWrite

    groups = _live_by_bucket(table)
    rb = table.new_read_builder()
    data = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    w = TableWrite(table, "test-compactor")
    w.write_arrow(data)
    msgs = w.prepare_commit()
    compact = []
    for m in msgs:
        for f in m.changelog_files:  # compaction writes no changelog here
            table.file_io.delete_quietly(table.paths.data_file_path(m.partition, m.bucket,
                                                                    f.file_name))
        before = tuple(groups.pop((table.partition_codec.encode(m.partition), m.bucket), ()))
        compact.append(CommitMessage(m.partition, m.bucket, m.total_buckets,
                                     compact_before=before,
                                     compact_after=tuple(f.upgrade(level) for f in m.new_files)))
    commit = FileStoreCommit(table, f"test-compactor-{uuid.uuid4()}", fresh_user=True)
    return commit.commit(compact).snapshot_ids


def upgrade_single_files(table: FileStoreTable, level: int = 5) -> tuple[int, ...]:
    """An upgrade-only COMPACT commit: every bucket holding exactly one level-0 file moves it
    to ``level`` without rewriting it (the same file name, now at another level)."""
    from lakecore.commit.file_store_commit import FileStoreCommit
    from lakecore.commit.message import CommitMessage

    msgs = []
    for (pbytes, bucket), files in _live_by_bucket(table).items():
        if len(files) == 1 and files[0].level == 0:
            f = files[0]
            msgs.append(CommitMessage(table.partition_codec.decode(pbytes), bucket,
                                      table.bucket, compact_before=(f,),
                                      compact_after=(f.upgrade(level),)))
    assert msgs, "no bucket with a single level-0 file"
    commit = FileStoreCommit(table, f"test-upgrader-{uuid.uuid4()}", fresh_user=True)
    return commit.commit(msgs).snapshot_ids


def data_files(table: FileStoreTable) -> set[str]:
    """Names of every .parquet file under the table directory."""
    return {s.path.rsplit("/", 1)[-1] for s in table.file_io.list_status(table.table_path,
                                                                        recursive=True)
            if s.path.endswith(".parquet")}
