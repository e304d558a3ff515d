"""Running one bucket's compaction: plan (pure) -> rewrite / upgrade (I/O) -> CompactResult."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lakecore.compact.changelog import ChangelogMaker
from lakecore.compact.deletion_vectors import BucketVectors
from lakecore.compact.first_row import known_level0_rows, refuse_retractions
from lakecore.compact.keys import KeyOrder
from lakecore.compact.levels import Levels, SortedRun
from lakecore.compact.lookup import apply_vector
from lakecore.compact.planner import CompactTaskPlan, plan_compaction
from lakecore.compact.rewrite_plan import Rewrite, Upgrade
from lakecore.compact.rewriter import MergeTreeRewriter
from lakecore.compact.ties import tied_level0_rows
from lakecore.compact.unit import CompactResult, CompactUnit
from lakecore.compact.universal import CompactStrategy, create_compact_strategy, needs_lookup
from lakecore.format.manifest import DataFileMeta, FileSource
from lakecore.io.data_file_reader import iter_data_file
from lakecore.io.data_file_writer import RollingFileWriter
from lakecore.io.schema_mapping import check_rewritable
from lakecore.io.specs import file_writer_spec, merge_spec_for
from lakecore.options import ChangelogProducer, MergeEngine
from lakecore.store.file_store import FileStore
from lakecore.utils.faults import CrashStep, maybe_crash

log = logging.getLogger(__name__)


def key_order(table: FileStore) -> KeyOrder:
    rt = table.schema.row_type
    return KeyOrder.of([rt.field(k).type for k in table.schema.trimmed_primary_keys])


class BucketCompactor:
    """Compacts one (partition, bucket) of a primary-key table from a known file list.

    ``vectors``: the bucket's deletion vectors (tables with ``deletion-vectors.enabled``; when
    None they are loaded from the latest snapshot). Such a compaction marks superseded rows
    in their files' vectors (``dv_compact.py``) and writes the bucket's new index file.
    ``rewrite_deleted``: afterwards rewrite the files whose vectors cover more than
    ``compaction.delete-ratio-threshold`` of their rows (the dedicated compaction does; a
    writer's own compaction does not, as Paimon's writers do not for primary-key tables).
    """

    def __init__(self, table: FileStore, partition: Sequence[Any], bucket: int,
                 files: Sequence[DataFileMeta], strategy: CompactStrategy | None = None,
                 chunk_rows: int = 128 * 1024, vectors: BucketVectors | None = None,
                 rewrite_deleted: bool = True) -> None:
        check_rewritable(table, files)
        self.rewrite_deleted = rewrite_deleted
        self.dv: BucketVectors | None = None
        if table.options.deletion_vectors_enabled:
            self.dv = vectors if vectors is not None else BucketVectors.load_latest(
                table, partition, bucket)
        self.table, self.partition, self.bucket = table, tuple(partition), bucket
        self.chunk_rows = chunk_rows  # rows read per run per merge round: bounds memory
        o = table.options
        self.levels = Levels(key_order(table), list(files), o.num_levels)
        self.strategy = strategy or create_compact_strategy(o, restore_files=files)
        self.bytes_read = 0
        self.bytes_written = 0

    def compact(self, full: bool = False) -> CompactResult:
        """One compaction (or, for tables that need lookup, until level 0 is empty)."""
        if self.dv is not None:
            from lakecore.compact.dv_compact import compact_with_vectors
            return compact_with_vectors(self, self.dv, full)
        o = self.table.options
        lookup = needs_lookup(o)
        result = CompactResult()
        created: set[str] = set()
        try:
            while True:
                task = plan_compaction(
                    self.levels, self.strategy,
                    target_file_size=o.target_file_size(True),
                    small_file_ratio=o.compaction_small_file_ratio,
                    full=full,
                )
                if task is None:
                    break
                steps, dropped = self._drop_tied_level0(task)
                step_result = self._execute(steps, dropped)
                step_result = self._with_changelog(task.unit, step_result, created)
                created.update(f.file_name for f in step_result.after
                               if f.file_source is FileSource.COMPACT
                               and f.file_name not in {b.file_name for b in step_result.before})
                self.levels = self.levels.update(step_result.before, step_result.after)
                result = _chain(result, step_result, created, self)
                if full or not (lookup and self.levels.level0):
                    break
        except BaseException:
            self._delete([f for f in result.after if f.file_name in created])
            raise
        return result

    def _drop_tied_level0(self, task: CompactTaskPlan
                          ) -> tuple[Sequence[Rewrite | Upgrade], dict[str, Any] | None]:
        """The task's steps, and the level-0 rows they must drop (``ties.py``; a first-row
        table's lookup: ``first_row.py``): those files are rewritten, not upgraded."""
        unit = task.unit
        l0 = [f for f in unit.files if f.level == 0]
        in_unit = {f.file_name for f in unit.files}
        above = [f for f in self.levels.all_files() if f.level > 0 and f.file_name not in in_unit]
        spec = merge_spec_for(self.table)
        if l0 and spec.engine is MergeEngine.FIRST_ROW:
            # Paimon's FirstRowMergeFunctionWrapper (first_row.py): a lifted level-0 key that
            # a level above the output holds is dropped; a retraction fails the compaction
            if not spec.ignore_delete:
                refuse_retractions(self.table, self.partition, self.bucket, l0)
            higher = [f for f in above if f.level > unit.output_level]
            above = [f for f in above if f.level <= unit.output_level]
            dropped = known_level0_rows(self.table, self.partition, self.bucket, l0, higher)
        else:
            dropped = {}
        if l0 and above:
            for name, positions in tied_level0_rows(
                    self.table, self.partition, self.bucket, l0, above, spec.engine,
                    spec.sequence_fields).items():
                old = dropped.get(name)
                dropped[name] = positions if old is None else np.union1d(old, positions)
        if not dropped:
            return task.plan.steps, None
        steps: list[Rewrite | Upgrade] = [
            Rewrite(((SortedRun.from_single(s.file),),), s.new_level, task.drop_delete)
            if isinstance(s, Upgrade) and s.file.file_name in dropped else s
            for s in task.plan.steps
        ]
        return steps, dropped

    def _with_changelog(self, unit: CompactUnit, result: CompactResult,
                        created: set[str], vectors: Mapping[str, Any] | None = None
                        ) -> CompactResult:
        """Add lookup / full-compaction changelog for this round (before Levels.update)."""
        producer = self.table.options.changelog_producer
        if producer not in (ChangelogProducer.LOOKUP, ChangelogProducer.FULL_COMPACTION):
            return result
        levels = self.levels
        unit_files = list(unit.files)
        upper = [f for f in levels.all_files() if f.level > 0]
        maker = ChangelogMaker(self.table, self.partition, self.bucket, vectors)
        if producer is ChangelogProducer.LOOKUP:
            l0 = [f for f in unit_files if f.level == 0]
            if not l0:
                return result
            keys = maker.keys_of(l0)
            records = maker.diff(maker.state(upper, keys), maker.state(upper + l0, keys))
        else:
            if unit.output_level != levels.max_level or len(unit_files) != len(levels.all_files()):
                return result  # only a full compaction produces this changelog
            top = list(levels.run_of_level(levels.max_level).files)
            # keys only at the top level have no new record: no changelog (Paimon's
            # FullChangelogMergeFunctionWrapper)
            fresh = [f for f in unit_files if f.level != levels.max_level]
            if not fresh:
                return result
            keys = maker.keys_of(fresh)
            records = maker.diff(maker.state(top, keys), maker.state(unit_files, keys))
        files = maker.write(records, unit.output_level)
        created.update(f.file_name for f in files)
        return CompactResult(result.before, result.after, result.changelog + files)

    def _execute(self, steps: Sequence[Rewrite | Upgrade],
                 vectors: Mapping[str, Any] | None = None,
                 extra_run: Any = None) -> CompactResult:
        rewriter = MergeTreeRewriter(self.table, self.partition, self.bucket, self.chunk_rows,
                                     vectors)
        before: list[DataFileMeta] = []
        after: list[DataFileMeta] = []
        written: list[DataFileMeta] = []
        try:
            for step in steps:
                if isinstance(step, Upgrade):
                    before.append(step.file)
                    after.append(step.upgraded)
                    continue
                new = rewriter.rewrite(
                    [[run.files for run in s] for s in step.sections],
                    step.output_level, step.drop_delete, extra_run,
                )
                written.extend(new)
                maybe_crash(CrashStep.COMPACT_AFTER_REWRITE)
                before.extend(step.files)
                after.extend(new)
        except BaseException:
            self._delete(written)  # the failing rewrite already removed its own files
            raise
        finally:
            self.bytes_read += rewriter.bytes_read
        self.bytes_written += sum(f.file_size for f in written)
        return CompactResult(tuple(before), tuple(after))

    def _delete(self, files: Sequence[DataFileMeta]) -> None:
        for f in files:
            self.table.file_io.delete_quietly(
                self.table.paths.data_file_path(self.partition, self.bucket, f.file_name)
            )


