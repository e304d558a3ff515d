"""Planning a read: which snapshot, which live files, pruned by partition and statistics,
grouped into one split per (partition, bucket).

``incremental-between`` plans as Paimon's batch scan does (``AbstractDataTableScan.
createIncrementalStartingScanner``): two tags (looked up first) read the diff of the tagged
snapshots, or with ``incremental-between-tag-to-snapshot`` the range of their snapshot ids;
two snapshot ids read by ``incremental-between-scan-mode``: ``delta`` (the files the APPEND
snapshots of the range added), ``changelog`` (the changelog files of every snapshot but
OVERWRITE ones), both read raw, each record with its row kind; ``diff`` (the end snapshot's
files the start snapshot does not hold, merged, against the start's files the end does not
hold, merged); ``auto``: ``changelog`` with a changelog producer, else ``delta``. The batch
scan's level filter (``_skip_level0``) applies to all of them, as in Paimon.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from lakecore.errors import MaintenanceError, OptionError, SnapshotNotExistError, TagNotExistError
from lakecore.format.bucket import POSTPONE_BUCKET
from lakecore.format.deletion_vector import DeletionFile
from lakecore.format.index_manifest import IndexManifestEntry
from lakecore.format.manifest import DataFileMeta, FileKind, ManifestEntry
from lakecore.format.snapshot import CommitKind, Snapshot
from lakecore.io.schema_mapping import file_stats
from lakecore.options import ChangelogProducer, CoreOptions, MergeEngine
from lakecore.options.registry import (
    BUCKET,
    INCREMENTAL_BETWEEN,
    INCREMENTAL_BETWEEN_SCAN_MODE,
    IncrementalBetweenScanMode,
)
from lakecore.read.deletion_vectors import deletion_files, dv_entries
from lakecore.read.predicate import Predicate, split_and
from lakecore.store.file_store import FileStore
from lakecore.store.manifest_io import merge_entries
from lakecore.store.tags import tag_snapshot
from lakecore.store.time_travel import travel_snapshot

DeletionFiles = tuple[tuple[str, DeletionFile], ...]


@dataclass(frozen=True)
class Split:
    """One (partition, bucket)'s files to read from a snapshot."""

    partition: tuple
    bucket: int
    files: tuple[DataFileMeta, ...]
    snapshot_id: int
    # incremental delta / changelog read: the files' records as they are, each with its row
    # kind (no merge)
    is_changelog: bool = False
    # deletion-vector tables: where each file's vector is (data file name, DeletionFile), and
    # whether the files are read as they are (vectors applied, no merge: levels >= 1 only)
    deletion_files: DeletionFiles = ()
    raw_with_vectors: bool = False
    # incremental diff read: ``files`` are the end snapshot's files the start snapshot does
    # not hold, ``before_files`` the start's files the end does not hold (each side merged on
    # its own, then compared key by key: ``read/diff_read.py``)
    is_diff: bool = False
    before_files: tuple[DataFileMeta, ...] = ()
    before_deletion_files: DeletionFiles = ()

    @property
    def row_count(self) -> int:
        return sum(f.row_count for f in self.files) + sum(f.row_count for f in self.before_files)


@dataclass(frozen=True)
class Plan:
    """The splits of one scan, and the snapshot they come from."""

    splits_: tuple[Split, ...]
    snapshot_id: int | None

    def splits(self) -> list[Split]:
        return list(self.splits_)


