"""Partition expiry: drop partitions whose time is strictly before ``now - expiration-time``.

Strategies (``partition.expiration-strategy``): ``values-time`` reads the time from the
partition values (``partition_time``); ``update-time`` uses the newest creation time of the
partition's live files. At most ``partition.expiration-max-num`` partitions go per run (sorted by
their values, as Paimon). Partitions whose time cannot be determined are reported, never
silently kept or dropped.

Expiry is an OVERWRITE commit through ``FileStoreCommit`` (lock, conflict checks and retries
apply) that deletes every live file of the chosen partitions, like Paimon's ``dropPartitions``.
Older snapshots still see those files until snapshot expiry removes them.

Bookkeeping (Paimon keeps neither on disk; lakecore needs both across processes):

* ``_lakecore/expired-partitions/expire-<millis>-<id>.json``: the partitions each run dropped,
  written before its commit (and removed if the commit fails). ``check_not_expired`` reads them
  so that a later write into a dropped partition fails with ``PartitionExpiredError``. One new
  file per run means concurrent expirers never overwrite each other's records; past 16 files
  they are folded into one (commits read them all). Deleting a record (or one partition from
  it) re-opens those partitions.
* ``_lakecore/partition-expire-last-check``: epoch millis of the last check, for
  ``maybe_expire_partitions`` (``partition.expiration-check-interval``).

``remove_orphan_files`` never touches ``_lakecore/``; Paimon's readers ignore it.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from lakecore.errors import CorruptFileError, PartitionExpiredError
from lakecore.maintenance.refs import live_entries, state_dir, to_epoch_millis, to_local_naive
from lakecore.options import PartitionExpirationStrategy
from lakecore.schema.partition_time import (
    PartitionTimeError,
    extract_time,
    validate_partition_expiration,
)
from lakecore.store.paths import partition_value_string
from lakecore.utils.faults import CrashStep, maybe_crash

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from lakecore.store.file_store import FileStore

EXPIRED_DIR = "expired-partitions"
LAST_CHECK_FILE = "partition-expire-last-check"
COMMIT_USER_PREFIX = "lakecore-partition-expire-"
RECORD_FILES_MAX = 16


@dataclass(frozen=True)
class PartitionExpirePlan:
    strategy: str
    cutoff: datetime | None  # local wall-clock; None when expiry is not configured
    expired: tuple[dict[str, str], ...] = ()
    expired_values: tuple[tuple, ...] = ()  # decoded partition values, for the commit filter
    unparsable: tuple[tuple[dict[str, str], str], ...] = ()
    deferred: int = 0  # expired beyond partition.expiration-max-num, left for the next run
    files: int = 0
    bytes: int = 0
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "cutoff": None if self.cutoff is None else self.cutoff.isoformat(sep=" "),
            "expired": [dict(p) for p in self.expired],
            "unparsable": [{"partition": dict(p), "reason": r} for p, r in self.unparsable],
            "deferred": self.deferred, "files": self.files, "bytes": self.bytes,
            "note": self.note,
        }


@dataclass(frozen=True)
class PartitionExpireReport:
    dry_run: bool
    plan: PartitionExpirePlan
    snapshot_ids: tuple[int, ...] = ()

    @property
    def partitions_removed(self) -> int:
        return 0 if self.dry_run else len(self.plan.expired)

    def to_dict(self) -> dict[str, Any]:
        return {"operation": "expire-partitions", "dry_run": self.dry_run,
                "partitions_removed": self.partitions_removed,
                "snapshot_ids": list(self.snapshot_ids), "plan": self.plan.to_dict()}


def _texts(table: FileStore, values: Sequence[Any]) -> tuple[str, ...]:
    """Partition values as Paimon's path/spec strings (null -> ``partition.default-name``)."""
    types = table.partition_codec.types
    default = table.options.partition_default_name
    out = []
    for v, t in zip(values, types, strict=True):
        text = partition_value_string(v, t)
        out.append(default if text is None else text)
    return tuple(out)


def _spec(table: FileStore, texts: Sequence[str]) -> dict[str, str]:
    return dict(zip(table.partition_keys, texts, strict=True))


def _value_time(table: FileStore, values: Sequence[Any]) -> datetime:
    o = table.options
    texts = [None if v is None else t for v, t in zip(values, _texts(table, values), strict=True)]
    return extract_time(table.partition_keys, texts, o.partition_timestamp_pattern,
                        o.partition_timestamp_formatter)


def validate_options(table: FileStore) -> None:
    """Raise ``OptionError`` when the partition-expiry options do not fit the partition keys
    (the lead wires the same check into table creation)."""
    o = table.options
    validate_partition_expiration(table.partition_keys, o.partition_timestamp_pattern,
                                  o.partition_timestamp_formatter,
                                  o.partition_expiration_time is not None)


