"""Merge all records of each key into one, per Paimon's merge engines, column-at-a-time.

Semantics follow Paimon's Java classes (facts, re-expressed as group reductions):

* Every engine runs behind ``ReducerMergeFunctionWrapper``: a key with a single record that is
  a retraction (-U/-D) is passed through untouched, so a flushed retraction can still retract
  from older levels later; a single +I/+U goes through the merge function like any group.
* ``ignore-delete`` drops -U/-D before merging (Paimon filters them when writing).
* deduplicate (``DeduplicateMergeFunction``): the last record wins, kind included.
* first-row (``FirstRowMergeFunction``): the first record wins; a -U/-D among several records
  is an error (configure ``ignore-delete``).
* partial-update (``PartialUpdateMergeFunction``): each column takes its last non-null value;
  result +I. A -U/-D is an error unless ``partial-update.remove-record-on-delete``, where a -D
  sets the row to the -D's own values (``initRow``; so does a retraction that comes first)
  and later records overwrite their non-null columns; -U is otherwise ignored; the result is
  a -D when the last record is one or no +I/+U came at all. With sequence
  groups (``fields.<s>.sequence-group``) a group's columns follow its own sequence, -U/-D
  retract them, and every key of one record passes through: ``merge/groups.py``.
* aggregation (``AggregateMergeFunction``): each column folds its field aggregator, -U/-D
  calling ``retract``; result +I. ``aggregation.remove-record-on-delete``: a -D sets the row to
  its own values, which the later records fold onto (the aggregators' state, such as
  first_value's ``initialized``, is not reset); when it is the last record, the result is
  that -D.

The output ``_SEQUENCE_NUMBER`` is the key's largest; a -D/-U result keeps the retraction's
own values. ``drop_retracts`` removes -U/-D results (reads and compaction into the max level).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.errors import MergeError
from lakecore.format.kv import KEY_PREFIX, KV_SYSTEM_COLUMNS, SEQUENCE_NUMBER, VALUE_KIND, RowKind
from lakecore.merge.aggregates import Groups, RetractionError, aggregate, take_or_null
from lakecore.merge.groups import GroupFieldError, merge_with_sequence_groups
from lakecore.merge.sort import group_starts
from lakecore.merge.spec import MergeSpec
from lakecore.options import AggregateFunction, MergeEngine
from lakecore.utils.arrow import bool_array


@dataclass
class _Result:
    """One output row per group: ``rows`` are copied verbatim except the ``merged`` columns,
    which replace them in groups where ``use_merged`` holds."""

    rows: np.ndarray
    kinds: np.ndarray
    merged: dict[str, pa.Array] = field(default_factory=dict)
    use_merged: np.ndarray | None = None


def merge_sorted(table: pa.Table, spec: MergeSpec, *, drop_retracts: bool) -> pa.Table:
    """Merge a table sorted by :func:`~lakecore.merge.sort.sort_kv` that holds every record of
    each of its keys; one row per key comes out, in the same layout and key order."""
    if spec.ignore_delete:
        table = _drop_retractions(table)
    n = table.num_rows
    if n == 0:
        return table
    kinds = _numpy(table, VALUE_KIND).astype(np.int8, copy=False)
    if kinds.min() < RowKind.INSERT or kinds.max() > RowKind.DELETE:
        bad = int(np.flatnonzero((kinds < 0) | (kinds > 3))[0])
        key = _key_repr(table, spec, bad)
        raise MergeError(f"unknown _VALUE_KIND {int(kinds[bad])} (key {key})")
    groups = Groups(group_starts(table, spec), n)
    retract = (kinds == RowKind.UPDATE_BEFORE) | (kinds == RowKind.DELETE)
    if spec.engine is MergeEngine.DEDUPLICATE:
        if groups.count == n and not (drop_retracts and retract.any()):
            return table  # every key once: nothing to merge
        result = _Result(rows=groups.ends - 1, kinds=kinds[groups.ends - 1])
    elif spec.engine is MergeEngine.FIRST_ROW:
        result = _first_row(table, spec, groups, kinds, retract)
    elif spec.engine is MergeEngine.PARTIAL_UPDATE:
        result = _partial_update(table, spec, groups, kinds, retract)
    else:
        result = _aggregation(table, spec, groups, kinds, retract)
    return _assemble(table, spec, groups, result, drop_retracts)


def _drop_retractions(table: pa.Table) -> pa.Table:
    kinds = table.column(VALUE_KIND)
    keep = pc.or_(
        pc.equal(kinds, RowKind.INSERT.value), pc.equal(kinds, RowKind.UPDATE_AFTER.value)
    )
    return table if pc.all(keep).as_py() else table.filter(keep)


def _first_row(
    table: pa.Table, spec: MergeSpec, groups: Groups, kinds: np.ndarray, retract: np.ndarray
) -> _Result:
    bad = retract & ~_passthrough(groups, retract)[groups.gid]
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise MergeError(
            f"first-row merge engine can not accept DELETE/UPDATE_BEFORE records "
            f"(key {_key_repr(table, spec, row)}, {RowKind(int(kinds[row])).short_string}); "
            "configure 'ignore-delete' to ignore them"
        )
    return _Result(rows=groups.starts, kinds=kinds[groups.starts])


def _partial_update(
    table: pa.Table, spec: MergeSpec, groups: Groups, kinds: np.ndarray, retract: np.ndarray
) -> _Result:
    if spec.has_sequence_groups:
        return _with_sequence_groups(table, spec, groups, kinds, retract)
    passthrough = _passthrough(groups, retract)
    live = ~passthrough[groups.gid]
    if not spec.remove_record_on_delete and (bad := retract & live).any():
        row = int(np.flatnonzero(bad)[0])
        raise MergeError(
            f"partial-update can not accept delete records (key {_key_repr(table, spec, row)}, "
            f"{RowKind(int(kinds[row])).short_string}); configure 'ignore-delete' to ignore "
            "them, 'partial-update.remove-record-on-delete' to remove the whole row, or "
            "sequence groups to retract their columns"
        )
    last = groups.ends - 1
    adds = live & ~retract
    if not spec.remove_record_on_delete:
        no_retract = np.zeros(groups.n, dtype=bool)
        merged = {
            col: aggregate(AggregateFunction.LAST_NON_NULL_VALUE, _arr(table, col), groups,
                           adds, no_retract)
            for col in _value_columns(table)
        }
        has_add = groups.count_where(adds) > 0
        out_kinds = np.where(
            passthrough, kinds[last], np.where(has_add, RowKind.INSERT, RowKind.DELETE)
        ).astype(np.int8)
        return _Result(rows=last, kinds=out_kinds, merged=merged,
                       use_merged=~passthrough & has_add)
    # remove-record-on-delete (PartialUpdateMergeFunction.add): a -D sets the row to its own
    # values, and so does a retraction that comes first (initRow); later +I/+U records
    # overwrite their non-null columns. The result is a -D when the last record is one or no
    # +I/+U came at all (meetInsert is not reset by a -D), else +I; -U is otherwise ignored.
    base = groups.last_index(kinds == RowKind.DELETE)
    base = np.where(base >= 0, base, np.where(retract[groups.starts], groups.starts, -1))
    after = adds & (np.arange(groups.n) > base[groups.gid])
    merged = {}
    for col in _value_columns(table):
        arr = _arr(table, col)
        idx = groups.last_index(after & _valid(arr))
        merged[col] = take_or_null(arr, np.where(idx >= 0, idx, base))
    deleted = (kinds[last] == RowKind.DELETE) | (groups.count_where(adds) == 0)
    out_kinds = np.where(
        passthrough, kinds[last], np.where(deleted, RowKind.DELETE, RowKind.INSERT)
    ).astype(np.int8)
    return _Result(rows=last, kinds=out_kinds, merged=merged, use_merged=~passthrough)


def _with_sequence_groups(
    table: pa.Table, spec: MergeSpec, groups: Groups, kinds: np.ndarray, retract: np.ndarray
) -> _Result:
    columns = {c: _arr(table, c) for c in _value_columns(table)}
    try:
        res = merge_with_sequence_groups(columns, spec, groups, kinds, retract)
    except GroupFieldError as e:
        err = e.error
        hint = (f"; configure 'fields.{e.column}.ignore-retract'='true' to ignore retractions"
                if err.retraction else "")
        raise MergeError(
            f"aggregate function {err.func.value!r} of field {e.column!r} in a sequence group "
            f"{err.reason} (key {_key_repr(table, spec, err.row)}, "
            f"{RowKind(int(kinds[err.row])).short_string}){hint}"
        ) from None
    return _Result(rows=groups.ends - 1, kinds=res.kinds, merged=res.merged,
                   use_merged=res.use_merged)


def _aggregation(
    table: pa.Table, spec: MergeSpec, groups: Groups, kinds: np.ndarray, retract: np.ndarray
) -> _Result:
    passthrough = _passthrough(groups, retract)
    seen = ~passthrough[groups.gid]
    active = seen
    last = groups.ends - 1
    deleted = np.zeros(groups.count, dtype=bool)
    reset: _Reset | None = None
    if spec.remove_record_on_delete:
        # AggregateMergeFunction.add: a -D sets the row to its own values (initRow) and the
        # records after it fold onto them; the aggregators keep their state (reset only per
        # key), which matters to first_value / first_non_null_value (_first_after_reset).
        is_delete = kinds == RowKind.DELETE
        reset = _Reset(groups, is_delete, seen, seen & ~is_delete)
        seen = reset.seen
        active = seen & reset.after
        deleted = ~passthrough & (kinds[last] == RowKind.DELETE)
    # Records a later -D discards are still folded by Paimon (and can overflow there): check
    # them per run from one -D (whose values start the run) to the next, discarding the result.
    discarded = seen & ~active
    runs = None
    fold_retract = retract  # the -D of remove-record-on-delete starts a fold, retracts nothing
    if reset is not None:
        fold_retract = retract & ~reset.deletes
        if discarded.any():
            runs = _runs_between_deletes(groups, kinds)
            discarded |= reset.deletes & ~reset.row
    merged: dict[str, pa.Array] = {}
    for col in _value_columns(table):
        func = spec.aggregate_function(col)
        arr = _arr(table, col)
        ignore_retract = col in spec.ignore_retract
        try:
            if runs is not None and func in _EXACT:
                aggregate(func, arr, runs, discarded, fold_retract,
                          ignore_retract=ignore_retract)
            if reset is None or func in _FIRST:
                merged[col] = aggregate(
                    func, arr, groups, active, retract, ignore_retract=ignore_retract,
                    delimiter=spec.listagg_delimiter(col),
                    distinct=col in spec.listagg_distinct, seen=seen,
                )
                if reset is not None:
                    merged[col] = reset.first_after_reset(func, arr, retract, merged[col])
            else:  # the -D's values are the accumulator the records after it fold onto
                merged[col] = aggregate(
                    func, arr, groups, active | reset.row, fold_retract,
                    ignore_retract=ignore_retract, delimiter=spec.listagg_delimiter(col),
                    distinct=col in spec.listagg_distinct,
                    seen=seen | reset.row,
                )
        except RetractionError as e:
            hint = (f"; configure 'fields.{col}.ignore-retract'='true' to ignore retractions"
                    if e.retraction else "")
            raise MergeError(
                f"aggregate function {e.func.value!r} of field {col!r} {e.reason} "
                f"(key {_key_repr(table, spec, e.row)}, "
                f"{RowKind(int(kinds[e.row])).short_string}){hint}"
            ) from None
    out_kinds = np.where(
        passthrough, kinds[last], np.where(deleted, RowKind.DELETE, RowKind.INSERT)
    ).astype(np.int8)
    return _Result(rows=last, kinds=out_kinds, merged=merged, use_merged=~passthrough & ~deleted)


_EXACT = (AggregateFunction.SUM, AggregateFunction.PRODUCT)
_FIRST = (AggregateFunction.FIRST_VALUE, AggregateFunction.FIRST_NON_NULL_VALUE)


class _Reset:
    """The -D records of merged groups under ``aggregation.remove-record-on-delete``
    (``deletes``), the last of each group (``row``; ``index`` per group, -1 without one), the
    rows after it (``after``: every row of a group without one), and the rows fed to the
    aggregators (``seen``: not the -D records)."""

    def __init__(self, groups: Groups, is_delete: np.ndarray, seen_before_deletes: np.ndarray,
                 seen: np.ndarray) -> None:
        self.groups = groups
        self.deletes = is_delete & seen_before_deletes
        self.index = groups.last_index(self.deletes)
        rows = np.arange(groups.n)
        at = self.index[groups.gid]
        self.row = rows == at
        self.after = rows > at
        self.seen = seen

    def first_after_reset(self, func: AggregateFunction, arr: pa.Array, retract: np.ndarray,
                          folded: pa.Array) -> pa.Array:
        """first_value / first_non_null_value: FieldFirstValueAgg takes the first input only
        while not ``initialized`` (FieldFirstNonNullValueAgg: the first non-null one), a flag
        a -D does not reset. So once a record before the last -D set it, the result stays the
        -D's value; otherwise it is the first (non-null) input after the -D, or the -D's
        value when none comes."""
        g = self.groups
        take = self.seen & ~retract
        if func is AggregateFunction.FIRST_NON_NULL_VALUE:
            take &= _valid(arr)
        initialized = g.count_where(take & ~self.after) > 0
        later = g.count_where(take & self.after) > 0
        use_delete = (self.index >= 0) & (initialized | ~later)
        if not use_delete.any():
            return folded
        return pc.if_else(pa.array(use_delete), take_or_null(arr, self.index), folded)


def _runs_between_deletes(groups: Groups, kinds: np.ndarray) -> Groups:
    """The rows regrouped so that a -D also starts a group (remove-record-on-delete)."""
    deletes = np.flatnonzero(kinds == RowKind.DELETE)
    starts = np.union1d(groups.starts, deletes)
    return Groups(starts.astype(groups.starts.dtype, copy=False), groups.n)


def _passthrough(groups: Groups, retract: np.ndarray) -> np.ndarray:
    """Groups of one retraction record, which ReducerMergeFunctionWrapper never merges."""
    return (groups.ends - groups.starts == 1) & retract[groups.starts]


def _assemble(
    table: pa.Table, spec: MergeSpec, groups: Groups, result: _Result, drop_retracts: bool
) -> pa.Table:
    kinds = result.kinds
    keep = None
    if drop_retracts:
        keep = (kinds == RowKind.INSERT) | (kinds == RowKind.UPDATE_AFTER)
        if keep.all():
            keep = None
    rows = result.rows if keep is None else result.rows[keep]
    index = pa.array(rows)
    mask = None if keep is None else bool_array(keep)
    use_merged = result.use_merged
    if use_merged is not None and keep is not None:
        use_merged = use_merged[keep]
    verbatim = None if use_merged is None or use_merged.all() else bool_array(use_merged)
    arrays: list[pa.Array] = []
    for name in table.column_names:
        if name == VALUE_KIND:
            arrays.append(pa.array(kinds if keep is None else kinds[keep], pa.int8()))
        elif name == SEQUENCE_NUMBER:
            arrays.append(pa.array(_max_sequence(table, spec, groups, keep), pa.int64()))
        elif name in result.merged:
            col = result.merged[name]
            col = col if mask is None else col.filter(mask)
            if verbatim is not None:  # -D results and passed-through retractions
                col = pc.if_else(verbatim, col, _arr(table, name).take(index))
            arrays.append(col)
        else:
            arrays.append(_arr(table, name).take(index))
    schema = table.schema
    arrays = [a if a.type == f.type else a.cast(f.type) for a, f in zip(arrays, schema)]
    return pa.Table.from_arrays(arrays, schema=schema)


def _max_sequence(
    table: pa.Table, spec: MergeSpec, groups: Groups, keep: np.ndarray | None
) -> np.ndarray:
    seq = _numpy(table, SEQUENCE_NUMBER)
    if spec.sequence_fields:
        out = np.maximum.reduceat(seq, groups.starts)
    else:  # sorted by sequence number within a key: the last record holds the largest
        out = seq[groups.ends - 1]
    return out if keep is None else out[keep]


def _value_columns(table: pa.Table) -> list[str]:
    return [
        c for c in table.column_names if c not in KV_SYSTEM_COLUMNS and not c.startswith(KEY_PREFIX)
    ]


def _valid(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _arr(table: pa.Table, name: str) -> pa.Array:
    col = table.column(name)
    return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)


def _numpy(table: pa.Table, name: str) -> np.ndarray:
    return _arr(table, name).to_numpy(zero_copy_only=False)


def _key_repr(table: pa.Table, spec: MergeSpec, row: int) -> str:
    values = {c.removeprefix(KEY_PREFIX): table.column(c)[row].as_py() for c in spec.key_columns}
    return ", ".join(f"{k}={v!r}" for k, v in values.items())
