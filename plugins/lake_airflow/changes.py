"""What commits changed, read from the table at task run time (lakecore imported inside).

``snapshot_changes`` describes snapshots for asset events (kind, rows, partitions touched);
``touching_snapshots`` finds snapshots after a given one that touched a partition and
``check_partition`` is what the partition sensor waits for; ``mark_done`` and
``partition_marks`` write and read Paimon's partition done marks
(``lakecore.store.partition_done``). No Airflow here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakecore.format.snapshot import Snapshot
    from lakecore.table import FileStoreTable


def iso_millis(ms: int) -> str:
    """Epoch millis as an ISO time in UTC (``2026-11-01T06:00:00.123+00:00``)."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(int(ms) / 1000, tz=UTC).isoformat(timespec="milliseconds")


def partition_label(table: FileStoreTable, partition: bytes) -> str:
    """A partition's ``k=v/k=v`` label (Paimon's strings; empty when unpartitioned)."""
    from lakecore.format.partition_string import partition_value_string

    codec = table.partition_codec
    return "/".join(f"{k}={partition_value_string(v, t)}"
                    for k, v, t in zip(table.partition_keys, codec.decode(partition),
                                       codec.types))


def delta_partitions(table: FileStoreTable, snapshot: Snapshot) -> list[str]:
    """The partitions a snapshot's delta (its own changes) touched."""
    mio = table.manifest_io()
    entries = mio.read_entries(mio.read_manifest_list(snapshot.delta_manifest_list))
    return sorted({partition_label(table, e.partition) for e in entries})


def snapshot_changes(table: FileStoreTable, snapshot_ids: Sequence[int]) -> list[dict[str, Any]]:
    """Per snapshot id: ``id``, ``kind``, ``rows`` (its delta record count), ``partitions``
    and ``time_millis``; a snapshot already expired is described by its id only."""
    from lakecore.errors import CorruptFileError, SnapshotNotExistError

    out = []
    for sid in sorted(set(int(s) for s in snapshot_ids)):
        try:
            snap = table.snapshot_manager.snapshot(sid)
        except (SnapshotNotExistError, CorruptFileError):
            out.append({"id": sid, "kind": "UNKNOWN", "rows": 0, "partitions": []})
            continue
        out.append({"id": sid, "kind": snap.commit_kind.value,
                    "rows": int(snap.delta_record_count or 0),
                    "partitions": delta_partitions(table, snap),
                    "time_millis": snap.time_millis})
    return out


def touching_snapshots(table: FileStoreTable, label: str, after: int) -> list[int]:
    """Ids of the snapshots newer than ``after`` whose delta touched partition ``label``."""
    sm = table.snapshot_manager
    latest = sm.latest_id()
    if latest is None or latest <= after:
        return []
    hits = []
    for sid in range(max(after + 1, sm.earliest_id() or 1), latest + 1):
        if label in delta_partitions(table, sm.snapshot(sid)):
            hits.append(sid)
    return hits


def mark_done(table: FileStoreTable, spec: Mapping[str, str],
              snapshot_id: int | None) -> list[str]:
    """Mark a partition done with the table's ``partition.mark-done-action``; the paths."""
    from lakecore.store.partition_done import mark_partition_done

    return mark_partition_done(table, dict(spec), snapshot_id=snapshot_id)


def live_partitions(table: FileStoreTable) -> list[dict[str, str]]:
    """The partitions with live files in the latest snapshot, as specs."""
    from lakecore.store.manifest_io import merge_entries

    latest = table.snapshot_manager.latest()
    if latest is None or not table.partition_keys:
        return []
    mio = table.manifest_io()
    metas = (mio.read_manifest_list(latest.base_manifest_list)
             + mio.read_manifest_list(latest.delta_manifest_list))
    labels = {partition_label(table, e.partition)
              for e in merge_entries(mio.read_entries(metas)).values()}
    return [dict(kv.split("=", 1) for kv in label.split("/")) for label in sorted(labels)]


def partition_marks(table: FileStoreTable) -> list[dict[str, Any]]:
    """The table's partitions marked done (either action), newest mark first."""
    from lakecore.store.partition_done import done_partitions

    if not table.partition_keys:
        return []
    marks = [m.to_dict() for m in done_partitions(table, live_partitions(table))]
    return sorted(marks, key=lambda m: -m["marked_at"])


def check_partition(table: str, partition: str,
                    newer_than_snapshot: int | None) -> dict[str, Any] | None:
    """What the sensor waits for, if it holds now (else None). Reads the table (lakecore)."""
    from lake_airflow.config import load_config
    from lake_airflow.submit import parse_partition
    from lake_airflow.tables import get_table, open_catalog
    from lakecore.store.partition_done import done_mark
    from lakecore.store.partition_done import partition_label as spec_label

    cfg = load_config()
    spec = cfg.table(table)
    wanted = parse_partition(partition, spec.partition_keys)
    catalog = open_catalog(cfg)
    try:
        t = get_table(catalog, table)
        if t is None:
            return None
        if newer_than_snapshot is not None:
            label = spec_label({k: wanted[k] for k in t.partition_keys})
            ids = touching_snapshots(t, label, int(newer_than_snapshot))
            if not ids:
                return None
            return {"table": table, "partition": label, "condition": "snapshot",
                    "snapshot_ids": ids, "newer_than_snapshot": int(newer_than_snapshot)}
        mark = done_mark(t, wanted)
        if mark is None:
            return None
        found = {"table": table, "condition": "done", **mark.to_dict()}
        found["marked_at_millis"] = found["marked_at"]  # Paimon's epoch millis
        found["marked_at"] = iso_millis(found["marked_at"])
        return found
    finally:
        catalog.close()
