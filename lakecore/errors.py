"""Every exception lakecore raises. Three families:

* ``LakecoreValidationError`` and subclasses: bad input or state; fatal, never retried.
* ``CommitRetryableError``: a lost race creating a snapshot; the committer retries with backoff.
* ``CommitOutcomeUnknownError``: the commit may or may not have landed; retry the same
  (commit user, commit identifier) and idempotence sorts it out.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar


class LakecoreError(Exception):
    """Base of every lakecore error."""


class LakecoreValidationError(LakecoreError, ValueError):
    """Fatal: the input or the table state is wrong; retrying cannot help."""


class OptionError(LakecoreValidationError):
    """An option key is unknown or its value is malformed. ``key`` names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"option {key!r}: {message}")
        self.key = key


class SchemaError(LakecoreValidationError):
    """A schema, a type or a row does not fit the table."""


class NullKeyError(SchemaError):
    """Rows to write hold a null in a primary-key column (Paimon's key columns are NOT NULL).
    ``column`` names it and ``count`` says how many rows; nothing was written."""

    def __init__(self, column: str, count: int) -> None:
        super().__init__(
            f"primary key column {column!r} has {count} null value(s); primary-key columns "
            "are NOT NULL"
        )
        self.column = column
        self.count = count


class PartitionValueError(LakecoreValidationError):
    """A partition value cannot be turned into a safe path (``/``, ``..``, control chars)."""


class CatalogError(LakecoreError):
    """Base for catalog lookups."""


class DatabaseNotExistError(CatalogError):
    """The database is not in the catalog."""


class DatabaseAlreadyExistError(CatalogError):
    """The database to create is already in the catalog."""


class TableNotExistError(CatalogError):
    """The table is not in the catalog."""


class TableAlreadyExistError(CatalogError):
    """The table to create is already in the catalog."""


class CorruptFileError(LakecoreError):
    """A metadata or data file is missing, truncated or cannot be decoded. ``path`` names it."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


class SnapshotNotExistError(LakecoreValidationError):
    """The snapshot (by id, time or hint) does not exist."""


class CommitError(LakecoreError):
    """Base for commit failures."""


class CommitConflictError(CommitError):
    """Two commits changed the same thing; not retried. Names both commit users and the files.

    Each kind of conflict is a subclass; ``kind`` is its class-level name, the message's
    prefix (``"<kind> conflict: ..."``). Catch this class to catch them all."""

    kind: ClassVar[str] = "commit"

    def __init__(self, message: str) -> None:
        super().__init__(f"{self.kind} conflict: {message}")


class ConcurrentDeleteConflict(CommitConflictError):
    """The commit deletes a file that is no longer live (another commit removed it first).
    ``partitions``: the partitions (BinaryRow bytes) of those files."""

    kind = "file deletion"

    def __init__(self, message: str, *, partitions: tuple[bytes, ...] = ()) -> None:
        super().__init__(message)
        self.partitions = partitions


class BucketCountConflict(CommitConflictError):
    """The commit adds files written with another bucket count than the partition's live ones."""

    kind = "bucket count"


class LevelOverlapConflict(CommitConflictError):
    """A compaction leaves two files of one level >= 1 overlapping in key range (it raced
    another compaction of the same bucket)."""

    kind = "level overlap"


class IndexConflictError(CommitConflictError):
    """The commit replaces a (partition, bucket)'s HASH or deletion-vector index, but the live
    index of that type is not the one its writer read and replaced: another writer assigned
    buckets or compacted that bucket concurrently. ``table``, ``partition``, ``bucket`` and
    ``index_type`` name it; nothing of this commit was kept."""

    kind = "index"

    def __init__(self, message: str, *, table: str, partition: str, bucket: int,
                 index_type: str) -> None:
        super().__init__(message)
        self.table = table
        self.partition = partition
        self.bucket = bucket
        self.index_type = index_type


