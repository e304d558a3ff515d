"""Time travel: the snapshot ``scan.snapshot-id``, ``scan.tag-name`` or
``scan.timestamp-millis`` names, and the schema version it was committed with.

``TableScan`` reads that snapshot; ``FileStore.copy`` switches the table to its schema (Paimon's
``tryTimeTravel``), so a snapshot from before an ALTER reads with the columns it had then.
"""

from __future__ import annotations

from lakecore.errors import CorruptFileError, LakecoreValidationError, SnapshotNotExistError
from lakecore.format.snapshot import Snapshot
from lakecore.options.registry import SCAN_SNAPSHOT_ID, SCAN_TAG_NAME, SCAN_TIMESTAMP_MILLIS
from lakecore.store.file_store import FileStore
from lakecore.store.tags import scan_tag_snapshot

TIME_TRAVEL_KEYS = frozenset(
    {SCAN_SNAPSHOT_ID.key, SCAN_TAG_NAME.key, SCAN_TIMESTAMP_MILLIS.key,
     *SCAN_TIMESTAMP_MILLIS.fallback_keys}
)


def travel_snapshot(table: FileStore) -> Snapshot | None:
    """The snapshot the scan options name; None when they name none (read the latest).
    A snapshot or tag that does not exist raises ``SnapshotNotExistError`` /
    ``TagNotExistError``."""
    o = table.options
    sm = table.snapshot_manager
    if o.scan_snapshot_id is not None:
        return sm.snapshot(o.scan_snapshot_id)
    if o.scan_tag_name is not None:
        return scan_tag_snapshot(table)
    if o.scan_timestamp_millis is not None:
        snap = sm.earlier_or_equal_time(o.scan_timestamp_millis)
        if snap is None:
            raise SnapshotNotExistError(
                f"no snapshot at or before timestamp {o.scan_timestamp_millis}"
            )
        return snap
    return None


def travel_schema_id(table: FileStore) -> int | None:
    """The schema id of the snapshot time travel names; None when there is none (no time
    travel, or a snapshot that does not exist: the scan reports that)."""
    try:
        snap = travel_snapshot(table)
    except (LakecoreValidationError, CorruptFileError):
        return None
    return None if snap is None else snap.schema_id
