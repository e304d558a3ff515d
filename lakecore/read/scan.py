"""Planning a read: which snapshot, which live files, pruned by partition and statistics,
grouped into one split per (partition, bucket)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from lakecore.format.bucket import POSTPONE_BUCKET
from lakecore.format.manifest import DataFileMeta, FileKind, ManifestEntry
from lakecore.format.snapshot import CommitKind, Snapshot
from lakecore.io.schema_mapping import file_stats
from lakecore.options import ChangelogProducer, MergeEngine
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
        return Plan(self._splits(live, snap.id, changelog=False), snap.id)

    def _skip_level0(self) -> bool:
        """Paimon's batchScanSkipLevel0: a first-row table's level-0 files are not yet
        deduplicated against higher levels (lookup compaction lifts them), so batch scans
        read levels >= 1 only — exactly what Paimon's readers show."""
        return (self.table.is_primary_key_table
                and self.table.options.merge_engine is MergeEngine.FIRST_ROW)

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
