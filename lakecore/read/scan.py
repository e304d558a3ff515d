"""Planning a read: which snapshot, which live files, pruned by partition and statistics,
grouped into one split per (partition, bucket)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace

from lakecore.format.bucket import POSTPONE_BUCKET
from lakecore.format.deletion_vector import DeletionFile
from lakecore.format.manifest import DataFileMeta, FileKind, ManifestEntry
from lakecore.format.snapshot import CommitKind, Snapshot
from lakecore.io.schema_mapping import file_stats
from lakecore.options import ChangelogProducer, MergeEngine
from lakecore.read.deletion_vectors import deletion_files, dv_entries
from lakecore.read.predicate import Predicate, split_and
from lakecore.store.file_store import FileStore
from lakecore.store.manifest_io import merge_entries
from lakecore.store.tags import tag_snapshot
from lakecore.store.time_travel import travel_snapshot


@dataclass(frozen=True)
class Split:
    """One (partition, bucket)'s files to read from a snapshot."""

    partition: tuple
    bucket: int
    files: tuple[DataFileMeta, ...]
    snapshot_id: int
    is_changelog: bool = False  # incremental read of raw records (no merge)
    # deletion-vector tables: where each file's vector is (data file name, DeletionFile), and
    # whether the files are read as they are (vectors applied, no merge: levels >= 1 only)
    deletion_files: tuple[tuple[str, DeletionFile], ...] = ()
    raw_with_vectors: bool = False

    @property
    def row_count(self) -> int:
        return sum(f.row_count for f in self.files)


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
        between = self.table.options.incremental_between
        if between is not None:
            start, end = between
            if isinstance(start, str) or isinstance(end, str):  # tag names
                start = start if isinstance(start, int) else tag_snapshot(self.table, start).id
                end = end if isinstance(end, int) else tag_snapshot(self.table, end).id
            return self._plan_incremental(start, end)
        snap = self._snapshot()
        if snap is None:
            return Plan((), None)
        mio = self.table.manifest_io()
        metas = mio.read_manifest_list(snap.base_manifest_list) + mio.read_manifest_list(
            snap.delta_manifest_list
        )
        live = list(merge_entries(mio.read_entries(metas)).values())
        if self._skip_level0():
            live = [e for e in live if e.file.level > 0]
        splits = self._splits(live, snap.id, changelog=False)
        if self._uses_vectors():
            splits = self._with_vectors(splits, snap)
        return Plan(splits, snap.id)

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

    def _plan_incremental(self, start: int, end: int) -> Plan:
        """Files added by snapshots in (start, end]: changelog files when a changelog producer
        writes them, otherwise the APPEND snapshots' delta files."""
        sm, mio = self.table.snapshot_manager, self.table.manifest_io()
        use_changelog = self.table.options.changelog_producer is not ChangelogProducer.NONE
        entries: list[ManifestEntry] = []
        for sid in range(start + 1, end + 1):
            snap = sm.snapshot(sid)
            if use_changelog:
                names = mio.read_manifest_list(snap.changelog_manifest_list)
            elif snap.commit_kind is CommitKind.APPEND:
                names = mio.read_manifest_list(snap.delta_manifest_list)
            else:
                continue
            entries += [e for e in mio.read_entries(names) if e.kind is FileKind.ADD]
        return Plan(self._splits(entries, end, changelog=use_changelog), end)

    def _splits(self, entries: Iterable[ManifestEntry], snapshot_id: int, changelog: bool
                ) -> tuple[Split, ...]:
        t = self.table
        codec = t.partition_codec
        conjuncts = split_and(self.predicate)
        pkeys = set(t.partition_keys)
        part_preds = [p for p in conjuncts if p.columns() <= pkeys]
        stat_preds = [p for p in conjuncts if not p.columns() <= pkeys]
        groups: dict[tuple[bytes, int], list[DataFileMeta]] = defaultdict(list)
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
