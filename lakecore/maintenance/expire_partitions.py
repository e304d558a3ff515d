"""Partition expiry: drop partitions whose time is strictly before ``now - expiration-time``.

Strategies (``partition.expiration-strategy``): ``values-time`` reads the time from the
partition values (``partition_time``); ``update-time`` uses the newest creation time of the
partition's live files. At most ``partition.expiration-max-num`` partitions go per run (sorted by
their values, as Paimon). Partitions whose time cannot be determined are reported, never
silently kept or dropped.

Expiry is an OVERWRITE commit through ``FileStoreCommit`` (lock, conflict checks and retries
apply) that deletes every live file of the chosen partitions, like Paimon's ``dropPartitions``.
Older snapshots still see those files until snapshot expiry removes them.

Bookkeeping (``lakecore.store.partition_records``): each run records the partitions it drops
under ``_lakecore/expired-partitions/`` before its commit (and removes the record if the commit
fails), so that ``check_not_expired`` refuses later writes into them; the time of the last
check, for ``maybe_expire_partitions``, is kept in ``_lakecore/partition-expire-last-check``.

``remove_orphan_files`` never touches ``_lakecore/``; Paimon's readers ignore it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from lakecore.commit.file_store_commit import FileStoreCommit
from lakecore.maintenance.refs import live_entries
from lakecore.options import PartitionExpirationStrategy
from lakecore.schema.partition_time import PartitionTimeError, validate_partition_expiration
from lakecore.store.file_store import FileStore
from lakecore.store.partition_records import (
    compact_records,
    partition_spec,
    partition_texts,
    partition_value_time,
    read_last_check,
    write_last_check,
    write_record,
)
from lakecore.utils.clock import to_epoch_millis, to_local_naive
from lakecore.utils.faults import CrashStep, maybe_crash

COMMIT_USER_PREFIX = "lakecore-partition-expire-"


@dataclass(frozen=True)
class PartitionExpirePlan:
    """The partitions a partition expiry would drop, and the cut-off it used."""

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
    """What a partition expiry dropped (or would drop, in a dry run)."""

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
        texts = partition_texts(table, values)
        if strategy is PartitionExpirationStrategy.UPDATE_TIME:
            if newest is None:
                unparsable.append((partition_spec(table, texts),
                                   "no file records its creation time"))
                continue
            if cutoff_millis > newest:
                expired.append((texts, values, n, size))
            continue
        try:
            when = partition_value_time(table, values)
        except PartitionTimeError as err:
            unparsable.append((partition_spec(table, texts), str(err)))
            continue
        if cutoff > when:
            expired.append((texts, values, n, size))
    expired.sort(key=lambda x: ",".join(x[0]))
    limit = o.partition_expiration_max_num
    chosen = expired[:limit]
    unparsable.sort(key=lambda x: ",".join(x[0].values()))
    return PartitionExpirePlan(
        strategy.value, cutoff,
        expired=tuple(partition_spec(table, t) for t, _, _, _ in chosen),
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
    record = write_record(table, [dict(p) for p in plan.expired], plan.strategy, now)
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
    last = read_last_check(table)
    if interval > timedelta(0) and last is not None:
        if now_ms <= last + int(interval.total_seconds() * 1000):
            return None
    report = expire_partitions(table, now=now, dry_run=False)
    write_last_check(table, now_ms)
    return report