def _chain(acc: CompactResult, nxt: CompactResult, created: set[str],
           owner: BucketCompactor) -> CompactResult:
    """Combine two consecutive results into one diff against the original files: a file made
    by ``acc`` and consumed by ``nxt`` is an intermediate (deleted now, in neither list)."""
    consumed = {f.file_name for f in nxt.before}
    produced = {f.file_name for f in acc.after}
    intermediate = consumed & produced
    dead = [f for f in acc.after if f.file_name in intermediate and f.file_name in created
            and f.file_name not in {a.file_name for a in nxt.after}]
    owner._delete(dead)
    before = list(acc.before) + [f for f in nxt.before if f.file_name not in produced]
    after = [f for f in acc.after if f.file_name not in consumed] + list(nxt.after)
    return CompactResult(tuple(before), tuple(after), acc.changelog + nxt.changelog)


def compact_append_files(table: FileStore, partition: Sequence[Any], bucket: int,
                         groups: Sequence[Sequence[DataFileMeta]],
                         vectors: Mapping[str, np.ndarray] | None = None) -> CompactResult:
    """Rewrite each group of an append-only bucket into new files, rows in sequence order,
    without the rows ``vectors`` (data file name -> deleted positions) mark."""
    vectors = vectors or {}
    check_rewritable(table, [f for group in groups for f in group])
    spec = file_writer_spec(table)
    before: list[DataFileMeta] = []
    after: list[DataFileMeta] = []
    names = table.schema.row_type.names
    try:
        for group in groups:
            ordered = sorted(group, key=lambda f: f.min_sequence_number)
            w = RollingFileWriter(table.file_io, table.paths, partition, bucket, spec, level=0,
                                  file_source=FileSource.COMPACT,
                                  first_sequence=ordered[0].min_sequence_number)
            try:
                for f in ordered:
                    offset = 0
                    for chunk in iter_data_file(table, partition, bucket, f, names):
                        n = chunk.num_rows
                        chunk = apply_vector(chunk, vectors.get(f.file_name), offset)
                        offset += n
                        if chunk.num_rows:
                            w.write(chunk)
                after.extend(w.close())
            except BaseException:
                w.abort()
                raise
            before.extend(ordered)
    except BaseException:
        for f in after:
            table.file_io.delete_quietly(table.paths.data_file_path(partition, bucket, f.file_name))
        raise
    return CompactResult(tuple(before), tuple(after))
