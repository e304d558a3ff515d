"""Every exception lakecore raises. Three families, as DESIGN.md §4 asks:

* ``LakecoreValidationError`` and subclasses: bad input or state; fatal, never retried.
* ``CommitRetryableError``: a lost race creating a snapshot; the committer retries with backoff.
* ``CommitOutcomeUnknownError``: the commit may or may not have landed; retry the same
  (commit user, commit identifier) and idempotence sorts it out.
"""

from __future__ import annotations


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


class PartitionValueError(LakecoreValidationError):
    """A partition value cannot be turned into a safe path (``/``, ``..``, control chars)."""


class CatalogError(LakecoreError):
    """Base for catalog lookups."""


class DatabaseNotExistError(CatalogError):
    pass


class DatabaseAlreadyExistError(CatalogError):
    pass


class TableNotExistError(CatalogError):
    pass


class TableAlreadyExistError(CatalogError):
    pass


class CorruptFileError(LakecoreError):
    """A metadata or data file is missing, truncated or cannot be decoded. ``path`` names it."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


class SnapshotNotExistError(LakecoreValidationError):
    pass


class CommitError(LakecoreError):
    """Base for commit failures."""


class CommitConflictError(CommitError):
    """Two commits changed the same thing; not retried. Names both commit users and the files."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind} conflict: {message}")
        self.kind = kind


class CommitRetryableError(CommitError):
    """Another committer created the snapshot first; try again on the new latest."""


class CommitOutcomeUnknownError(CommitError):
    """We cannot tell whether the snapshot landed (e.g. timeout mid-create)."""


class CommitTimeoutError(CommitError):
    """``commit.timeout`` or ``commit.max-retries`` ran out."""


class MergeError(LakecoreValidationError):
    """A merge engine was given records it cannot merge (e.g. a delete for partial-update)."""