class FileAlreadyAddedConflict(CommitConflictError):
    """The commit ADDs a file that is already live in the same partition, bucket and level
    (Paimon: "Trying to add file ... which is already added"): the same messages were
    committed before. Nothing was written and, because the files are live, none is deleted.
    ``files`` names them."""

    kind = "file deletion"  # Paimon reports it as "File deletion conflicts detected!"

    def __init__(self, message: str, *, files: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.files = files


class UnsortedCommittablesError(CommitError, ValueError):
    """Committables handed to ``filter_committed`` are not in strictly increasing identifier
    order (Paimon: "Committables must be sorted according to identifiers before
    filtering"): the rule that everything at or below the user's latest committed identifier
    is committed would otherwise drop a committable that never landed. ``identifiers`` is
    the order given; nothing was filtered or committed."""

    def __init__(self, identifiers: tuple[int, ...]) -> None:
        super().__init__(
            "committables must be sorted by identifier (strictly increasing) before "
            f"filtering, got {list(identifiers)}")
        self.identifiers = identifiers


class CommittableFilesMissingError(CommitError):
    """A committable to (re)commit names files that no longer exist (Paimon: "Cannot recover
    from this checkpoint"): it is older than what compaction and expiry kept, so it can never
    be committed. ``paths`` lists the missing files; the table was not changed and no file
    was deleted."""

    def __init__(self, message: str, *, paths: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.paths = paths


class CommitRetryableError(CommitError):
    """Another committer created the snapshot first; try again on the new latest."""


class CommitOutcomeUnknownError(CommitError):
    """We cannot tell whether the snapshot landed (e.g. timeout mid-create)."""


class CommitTimeoutError(CommitError):
    """``commit.timeout`` or ``commit.max-retries`` ran out."""


class MergeError(LakecoreValidationError):
    """A merge engine was given records it cannot merge (e.g. a delete for partial-update)."""


class CatalogLockError(LakecoreError):
    """The catalog lock could not be taken or used (not a commit conflict)."""


class CatalogLockTimeoutError(CatalogLockError):
    """``lock-acquire-timeout`` ran out while another owner held the lock.

    ``holder`` and ``since`` (UTC) name the owner seen last, or are None if the row vanished
    between the last attempt and the message. Nothing was published: retrying is safe.
    """

    def __init__(self, lock_id: str, waited_seconds: float, holder: str | None,
                 since: datetime | None, expires: datetime | None) -> None:
        if holder is None:
            who = "its holder released it just as the wait ran out"
        else:
            when = since.isoformat(timespec="seconds") if since else "an unknown time"
            until = f", stale after {expires.isoformat(timespec='seconds')}" if expires else ""
            who = f"held by {holder!r} since {when}{until}"
        super().__init__(
            f"could not acquire catalog lock {lock_id!r} within {waited_seconds:.1f} s: {who}"
        )
        self.lock_id = lock_id
        self.waited_seconds = waited_seconds
        self.holder = holder
        self.since = since
        self.expires = expires


class PartitionExpiredError(LakecoreValidationError):
    """A write targets a partition that partition expiry removed (or whose time is past the
    ``partition.expiration-time`` cut-off). ``partitions`` lists them as ``{key: value}``."""

    def __init__(self, message: str, partitions: list[dict[str, str]]) -> None:
        super().__init__(message)
        self.partitions = partitions


class TagNotExistError(LakecoreValidationError):
    """The tag does not exist."""


class TagAlreadyExistError(LakecoreValidationError):
    """The tag to create already exists."""


class MaintenanceError(LakecoreValidationError):
    """A maintenance request that would be unsafe or cannot apply to this table (e.g. an
    orphan-file cut-off in the future, a rollback target that does not exist)."""


class UnsupportedFeatureError(LakecoreValidationError):
    """The table uses a Paimon feature lakecore does not implement (named in the message)."""


class SchemaChangeError(SchemaError):
    """An ALTER TABLE change Paimon's rules refuse: a protected key or partition column, a type
    that cannot be converted, an option that cannot change. Nothing was written."""


class ColumnNotExistError(SchemaChangeError):
    """A schema change names a column the table does not have. ``column`` names it."""

    def __init__(self, column: str, message: str | None = None) -> None:
        super().__init__(message or f"column {column!r} does not exist")
        self.column = column


class ColumnAlreadyExistError(SchemaChangeError):
    """A schema change adds (or renames to) a column name the table already has."""

    def __init__(self, column: str, message: str | None = None) -> None:
        super().__init__(message or f"column {column!r} already exists")
        self.column = column


class IncompatibleSchemaError(SchemaChangeError):
    """A wanted schema (a declaration, a write's source) cannot be reached by an ALTER
    (``lakecore.schema.diff``). ``table`` and ``problems`` (each naming a column or an
    option) say why; nothing was changed."""

    def __init__(self, table: str, problems: list[str]) -> None:
        super().__init__(f"table {table!r}: incompatible schema change, nothing was changed: "
                         + "; ".join(problems))
        self.table = table
        self.problems = list(problems)
