"""Write builders in pypaimon's shape: batch (one commit per builder) and stream (explicit
commit identifiers, for jobs that commit again and again as the same commit user).

What runs after a successful commit (Paimon's post-commit expiry) is handed in by the table as
``after_commit``: the write layer does not import maintenance."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lakecore.commit.file_store_commit import CommitResult, FileStoreCommit, partition_equals
from lakecore.commit.message import CommitMessage
from lakecore.errors import SchemaError
from lakecore.format.snapshot import BATCH_COMMIT_IDENTIFIER
from lakecore.store.file_store import FileStore
from lakecore.write.table_write import TableWrite

log = logging.getLogger(__name__)

AfterCommit = Callable[[FileStore], object]
"""What a writer that is not write-only runs after each landed commit (the table's expiry)."""


def run_after_commit(table: FileStore, result: CommitResult,
                     after_commit: AfterCommit | None) -> None:
    """Writers that are not write-only expire partitions and snapshots after each commit, as
    Paimon's do. The commit has landed: a failure here is logged, never raised."""
    if after_commit is None or not result.snapshot_ids or table.options.write_only:
        return
    try:
        after_commit(table)
    except Exception:  # noqa: BLE001 - maintenance must not undo a successful commit
        log.exception("post-commit maintenance of %s failed", table.identifier)


class BatchWriteBuilder:
    """One batch write: ``new_write`` then ``new_commit``, optionally an overwrite."""

    def __init__(self, table: FileStore, commit_user: str | None = None,
                 after_commit: AfterCommit | None = None) -> None:
        self.table = table
        self.after_commit = after_commit
        self.fresh_user = commit_user is None
        self.commit_user = commit_user or str(uuid.uuid4())
        self.static_partition: dict[str, Any] | None = None
        self.is_overwrite = False
        self._committer: FileStoreCommit | None = None

    def file_store_commit(self) -> FileStoreCommit:
        """One committer per builder: its uuid user's lookups start at its first attempt,
        which every BatchTableCommit of this builder must share."""
        if self._committer is None:
            self._committer = FileStoreCommit(self.table, self.commit_user,
                                              fresh_user=self.fresh_user)
        return self._committer

    def overwrite(self, static_partition: dict[str, Any] | None = None) -> BatchWriteBuilder:
        """Overwrite: a static partition spec replaces that partition; an empty spec replaces
        the partitions present in the written data (``dynamic-partition-overwrite``, default
        true) or the whole table."""
        unknown = [k for k in (static_partition or {}) if k not in self.table.partition_keys]
        if unknown:
            raise SchemaError(f"overwrite spec names non-partition column(s) {unknown}")
        self.is_overwrite = True
        self.static_partition = dict(static_partition or {})
        return self

    def new_write(self) -> BatchTableWrite:
        w = BatchTableWrite(self.table, self.commit_user)
        if self.is_overwrite:
            w.with_static_partition(self.static_partition)
            w.with_ignore_previous_files()
        return w

    def new_commit(self) -> BatchTableCommit:
        return BatchTableCommit(self)


class BatchTableWrite(TableWrite):
    """The write of a batch builder."""


class BatchTableCommit:
    """The commit of a batch builder: one commit (or overwrite) of its writes' messages."""

    def __init__(self, builder: BatchWriteBuilder) -> None:
        self.builder = builder
        self.table = builder.table
        self._commit = builder.file_store_commit()
        self.last_result: CommitResult | None = None

    def commit(self, messages: Sequence[CommitMessage]) -> CommitResult:
        b = self.builder
        pf = None
        if b.is_overwrite:
            keys = self.table.partition_keys
            if b.static_partition:
                pf = partition_equals(b.static_partition, keys)
            elif keys and self.table.options.dynamic_partition_overwrite:
                touched = {tuple(m.partition) for m in messages}
                pf = touched.__contains__
        # a recommit (after an unknown outcome) looks for the first attempt's snapshot
        if b.is_overwrite:
            self.last_result = self._commit.overwrite(messages, pf, BATCH_COMMIT_IDENTIFIER)
        else:
            self.last_result = self._commit.commit(messages, BATCH_COMMIT_IDENTIFIER)
        run_after_commit(self.table, self.last_result, b.after_commit)
        return self.last_result

    def abort(self, messages: Sequence[CommitMessage]) -> None:
        self._commit.abort(messages)

    def close(self) -> None:
        pass


class StreamWriteBuilder:
    """Repeated commits as one commit user, each with an explicit commit identifier."""

    def __init__(self, table: FileStore, after_commit: AfterCommit | None = None) -> None:
        self.table = table
        self.after_commit = after_commit
        self.commit_user = str(uuid.uuid4())

    def with_commit_user(self, commit_user: str) -> StreamWriteBuilder:
        self.commit_user = commit_user
        return self

    def new_write(self) -> StreamTableWrite:
        return StreamTableWrite(self.table, self.commit_user)

    def new_commit(self) -> StreamTableCommit:
        return StreamTableCommit(self.table, self.commit_user, self.after_commit)


class StreamTableWrite(TableWrite):
    """The write of a stream builder."""

    def prepare_commit(self, commit_identifier: int | None = None) -> list[CommitMessage]:
        return super().prepare_commit()


class StreamTableCommit:
    """Commits of a stream builder, idempotent per commit identifier."""

    def __init__(self, table: FileStore, commit_user: str,
                 after_commit: AfterCommit | None = None) -> None:
        self.table = table
        self.after_commit = after_commit
        self._commit = FileStoreCommit(table, commit_user)

    def commit(self, messages: Sequence[CommitMessage], commit_identifier: int) -> CommitResult:
        result = self._commit.commit(messages, commit_identifier)
        run_after_commit(self.table, result, self.after_commit)
        return result

    def overwrite(
        self,
        messages: Sequence[CommitMessage],
        commit_identifier: int,
        static_partition: dict[str, Any] | None = None,
    ) -> CommitResult:
        pf = (
            partition_equals(static_partition, self.table.partition_keys)
            if static_partition
            else None
        )
        result = self._commit.overwrite(messages, pf, commit_identifier)
        run_after_commit(self.table, result, self.after_commit)
        return result

    def filter_committed(self, identifiers: Sequence[int]) -> list[int]:
        """Paimon's ``filterCommitted``: the identifiers above the user's latest committed.
        ``identifiers`` must be strictly increasing (``UnsortedCommittablesError``)."""
        return self._commit.filter_committed(identifiers)

    def filter_and_commit(self, committables: Mapping[int, Sequence[CommitMessage]]) -> int:
        """Paimon's ``filterAndCommit`` (a restarted job recommitting what it prepared):
        committed identifiers are skipped, a committable whose files are gone raises
        ``CommittableFilesMissingError`` before anything changes, the rest is committed in
        identifier order. Returns how many were committed."""
        results = self._commit.filter_and_commit(committables)
        if results:
            run_after_commit(self.table, results[-1], self.after_commit)
        return len(results)

    def abort(self, messages: Sequence[CommitMessage]) -> None:
        self._commit.abort(messages)

    def close(self) -> None:
        pass
