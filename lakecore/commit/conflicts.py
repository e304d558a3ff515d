"""Conflict detection: pure functions over the live files of the snapshot we commit on.

Each check raises its own ``CommitConflictError`` subclass (``lakecore.errors``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence

from lakecore.errors import (
    BucketCountConflict,
    ConcurrentDeleteConflict,
    FileAlreadyAddedConflict,
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
            partitions=tuple(sorted({e.partition for e in missing})),
        )


def check_no_duplicate_adds(
    changes: Iterable[ManifestEntry],
    live: Mapping[tuple, ManifestEntry],
    commit_user: str,
    also: Iterable[ManifestEntry] = (),
) -> None:
    """No ADD may name a file that is already live with the same identity (partition, bucket,
    level, name, extra files, embedded index, external path), nor one the same commit adds
    twice: Paimon's ``FileEntry.mergeEntries`` ("Trying to add file %s which is already
    added"), raised by its conflict check as a file deletion conflict. Committing the same
    messages again (a replayed committable, a duplicate submission) is refused here.
    ``also``: ADDs of the same messages committed later (an APPEND's own compaction output):
    one of them live means the messages were committed before, so the APPEND is refused too."""
    changes = [*changes, *also]
    gone = {e.identifier() for e in changes if e.kind is FileKind.DELETE}
    seen: set[tuple] = set()
    dup: list[ManifestEntry] = []
    for e in changes:
        if e.kind is not FileKind.ADD:
            continue
        ident = e.identifier()
        if (ident in live and ident not in gone) or ident in seen:
            dup.append(e)
        seen.add(ident)
    if dup:
        names = tuple(e.file.file_name for e in dup)
        raise FileAlreadyAddedConflict(
            f"File deletion conflicts detected! Give up committing. Trying to add file "
            f"{_describe(dup[0])} which is already added"
            + (f" (and {len(dup) - 1} more)" if len(dup) > 1 else "")
            + f"; commit user {commit_user!r} commits files that are already committed "
            "(a replayed or duplicate committable)",
            files=names,
        )


def check_bucket_counts(
    changes: Iterable[ManifestEntry],
    live: Mapping[tuple, ManifestEntry],
    commit_user: str,
    *,
    overwrite: bool = False,
    label: Callable[[bytes], str] = bytes.hex,
) -> None:
    """Paimon's rule (``FileStoreCommitImpl.noConflictsOrFail`` / ``ConflictDetection``):
    unless the commit is an OVERWRITE (a rescale replaces every file of the partition), all
    files of a partition - the live ones, then the commit's changes - must record the same
    total bucket count. Files whose recorded count is unset (<= 0: older writers, dynamic
    and postpone buckets) take no part."""
    if overwrite:
        return
    counts: dict[bytes, int] = {}
    for e in (*live.values(), *changes):
        if e.total_buckets is None or e.total_buckets <= 0 or e.bucket == POSTPONE_BUCKET:
            continue
        old = counts.setdefault(e.partition, e.total_buckets)
        if old != e.total_buckets:
            where = label(e.partition) or "(unpartitioned)"
            raise BucketCountConflict(
                f"Total buckets of partition {where} changed from {old} to {e.total_buckets} "
                f"without overwrite. Give up committing. (commit user {commit_user!r}, "
                f"{_describe(e)}; rescale with an OVERWRITE)",
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
