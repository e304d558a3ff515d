"""The crash matrix's table and its writing operations; also a child process:
``python -m tests.faults.operations '{"catalog": {...}, "table": "db.t", "op": "append"}'``.

``build_history`` makes a table on which every operation has work to do: two ``dt`` partitions
in the far future and one long expired (``partition.expiration-time`` = 7 d), two buckets,
``changelog-producer = input`` (changelog files to expire), an OVERWRITE and a full COMPACT,
an earlier snapshot expiry (so tag ``old`` pins an expired snapshot and holds files no snapshot
does), tags ``keep`` (rollback target) and ``late`` (removed by the rollback), level-0 files to
compact, and the leftovers of a writer that died before committing (orphans). Most commits also
carry a HASH index file for one (partition, bucket), replacing the live one as a dynamic-bucket
writer does (``index_message``), so the table has an index manifest whose files expiry, tags,
rollback, overwrites and orphan removal must handle like data files.

Each operation is a function of the table, run the same way in the killed child, in the rerun
and in the uninterrupted reference run: the same commit user and identifier for commits, the
same partition, tag and retention arguments.
"""

from __future__ import annotations

import json
import struct
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

TABLE = "db.t"
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False),
                    ("v", pa.int64())])
OLD, A, B = "2020-01-01", "2999-01-01", "2999-01-02"  # OLD is past partition expiry
TABLE_OPTIONS = {
    "bucket": "2",
    "write-only": "true",  # no inline compaction or expiry unless an operation asks for it
    "changelog-producer": "input",
    "manifest.merge-min-count": "3",
    "partition.expiration-time": "7 d",
    "partition.timestamp-formatter": "yyyy-MM-dd",
}
INLINE_OPTIONS = {"write-only": "false", "full-compaction.delta-commits": "1"}
KEEP = 3  # snapshots the expiry operation retains


def catalog_options(root: Path | str) -> dict[str, str]:
    """A warehouse and a catalog lock of its own under ``root`` (copied with it). A 1 s lock
    expiry lets the rerun take over a lock the killed process held."""
    return {"warehouse": f"{root}/wh", "lock.enabled": "true",
            "lock.uri": f"sqlite:///{root}/locks.db", "lock-expire-time": "1 s",
            "lock-acquire-timeout": "60 s", "lock-check-max-sleep": "200 ms"}


def open_table(options: dict[str, str]) -> Any:
    """(catalog, table); close the catalog when done (it owns the lock's engine)."""
    from lakecore import CatalogFactory

    catalog = CatalogFactory.create(options)
    return catalog, catalog.get_table(TABLE)


