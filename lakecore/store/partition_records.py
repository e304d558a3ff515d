"""lakecore's expired-partition records, and the check that refuses writes into them.

Paimon keeps neither on disk; lakecore needs both across processes (see
``lakecore.maintenance.expire_partitions``, which writes them):

* ``_lakecore/expired-partitions/expire-<millis>-<id>.json``: the partitions each expiry run
  dropped, written before its commit (and removed if the commit fails). ``check_not_expired``
  reads them so that a later write into a dropped partition fails with
  ``PartitionExpiredError``. One new file per run means concurrent expirers never overwrite
  each other's records; past ``RECORD_FILES_MAX`` files they are folded into one (commits read
  them all). Deleting a record (or one partition from it) re-opens those partitions.
* ``_lakecore/partition-expire-last-check``: epoch millis of the last check, for
  ``maybe_expire_partitions`` (``partition.expiration-check-interval``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from lakecore.errors import CorruptFileError, PartitionExpiredError
from lakecore.format.partition_string import partition_value_string
from lakecore.options import PartitionExpirationStrategy
from lakecore.schema.partition_time import PartitionTimeError, extract_time
from lakecore.store.file_store import FileStore
from lakecore.utils.clock import to_epoch_millis, to_local_naive

RECORD_FILES_MAX = 16


# -- partitions as Paimon spells them ------------------------------------------------------
def partition_texts(table: FileStore, values: Sequence[Any]) -> tuple[str, ...]:
    """Partition values as Paimon's path/spec strings (null -> ``partition.default-name``)."""
    types = table.partition_codec.types
    default = table.options.partition_default_name
    out = []
    for v, t in zip(values, types, strict=True):
        text = partition_value_string(v, t)
        out.append(default if text is None else text)
    return tuple(out)


def partition_spec(table: FileStore, texts: Sequence[str]) -> dict[str, str]:
    return dict(zip(table.partition_keys, texts, strict=True))


def partition_value_time(table: FileStore, values: Sequence[Any]) -> datetime:
    """The time a partition's values name (``partition.timestamp-pattern``/``-formatter``)."""
    o = table.options
    texts = [None if v is None else t
             for v, t in zip(values, partition_texts(table, values), strict=True)]
    return extract_time(table.partition_keys, texts, o.partition_timestamp_pattern,
                        o.partition_timestamp_formatter)


# -- the last-check time -------------------------------------------------------------------
def read_last_check(table: FileStore) -> int | None:
    try:
        return int(table.file_io.read_text(table.paths.partition_expire_last_check).strip())
    except (CorruptFileError, ValueError):
        return None


def write_last_check(table: FileStore, now_millis: int) -> None:
    table.file_io.overwrite_atomic(table.paths.partition_expire_last_check,
                                   str(now_millis).encode())


# -- the records ---------------------------------------------------------------------------
def write_record(table: FileStore, partitions: list[dict[str, str]], strategy: str,
                 now: datetime | None) -> str:
    """Record the partitions one expiry run drops; returns the record's path."""
    millis = to_epoch_millis(now)
    return _write_partitions(table, f"expire-{millis}-{uuid.uuid4().hex[:12]}.json",
                             partitions, {"expiredAtMillis": millis, "strategy": strategy})


def _write_partitions(table: FileStore, name: str, partitions: list[dict[str, str]],
                      extra: dict[str, Any]) -> str:
    path = table.paths.expired_partitions_path(name)
    body = {**extra, "partitionKeys": table.partition_keys, "partitions": partitions}
    table.file_io.write_bytes(path, json.dumps(body, indent=2).encode())
    return path


def _record_files(table: FileStore) -> list[str]:
    return sorted(st.path for st in table.file_io.list_status(table.paths.expired_partitions_dir)
                  if not st.is_dir and st.path.endswith(".json"))


def _read_record(table: FileStore, path: str) -> list[dict[str, str]] | None:
    try:
        body = json.loads(table.file_io.read_text(path))
    except (CorruptFileError, ValueError):
        return None  # a record being written, or removed meanwhile
    return [dict(p) for p in body.get("partitions", ()) if isinstance(p, dict)]


def compact_records(table: FileStore, max_files: int = RECORD_FILES_MAX) -> None:
    """Fold the record files into one when there are more than ``max_files`` (commits read them
    all). The union is written before the folded files go, so nothing is ever lost; a record a
    concurrent expirer adds meanwhile is simply not folded this time."""
    paths = _record_files(table)
    if len(paths) <= max_files:
        return
    union: dict[tuple, dict[str, str]] = {}
    folded = []
    for path in paths:
        parts = _read_record(table, path)
        if parts is None:
            continue
        folded.append(path)
        for p in parts:
            union.setdefault(tuple(sorted(p.items())), p)
    _write_partitions(table, f"expire-{to_epoch_millis(None)}-merged-{uuid.uuid4().hex[:12]}"
                      ".json", list(union.values()), {"merged": len(folded)})
    for path in folded:
        table.file_io.delete_quietly(path)


def expired_partition_records(table: FileStore) -> list[dict[str, str]]:
    """Every partition a past expiry dropped (from the record files), oldest run first."""
    out: list[dict[str, str]] = []
    for path in _record_files(table):
        out.extend(_read_record(table, path) or ())
    return out


def check_not_expired(
    table: FileStore,
    partitions: Iterable[Sequence[Any]],
    *,
    now: datetime | None = None,
    past_cutoff: bool = True,
) -> None:
    """Raise ``PartitionExpiredError`` if a write into ``partitions`` (tuples of partition
    values in partition-key order, as ``CommitMessage.partition``) targets a partition that
    expiry dropped, or — under ``values-time`` — whose time is already past the cut-off (the
    next expiry would drop it again; Paimon fails such writes the same way)."""
    if not table.partition_keys:
        return
    todo = {tuple(p) for p in partitions}
    if not todo:
        return
    keys = table.partition_keys
    recorded = {tuple(r.get(k) for k in keys) for r in expired_partition_records(table)}
    o = table.options
    cutoff = None
    if (past_cutoff and o.partition_expiration_time is not None
            and o.partition_expiration_strategy is PartitionExpirationStrategy.VALUES_TIME):
        cutoff = to_local_naive(now) - o.partition_expiration_time
    bad: list[dict[str, str]] = []
    reasons: list[str] = []
    for values in sorted(todo, key=repr):
        texts = partition_texts(table, values)
        if texts in recorded:
            bad.append(partition_spec(table, texts))
            reasons.append(f"{partition_spec(table, texts)} was dropped by partition expiry")
            continue
        if cutoff is None:
            continue
        try:
            when = partition_value_time(table, values)
        except PartitionTimeError:
            continue
        if cutoff > when:
            bad.append(partition_spec(table, texts))
            reasons.append(f"{partition_spec(table, texts)} is at {when.isoformat(sep=' ')}, "
                           f"before the expiration cut-off {cutoff.isoformat(sep=' ')}")
    if bad:
        raise PartitionExpiredError(
            f"writing into expired partition(s) of {table.identifier}: " + "; ".join(reasons)
            + ". Filter these rows out, or remove the record under "
            f"{table.paths.expired_partitions_dir} to re-open a partition.", bad)
