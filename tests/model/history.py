"""A table's history as a plain value, for comparing two runs of the same operations.

Everything a later operation of the model machine may depend on is in it: each retained
snapshot's id, kind, schema and record counts; its live data files by (partition, bucket,
level) with their rows, key range, sequence range and size; its changelog files by partition
and bucket; and the tags. File names and times are left out (new per run).
"""

from __future__ import annotations

from typing import Any

from lakecore.maintenance import list_tags
from lakecore.maintenance.refs import live_entries
from lakecore.table import FileStoreTable


def _files(table: FileStoreTable, list_name: str | None) -> tuple[Any, ...]:
    if not list_name:
        return ()
    mio = table.manifest_io()
    entries = mio.read_entries(mio.read_manifest_list(list_name))
    return tuple(sorted((bytes(e.partition), e.bucket, e.kind.value, e.file.level,
                         e.file.row_count) for e in entries))


def table_history(table: FileStoreTable) -> list[tuple[Any, ...]]:
    """The retained snapshots and the tags of ``table``, as comparable tuples."""
    sm, mio = table.snapshot_manager, table.manifest_io()
    out: list[tuple[Any, ...]] = []
    for sid in sm.list_ids():
        s = sm.snapshot(sid)
        live = sorted(
            (bytes(e.partition), e.bucket, e.file.level, e.file.row_count,
             bytes(e.file.min_key), bytes(e.file.max_key), e.file.min_sequence_number,
             e.file.max_sequence_number, e.file.delete_row_count, e.file.file_size)
            for e in live_entries(mio, s).values())
        out.append((sid, s.commit_kind.value, s.schema_id, s.total_record_count,
                    s.delta_record_count, s.changelog_record_count, tuple(live),
                    _files(table, s.changelog_manifest_list)))
    out.append(("tags", tuple((t.name, t.snapshot_id) for t in list_tags(table))))
    return out