def rows(ids: list[int] | range, dt: str, v: int) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "dt": [dt] * len(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def index_message(table: Any, dt: str, bucket: int, hashes: list[int],
                  replace: bool = True) -> Any:
    """What a dynamic-bucket writer hands over for (dt, bucket): a new HASH index file (sorted
    big-endian int32 key hashes) that replaces the live one it read (``replace``; an overwrite
    writer starts from nothing and names none)."""
    from lakecore.commit.message import CommitMessage
    from lakecore.format.index_manifest import HASH_INDEX, IndexFileMeta

    part = table.partition_codec.encode((dt,))
    live = tuple(e.index_file for e in table.index_entries(table.snapshot_manager.latest(),
                                                           HASH_INDEX)
                 if replace and e.partition == part and e.bucket == bucket)
    name = table.paths.new_index_file_name()
    data = b"".join(struct.pack(">i", h) for h in sorted(hashes))
    table.file_io.write_bytes(table.paths.index_file_path(name), data)
    meta = IndexFileMeta(HASH_INDEX, name, len(data), len(hashes))
    return CommitMessage((dt,), bucket, 2, new_index_files=(meta,), deleted_index_files=live)


def ingest(table: Any, user: str, identifier: int, *batches: pa.Table,
           overwrite: str | None = None,
           index: tuple[tuple[str, int, list[int]], ...] = ()) -> dict[str, Any]:
    """Write and commit as a rerunnable job does: if (user, identifier) is already committed,
    the files written now (data and index files) are aborted. ``index`` adds a HASH index
    file per (dt, bucket, key hashes)."""
    from lakecore.commit.file_store_commit import FileStoreCommit, partition_equals
    from lakecore.write.table_write import TableWrite

    write = TableWrite(table, user)
    for b in batches:
        write.write_arrow(b)
    messages = write.prepare_commit()
    messages += [index_message(table, dt, bucket, hashes, replace=overwrite is None)
                 for dt, bucket, hashes in index]
    commit = FileStoreCommit(table, user)
    if overwrite is None:
        result = commit.commit(messages, identifier)
    else:
        pf = partition_equals({"dt": overwrite}, table.partition_keys)
        result = commit.overwrite(messages, pf, identifier)
    if result.skipped:
        commit.abort(messages)
    write.close()
    return {"snapshot_ids": list(result.snapshot_ids), "skipped": result.skipped}


def now() -> datetime:
    return datetime.now() + timedelta(days=1)


def build_history(options: dict[str, str]) -> None:
    from lakecore import CatalogFactory, Schema
    from lakecore.compact.job import compact
    from lakecore.maintenance import ExpireConfig, create_tag, expire_snapshots
    from lakecore.write.table_write import TableWrite

    catalog = CatalogFactory.create(options)
    catalog.create_database("db", ignore_if_exists=True)
    catalog.create_table(TABLE, Schema.from_pyarrow_schema(
        SCHEMA, partition_keys=["dt"], primary_keys=["id", "dt"], options=TABLE_OPTIONS))
    t = catalog.get_table(TABLE)
    user = "base-ingest"
    ingest(t, user, 1, rows(range(8), OLD, 1), rows(range(8), A, 1),
           index=((OLD, 0, list(range(8))), (A, 0, list(range(8)))))  # 1
    ingest(t, user, 2, rows(range(4), A, 2), rows(range(4), OLD, 2),
           index=((A, 0, list(range(9))),))  # 2
    create_tag(t, "old", 2)
    ingest(t, user, 3, rows(range(10, 16), A, 3), overwrite=A)  # 3: OVERWRITE (A's index goes)
    ingest(t, user, 4, rows(range(16, 21), A, 4), rows(range(4), B, 4),
           index=((A, 1, list(range(16, 21))), (B, 0, list(range(4)))))  # 4
    compact(t, full=True, commit_user="base-compactor")  # 5: COMPACT
    expire_snapshots(t, dry_run=False, now=now(), config=ExpireConfig(2, 2, timedelta(0), 100))
    ingest(t, user, 5, rows(range(2, 6), A, 5), index=((A, 1, list(range(2, 21))),))  # 6
    ingest(t, user, 6, rows(range(4, 9), B, 6))  # 7
    create_tag(t, "keep", 7)
    ingest(t, user, 7, rows(range(20, 25), A, 7), index=((A, 0, list(range(20, 25))),))  # 8
    ingest(t, user, 8, rows(range(0, 3), B, 8))  # 9
    create_tag(t, "late", 9)
    ingest(t, user, 9, rows(range(30, 34), A, 9), rows(range(30, 34), B, 9),
           index=((B, 0, list(range(9)) + list(range(30, 34))),))  # 10
    # a writer that died before committing: its data, changelog and index files are orphans,
    # and so is the temporary file of a snapshot it never published
    dead = TableWrite(t, "dead-writer")
    dead.write_arrow(rows(range(50, 60), A, 50))
    dead.prepare_commit()
    index_message(t, A, 0, list(range(50, 60)))
    t.file_io.write_bytes(f"{t.paths.snapshot_dir}/.snapshot-11.0123abcd.tmp", b'{"id": 11')
    assert t.snapshot_manager.list_ids() == [4, 5, 6, 7, 8, 9, 10]
    catalog.close()


# -- the operations -----------------------------------------------------------------------
def op_append(table: Any) -> dict[str, Any]:
    """An append whose writer also replaces (A, bucket 0)'s HASH index: a new index manifest."""
    return ingest(table, "ingest-op", 100, rows(range(0, 6), A, 100),
                  rows(range(100, 106), B, 100), index=((A, 0, list(range(100, 106))),))


def op_append_inline_compact(table: Any) -> dict[str, Any]:
    """One commit call, two snapshots: APPEND then the inline full compaction's COMPACT."""
    return ingest(table.copy(INLINE_OPTIONS), "inline-op", 300, rows(range(3, 7), A, 300),
                  rows(range(300, 304), B, 300))


def op_overwrite(table: Any) -> dict[str, Any]:
    """Overwrite B: B's HASH index is dropped, the writer's new one (built from nothing) added."""
    return ingest(table, "backfill-op", 200, rows(range(200, 204), B, 200), overwrite=B,
                  index=((B, 0, list(range(200, 204))),))


def op_compact(table: Any) -> dict[str, Any]:
    from lakecore.compact.job import compact

    report = compact(table, full=True, commit_user="compact-op")
    return {"snapshot_ids": list(report.snapshot_ids), "buckets": report.buckets}


def op_expire_snapshots(table: Any) -> dict[str, Any]:
    from lakecore.maintenance import ExpireConfig, expire_snapshots

    cfg = ExpireConfig(KEEP, KEEP, timedelta(0), 1000)
    return expire_snapshots(table, dry_run=False, now=now(), config=cfg).to_dict()


def op_expire_partitions(table: Any) -> dict[str, Any]:
    from lakecore.maintenance import expire_partitions

    return expire_partitions(table, now=now(), dry_run=False,
                             commit_user="partition-expire-op").to_dict()


def remove_all_orphans(table: Any) -> dict[str, Any]:
    """Orphan removal with a cut-off after every file's mtime: all unreferenced files go."""
    from lakecore.maintenance import remove_orphan_files

    return remove_orphan_files(table, older_than=timedelta(0), now=now(),
                               dry_run=False).to_dict()


def op_create_tag(table: Any) -> dict[str, Any]:
    from lakecore.maintenance import create_tag

    return create_tag(table, "new", ignore_if_exists=True).to_dict()


def op_delete_tag(table: Any) -> dict[str, Any]:
    """Deleting a tag that is already gone is done (a rerun after the tag file went)."""
    from lakecore.errors import TagNotExistError
    from lakecore.maintenance import delete_tag

    try:
        return delete_tag(table, "old", dry_run=False).to_dict()
    except TagNotExistError:
        return {"already_deleted": True}


def op_rollback(table: Any) -> dict[str, Any]:
    from lakecore.maintenance import rollback_to

    return rollback_to(table, tag="keep", dry_run=False).to_dict()


def op_alter(table: Any) -> dict[str, Any]:
    """ALTER TABLE (add ``note``, rename ``v`` to ``value``) through the catalog, under its
    lock, then an append in the new schema. Rerunnable as a pipeline's prepare step is: it
    applies only the changes the table does not have yet (none, once schema-1 landed)."""
    from lakecore.catalog import FileSystemCatalog
    from lakecore.schema.schema_change import SchemaChange

    catalog = FileSystemCatalog({"warehouse": table.table_path.rsplit("/", 2)[0]},
                                lock=table.lock)
    names = catalog.get_table(TABLE).schema.field_names
    changes = []
    if "note" not in names:
        changes.append(SchemaChange.add_column("note", "STRING"))
    if "v" in names:
        changes.append(SchemaChange.rename_column("v", "value"))
    if changes:
        catalog.alter_table(TABLE, changes)
    evolved = catalog.get_table(TABLE)
    data = pa.table({"id": pa.array([0, 1, 400, 401], pa.int64()), "dt": [A, A, B, B],
                     "value": pa.array([400] * 4, pa.int64()), "note": ["n0", "n1", None, "x"]})
    return ingest(evolved, "alter-op", 400, data)


OPERATIONS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "append": op_append,
    "append-inline-compact": op_append_inline_compact,
    "overwrite": op_overwrite,
    "compact": op_compact,
    "expire-snapshots": op_expire_snapshots,
    "expire-partitions": op_expire_partitions,
    "remove-orphan-files": remove_all_orphans,
    "create-tag": op_create_tag,
    "delete-tag": op_delete_tag,
    "rollback": op_rollback,
    "alter": op_alter,
}


def run(options: dict[str, str], op: str) -> dict[str, Any]:
    catalog, table = open_table(options)
    try:
        return OPERATIONS[op](table)
    finally:
        catalog.close()


if __name__ == "__main__":
    args = json.loads(sys.argv[1])
    print(json.dumps(run(args["catalog"], args["op"]), default=str))
