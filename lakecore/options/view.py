"""Typed, read-only access to a table's parsed options.

``OptionsView`` holds what ``CoreOptions.from_map`` (``lakecore.options.core``) produced: the
strings as given, their typed values keyed by option, and the per-column values of the
``fields.<name>.*`` options. Its snake_case accessors read those values with Paimon's defaults
and fallbacks. It parses and checks nothing itself, so the cross-option checks
(``lakecore.options.checks``) can be typed on it while ``CoreOptions`` runs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, TypeVar, overload

from lakecore.errors import OptionError
from lakecore.options import registry as reg
from lakecore.options.registry import (
    AggregateFunction,
    ConfigOption,
    MergeEngine,
    SortOrder,
    field_key_columns,
)

T = TypeVar("T")


class _Value(Generic[T]):
    """A read-only accessor for an option with a default; its docstring is the option's."""

    def __init__(self, option: ConfigOption[T]) -> None:
        self.option = option
        self.__doc__ = f"``{option.key}``: {option.description}"

    @overload
    def __get__(self, obj: None, owner: type) -> _Value[T]: ...
    @overload
    def __get__(self, obj: OptionsView, owner: type) -> T: ...
    def __get__(self, obj: OptionsView | None, owner: type) -> Any:
        return self if obj is None else obj.get(self.option)


class _Optional(Generic[T]):
    """A read-only accessor for an option without a default: None when unset."""

    def __init__(self, option: ConfigOption[T]) -> None:
        self.option = option
        self.__doc__ = f"``{option.key}``: {option.description}"

    @overload
    def __get__(self, obj: None, owner: type) -> _Optional[T]: ...
    @overload
    def __get__(self, obj: OptionsView, owner: type) -> T | None: ...
    def __get__(self, obj: OptionsView | None, owner: type) -> Any:
        return self if obj is None else obj.get(self.option)


