"""Paimon's streaming consumers (``consumer/consumer-<id>``, ``{"nextSnapshot": N}``): a
streaming reader records the next snapshot it will read, and snapshot expiry keeps that
snapshot and every later one. ``consumer.expiration-time`` lets consumers whose file was not
updated for that long go (an abandoned stream): expiry ignores and deletes them.

lakecore adds one field Paimon's readers ignore (Paimon's ``Consumer`` is
``@JsonIgnoreProperties(ignoreUnknown = true)``): ``"fullScanPending": true`` on a consumer a
stream registered to hold its start, a full scan of ``nextSnapshot`` (Paimon's default
``latest-full``), before its first batch committed. A query that resumes from that consumer
-- the same query restarted before its first batch committed, when Spark asks the source for
its initial offset again -- starts with the same full scan instead of that snapshot's
changes. The first committed batch moves the consumer and drops the field."""

from __future__ import annotations

import json
import re
from datetime import timedelta

from lakecore.errors import CorruptFileError, LakecoreValidationError
from lakecore.store.file_store import FileStore
from lakecore.store.paths import CONSUMER_PREFIX

_VALID_ID = re.compile(r"^[^/\\]+$")


def consumer_path(table: FileStore, consumer_id: str) -> str:
    if not _VALID_ID.match(consumer_id) or consumer_id in (".", ".."):
        raise LakecoreValidationError(f"invalid consumer id {consumer_id!r}: it must be a "
                                      "non-empty name without path separators")
    return f"{table.paths.consumer_dir}/{CONSUMER_PREFIX}{consumer_id}"


FULL_SCAN_PENDING = "fullScanPending"


def read_consumer_state(table: FileStore, consumer_id: str) -> tuple[int, bool] | None:
    """The consumer's ``(nextSnapshot, fullScanPending)``; None when it does not exist (or
    is unreadable)."""
    path = consumer_path(table, consumer_id)
    try:
        data = json.loads(table.file_io.read_text(path))
        value = data.get("nextSnapshot")
    except (CorruptFileError, ValueError, AttributeError):
        return None
    if not isinstance(value, int):
        return None
    return value, data.get(FULL_SCAN_PENDING) is True


def read_consumer(table: FileStore, consumer_id: str) -> int | None:
    """The consumer's ``nextSnapshot``; None when it does not exist (or is unreadable)."""
    state = read_consumer_state(table, consumer_id)
    return None if state is None else state[0]


def write_consumer(table: FileStore, consumer_id: str, next_snapshot: int,
                   full_scan_pending: bool = False) -> None:
    """Create or move the consumer (Paimon's ``ConsumerManager.resetConsumer``);
    ``full_scan_pending``: see the module docstring."""
    data: dict[str, object] = {"nextSnapshot": next_snapshot}
    if full_scan_pending:
        data[FULL_SCAN_PENDING] = True
    table.file_io.overwrite_atomic(consumer_path(table, consumer_id),
                                   json.dumps(data).encode("utf-8"))


def _consumers(table: FileStore) -> list[tuple[str, int | None, int | None]]:
    """(path, mtime millis, nextSnapshot) of every consumer file."""
    out = []
    for st in table.file_io.list_status(table.paths.consumer_dir):
        if st.is_dir or not st.path.rsplit("/", 1)[-1].startswith(CONSUMER_PREFIX):
            continue
        try:
            value = json.loads(table.file_io.read_text(st.path)).get("nextSnapshot")
        except (CorruptFileError, ValueError, AttributeError):
            value = None
        out.append((st.path, st.mtime_millis, value if isinstance(value, int) else None))
    return out


def _expired(mtime: int | None, now_millis: int | None, expiration: timedelta | None) -> bool:
    if expiration is None or now_millis is None or mtime is None:
        return False
    return mtime < now_millis - int(expiration.total_seconds() * 1000)


def consumer_min_next_snapshot(table: FileStore, now_millis: int | None = None) -> int | None:
    """The smallest ``nextSnapshot`` of Paimon consumers (``consumer/consumer-<id>``): a
    streaming reader still needs that snapshot and everything after it. With ``now_millis``,
    consumers older than ``consumer.expiration-time`` do not count."""
    expiration = table.options.consumer_expiration_time
    found = [v for _, mtime, v in _consumers(table)
             if v is not None and not _expired(mtime, now_millis, expiration)]
    return min(found) if found else None


def expire_consumers(table: FileStore, now_millis: int) -> int:
    """Delete consumers not updated for ``consumer.expiration-time`` (Paimon's
    ``ConsumerManager.expire``); returns how many. Nothing without the option."""
    expiration = table.options.consumer_expiration_time
    if expiration is None:
        return 0
    gone = 0
    for path, mtime, _ in _consumers(table):
        if _expired(mtime, now_millis, expiration):
            gone += table.file_io.delete_quietly(path)
    return gone
