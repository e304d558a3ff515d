"""The single committer: CommitMessages -> APPEND / COMPACT / OVERWRITE snapshots.

commit -> try_commit (retry loop with backoff) -> try_commit_once (read latest and its
manifests, ``plan_commit`` checks conflicts and plans the snapshot, then write manifests,
create ``snapshot-N`` if absent, under the catalog lock when one is configured).

Paimon's commit rules, mirrored:

* ``filterCommitted``: every identifier at or below a commit user's latest committed one is
  committed (the latest is the user's newest snapshot, or the commit-user marker's
  ``latestIdentifier`` once those expired: ``lakecore.store.commit_users``).
* ``checkFilesExistence``: a committable whose files no longer exist can never be committed
  (``CommittableFilesMissingError``, nothing changed, nothing deleted).
* ``mergeEntries``: an ADD of a file already live is refused (``FileAlreadyAddedConflict``;
  its files are live, so none is deleted).
* ``tryCommitOnce``'s "commit may have succeeded": an I/O error while writing or publishing the
  snapshot is retried; whether our snapshot landed is read back from ``snapshot-N`` (its
  commit user, identifier, kind and delta manifest list), so a landed one is never redone and
  its manifests never deleted. Callers see only lakecore's typed errors.
* A writer's APPEND landed but its inline compaction lost the race (another writer compacted
  the bucket): the commit succeeds, the compaction's own files are deleted and
  ``CommitResult.compaction_dropped`` says so (Paimon's writers drop such a compaction
  the same way on their next restore; the data is committed).

Index files travel with their increment: a message's ``new_index_files`` /
``deleted_index_files`` go into the APPEND (or OVERWRITE) snapshot, its
``compact_new_index_files`` / ``compact_deleted_index_files`` into the COMPACT one. Each
attempt reads the latest snapshot's index manifest when the increment changes an index (or
an OVERWRITE may drop one), and writes the combined entries as a new index manifest; otherwise
the name is carried unchanged (``lakecore.commit.plan``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from lakecore.commit.message import CommitMessage
from lakecore.commit.plan import (
    CommitPlan,
    bucket_count_suspects,
    is_pure_append,
    merged_base,
    needs_previous_index,
    overwrite_changes,
    plan_commit,
    touching_manifests,
)
from lakecore.errors import (
    CommitConflictError,
    CommitOutcomeUnknownError,
    CommitRetryableError,
    CommittableFilesMissingError,
    CommitTimeoutError,
    ConcurrentDeleteConflict,
    CorruptFileError,
    FileAlreadyAddedConflict,
    LakecoreError,
    LakecoreValidationError,
    PartitionExpiredError,
    SnapshotNotExistError,
    UnsortedCommittablesError,
)
from lakecore.format.binary_row import decode_row
from lakecore.format.index_manifest import IndexManifestEntry
from lakecore.format.manifest import FileKind, ManifestEntry
from lakecore.format.manifest_list import ManifestFileMeta
from lakecore.format.partition_string import partition_value_string
from lakecore.format.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind, Snapshot
from lakecore.store.commit_users import CommitUserIndex, Marker
from lakecore.store.file_store import FileStore
from lakecore.store.index_paths import index_file_path, statistics_path
from lakecore.store.manifest_io import merge_entries
from lakecore.store.partition_records import check_not_expired
from lakecore.utils.faults import CrashStep, maybe_crash

log = logging.getLogger(__name__)

PartitionFilter = Callable[[tuple], bool]


@dataclass(frozen=True)
class CommitResult:
    """The snapshots one commit call created, or that it was skipped as already committed."""

    snapshot_ids: tuple[int, ...]
    skipped: bool = False  # True when (user, identifier) was already committed
    # the APPEND landed, the writers' inline compaction lost a race and was dropped (its
    # files deleted); ``dropped_reason`` is the conflict's message
    compaction_dropped: bool = False
    dropped_reason: str | None = None



def retry_wait_seconds(min_wait: timedelta, max_wait: timedelta, retry_count: int,
                       rng: random.Random) -> float:
    """Paimon's ``RetryWaiter.retryWait``: before retry ``retry_count`` (0 for the first),
    ``min(commit.min-retry-wait * 2^retry_count, commit.max-retry-wait)`` in whole
    milliseconds, plus a jitter of ``[0, max(1, 20 %))`` milliseconds: a wait in
    ``[base, 1.2 x base)``, never shorter than the base."""
    lo_ms = min_wait // timedelta(milliseconds=1)
    hi_ms = max_wait // timedelta(milliseconds=1)
    wait_ms = int(min(lo_ms * 2.0 ** retry_count, hi_ms))
    wait_ms += rng.randrange(max(1, int(wait_ms * 0.2)))
    return wait_ms / 1000

class FileStoreCommit:
    """The single committer: APPEND/COMPACT/OVERWRITE snapshots with conflict checks and retries."""

    def __init__(
        self,
        table: FileStore,
        commit_user: str,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        fresh_user: bool = False,
        rng: random.Random | None = None,
    ) -> None:
        self.table = table
        self.commit_user = commit_user
        # a commit user made up just now (a builder's uuid) cannot have committed before this
        # object's first attempt: its lookups start there and it needs no marker
        self.fresh_user = fresh_user
        self._first_base_id: int | None = None
        self.users = CommitUserIndex(table.file_io, table.table_path)
        self.clock, self.sleep = clock, sleep
        self.rng = rng or random.Random()
        self.sm = table.snapshot_manager
        self.mio = table.manifest_io()
        # the snapshot a compaction or overwrite was planned on; names the conflicting users
        self.base_snapshot_id: int | None = None
        self._abort_scope: list[CommitMessage] = []  # whose files a fatal failure deletes
        self._published = False  # set once this attempt's snapshot file exists
        rt = table.schema.row_type
        self.key_types = [rt.field(k).type for k in table.schema.trimmed_primary_keys]

    # -- idempotence ---------------------------------------------------------------------
    def latest_committed_identifier(self) -> int | None:
        """The commit user's latest committed identifier (Paimon's ``latestSnapshotOfUser``):
        its newest snapshot's, or the marker's record once those expired; None if none.

        The snapshot walk is bounded by where the user can have committed: for a fresh user,
        this object's first attempt; for a named one, its commit-user marker. History older
        than that is never read."""
        since_id: int | None = None
        recorded: int | None = None
        if self.fresh_user:
            if self._first_base_id is None:
                return None
            since_id = self._first_base_id
        else:
            marker = self.users.read(self.commit_user)
            if marker is not None:
                since_id, recorded = marker.after_snapshot_id, self._recorded(marker)
            elif self.users.enabled():
                return None  # never tried to publish
            # else: a table without markers (older, or other engines'): walk it all
        found: int | None = None
        for snap in self.sm.snapshots_backward():
            if since_id is not None and snap.id <= since_id:
                break
            if snap.commit_user == self.commit_user:
                found = snap.commit_identifier
                break
        known = [i for i in (found, recorded) if i is not None]
        return max(known) if known else None

    def _recorded(self, marker: Marker) -> int | None:
        """The marker's recorded identifier, unless its snapshot was rolled back (its id is
        above the latest, or snapshot-N exists and is not that commit)."""
        ident, sid = marker.latest_identifier, marker.latest_snapshot_id
        if ident is None or sid is None:
            return None
        latest = self.sm.latest_id()
        if latest is None or sid > latest:
            return None
        try:
            snap = self.sm.snapshot(sid)
        except SnapshotNotExistError:
            return ident  # expired: the record is all that is left of it
        ok = snap.commit_user == self.commit_user and snap.commit_identifier == ident
        return ident if ok else None

    def is_committed(self, identifier: int) -> bool:
        """Paimon's ``filterCommitted``: at or below the user's latest committed identifier."""
        latest = self.latest_committed_identifier()
        return latest is not None and identifier <= latest

    def filter_committed(self, identifiers: Sequence[int]) -> list[int]:
        """The identifiers among ``identifiers`` that are not committed yet. They must be
        strictly increasing, as Paimon's ``filterCommitted`` checks (else
        ``UnsortedCommittablesError``); ``filter_and_commit`` sorts them itself."""
        if any(b <= a for a, b in zip(identifiers, identifiers[1:])):
            raise UnsortedCommittablesError(tuple(identifiers))
        latest = self.latest_committed_identifier()
        return [i for i in identifiers if latest is None or i > latest]

    def filter_and_commit(self, committables: Mapping[int, Sequence[CommitMessage]]
                          ) -> list[CommitResult]:
        """Paimon's ``TableCommitImpl.filterAndCommit`` (a restarted writer recommitting what
        it had prepared): drop the committed identifiers, refuse (changing nothing) when a
        remaining committable names a file that no longer exists, commit the rest in
        identifier order. Returns their results (empty: everything was committed)."""
        retry = self.filter_committed(sorted(committables))
        if not retry:
            return []
        self._check_files_exist([m for i in retry for m in committables[i]], everything=True)
        return [self.commit(committables[i], i) for i in retry]

    def _check_files_exist(self, messages: Sequence[CommitMessage],
                           everything: bool = False) -> None:
        """Paimon's ``checkFilesExistence``: raise ``CommittableFilesMissingError`` (before
        anything is written or deleted) when a file the messages name does not exist. By
        default only the files the messages' writers created (a commit's own files must
        exist: missing ones mean an old committable whose files compaction and expiry
        removed); with ``everything`` also those they replace, as Paimon checks on recovery."""
        paths = self.table.paths
        in_data_dir = self.table.options.index_file_in_data_file_dir
        wanted: list[str] = []
        for m in messages:
            files = (m.new_files + m.changelog_files + m.compact_after
                     + m.compact_changelog_files)
            if everything:
                files += m.compact_before
            for f in files:
                wanted.append(paths.data_file_path(m.partition, m.bucket, f.file_name,
                                                   f.external_path))
            index = m.written_index_files()
            if everything:
                index += m.deleted_index_files + m.compact_deleted_index_files
            for i in index:
                wanted.append(index_file_path(paths, m.partition, m.bucket, i, in_data_dir))
        wanted = list(dict.fromkeys(wanted))
        if not wanted:
            return
        missing = self.table.file_io.missing(wanted)
        if missing:
            raise CommittableFilesMissingError(
                f"commit user {self.commit_user!r}: Cannot recover from this checkpoint because "
                "some files in the snapshot that need to be resubmitted have been deleted: "
                + ", ".join(missing[:10]) + (f" (and {len(missing) - 10} more)"
                                             if len(missing) > 10 else "")
                + ". The most likely reason is that an old committable was replayed whose "
                "files compaction and expiry already removed; nothing was committed",
                paths=tuple(missing),
            )

    def _landed_since(self, base_id: int, identifier: int, kind: CommitKind) -> int | None:
        """The id of a snapshot after ``base_id`` by this user with ``identifier`` and
        ``kind`` (an earlier attempt whose outcome was unknown did land), else None."""
        for snap in self.sm.snapshots_backward():
            if snap.id <= base_id:
                break
            if (snap.commit_user == self.commit_user and snap.commit_identifier == identifier
                    and snap.commit_kind is kind):
                return snap.id
        return None

    def _record(self, identifier: int, snapshot_id: int) -> None:
        """The marker remembers the latest committed identifier (best effort: the snapshot
        answers until it expires)."""
        if self.fresh_user:
            return
        try:
            self.users.record(self.commit_user, identifier, snapshot_id)
        except (OSError, LakecoreError) as e:
            log.warning("commit-user marker of %s not updated: %s", self.commit_user, e)

    # -- entry points --------------------------------------------------------------------
    def commit(
        self,
        messages: Sequence[CommitMessage],
        identifier: int = BATCH_COMMIT_IDENTIFIER,
        properties: dict[str, str] | None = None,
    ) -> CommitResult:
        if self.is_committed(identifier):
            log.info("commit %s/%s already committed; nothing to do", self.commit_user, identifier)
            return CommitResult((), skipped=True)
        self._check_files_exist(messages)
        self._abort_scope = list(messages)
        with self._abort_on_fatal():
            self._check_not_expired(messages)
            result = self._commit(messages, identifier, properties)
        if result.snapshot_ids:
            self._record(identifier, result.snapshot_ids[-1])
        return result

    def _commit(self, messages: Sequence[CommitMessage], identifier: int,
                properties: dict[str, str] | None) -> CommitResult:
        append, append_log, compact, compact_log = self._collect(messages)
        append_index, compact_index = self._collect_index(messages)
        ids: list[int] = []
        if append or append_log or append_index:
            probe = [e for e in compact if e.kind is FileKind.ADD]
            ids.append(self._try_commit(CommitKind.APPEND, lambda live: append, append_log,
                                        identifier, properties, append_index, probe=probe))
            # the new files are committed now; only the compaction's own files may go
            self._abort_scope = [m.compaction_only() for m in messages]
        if compact or compact_log or compact_index:
            try:
                ids.append(self._try_commit(CommitKind.COMPACT, lambda live: compact,
                                            compact_log, identifier, properties,
                                            compact_index))
            except (CommitConflictError, PartitionExpiredError) as e:
                # (PartitionExpiredError: the compaction's inputs went with a partition that
                # expired after the APPEND; see _expired_partitions_named)
                if not ids:
                    raise  # a compaction-only commit (dedicated compaction): its conflict
                # the data landed; only the inline compaction lost the race: drop it
                log.warning("commit %s/%s: APPEND snapshot %s landed, its compaction was "
                            "dropped: %s", self.commit_user, identifier, ids[0], e)
                if not isinstance(e, FileAlreadyAddedConflict):  # else its files are live
                    self.abort(self._abort_scope)
                return CommitResult(tuple(ids), compaction_dropped=True, dropped_reason=str(e))
        return CommitResult(tuple(ids))

    def overwrite(
        self,
        messages: Sequence[CommitMessage],
        partition_filter: PartitionFilter | None,
        identifier: int = BATCH_COMMIT_IDENTIFIER,
        properties: dict[str, str] | None = None,
    ) -> CommitResult:
        """Replace the live files of partitions matching ``partition_filter`` (None: all;
        for dynamic overwrite the caller passes the partitions present in ``messages``)."""
        if self.is_committed(identifier):
            return CommitResult((), skipped=True)
        self._check_files_exist(messages)
        self._abort_scope = list(messages)
        with self._abort_on_fatal():
            self._check_not_expired(messages)
            result = self._overwrite(messages, partition_filter, identifier, properties)
        if result.snapshot_ids:
            self._record(identifier, result.snapshot_ids[-1])
        return result

    def _overwrite(self, messages: Sequence[CommitMessage],
                   partition_filter: PartitionFilter | None, identifier: int,
                   properties: dict[str, str] | None) -> CommitResult:
        append, append_log, compact, compact_log = self._collect(messages)
        append_index, compact_index = self._collect_index(messages)
        codec = self.table.partition_codec

        def matches(partition: bytes) -> bool:
            return partition_filter is None or partition_filter(codec.decode(partition))

        def changes(live: dict[tuple, ManifestEntry]) -> list[ManifestEntry]:
            return overwrite_changes(live, append, matches)

        ids = [self._try_commit(CommitKind.OVERWRITE, changes, append_log, identifier,
                                properties, append_index, matches)]
        own = {e.file.file_name for e in append}
        if (compact or compact_log or compact_index) and all(
                e.file.file_name in own for e in compact if e.kind is FileKind.DELETE):
            # the writers' inline compaction of the new files, as Paimon's overwrite does (a
            # writer that did not ignore the previous files compacted replaced ones: dropped)
            self._abort_scope = [m.compaction_only() for m in messages]
            ids.append(self._try_commit(CommitKind.COMPACT, lambda live: compact, compact_log,
                                        identifier, properties, compact_index))
        return CommitResult(tuple(ids))

    def abort(self, messages: Sequence[CommitMessage]) -> None:
        """Delete every file the messages' writers created: data, changelog and index files."""
        paths = self.table.paths
        in_data_dir = self.table.options.index_file_in_data_file_dir
        for m in messages:
            for f in m.written_files():
                self.table.file_io.delete_quietly(paths.data_file_path(m.partition, m.bucket,
                                                                       f.file_name))
            for i in m.written_index_files():
                self.table.file_io.delete_quietly(
                    index_file_path(paths, m.partition, m.bucket, i, in_data_dir))

    # -- internals -----------------------------------------------------------------------
    @contextlib.contextmanager
    def _abort_on_fatal(self) -> Iterator[None]:
        """A commit that can never succeed (bad input, conflict) deletes the files its writers
        produced, leaving the table as it was. Timeouts and unknown outcomes keep them: the
        snapshot may have landed, and a retry with the same identifier will tell."""
        try:
            yield
        except FileAlreadyAddedConflict:
            raise  # its files are live (committed before): deleting them would break the table
        except (LakecoreValidationError, CommitConflictError):
            self.abort(self._abort_scope)
            raise

    def _check_not_expired(self, messages: Sequence[CommitMessage]) -> None:
        """Writing new files into a partition that expiry dropped is refused
        (PartitionExpiredError). Old partitions that were never expired stay writable (an
        Airflow backfill of old dates), the next expiry drops them again."""
        partitions = {tuple(m.partition) for m in messages if m.new_files}
        if partitions and self.table.partition_keys:
            check_not_expired(self.table, partitions, past_cutoff=False)

    def _collect(self, messages: Sequence[CommitMessage]) -> tuple[list[ManifestEntry], ...]:
        enc = self.table.partition_codec.encode
        append, append_log, compact, compact_log = [], [], [], []
        for m in messages:
            p = enc(m.partition)
            for f in m.new_files:
                append.append(ManifestEntry(FileKind.ADD, p, m.bucket, m.total_buckets, f))
            for f in m.changelog_files:
                append_log.append(ManifestEntry(FileKind.ADD, p, m.bucket, m.total_buckets, f))
            for f in m.compact_before:
                compact.append(ManifestEntry(FileKind.DELETE, p, m.bucket, m.total_buckets, f))
            for f in m.compact_after:
                compact.append(ManifestEntry(FileKind.ADD, p, m.bucket, m.total_buckets, f))
            for f in m.compact_changelog_files:
                compact_log.append(ManifestEntry(FileKind.ADD, p, m.bucket, m.total_buckets, f))
        return append, append_log, compact, compact_log

    def _collect_index(self, messages: Sequence[CommitMessage]
                       ) -> tuple[list[IndexManifestEntry], list[IndexManifestEntry]]:
        """(data increment, compaction increment) index changes: DELETEs then ADDs."""
        enc = self.table.partition_codec.encode
        append: list[IndexManifestEntry] = []
        compact: list[IndexManifestEntry] = []
        for m in messages:
            if not (m.new_index_files or m.deleted_index_files or m.compact_new_index_files
                    or m.compact_deleted_index_files):
                continue
            p = enc(m.partition)
            for out, deleted, added in ((append, m.deleted_index_files, m.new_index_files),
                                        (compact, m.compact_deleted_index_files,
                                         m.compact_new_index_files)):
                out += [IndexManifestEntry(FileKind.DELETE, p, m.bucket, f) for f in deleted]
                out += [IndexManifestEntry(FileKind.ADD, p, m.bucket, f) for f in added]
        return append, compact

    def _partition_label(self, partition: bytes) -> str:
        """``k=v/k=v`` for a partition's bytes (in conflict messages)."""
        codec = self.table.partition_codec
        return "/".join(f"{k}={partition_value_string(v, t)}" for k, v, t in
                        zip(self.table.partition_keys, codec.decode(partition), codec.types))

    def _statistics_schema_id(self, latest: Snapshot | None) -> int | None:
        """The schema id recorded in the latest snapshot's statistics file (Java inherits the
        file only while it matches the new snapshot's schema); None when there is none or it
        cannot be read (then it is not inherited, as after a schema change)."""
        if latest is None or not latest.statistics:
            return None
        path = statistics_path(self.table.paths, latest.statistics)
        try:
            data = json.loads(self.table.file_io.read_bytes(path))
            schema_id = data.get("schemaId") if isinstance(data, dict) else None
        except (CorruptFileError, ValueError) as e:
            log.warning("statistics file %s unreadable (%s); not inherited", path, e)
            return None
        return schema_id if type(schema_id) is int else None

    def _try_commit(
        self,
        kind: CommitKind,
        changes_fn: Callable[[dict[tuple, ManifestEntry]], list[ManifestEntry]],
        changelog: list[ManifestEntry],
        identifier: int,
        properties: dict[str, str] | None,
        index_changes: Sequence[IndexManifestEntry] = (),
        overwrite_matches: Callable[[bytes], bool] | None = None,
        probe: Sequence[ManifestEntry] = (),
    ) -> int:
        maybe_crash(CrashStep.AFTER_DATA_FILES)
        opts = self.table.options
        start = self.clock()
        timeout = opts.commit_timeout
        attempt = 0
        base_id: int | None = None
        while True:
            try:
                if base_id is not None:
                    landed = self._landed_since(base_id, identifier, kind)
                    if landed is not None:  # an earlier attempt's outcome was unknown: it landed
                        return landed
                latest = self.sm.latest()
                base_id = latest.id if latest else 0
                return self._try_commit_once(latest, kind, changes_fn, changelog, identifier,
                                             properties, index_changes, overwrite_matches,
                                             probe)
            except (CommitRetryableError, OSError) as e:
                if isinstance(e, OSError):
                    # transient I/O (Paimon retries every attempt's failure the same way);
                    # what this attempt wrote is gone again unless its snapshot landed
                    log.warning("commit by %s: I/O error, retrying: %s", self.commit_user, e)
                attempt += 1
                elapsed = self.clock() - start
                if attempt > opts.commit_max_retries or (
                    timeout is not None and elapsed > timeout.total_seconds()
                ):
                    raise CommitTimeoutError(
                        f"commit by {self.commit_user!r} gave up after {attempt} attempts "
                        f"({elapsed:.1f} s): {e}"
                    ) from e
                self.sleep(retry_wait_seconds(opts.commit_min_retry_wait,
                                              opts.commit_max_retry_wait, attempt - 1,
                                              self.rng))

    def _try_commit_once(
        self,
        latest: Snapshot | None,
        kind: CommitKind,
        changes_fn: Callable[[dict[tuple, ManifestEntry]], list[ManifestEntry]],
        changelog: list[ManifestEntry],
        identifier: int,
        properties: dict[str, str] | None,
        index_changes: Sequence[IndexManifestEntry] = (),
        overwrite_matches: Callable[[bytes], bool] | None = None,
        probe: Sequence[ManifestEntry] = (),
    ) -> int:
        mio = self.mio
        prev_base: list[ManifestFileMeta] = []
        prev_delta: list[ManifestFileMeta] = []
        if latest is not None:
            prev_base = mio.read_manifest_list(latest.base_manifest_list)
            prev_delta = mio.read_manifest_list(latest.delta_manifest_list)
        live: dict[tuple, ManifestEntry] = {}
        base_entries: list[ManifestEntry] | None = None
        changes = changes_fn({}) if kind is CommitKind.APPEND else None
        if changes is not None and is_pure_append(changes):
            # a pure append conflicts only on bucket counts and on files added twice: read just
            # the manifests that may hold files written with another count, or files of the
            # (partition, bucket)s it adds to (Paimon: readAllEntriesFromChangedPartitions)
            metas = prev_base + prev_delta
            chosen = {m.file_name for m in bucket_count_suspects(metas, changes)}
            chosen |= {m.file_name for m in touching_manifests(
                metas, [*changes, *probe], self._partition_bounds,
                self.table.partition_codec.decode)}
            suspects = [m for m in metas if m.file_name in chosen]
            live = merge_entries(mio.read_entries(suspects))
            # never build on damaged metadata: the latest snapshot's own changes are decoded
            # (a CorruptFileError names the file). Its base was decoded by the committer that
            # built on it, and so on back, so every manifest is read once before it is inherited.
            read = {m.file_name for m in suspects}
            mio.read_entries([m for m in prev_delta if m.file_name not in read])
        elif latest is not None:
            base_entries = mio.read_entries(prev_base + prev_delta)
            live = merge_entries(base_entries)
        if changes is None:
            changes = changes_fn(live)
        previous_index = None
        if latest is not None and latest.index_manifest:
            # decoded even when only carried by name: a damaged index manifest raises
            # CorruptFileError naming it, and nothing is ever built on it
            entries = mio.read_index_manifest(latest.index_manifest)
            if needs_previous_index(kind, index_changes, latest):
                previous_index = entries
        with self._expired_partitions_named():
            plan = self._plan(kind, changes, live, latest, changelog, identifier, properties,
                              index_changes, previous_index, overwrite_matches, probe)
        return self._write_and_publish(plan, latest, prev_base + prev_delta, base_entries)

    def _plan(self, kind: CommitKind, changes: list[ManifestEntry],
              live: Mapping[tuple, ManifestEntry], latest: Snapshot | None,
              changelog: list[ManifestEntry], identifier: int,
              properties: dict[str, str] | None, index_changes: Sequence[IndexManifestEntry],
              previous_index: list[IndexManifestEntry] | None,
              overwrite_matches: Callable[[bytes], bool] | None,
              probe: Sequence[ManifestEntry]) -> CommitPlan:
        return plan_commit(
            kind, changes, live, latest,
            commit_user=self.commit_user,
            commit_identifier=identifier,
            schema_id=self._latest_schema_id(),
            changelog=changelog,
            other_users=self._users_since(self.base_snapshot_id, latest),
            key_types=self.key_types,
            properties=properties,
            index_changes=index_changes,
            previous_index=previous_index,
            overwrite_matches=overwrite_matches,
            statistics_schema_id=self._statistics_schema_id(latest),
            table_name=self.table.identifier,
            partition_label=self._partition_label,
            committed_probe=probe,
        )

    @contextlib.contextmanager
    def _expired_partitions_named(self) -> Iterator[None]:
        """Paimon's ``checkConflictForPartitionExpire``: a commit that deletes files no longer
        live, all of them in partitions that expired (dropped by partition expiry, or past the
        ``values-time`` cut-off), gets ``PartitionExpiredError`` naming them instead of a
        file deletion conflict: those files went with their partition, and retrying the
        commit can never succeed."""
        try:
            yield
        except ConcurrentDeleteConflict as e:
            decode = self.table.partition_codec.decode
            partitions = [tuple(decode(p)) for p in e.partitions]
            if not partitions or not self.table.partition_keys:
                raise
            for p in partitions:
                try:
                    check_not_expired(self.table, [p])
                except PartitionExpiredError:
                    continue
                raise  # a partition that did not expire: the conflict stands
            try:
                check_not_expired(self.table, partitions)
            except PartitionExpiredError as expired:
                raise expired from e
            raise

    def _write_and_publish(
        self,
        plan: CommitPlan,
        latest: Snapshot | None,
        base_metas: list[ManifestFileMeta],
        base_entries: list[ManifestEntry] | None,
    ) -> int:
        """Write the plan's manifests and lists, then create its snapshot under the lock.
        Everything written is deleted again unless the snapshot file was created."""
        mio = self.mio
        written: list[str] = []
        try:
            if len(base_metas) >= self.table.options.manifest_merge_min_count:
                if base_entries is None:
                    base_entries = mio.read_entries(base_metas)
                base_metas = mio.write_manifests(merged_base(base_entries))
                written += [m.file_name for m in base_metas]
            delta_metas = mio.write_manifests(plan.delta)
            written += [m.file_name for m in delta_metas]
            maybe_crash(CrashStep.AFTER_MANIFESTS)
            base_list = mio.write_manifest_list(base_metas)
            delta_list = mio.write_manifest_list(delta_metas)
            written += [base_list[0], delta_list[0]]
            maybe_crash(CrashStep.AFTER_MANIFEST_LIST)
            log_list = None
            if plan.changelog:
                log_metas = mio.write_manifests(plan.changelog)
                written += [m.file_name for m in log_metas]
                log_list = mio.write_manifest_list(log_metas)
                written.append(log_list[0])
            index_name = None
            if plan.index_entries is not None:
                index_name = mio.write_index_manifest(plan.index_entries)
                if index_name is not None:
                    written.append(index_name)
                maybe_crash(CrashStep.AFTER_INDEX_MANIFEST)
            snapshot = plan.snapshot(base_list, delta_list, log_list,
                                     time_millis=int(self.clock() * 1000),
                                     written_index_manifest=index_name)
            base_id = latest.id if latest else 0
            if self.fresh_user:
                if self._first_base_id is None:
                    self._first_base_id = base_id
            else:
                self.users.ensure(self.commit_user, base_id)
            self._published = False
            try:
                created = self.table.run_with_lock(lambda: self._publish(latest, snapshot))
            except OSError as io_error:
                # Paimon's "commit may have succeeded": read snapshot-N back
                if not self._landed(snapshot):
                    raise  # it did not: clean up below, the retry loop tries again
                log.warning("commit by %s: snapshot %s landed despite an I/O error: %s",
                            self.commit_user, snapshot.id, io_error)
                created = self._published = True
                self.sm.commit_latest_hint(snapshot.id)
                if snapshot.id == 1:
                    self.sm.commit_earliest_hint(1)
        except BaseException as e:
            # snapshot-N exists, or may (a conditional PUT whose outcome could not be read
            # back): its manifests must stay; orphan removal takes them if it did not land
            if self._published or isinstance(e, CommitOutcomeUnknownError):
                raise
            self._cleanup(written)
            raise
        if not created:
            self._cleanup(written)
            raise CommitRetryableError(
                f"snapshot {snapshot.id} was created by another committer first"
            )
        log.info("committed snapshot %s (%s) by %s", snapshot.id, plan.kind.value,
                 self.commit_user)
        maybe_crash(CrashStep.AFTER_COMMIT)
        return snapshot.id

    def _latest_schema_id(self) -> int:
        """The snapshot records the newest schema at commit time, as Paimon's commit does: a
        writer that opened the table before an ALTER still commits (its files name their own
        schema and are read through it), and time travel to this snapshot sees the columns the
        table had when it landed."""
        latest = self.table.schema_manager.latest_id()
        return max(self.table.schema.id, latest if latest is not None else -1)

    def _users_since(self, base_id: int | None, latest: Snapshot | None) -> list[str]:
        if latest is None:
            return []
        if base_id is None or base_id >= latest.id:
            return [latest.commit_user]
        users = []
        for sid in range(base_id + 1, latest.id + 1):
            try:
                users.append(self.sm.snapshot(sid).commit_user)
            except LakecoreError:
                continue
        return users

    def _landed(self, snapshot: Snapshot) -> bool:
        """Whether ``snapshot-N`` exists and is ours (after an I/O error while creating it).
        Its delta manifest list's name is unique to this attempt. Raises
        ``CommitOutcomeUnknownError`` when that cannot be read (our manifests are kept)."""
        try:
            found = self.sm.snapshot(snapshot.id)
        except SnapshotNotExistError:
            return False
        except (OSError, CorruptFileError) as e:
            raise CommitOutcomeUnknownError(
                f"commit by {self.commit_user!r}: cannot tell whether snapshot {snapshot.id} "
                f"landed: {e}") from e
        return (found.commit_user == snapshot.commit_user
                and found.commit_identifier == snapshot.commit_identifier
                and found.commit_kind is snapshot.commit_kind
                and found.delta_manifest_list == snapshot.delta_manifest_list)

    def _partition_bounds(self, meta: ManifestFileMeta) -> tuple[tuple, tuple] | None:
        """A manifest's (min, max) partition values, None when they cannot be decoded."""
        types = self.table.partition_codec.types
        if not types:
            return (), ()
        try:
            stats = meta.partition_stats
            return (tuple(decode_row(stats.min_values, types)),
                    tuple(decode_row(stats.max_values, types)))
        except Exception:  # noqa: BLE001 - unknown bounds: the manifest is read
            return None

    def _publish(self, latest: Snapshot | None, snapshot: Snapshot) -> bool:
        current = self.sm.latest_id()
        if current != (latest.id if latest else None):
            return False
        created = self.sm.try_create(snapshot)
        self._published = created
        return created

    def _cleanup(self, names: list[str]) -> None:
        for n in names:
            self.table.file_io.delete_quietly(self.table.paths.manifest_path(n))


def partition_equals(spec: dict[str, Any], keys: Sequence[str]) -> PartitionFilter:
    """A filter for static overwrite: partitions whose given keys equal ``spec``."""
    idx = {k: keys.index(k) for k in spec}

    def f(values: tuple) -> bool:
        return all(_text(values[i]) == _text(spec[k]) for k, i in idx.items())

    return f


def _text(v: Any) -> str | None:
    return None if v is None else str(v)
