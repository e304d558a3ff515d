"""Conflict detection: pure functions over the live files of the snapshot we commit on."""

from __future__ import annotations

from collections.abc import Iterable

from lakecore.errors import CommitConflictError
from lakecore.format.manifest import FileKind, ManifestEntry


def _describe(e: ManifestEntry) -> str:
    return f"{e.file.file_name} (bucket {e.bucket}, level {e.file.level})"


def check_deletes_live(
    changes: Iterable[ManifestEntry],
    live: dict[tuple, ManifestEntry],
    commit_user: str,
    other_users: Iterable[str],
) -> None:
    """Every DELETE must name a file that is live, identity including its level."""
    missing = [e for e in changes if e.kind is FileKind.DELETE and e.identifier() not in live]
    if missing:
        names = ", ".join(_describe(e) for e in missing[:10])
        others = ", ".join(sorted(set(other_users))) or "unknown"
        raise CommitConflictError(
            "file deletion",
            f"commit user {commit_user!r} deletes {len(missing)} file(s) that are no longer live "
            f"(removed by commit user(s) {others}): {names}",
        )


def check_bucket_counts(
    changes: Iterable[ManifestEntry],
    live: dict[tuple, ManifestEntry],
    commit_user: str,
) -> None:
    """All files of a partition must agree on the bucket count the table was written with."""
    existing: dict[bytes, int] = {}
    for e in live.values():
        existing.setdefault(e.partition, e.total_buckets)
    for e in changes:
        if e.kind is not FileKind.ADD:
            continue
        have = existing.get(e.partition)
        if have is not None and have != e.total_buckets:
            raise CommitConflictError(
                "bucket count",
                f"commit user {commit_user!r} wrote {_describe(e)} with {e.total_buckets} "
                f"buckets, but the partition's live files were written with {have} buckets",
            )