class TableScan:
    """Plans a read: the snapshot to read, its live files pruned by the filter, as splits."""

    def __init__(self, table: FileStore, predicate: Predicate | None = None) -> None:
        self.table = table
        self.predicate = predicate

    def _snapshot(self) -> Snapshot | None:
        snap = travel_snapshot(self.table)
        return snap if snap is not None else self.table.snapshot_manager.latest()

    def plan(self) -> Plan:
        if self.table.options.incremental_between is not None:
            return self._plan_incremental_between()
        snap = self._snapshot()
        if snap is None:
            return Plan((), None)
        splits = self._splits(self._live_entries(snap), snap.id, changelog=False)
        if self._uses_vectors():
            splits = self._with_vectors(splits, snap)
        return Plan(splits, snap.id)

    def _live_entries(self, snap: Snapshot) -> list[ManifestEntry]:
        """The snapshot's live files (level 0 left out where batch scans skip it)."""
        mio = self.table.manifest_io()
        metas = mio.read_manifest_list(snap.base_manifest_list) + mio.read_manifest_list(
            snap.delta_manifest_list
        )
        live = list(merge_entries(mio.read_entries(metas)).values())
        if self._skip_level0():
            live = [e for e in live if e.file.level > 0]
        return live

    def _uses_vectors(self) -> bool:
        """Primary-key and append tables alike (Java Paimon deletes rows of append files
        through vectors too)."""
        return bool(self.table.options.deletion_vectors_enabled)

    def _skip_level0(self) -> bool:
        """Paimon's batchScanSkipLevel0. A deletion-vector table's level-0 files are invisible
        until compaction marks the rows they supersede (unless
        ``deletion-vectors.merge-on-read``); a first-row table's level-0 files are not yet
        deduplicated against higher levels (lookup compaction lifts them). Batch scans then
        read levels >= 1 only — exactly what Paimon's readers show."""
        if not self.table.is_primary_key_table:
            return False
        o = self.table.options
        if o.deletion_vectors_enabled:
            return not o.deletion_vectors_merge_on_read
        return o.merge_engine is MergeEngine.FIRST_ROW

    def _with_vectors(self, splits: tuple[Split, ...], snap: Snapshot) -> tuple[Split, ...]:
        """Attach each bucket's deletion files; without merge-on-read a split is read raw."""
        entries = dv_entries(self.table, snap)
        raw = (self.table.is_primary_key_table
               and not self.table.options.deletion_vectors_merge_on_read)
        out = []
        for s in splits:
            names = {f.file_name for f in s.files}
            metas = [e.index_file for e in entries.get((tuple(s.partition), s.bucket), ())]
            found = deletion_files(self.table, s.partition, s.bucket, metas)
            dfs = tuple(sorted((n, d) for n, d in found.items() if n in names))
            out.append(replace(s, deletion_files=dfs, raw_with_vectors=raw))
        return tuple(out)

    # -- incremental-between ---------------------------------------------------------------
    def _plan_incremental_between(self) -> Plan:
        """Paimon's batch incremental scan (see the module docstring). Errors as Paimon's:
        an end before the start, names that are neither two tags nor two snapshot ids, a
        snapshot range outside the retained snapshots (delta / changelog), a start or end
        snapshot that does not exist (diff), ``diff`` with ``incremental-between-tag-to-
        snapshot``."""
        o = self.table.options
        between = o.incremental_between
        assert between is not None
        start, end = between
        mode = o.incremental_between_scan_mode
        tags = self._tag_pair(str(start), str(end))
        if tags is not None:
            first, last = tags
            if o.incremental_between_tag_to_snapshot:
                if mode is IncrementalBetweenScanMode.DIFF:
                    raise OptionError(INCREMENTAL_BETWEEN_SCAN_MODE.key, (
                        "'diff' does not read a snapshot range: with "
                        "'incremental-between-tag-to-snapshot' = true the tags' snapshots are "
                        "read by delta, changelog or auto"))
                return self._plan_range(first.id, last.id, _reads_changelog(mode, o))
            if last.id < first.id:
                raise OptionError(INCREMENTAL_BETWEEN.key, (
                    f"tag {end!r} (snapshot {last.id}) is older than tag {start!r} "
                    f"(snapshot {first.id})"))
            if last.id == first.id:
                return Plan((), last.id)
            return self._plan_diff(first, last)
        if not (isinstance(start, int) and isinstance(end, int)):
            raise OptionError(INCREMENTAL_BETWEEN.key, (
                f"found no two tags {start!r} and {end!r}, and they are not two snapshot ids: "
                "give two tags or two snapshot ids"))
        if end < start:
            raise OptionError(INCREMENTAL_BETWEEN.key,
                              f"the end snapshot {end} is before the start snapshot {start}")
        sm = self.table.snapshot_manager
        if sm.earliest_id() is None:
            return Plan((), None)
        if start == end:
            return Plan((), end)
        if mode is IncrementalBetweenScanMode.DIFF:
            return self._plan_diff(sm.snapshot(start), sm.snapshot(end))
        return self._plan_range(start, end, _reads_changelog(mode, o))

    def _tag_pair(self, start: str, end: str) -> tuple[Snapshot, Snapshot] | None:
        """Both tags' snapshots when both names are tags (Paimon looks tags up first, even
        for names that are numbers), else None."""
        first = self._find_tag(start)
        last = self._find_tag(end) if first is not None else None
        return None if first is None or last is None else (first, last)

    def _find_tag(self, name: str) -> Snapshot | None:
        try:
            return tag_snapshot(self.table, name)
        except (TagNotExistError, MaintenanceError):  # absent, or not a possible tag name
            return None

    def _plan_range(self, start: int, end: int, changelog: bool) -> Plan:
        """Paimon's IncrementalDeltaStartingScanner: the files the snapshots in (start, end]
        added (``changelog``: their changelog files, OVERWRITE snapshots left out; else the
        delta files of the APPEND snapshots), read raw, level 0 skipped where batch scans
        skip it."""
        sm = self.table.snapshot_manager
        earliest, latest = sm.earliest_id(), sm.latest_id()
        assert earliest is not None and latest is not None
        if start < earliest - 1 or end > latest:
            raise SnapshotNotExistError(
                f"the incremental snapshot range ({start}, {end}] is outside the snapshots "
                f"{earliest}..{latest} of {self.table.identifier}")
        entries: list[ManifestEntry] = []
        for sid in range(start + 1, end + 1):
            entries += self._added_entries(sm.snapshot(sid), changelog, batch=True)
        if self._skip_level0():
            entries = [e for e in entries if e.file.level > 0]
        return Plan(self._splits(entries, end, changelog=True), end)

    def plan_changes(self, snap: Snapshot, changelog: bool) -> Plan:
        """One snapshot's changes as a stream reads them (Paimon's follow-up scanners): its
        changelog files (``changelog``; whatever the commit kind) or, for an APPEND
        snapshot, its delta files, read raw with their row kinds; level 0 included."""
        entries = self._added_entries(snap, changelog, batch=False)
        return Plan(self._splits(entries, snap.id, changelog=True), snap.id)

    def _added_entries(self, snap: Snapshot, changelog: bool, batch: bool
                       ) -> list[ManifestEntry]:
        """The files ``snap`` added: changelog files (a batch read leaves OVERWRITE
        snapshots out, as Paimon's CHANGELOG scan mode does), or an APPEND's delta files."""
        mio = self.table.manifest_io()
        if changelog:
            if not snap.changelog_manifest_list or (
                    batch and snap.commit_kind is CommitKind.OVERWRITE):
                return []
            names = mio.read_manifest_list(snap.changelog_manifest_list)
        elif snap.commit_kind is CommitKind.APPEND:
            names = mio.read_manifest_list(snap.delta_manifest_list)
        else:
            return []
        return [e for e in mio.read_entries(names) if e.kind is FileKind.ADD]

    def _plan_diff(self, before: Snapshot, after: Snapshot) -> Plan:
        """Paimon's IncrementalDiffStartingScanner: per (partition, bucket), the files of
        ``after`` that ``before`` does not hold and those of ``before`` that ``after`` does
        not hold (a file both hold is left out of both sides), each side with its own
        snapshot's deletion vectors."""
        self._check_diff_buckets(before, after)
        codec = self.table.partition_codec
        sides = []
        for snap in (before, after):
            groups: dict[tuple[tuple, int], dict[tuple, DataFileMeta]] = defaultdict(dict)
            for e in self._pruned(self._live_entries(snap)):
                part = tuple(codec.decode(e.partition))
                groups[(part, e.bucket)][e.file.identifier] = e.file
            sides.append(groups)
        old, new = sides
        vectors = self._uses_vectors()
        old_dvs = dv_entries(self.table, before) if vectors else {}
        new_dvs = dv_entries(self.table, after) if vectors else {}
        splits = []
        for part, bucket in sorted(set(old) | set(new), key=repr):
            was, now = old.get((part, bucket), {}), new.get((part, bucket), {})
            shared = was.keys() & now.keys()
            gone = _in_order(f for i, f in was.items() if i not in shared)
            added = _in_order(f for i, f in now.items() if i not in shared)
            if not gone and not added:
                continue
            splits.append(Split(
                part, bucket, added, after.id, is_diff=True, before_files=gone,
                deletion_files=self._bucket_vectors(new_dvs, part, bucket, added),
                before_deletion_files=self._bucket_vectors(old_dvs, part, bucket, gone)))
        return Plan(tuple(splits), after.id)

    def _bucket_vectors(self, entries: Mapping[tuple[tuple, int], Sequence[IndexManifestEntry]],
                        part: tuple, bucket: int, files: tuple[DataFileMeta, ...]
                        ) -> DeletionFiles:
        """Where the vectors of ``files`` are, from a snapshot's deletion-vector entries."""
        metas = [e.index_file for e in entries.get((part, bucket), ())]
        if not metas or not files:
            return ()
        names = {f.file_name for f in files}
        found = deletion_files(self.table, part, bucket, metas)
        return tuple(sorted((n, d) for n, d in found.items() if n in names))

    def _check_diff_buckets(self, before: Snapshot, after: Snapshot) -> None:
        """Paimon refuses a diff across a change of the bucket count (its check compares the
        two snapshots' schemas)."""
        if before.schema_id == after.schema_id:
            return
        counts = [_bucket_count(self.table.schema_of(s.schema_id).options)
                  for s in (before, after)]
        if counts[0] != counts[1]:
            raise OptionError(INCREMENTAL_BETWEEN.key, (
                f"the bucket numbers of snapshots {before.id} and {after.id} differ "
                f"({counts[0]}, {counts[1]}): a diff cannot compare them"))

    def _pruned(self, entries: Iterable[ManifestEntry]) -> Iterator[ManifestEntry]:
        """The entries the filter may match (partition values, then file statistics); real
        buckets only."""
        t = self.table
        codec = t.partition_codec
        conjuncts = split_and(self.predicate)
        pkeys = set(t.partition_keys)
        part_preds = [p for p in conjuncts if p.columns() <= pkeys]
        stat_preds = [p for p in conjuncts if not p.columns() <= pkeys]
        part_ok: dict[bytes, bool] = {}
        for e in entries:
            if e.bucket == POSTPONE_BUCKET:
                continue  # invisible until the dedicated compaction assigns a real bucket
            ok = part_ok.get(e.partition)
            if ok is None:
                values = dict(zip(t.partition_keys, codec.decode(e.partition)))
                ok = part_ok[e.partition] = all(p.test(values) for p in part_preds)
            if not ok:
                continue
            if stat_preds and not self._stats_may_match(e.file, stat_preds):
                continue
            yield e

    def _splits(self, entries: Iterable[ManifestEntry], snapshot_id: int, changelog: bool
                ) -> tuple[Split, ...]:
        codec = self.table.partition_codec
        groups: dict[tuple[bytes, int], list[DataFileMeta]] = defaultdict(list)
        for e in self._pruned(entries):
            groups[(e.partition, e.bucket)].append(e.file)
        splits = []
        for (pbytes, bucket), files in sorted(groups.items(), key=lambda kv: kv[0]):
            files.sort(key=lambda f: (f.min_sequence_number, f.file_name))
            splits.append(Split(codec.decode(pbytes), bucket, tuple(files), snapshot_id, changelog))
        return tuple(splits)

    def _stats_may_match(self, f: DataFileMeta, preds: list[Predicate]) -> bool:
        """Key stats for primary-key tables (value stats could resurrect shadowed rows);
        value stats for append tables. Read through the file's schema version
        (``file_stats``): renamed columns by field id, columns whose type changed since the
        file was written never prune it."""
        stats = file_stats(self.table, f)
        if stats is None:
            return True
        usable = [p for p in preds if p.columns() <= stats.names]
        return all(p.may_match(stats.mins, stats.maxs, stats.nulls, f.row_count)
                   for p in usable)


def _reads_changelog(mode: IncrementalBetweenScanMode, options: CoreOptions) -> bool:
    """Whether a delta-or-changelog scan reads changelog files (``auto``: with a changelog
    producer)."""
    if mode is IncrementalBetweenScanMode.AUTO:
        return options.changelog_producer is not ChangelogProducer.NONE
    return mode is IncrementalBetweenScanMode.CHANGELOG


def _in_order(files: Iterable[DataFileMeta]) -> tuple[DataFileMeta, ...]:
    return tuple(sorted(files, key=lambda f: (f.min_sequence_number, f.file_name)))


def _bucket_count(options: dict[str, str]) -> int:
    text = options.get(BUCKET.key)
    return BUCKET.parser(text) if text is not None else -1  # Paimon's default
