"""Compaction of a deletion-vector bucket (Paimon's lookup compaction with a DV maintainer).

Each round lifts level-0 files into a level >= 1 run, as any lookup table does
(``ForceUpLevel0Compaction``), and then:

* inputs are read with their vectors applied; outputs at a level >= 1 drop deletes. A level-0
  file the plan upgrades (it overlaps no other input) is lifted as it is, as Paimon's
  ``LookupMergeTreeCompactRewriter.upgradeStrategy`` does, only when it provably holds no
  retraction: ``delete_row_count`` is 0 *and* its ``_VALUE_KIND`` footer statistics (or the
  column) show only +I/+U (pypaimon 2.1 records 0 for files holding -D rows), and it was
  written under a schema with vectors on; otherwise it is rewritten;
* keys of the lifted level-0 rows still live in a file the round leaves alone are looked up
  (``lookup.py``) and those rows are marked in that file's vector. With an engine that merges
  versions (partial-update, aggregation, a ``sequence.field``) the old rows are read back and
  merged into the new ones first, as the oldest run of one rewrite of the whole unit;
* files the round rewrites lose their vectors; upgraded files keep theirs.

A bucket whose levels >= 1 still hold one key live twice, or a retraction (vectors turned on
for a table whose overlapping runs were merged on read), gets a full compaction instead, once:
other engines read such levels without merging. A full compaction rewrites every file holding
a vector. Only files written under a schema version without vectors can cause that (a
compaction with vectors marks what it supersedes and drops retractions), so a writer checks
the data of those alone, and of them only the ones under the highest level for a key held
twice (the newer copy of such a key is in the lower level, placed without vectors).
``compaction.delete-ratio-threshold``: afterwards, in the dedicated compaction, a file whose
vector covers more than that share of its rows is rewritten on its own at its level (Paimon
applies the option to append tables; here the off-peak job also bounds dead rows in
primary-key files, while a writer's own compaction leaves them, as Paimon's writers do).

At the end the bucket's vectors are written as one new index file; the result names it and
the index files it replaces, for the commit message's compaction increment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from lakecore.compact.deletion_vectors import BucketVectors, delete_index_files
from lakecore.compact.interval_partition import IntervalPartition
from lakecore.compact.keys import KeyOrder
from lakecore.compact.levels import SortedRun
from lakecore.compact.lookup import (
    has_duplicate_keys,
    key_columns,
    level0_keys,
    live_keys,
    old_rows,
    superseded,
)
from lakecore.compact.planner import CompactTaskPlan, plan_compaction
from lakecore.compact.rewrite_plan import Rewrite, Step, Upgrade, contains_delete_records
from lakecore.compact.ties import tied_level0_rows
from lakecore.compact.unit import CompactResult
from lakecore.format.manifest import DataFileMeta, FileSource
from lakecore.io.data_file_reader import retraction_free
from lakecore.options import MergeEngine

if TYPE_CHECKING:
    from lakecore.compact.executor import BucketCompactor


def compact_with_vectors(c: BucketCompactor, dv: BucketVectors, full: bool) -> CompactResult:
    """Run ``c``'s compaction with deletion vectors ``dv`` (changed in place)."""
    from lakecore.compact.executor import _chain

    o = c.table.options
    if not full and not dv.consistent:
        full = _needs_repair(c, dv)
        dv.consistent = True  # after this compaction; a writer checks once, not per commit
    result = CompactResult()
    created: set[str] = set()
    try:
        while True:
            task = plan_compaction(
                c.levels, c.strategy,
                target_file_size=o.target_file_size(True),
                small_file_ratio=o.compaction_small_file_ratio,
                full=full, rewrite_if=(lambda f: dv.has(f.file_name)) if full else None,
                deletion_vectors=True,
            )
            if task is None:
                break
            before_vectors = dv.snapshot()
            steps, extra, marks = _lookup(c, dv, task, full)
            step_result = c._execute(steps, before_vectors, extra)
            step_result = c._with_changelog(task.unit, step_result, created, before_vectors)
            created.update(f.file_name for f in step_result.after
                           if f.file_source is FileSource.COMPACT
                           and f.file_name not in {b.file_name for b in step_result.before})
            _update_vectors(dv, step_result, marks)
            c.levels = c.levels.update(step_result.before, step_result.after)
            result = _chain(result, step_result, created, c)
            if full or not c.levels.level0:
                break
        ratio_result = _rewrite_deleted_heavy(c, dv) if c.rewrite_deleted else CompactResult()
        if not ratio_result.is_empty():
            created.update(f.file_name for f in ratio_result.after)
            _update_vectors(dv, ratio_result, {})
            c.levels = c.levels.update(ratio_result.before, ratio_result.after)
            result = _chain(result, ratio_result, created, c)
        new, replaced = dv.write(c.table, c.partition, c.bucket)
    except BaseException:
        c._delete([f for f in result.after if f.file_name in created])
        raise
    return CompactResult(result.before, result.after, result.changelog,
                         index_after=new, index_before=replaced)


def abort_index_files(c: BucketCompactor, result: CompactResult) -> None:
    """Delete the index file a result wrote (its commit certainly did not land)."""
    delete_index_files(c.table, c.partition, c.bucket, result.index_after)


