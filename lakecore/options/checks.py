"""Cross-option checks run when a table's options are set (``CoreOptions.from_map(strict=True)``).

Each check looks at combinations a single value cannot judge: a key that names columns, two
options that contradict each other, an option that only makes sense with a primary key. Most
mirror Paimon's ``SchemaValidation``; the rest refuse settings Paimon would silently ignore, so a
mistake surfaces when the table is created rather than as wrong data later. Every error names
the offending key. The checks read the parsed map through ``OptionsView``; ``CoreOptions``, which
runs them, builds on that view.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lakecore.errors import OptionError
from lakecore.options.registry import (
    AGGREGATION_REMOVE_RECORD_ON_DELETE,
    BUCKET_KEY,
    CHANGELOG_NUM_RETAINED_MIN,
    CHANGELOG_PRODUCER,
    COMMIT_MIN_RETRY_WAIT,
    COMPACTION_OFFPEAK_END_HOUR,
    COMPACTION_OFFPEAK_START_HOUR,
    DELETION_VECTORS_ENABLED,
    DYNAMIC_BUCKET_MAX_BUCKETS,
    FIELD_AGGREGATE_FUNCTION,
    FIELD_IGNORE_RETRACT,
    FIELDS_DEFAULT_AGGREGATE_FUNCTION,
    FULL_COMPACTION_DELTA_COMMITS,
    IGNORE_DELETE,
    MERGE_ENGINE,
    NUM_SORTED_RUN_STOP_TRIGGER,
    PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE,
    PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP,
    ROWKIND_FIELD,
    SCAN_MODE_OPTIONS,
    SEQUENCE_FIELD,
    SEQUENCE_FIELD_SORT_ORDER,
    SNAPSHOT_NUM_RETAINED_MIN,
    AggregateFunction,
    ChangelogProducer,
    ConfigOption,
    MergeEngine,
    resolve_key,
)
from lakecore.options.view import OptionsView


def require_columns(opts: OptionsView, option: ConfigOption[Any], names: Sequence[str]) -> None:
    """The columns an option names exist (when the columns are known) and are not repeated."""
    if opts.column_names:
        missing = [n for n in names if n not in opts.column_names]
        if missing:
            raise OptionError(
                option.key,
                f"names column(s) {missing} not in the table (columns: {list(opts.column_names)})",
            )
    repeated = sorted({n for n in names if list(names).count(n) > 1})
    if repeated:
        raise OptionError(option.key, f"names column(s) {repeated} more than once")


def _needs_primary_key(opts: OptionsView, option: ConfigOption[Any], why: str) -> None:
    if not opts.primary_keys:
        raise OptionError(option.key, f"needs a table with a primary key: {why}")


def check_bucket(opts: OptionsView) -> None:
    if not opts.contains(BUCKET_KEY):
        return
    if opts.bucket == -1:
        raise OptionError(
            BUCKET_KEY.key,
            "cannot be set with bucket = -1; set 'bucket' to a number of buckets or drop it",
        )
    require_columns(opts, BUCKET_KEY, opts.bucket_key)
    outside = [k for k in opts.bucket_key if k not in opts.primary_keys]
    if opts.primary_keys and outside:
        raise OptionError(
            BUCKET_KEY.key,
            f"column(s) {outside} are not in the primary key {list(opts.primary_keys)}; "
            "all rows of one key must land in one bucket",
        )


def check_dynamic_bucket(opts: OptionsView) -> None:
    """``dynamic-bucket.max-buckets``: -1 (no limit below 32768) or 1..32768, as Paimon."""
    limit = opts.dynamic_bucket_max_buckets
    if limit != -1 and not 1 <= limit <= 32768:
        raise OptionError(
            DYNAMIC_BUCKET_MAX_BUCKETS.key,
            f"must be -1 (no limit) or between 1 and 32768, got {limit}",
        )


def check_merge(opts: OptionsView) -> None:
    if opts.contains(MERGE_ENGINE) and opts.merge_engine is not MergeEngine.DEDUPLICATE:
        _needs_primary_key(opts, MERGE_ENGINE, "rows are only merged by key")
    producer = opts.changelog_producer
    if producer is not ChangelogProducer.NONE:
        _needs_primary_key(opts, CHANGELOG_PRODUCER, "changelogs are produced per key")
    first_row_ok = (ChangelogProducer.NONE, ChangelogProducer.LOOKUP)
    if opts.merge_engine is MergeEngine.FIRST_ROW and producer not in first_row_ok:
        raise OptionError(
            CHANGELOG_PRODUCER.key, "merge-engine first-row supports only 'none' and 'lookup'"
        )
    if opts.full_compaction_delta_commits is not None:
        if producer is ChangelogProducer.LOOKUP:
            raise OptionError(
                FULL_COMPACTION_DELTA_COMMITS.key,
                "is incompatible with changelog-producer 'lookup'; "
                "use changelog-producer 'full-compaction' instead",
            )
        if not opts.primary_keys and opts.bucket == -1:
            raise OptionError(
                FULL_COMPACTION_DELTA_COMMITS.key,
                "an append table with bucket = -1 has no buckets to compact fully",
            )
    if opts.rowkind_field is not None:
        _needs_primary_key(opts, ROWKIND_FIELD, "-U/-D rows only apply to keyed rows")
        require_columns(opts, ROWKIND_FIELD, [opts.rowkind_field])
    sequence = opts.sequence_field
    if sequence:
        _needs_primary_key(opts, SEQUENCE_FIELD, "it orders the updates of one key")
        require_columns(opts, SEQUENCE_FIELD, sequence)
        if opts.merge_engine is MergeEngine.FIRST_ROW:
            raise OptionError(SEQUENCE_FIELD.key, "cannot be used with merge-engine first-row")


def check_aggregation(opts: OptionsView) -> None:
    """Aggregate functions: only with a merging engine, never on keys or sequence columns."""
    own = opts.field_settings(FIELD_AGGREGATE_FUNCTION)
    configured = [k for k in opts.to_map() if resolve_key(k)[1] is not None]
    default = opts.fields_default_aggregate_function
    if default is not None:
        configured.append(FIELDS_DEFAULT_AGGREGATE_FUNCTION.key)
    engine = opts.merge_engine
    if configured and engine not in (MergeEngine.AGGREGATION, MergeEngine.PARTIAL_UPDATE):
        raise OptionError(
            configured[0],
            f"only applies with merge-engine 'aggregation' or 'partial-update' (is {engine})",
        )
    for column in own:
        key = FIELD_AGGREGATE_FUNCTION.for_field(column)
        if column in opts.primary_keys:
            raise OptionError(key, f"{column!r} is a primary-key column; keys are not aggregated")
        if column in opts.sequence_field:
            raise OptionError(key, f"{column!r} is the sequence.field; it cannot be aggregated")
    if engine is MergeEngine.PARTIAL_UPDATE:
        _check_partial_update_functions(opts, own, default)
    retract = [c for c, v in opts.field_settings(FIELD_IGNORE_RETRACT).items() if v]
    if retract and opts.aggregation_remove_record_on_delete:
        raise OptionError(
            FIELD_IGNORE_RETRACT.for_field(retract[0]),
            f"conflicts with {AGGREGATION_REMOVE_RECORD_ON_DELETE.key} = true",
        )


def _check_partial_update_functions(opts: OptionsView, own: dict[str, AggregateFunction],
                                    default: AggregateFunction | None) -> None:
    """Paimon's ``PartialUpdateMergeFunction.getAggFuncName``: a column's function (its own,
    else the default) other than last_non_null_value needs the column to be in a sequence
    group; the groups' sequence fields are never aggregated (Paimon ignores a function set on
    one: refused here, like every setting Paimon would ignore)."""
    grouped = {f for g in opts.sequence_groups for f in g.fields}
    sequence = opts.sequence_group_fields
    for column, function in own.items():
        key = FIELD_AGGREGATE_FUNCTION.for_field(column)
        if column in sequence:
            raise OptionError(key, f"{column!r} is a sequence field of a sequence group; "
                                   "sequence fields are not aggregated")
        if function is not AggregateFunction.LAST_NON_NULL_VALUE and column not in grouped:
            raise OptionError(
                key,
                f"partial-update aggregates {column!r} with {function} only inside a sequence "
                f"group: add it to a 'fields.<sequence field>.sequence-group' (Paimon: "
                "\"Must use sequence group for aggregation functions\")",
            )
    if default is None or default is AggregateFunction.LAST_NON_NULL_VALUE:
        return
    outside = [c for c in opts.column_names
               if c not in opts.primary_keys and c not in sequence and c not in grouped
               and c not in own]
    if outside:
        raise OptionError(
            FIELDS_DEFAULT_AGGREGATE_FUNCTION.key,
            f"partial-update applies {default} to column(s) {outside}, which are in no "
            "sequence group; functions other than last_non_null_value need one (Paimon: "
            "\"Must use sequence group for aggregation functions\")",
        )
    if not opts.column_names and not grouped:
        raise OptionError(
            FIELDS_DEFAULT_AGGREGATE_FUNCTION.key,
            f"partial-update supports {default} only inside sequence groups",
        )


def check_sequence_groups(opts: OptionsView) -> None:
    """Paimon's ``PartialUpdateMergeFunction.Factory`` rules for ``fields.<s>.sequence-group``
    and ``partial-update.remove-record-on-sequence-group``, and the conflicts it refuses
    between them, ``ignore-delete`` and ``partial-update.remove-record-on-delete``. lakecore
    also refuses what Paimon resolves by the order of a hash map (a sequence field shared by
    two groups, or protected by another group) and groups on another engine (ignored there)."""
    groups = opts.sequence_groups
    remove = opts.partial_update_remove_record_on_sequence_group
    engine = opts.merge_engine
    if engine is MergeEngine.PARTIAL_UPDATE and opts.ignore_delete and (
            opts.partial_update_remove_record_on_delete):
        raise OptionError(
            PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE.key,
            f"{IGNORE_DELETE.key} and {PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE.key} have "
            "conflicting behavior so should not be enabled at the same time",
        )
    if not groups and remove is None:
        return
    first_key = groups[0].key if groups else PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP.key
    if engine is not MergeEngine.PARTIAL_UPDATE:
        raise OptionError(first_key, f"only applies with merge-engine 'partial-update' "
                                     f"(is {engine})")
    if not opts.primary_keys:
        raise OptionError(first_key, "needs a table with a primary key")
    protected_by: dict[str, str] = {}
    sequence_of: dict[str, str] = {}
    for g in groups:
        _require_group_columns(opts, g.key, g.sequence_fields)
        _require_group_columns(opts, g.key, g.fields)
        for name in (*g.sequence_fields, *g.fields):
            if name in opts.primary_keys:
                raise OptionError(
                    g.key, f"contains primary key field {name!r}, which is not allowed: "
                           "primary key columns cannot be put in a sequence group")
        for name in g.fields:
            if name in g.sequence_fields:
                continue  # a group's own sequence field: Paimon treats it as one
            if name in protected_by:
                raise OptionError(g.key, f"field {name!r} is defined repeatedly by multiple "
                                         f"groups ({protected_by[name]!r} and {g.key!r})")
            protected_by[name] = g.key
        for name in g.sequence_fields:
            if name in sequence_of:
                raise OptionError(g.key, f"sequence field {name!r} is also the sequence field "
                                         f"of {sequence_of[name]!r}; give each group its own")
            sequence_of[name] = g.key
    for name, key in sequence_of.items():
        if name in protected_by:
            raise OptionError(protected_by[name],
                              f"protects {name!r}, the sequence field of {key!r}")
    if opts.partial_update_remove_record_on_delete and groups:
        raise OptionError(
            PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE.key,
            f"sequence-group and {PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE.key} have conflicting "
            f"behavior so should not be enabled at the same time (sequence group {first_key!r})",
        )
    if remove is not None:
        key = PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP.key
        if opts.ignore_delete:
            raise OptionError(
                key, f"{IGNORE_DELETE.key} and {key} have conflicting behavior so should not "
                     "be enabled at the same time")
        outside = [n for n in remove if n not in sequence_of]
        if outside:
            raise OptionError(key, f"field(s) {outside} must be sequence fields of sequence "
                                   f"groups (sequence fields: {sorted(sequence_of)})")


def _require_group_columns(opts: OptionsView, key: str, names: Sequence[str]) -> None:
    if opts.column_names:
        missing = [n for n in names if n not in opts.column_names]
        if missing:
            raise OptionError(key, f"names column(s) {missing} not in the table "
                                   f"(columns: {list(opts.column_names)})")
    repeated = sorted({n for n in names if list(names).count(n) > 1})
    if repeated:
        raise OptionError(key, f"names column(s) {repeated} more than once")


def check_sort_order(opts: OptionsView) -> None:
    """``sequence.field.sort-order`` orders ``sequence.field``: without one Paimon ignores it."""
    if opts.contains(SEQUENCE_FIELD_SORT_ORDER) and opts.sequence_field_descending and (
            not opts.sequence_field):
        raise OptionError(SEQUENCE_FIELD_SORT_ORDER.key,
                          f"'descending' needs a '{SEQUENCE_FIELD.key}' to order")


def check_triggers_and_hours(opts: OptionsView) -> None:
    stop = opts.get(NUM_SORTED_RUN_STOP_TRIGGER)
    trigger = opts.num_sorted_run_compaction_trigger
    if stop is not None and stop < trigger:
        raise OptionError(
            NUM_SORTED_RUN_STOP_TRIGGER.key,
            f"is {stop}, below num-sorted-run.compaction-trigger ({trigger}); "
            "writes would stall before compaction starts",
        )
    start, end = opts.compaction_offpeak_start_hour, opts.compaction_offpeak_end_hour
    if (start == -1) != (end == -1):
        missing = COMPACTION_OFFPEAK_END_HOUR if end == -1 else COMPACTION_OFFPEAK_START_HOUR
        raise OptionError(missing.key, "set both off-peak hours, or neither")


def check_retention(opts: OptionsView) -> None:
    snapshot = (opts.snapshot_num_retained_min, opts.snapshot_num_retained_max)
    changelog = (opts.changelog_num_retained_min, opts.changelog_num_retained_max)
    for option, (low, high) in (
        (SNAPSHOT_NUM_RETAINED_MIN, snapshot),
        (CHANGELOG_NUM_RETAINED_MIN, changelog),
    ):
        if low > high:
            raise OptionError(option.key, f"is {low}, larger than the maximum ({high})")
    if opts.commit_min_retry_wait > opts.commit_max_retry_wait:
        raise OptionError(COMMIT_MIN_RETRY_WAIT.key, "is longer than commit.max-retry-wait")


def check_deletion_vectors(opts: OptionsView) -> None:
    """Paimon's ``validateForDeletionVectors``: vectors work with the ``none``, ``input`` and
    ``lookup`` changelog producers only, and not with ``first-row`` (nothing older is ever
    deleted there)."""
    if not opts.deletion_vectors_enabled:
        return
    allowed = (ChangelogProducer.NONE, ChangelogProducer.INPUT, ChangelogProducer.LOOKUP)
    if opts.changelog_producer not in allowed:
        raise OptionError(
            CHANGELOG_PRODUCER.key,
            f"{opts.changelog_producer.value!r} cannot be combined with "
            f"{DELETION_VECTORS_ENABLED.key}=true; use none, input or lookup",
        )
    if opts.merge_engine is MergeEngine.FIRST_ROW:
        raise OptionError(
            MERGE_ENGINE.key,
            f"first-row does not need {DELETION_VECTORS_ENABLED.key}: it never deletes an "
            "older row (Paimon refuses the combination)",
        )


def check_scan(opts: OptionsView) -> None:
    chosen = [o.key for o in SCAN_MODE_OPTIONS if opts.contains(o)]
    if len(chosen) > 1:
        raise OptionError(chosen[1], f"cannot be combined with {chosen[0]!r}; pick one")


CROSS_CHECKS: tuple[Callable[[OptionsView], None], ...] = (
    check_bucket,
    check_dynamic_bucket,
    check_merge,
    check_sequence_groups,
    check_sort_order,
    check_aggregation,
    check_triggers_and_hours,
    check_retention,
    check_scan,
    check_deletion_vectors,
)