def plan_partition_expiry(table: FileStore, *, now: datetime | None = None
                          ) -> PartitionExpirePlan:
    o = table.options
    strategy = o.partition_expiration_strategy
    expiration = o.partition_expiration_time
    if expiration is None or not table.partition_keys:
        return PartitionExpirePlan(strategy.value, None,
                                   note="partition.expiration-time is not set")
    validate_options(table)
    cutoff = to_local_naive(now) - expiration
    cutoff_millis = to_epoch_millis(cutoff)  # naive = local, like Paimon's atZone(systemDefault)
    latest = table.snapshot_manager.latest()
    if latest is None:
        return PartitionExpirePlan(strategy.value, cutoff)
    stats: dict[bytes, list[Any]] = {}  # partition -> [files, bytes, newest creation or None]
    for e in live_entries(table.manifest_io(), latest).values():
        s = stats.setdefault(e.partition, [0, 0, None])
        s[0] += 1
        s[1] += e.file.file_size
        created = e.file.creation_epoch_millis()
        if created is not None and (s[2] is None or created > s[2]):
            s[2] = created
    expired: list[tuple[tuple[str, ...], tuple, int, int]] = []
    unparsable: list[tuple[dict[str, str], str]] = []
    for pbytes, (n, size, newest) in stats.items():
        values = table.partition_codec.decode(pbytes)
        texts = _texts(table, values)
        if strategy is PartitionExpirationStrategy.UPDATE_TIME:
            if newest is None:
                unparsable.append((_spec(table, texts), "no file records its creation time"))
                continue
            if cutoff_millis > newest:
                expired.append((texts, values, n, size))
            continue
        try:
            when = _value_time(table, values)
        except PartitionTimeError as err:
            unparsable.append((_spec(table, texts), str(err)))
            continue
        if cutoff > when:
            expired.append((texts, values, n, size))
    expired.sort(key=lambda x: ",".join(x[0]))
    limit = o.partition_expiration_max_num
    chosen = expired[:limit]
    unparsable.sort(key=lambda x: ",".join(x[0].values()))
    return PartitionExpirePlan(
        strategy.value, cutoff,
        expired=tuple(_spec(table, t) for t, _, _, _ in chosen),
        expired_values=tuple(v for _, v, _, _ in chosen),
        unparsable=tuple(unparsable),
        deferred=len(expired) - len(chosen),
        files=sum(n for _, _, n, _ in chosen), bytes=sum(b for _, _, _, b in chosen),
    )


def expire_partitions(
    table: FileStore,
    *,
    now: datetime | None = None,
    dry_run: bool = True,
    commit_user: str | None = None,
) -> PartitionExpireReport:
    """Expire partitions now (for schedulers). ``dry_run`` (default) only plans."""
    plan = plan_partition_expiry(table, now=now)
    if dry_run or not plan.expired:
        return PartitionExpireReport(dry_run, plan)
    from lakecore.commit.file_store_commit import FileStoreCommit

    record = _write_record(table, plan, now)
    maybe_crash(CrashStep.PARTITION_EXPIRE_AFTER_RECORD)
    drop = set(plan.expired_values)
    user = commit_user or f"{COMMIT_USER_PREFIX}{uuid.uuid4()}"
    try:
        result = FileStoreCommit(table, user, fresh_user=commit_user is None).overwrite(
            [], partition_filter=drop.__contains__)
    except BaseException:
        table.file_io.delete_quietly(record)
        raise
    compact_records(table)
    return PartitionExpireReport(False, plan, result.snapshot_ids)


def maybe_expire_partitions(table: FileStore, *, now: datetime | None = None
                            ) -> PartitionExpireReport | None:
    """The writers' path: expire when ``partition.expiration-check-interval`` has passed since
    the last check (recorded under ``_lakecore/``); None when it is not time yet."""
    o = table.options
    if o.partition_expiration_time is None or not table.partition_keys:
        return None
    now_ms = to_epoch_millis(now)
    interval = o.partition_expiration_check_interval
    last = _read_last_check(table)
    if interval > timedelta(0) and last is not None:
        if now_ms <= last + int(interval.total_seconds() * 1000):
            return None
    report = expire_partitions(table, now=now, dry_run=False)
    table.file_io.overwrite_atomic(f"{state_dir(table)}/{LAST_CHECK_FILE}", str(now_ms).encode())
    return report


def _read_last_check(table: FileStore) -> int | None:
    try:
        return int(table.file_io.read_text(f"{state_dir(table)}/{LAST_CHECK_FILE}").strip())
    except (CorruptFileError, ValueError):
        return None


def _write_record(table: FileStore, plan: PartitionExpirePlan, now: datetime | None) -> str:
    millis = to_epoch_millis(now)
    return _write_partitions(table, f"expire-{millis}-{uuid.uuid4().hex[:12]}.json",
                             [dict(p) for p in plan.expired],
                             {"expiredAtMillis": millis, "strategy": plan.strategy})


def _write_partitions(table: FileStore, name: str, partitions: list[dict[str, str]],
                      extra: dict[str, Any]) -> str:
    path = f"{state_dir(table)}/{EXPIRED_DIR}/{name}"
    body = {**extra, "partitionKeys": table.partition_keys, "partitions": partitions}
    table.file_io.write_bytes(path, json.dumps(body, indent=2).encode())
    return path


def _record_files(table: FileStore) -> list[str]:
    return sorted(st.path for st in table.file_io.list_status(f"{state_dir(table)}/{EXPIRED_DIR}")
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
        texts = _texts(table, values)
        if texts in recorded:
            bad.append(_spec(table, texts))
            reasons.append(f"{_spec(table, texts)} was dropped by partition expiry")
            continue
        if cutoff is None:
            continue
        try:
            when = _value_time(table, values)
        except PartitionTimeError:
            continue
        if cutoff > when:
            bad.append(_spec(table, texts))
            reasons.append(f"{_spec(table, texts)} is at {when.isoformat(sep=' ')}, before the "
                           f"expiration cut-off {cutoff.isoformat(sep=' ')}")
    if bad:
        raise PartitionExpiredError(
            f"writing into expired partition(s) of {table.identifier}: " + "; ".join(reasons)
            + ". Filter these rows out, or remove the record under "
            f"{state_dir(table)}/{EXPIRED_DIR} to re-open a partition.", bad)