def _needs_repair(c: BucketCompactor, dv: BucketVectors) -> bool:
    """Levels >= 1 written without vectors: a retraction kept at a level >= 1 (it cancels an
    older row only when merged on read) or a key live in two runs."""
    upper = [f for f in c.levels.all_files() if f.level > 0]
    if any(contains_delete_records(f) for f in upper):
        return True
    before = [f for f in upper if not _written_with_vectors(c, f)]
    if any(not retraction_free(c.table, c.partition, c.bucket, f) for f in before):
        return True  # delete_row_count is not trusted (pypaimon 2.1 records 0)
    top = max((f.level for f in upper), default=0)
    if not any(f.level < top for f in before):
        return False  # one sorted run never holds a key twice; nothing newer lies below it
    live = live_keys(c.table, c.partition, c.bucket, upper, dv.vectors)
    return has_duplicate_keys(live, key_columns(c.table))


def _written_with_vectors(c: BucketCompactor, f: DataFileMeta) -> bool:
    """Whether ``f``'s schema version (cached per id) had ``deletion-vectors.enabled``."""
    return c.table.schema_of(f.schema_id).core_options.deletion_vectors_enabled


def _lift_as_is(c: BucketCompactor, f: DataFileMeta) -> bool:
    """Whether level-0 file ``f`` may be upgraded without a rewrite (the module docstring):
    no retraction, provably, and written with vectors on."""
    return (f.delete_row_count == 0 and _written_with_vectors(c, f)
            and retraction_free(c.table, c.partition, c.bucket, f))


def _needs_old_value(c: BucketCompactor) -> bool:
    o = c.table.options
    return o.merge_engine is not MergeEngine.DEDUPLICATE or bool(o.sequence_field)


def _lookup(c: BucketCompactor, dv: BucketVectors, task: CompactTaskPlan, full: bool
            ) -> tuple[list[Step], pa.Table | None, dict]:
    """The round's steps (level-0 upgrades that are not provably safe become rewrites), the
    old rows to merge in (or None) and the positions to mark per higher-level file.

    Paimon upgrades a level-0 file without retractions as it is; lakecore checks that it has
    none (``_lift_as_is``), since pypaimon 2.1 records no retractions for level-0 files that
    hold -D rows, and a retraction left at a level >= 1 would be read as a live row by readers
    that apply vectors raw."""
    unit = task.unit
    out = unit.output_level
    steps: list[Step] = []
    for s in task.plan.steps:
        if isinstance(s, Upgrade) and s.file.level == 0 and not _lift_as_is(c, s.file):
            steps.append(Rewrite(((SortedRun.from_single(s.file),),), out, task.drop_delete))
        else:
            steps.append(s)
    l0 = [f for f in unit.files if f.level == 0]
    if full or not l0:
        return steps, None, {}
    in_unit = {f.file_name for f in unit.files}
    others = [f for f in c.levels.all_files() if f.level > 0 and f.file_name not in in_unit]
    if not others:
        return steps, None, {}
    new_keys = level0_keys(c.table, c.partition, c.bucket, l0)
    marks = superseded(c.table, c.partition, c.bucket, _in_key_ranges(c, others, l0),
                       dv.vectors, new_keys)
    if not marks or not (_needs_old_value(c) or _ties(c, l0, others, marks)):
        return steps, None, marks
    extra = old_rows(c.table, c.partition, c.bucket, others, marks)
    sections = tuple(tuple(s) for s in IntervalPartition(unit.files, c.levels.keys).partition())
    return [Rewrite(sections, out, task.drop_delete)], extra, marks


def _in_key_ranges(c: BucketCompactor, files: Sequence[DataFileMeta],
                   l0: Sequence[DataFileMeta]) -> list[DataFileMeta]:
    """The files whose [min key, max key] meets some level-0 file's: only they can hold a
    key the round lifts (file metadata only; nothing is read)."""
    keys = KeyOrder.of(c.levels.keys)
    ranges = [(keys.min_key(f), keys.max_key(f)) for f in l0]
    return [f for f in files
            if any(lo <= keys.max_key(f) and keys.min_key(f) <= hi for lo, hi in ranges)]


def _ties(c: BucketCompactor, l0: Sequence[DataFileMeta], others: Sequence[DataFileMeta],
          marks: dict) -> bool:
    """Whether a superseded row ties with a level-0 row on its sequence number: then the old
    row wins (``merge/order.py``), so it is merged in rather than only marked."""
    marked = [f for f in others if f.file_name in marks]
    return bool(tied_level0_rows(c.table, c.partition, c.bucket, l0, marked,
                                 c.table.options.merge_engine))


def _update_vectors(dv: BucketVectors, r: CompactResult, marks: dict) -> None:
    kept = {f.file_name for f in r.after}
    dv.remove(f.file_name for f in r.before if f.file_name not in kept)
    dv.mark(marks)


def _rewrite_deleted_heavy(c: BucketCompactor, dv: BucketVectors) -> CompactResult:
    threshold = c.table.options.compaction_delete_ratio_threshold
    heavy: Sequence[DataFileMeta] = [
        f for f in c.levels.all_files()
        if f.level > 0 and dv.has(f.file_name) and f.row_count > 0
        and dv.vectors[f.file_name].size / f.row_count > threshold
    ]
    if not heavy:
        return CompactResult()
    steps: list[Step] = [Rewrite(((SortedRun.from_single(f),),), f.level, True) for f in heavy]
    return c._execute(steps, dv.snapshot())
