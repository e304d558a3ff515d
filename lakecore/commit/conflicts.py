"""Conflict detection: pure functions over the live files of the snapshot we commit on.

Each check raises its own ``CommitConflictError`` subclass (``lakecore.errors``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence

from lakecore.errors import (
    BucketCountConflict,
    ConcurrentDeleteConflict,
    IndexConflictError,
    LevelOverlapConflict,
)
from lakecore.format.binary_row import decode_row
from lakecore.format.bucket import POSTPONE_BUCKET
from lakecore.format.index_manifest import (
    DELETION_VECTORS_INDEX,
    HASH_INDEX,
    IndexManifestEntry,
)
from lakecore.format.manifest import FileKind, ManifestEntry
from lakecore.schema.types import DataType


def _describe(e: ManifestEntry) -> str:
    return f"{e.file.file_name} (bucket {e.bucket}, level {e.file.level})"


def check_deletes_live(
    changes: Iterable[ManifestEntry],
    live: Mapping[tuple, ManifestEntry],
    commit_user: str,
    other_users: Iterable[str],
) -> None:
    """Every DELETE must name a file that is live, identity including its level."""
    missing = [e for e in changes if e.kind is FileKind.DELETE and e.identifier() not in live]
    if missing:
        names = ", ".join(_describe(e) for e in missing[:10])
        others = ", ".join(sorted(set(other_users))) or "unknown"
        raise ConcurrentDeleteConflict(
            f"commit user {commit_user!r} deletes {len(missing)} file(s) that are no longer live "
            f"(removed by commit user(s) {others}): {names}",
        )


def check_bucket_counts(
    changes: Iterable[ManifestEntry],
    live: Mapping[tuple, ManifestEntry],
    commit_user: str,
) -> None:
    """All files of a partition must agree on the bucket count the table was written with.
    A postpone bucket's files (bucket -2) have none yet: they take no part."""
    existing: dict[bytes, int] = {}
    for e in live.values():
        if e.bucket != POSTPONE_BUCKET:
            existing.setdefault(e.partition, e.total_buckets)
    for e in changes:
        if e.kind is not FileKind.ADD or e.bucket == POSTPONE_BUCKET:
            continue
        have = existing.get(e.partition)
        if have is not None and have != e.total_buckets:
            raise BucketCountConflict(
                f"commit user {commit_user!r} wrote {_describe(e)} with {e.total_buckets} "
                f"buckets, but the partition's live files were written with {have} buckets",
            )


def check_level_overlap(
    changes: Sequence[ManifestEntry],
    live: Mapping[tuple, ManifestEntry],
    key_types: Sequence[DataType],
    commit_user: str,
) -> None:
    """After applying ``changes``, every level >= 1 of a touched bucket is one sorted run:
    no two files there overlap in key range (a compaction that raced another one fails)."""
    touched = {
        (e.partition, e.bucket, e.file.level)
        for e in changes
        if e.kind is FileKind.ADD and e.file.level > 0
    }
    if not touched or not key_types:
        return
    after = dict(live)
    for e in changes:
        if e.kind is FileKind.ADD:
            after[e.identifier()] = e
        else:
            after.pop(e.identifier(), None)
    by_level: dict[tuple, list[ManifestEntry]] = defaultdict(list)
    for e in after.values():
        k = (e.partition, e.bucket, e.file.level)
        if k in touched:
            by_level[k].append(e)
    for (_, bucket, level), entries in by_level.items():
        ranges = sorted(
            (tuple(decode_row(e.file.min_key, key_types)),
             tuple(decode_row(e.file.max_key, key_types)), e)
            for e in entries
        )
        for (_, hi, a), (lo, _, b) in zip(ranges, ranges[1:]):
            if lo <= hi:
                raise LevelOverlapConflict(
                    f"commit user {commit_user!r}: {_describe(a)} and {_describe(b)} overlap in "
                    f"key range at level {level} of bucket {bucket}; another compaction "
                    "changed this bucket concurrently",
                )


# Index types owned per (partition, bucket): one writer replaces them whole.
BUCKET_INDEX_TYPES = (HASH_INDEX, DELETION_VECTORS_INDEX)


def check_index_replacements(
    changes: Sequence[IndexManifestEntry],
    previous: Sequence[IndexManifestEntry],
    commit_user: str,
    *,
    table: str = "",
    label: Callable[[bytes], str] = bytes.hex,
) -> None:
    """The index-commit protocol: a HASH or deletion-vector change of a (partition, bucket) must
    replace exactly the live files of that type there. The files the increment DELETEs of that
    type are the ones its writer read; if they are not the live set (one of them is no longer
    live, or another live one appeared, or none is named while one is live), another writer
    changed the bucket since, and the commit raises ``IndexConflictError``. Other index types
    (global indexes) are not checked. ``label`` turns a partition's bytes into text."""
    touched: dict[tuple[bytes, int, str], bool] = {}
    replaced: dict[tuple[bytes, int, str], set[str]] = defaultdict(set)
    for e in changes:
        t = e.index_file.index_type
        if t not in BUCKET_INDEX_TYPES:
            continue
        key = (e.partition, e.bucket, t)
        touched.setdefault(key, False)
        if e.kind is FileKind.DELETE:
            replaced[key].add(e.index_file.file_name)
        else:
            touched[key] = True
    if not touched:
        return
    live: dict[tuple[bytes, int, str], set[str]] = defaultdict(set)
    for e in previous:
        key = (e.partition, e.bucket, e.index_file.index_type)
        if key in touched:
            live[key].add(e.index_file.file_name)
    for key in touched:
        mine, now = replaced.get(key, set()), live.get(key, set())
        if mine == now:
            continue
        partition, bucket, index_type = key
        where = label(partition) or "(unpartitioned)"
        gone = sorted(mine - now)
        other = sorted(now - mine)
        why = []
        if gone:
            why.append(f"it replaces {', '.join(gone)}, no longer live")
        if other:
            why.append(f"the live {', '.join(other)} was written by another commit")
        raise IndexConflictError(
            f"table {table or '?'} partition {where} bucket {bucket}: commit user "
            f"{commit_user!r} changes the {index_type} index, but {'; '.join(why)}; another "
            "writer changed this bucket concurrently (one writer at a time per bucket)",
            table=table, partition=where, bucket=bucket, index_type=index_type,
        )