@dataclass(frozen=True)
class SequenceGroupOption:
    """One ``fields.<s1,s2>.sequence-group = <f1,f2>`` option: its key, the sequence fields
    (from the key, compared in order) and the fields they protect (the value)."""

    key: str
    sequence_fields: tuple[str, ...]
    fields: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class OptionsView:
    """Typed, read-only access to a parsed option map (``CoreOptions.from_map`` builds one)."""

    _raw: Mapping[str, str]
    _values: Mapping[str, Any]
    _field_values: Mapping[tuple[str, str], Any]  # (column, option suffix) -> value
    primary_keys: tuple[str, ...] = ()
    column_names: tuple[str, ...] = ()
    strict: bool = True
    unknown_keys: tuple[str, ...] = ()
    """Keys lakecore does not know, kept from a non-strict map (a table Paimon wrote)."""

    def to_map(self) -> dict[str, str]:
        """The options exactly as given (Paimon stores strings), unknown keys included."""
        return dict(self._raw)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OptionsView) and dict(self._raw) == dict(other._raw)

    def __hash__(self) -> int:
        return hash(frozenset(self._raw.items()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self._raw)!r})"

    def get(self, option: ConfigOption[T]) -> T | None:
        """The typed value of ``option``: as set (under its key or an old spelling), else its
        default."""
        if option.key in self._values:
            return self._values[option.key]
        return option.default

    def contains(self, option: ConfigOption[Any]) -> bool:
        """Whether the option was set, under its key or an old spelling."""
        return option.key in self._values

    def field_settings(self, option: ConfigOption[T]) -> dict[str, T]:
        """Column -> value for a per-column option, for the columns that set it."""
        suffix = option.field_suffix
        return {c: v for (c, s), v in self._field_values.items() if s == suffix}

    def _field(self, option: ConfigOption[T], column: str) -> T:
        return self._field_values.get((column, option.field_suffix), option.default)

    # --- layout and merge ---------------------------------------------------------------
    bucket = _Value(reg.BUCKET)
    merge_engine = _Value(reg.MERGE_ENGINE)
    changelog_producer = _Value(reg.CHANGELOG_PRODUCER)
    changelog_producer_row_deduplicate = _Value(reg.CHANGELOG_PRODUCER_ROW_DEDUPLICATE)
    rowkind_field = _Optional(reg.ROWKIND_FIELD)
    ignore_delete = _Value(reg.IGNORE_DELETE)
    partial_update_remove_record_on_delete = _Value(reg.PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE)
    aggregation_remove_record_on_delete = _Value(reg.AGGREGATION_REMOVE_RECORD_ON_DELETE)
    fields_default_aggregate_function = _Optional(reg.FIELDS_DEFAULT_AGGREGATE_FUNCTION)

    @property
    def remove_record_on_delete(self) -> bool:
        """The merge engine's own ``*.remove-record-on-delete``: ``partial-update.*`` for
        partial-update, ``aggregation.*`` for aggregation; False for the other engines."""
        engine = self.merge_engine
        if engine is MergeEngine.PARTIAL_UPDATE:
            return self.partial_update_remove_record_on_delete
        if engine is MergeEngine.AGGREGATION:
            return self.aggregation_remove_record_on_delete
        return False

    @property
    def bucket_key(self) -> tuple[str, ...]:
        """``bucket-key`` columns; empty when unset (the trimmed primary key applies then)."""
        return self.get(reg.BUCKET_KEY) or ()

    postpone_default_bucket_num = _Value(reg.POSTPONE_DEFAULT_BUCKET_NUM)
    postpone_target_row_num_per_bucket = _Optional(reg.POSTPONE_TARGET_ROW_NUM_PER_BUCKET)

    @property
    def sequence_field(self) -> tuple[str, ...]:
        """``sequence.field`` columns; empty when unset (arrival order decides)."""
        return self.get(reg.SEQUENCE_FIELD) or ()

    sequence_field_sort_order = _Value(reg.SEQUENCE_FIELD_SORT_ORDER)

    @property
    def sequence_field_descending(self) -> bool:
        """``sequence.field.sort-order = descending``: the smallest sequence value wins."""
        return self.sequence_field_sort_order is SortOrder.DESCENDING

    partial_update_remove_record_on_sequence_group = _Optional(
        reg.PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP)

    @property
    def sequence_groups(self) -> tuple[SequenceGroupOption, ...]:
        """Every ``fields.<s>.sequence-group`` option, ordered by key (whatever the engine:
        only partial-update merges by them)."""
        out = []
        suffix = reg.FIELD_SEQUENCE_GROUP.field_suffix
        for (column, s), fields in self._field_values.items():
            if s != suffix:
                continue
            key = reg.FIELD_SEQUENCE_GROUP.for_field(column)
            try:
                sequence = field_key_columns(reg.FIELD_SEQUENCE_GROUP, column)
            except ValueError as error:
                raise OptionError(key, f"invalid column list {column!r}: {error}") from None
            out.append(SequenceGroupOption(key, sequence, fields))
        return tuple(sorted(out, key=lambda g: g.key))

    @property
    def sequence_group_fields(self) -> frozenset[str]:
        """The sequence fields of the sequence groups (Paimon never aggregates them)."""
        return frozenset(f for g in self.sequence_groups for f in g.sequence_fields)

    def field_aggregate_function(self, name: str) -> AggregateFunction | None:
        """The column's own function, else ``fields.default-aggregate-function`` (Paimon's
        order). Primary-key and sequence columns are never aggregated: None for them (in
        partial-update, the sequence groups' sequence fields)."""
        if name in self.primary_keys or name in self.sequence_field:
            return None
        if (self.merge_engine is MergeEngine.PARTIAL_UPDATE
                and name in self.sequence_group_fields):
            return None
        own = self._field(reg.FIELD_AGGREGATE_FUNCTION, name)
        return own if own is not None else self.fields_default_aggregate_function

    def field_ignore_retract(self, name: str) -> bool:
        return self._field(reg.FIELD_IGNORE_RETRACT, name)

    def field_list_agg_delimiter(self, name: str) -> str:
        return self._field(reg.FIELD_LIST_AGG_DELIMITER, name)

    def field_distinct(self, name: str) -> bool:
        return self._field(reg.FIELD_DISTINCT, name)

    # --- writing ------------------------------------------------------------------------
    write_only = _Value(reg.WRITE_ONLY)
    write_merge_schema = _Value(reg.WRITE_MERGE_SCHEMA)
    write_merge_schema_explicit_cast = _Value(reg.WRITE_MERGE_SCHEMA_EXPLICIT_CAST)
    dynamic_partition_overwrite = _Value(reg.DYNAMIC_PARTITION_OVERWRITE)
    write_buffer_size = _Value(reg.WRITE_BUFFER_SIZE)
    write_buffer_spillable = _Value(reg.WRITE_BUFFER_SPILLABLE)
    file_format = _Value(reg.FILE_FORMAT)
    file_compression = _Value(reg.FILE_COMPRESSION)
    metadata_stats_mode = _Value(reg.METADATA_STATS_MODE)
    manifest_format = _Value(reg.MANIFEST_FORMAT)
    manifest_compression = _Value(reg.MANIFEST_COMPRESSION)
    manifest_target_file_size = _Value(reg.MANIFEST_TARGET_FILE_SIZE)
    manifest_merge_min_count = _Value(reg.MANIFEST_MERGE_MIN_COUNT)

    def target_file_size(self, has_primary_key: bool) -> int:
        """Bytes at which data files roll: the option, else 128 MB (PK) / 256 MB (append)."""
        configured = self.get(reg.TARGET_FILE_SIZE)
        if configured is not None:
            return configured
        return (128 if has_primary_key else 256) << 20

    # --- compaction ---------------------------------------------------------------------
    num_sorted_run_compaction_trigger = _Value(reg.NUM_SORTED_RUN_COMPACTION_TRIGGER)
    compaction_max_size_amplification_percent = _Value(
        reg.COMPACTION_MAX_SIZE_AMPLIFICATION_PERCENT
    )
    compaction_size_ratio = _Value(reg.COMPACTION_SIZE_RATIO)
    compaction_small_file_ratio = _Value(reg.COMPACTION_SMALL_FILE_RATIO)
    compaction_optimization_interval = _Optional(reg.COMPACTION_OPTIMIZATION_INTERVAL)
    compaction_total_size_threshold = _Optional(reg.COMPACTION_TOTAL_SIZE_THRESHOLD)
    compaction_incremental_size_threshold = _Optional(reg.COMPACTION_INCREMENTAL_SIZE_THRESHOLD)
    compaction_offpeak_start_hour = _Value(reg.COMPACTION_OFFPEAK_START_HOUR)
    compaction_offpeak_end_hour = _Value(reg.COMPACTION_OFFPEAK_END_HOUR)
    compaction_offpeak_ratio = _Value(reg.COMPACTION_OFFPEAK_RATIO)
    full_compaction_delta_commits = _Optional(reg.FULL_COMPACTION_DELTA_COMMITS)
    lookup_wait = _Value(reg.LOOKUP_WAIT)

    # --- index layer --------------------------------------------------------------------
    dynamic_bucket_target_row_num = _Value(reg.DYNAMIC_BUCKET_TARGET_ROW_NUM)
    dynamic_bucket_initial_buckets = _Optional(reg.DYNAMIC_BUCKET_INITIAL_BUCKETS)
    dynamic_bucket_max_buckets = _Value(reg.DYNAMIC_BUCKET_MAX_BUCKETS)
    dynamic_bucket_assigner_parallelism = _Optional(reg.DYNAMIC_BUCKET_ASSIGNER_PARALLELISM)
    deletion_vectors_enabled = _Value(reg.DELETION_VECTORS_ENABLED)
    deletion_vectors_bitmap64 = _Value(reg.DELETION_VECTORS_BITMAP64)
    deletion_vectors_index_file_target_size = _Value(reg.DELETION_VECTORS_INDEX_FILE_TARGET_SIZE)
    deletion_vectors_merge_on_read = _Value(reg.DELETION_VECTORS_MERGE_ON_READ)
    compaction_delete_ratio_threshold = _Value(reg.COMPACTION_DELETE_RATIO_THRESHOLD)
    index_file_in_data_file_dir = _Value(reg.INDEX_FILE_IN_DATA_FILE_DIR)

    @property
    def num_sorted_run_stop_trigger(self) -> int:
        """Set value or trigger + 3, never below the trigger (Paimon clamps the same way)."""
        trigger = self.num_sorted_run_compaction_trigger
        stop = self.get(reg.NUM_SORTED_RUN_STOP_TRIGGER)
        return max(trigger, trigger + 3 if stop is None else stop)

    @property
    def num_levels(self) -> int:
        """Set value or trigger + 1, so that compaction always reaches at least level 1."""
        levels = self.get(reg.NUM_LEVELS)
        return self.num_sorted_run_compaction_trigger + 1 if levels is None else levels

    # --- commit -------------------------------------------------------------------------
    commit_max_retries = _Value(reg.COMMIT_MAX_RETRIES)
    commit_min_retry_wait = _Value(reg.COMMIT_MIN_RETRY_WAIT)
    commit_max_retry_wait = _Value(reg.COMMIT_MAX_RETRY_WAIT)
    commit_timeout = _Optional(reg.COMMIT_TIMEOUT)

    # --- expiry -------------------------------------------------------------------------
    snapshot_num_retained_min = _Value(reg.SNAPSHOT_NUM_RETAINED_MIN)
    snapshot_num_retained_max = _Value(reg.SNAPSHOT_NUM_RETAINED_MAX)
    snapshot_time_retained = _Value(reg.SNAPSHOT_TIME_RETAINED)
    snapshot_expire_limit = _Value(reg.SNAPSHOT_EXPIRE_LIMIT)
    snapshot_clean_empty_directories = _Value(reg.SNAPSHOT_CLEAN_EMPTY_DIRECTORIES)
    partition_expiration_time = _Optional(reg.PARTITION_EXPIRATION_TIME)
    partition_expiration_check_interval = _Value(reg.PARTITION_EXPIRATION_CHECK_INTERVAL)
    partition_expiration_strategy = _Value(reg.PARTITION_EXPIRATION_STRATEGY)
    partition_expiration_max_num = _Value(reg.PARTITION_EXPIRATION_MAX_NUM)
    partition_timestamp_formatter = _Optional(reg.PARTITION_TIMESTAMP_FORMATTER)
    partition_timestamp_pattern = _Optional(reg.PARTITION_TIMESTAMP_PATTERN)
    partition_default_name = _Value(reg.PARTITION_DEFAULT_NAME)
    partition_legacy_name = _Value(reg.PARTITION_LEGACY_NAME)
    partition_mark_done_actions = _Value(reg.PARTITION_MARK_DONE_ACTION)
    partition_end_input_to_done = _Value(reg.PARTITION_END_INPUT_TO_DONE)

    @property
    def changelog_num_retained_min(self) -> int:
        """Falls back to ``snapshot.num-retained.min``, as in Paimon."""
        value = self.get(reg.CHANGELOG_NUM_RETAINED_MIN)
        return self.snapshot_num_retained_min if value is None else value

    @property
    def changelog_num_retained_max(self) -> int:
        """Falls back to ``snapshot.num-retained.max``, as in Paimon."""
        value = self.get(reg.CHANGELOG_NUM_RETAINED_MAX)
        return self.snapshot_num_retained_max if value is None else value

    @property
    def changelog_time_retained(self) -> timedelta:
        """Falls back to ``snapshot.time-retained``, as in Paimon."""
        value = self.get(reg.CHANGELOG_TIME_RETAINED)
        return self.snapshot_time_retained if value is None else value

    # --- reading ------------------------------------------------------------------------
    scan_snapshot_id = _Optional(reg.SCAN_SNAPSHOT_ID)
    consumer_expiration_time = _Optional(reg.CONSUMER_EXPIRATION_TIME)
    scan_timestamp_millis = _Optional(reg.SCAN_TIMESTAMP_MILLIS)
    scan_tag_name = _Optional(reg.SCAN_TAG_NAME)
    incremental_between = _Optional(reg.INCREMENTAL_BETWEEN)
    incremental_between_scan_mode = _Value(reg.INCREMENTAL_BETWEEN_SCAN_MODE)
    incremental_between_tag_to_snapshot = _Value(reg.INCREMENTAL_BETWEEN_TAG_TO_SNAPSHOT)
    path = _Optional(reg.PATH)
