"""Table options: validation of Paimon's option map and typed access to it.

Paimon keeps a table's options as a ``dict[str, str]`` in the schema file. ``CoreOptions`` wraps
such a map: ``from_map`` checks every key against the registry (``lakecore.options.registry``),
parses every value with Paimon's text rules (``lakecore.options.parse``), runs the cross-option
checks (``lakecore.options.checks``) and exposes typed snake_case accessors. ``to_map`` gives
the original strings back, so what lakecore stores is exactly what the user wrote.

Two modes, because the same map is met twice:

* ``strict=True`` (creating a table, or ``with_options`` overrides): unknown keys, values out
  of range and contradictory combinations are errors, each naming the key.
* ``strict=False`` (opening a table someone else wrote): unknown keys are kept but ignored,
  known keys must still parse, and lakecore's creation-time restrictions are not applied.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from types import MappingProxyType
from typing import Any, Generic, TypeVar, overload

from lakecore.errors import OptionError
from lakecore.options import registry as reg
from lakecore.options.checks import CROSS_CHECKS, check_scan
from lakecore.options.parse import StatsMode
from lakecore.options.registry import (
    OPTIONS,
    AggregateFunction,
    ChangelogProducer,
    ConfigOption,
    MergeEngine,
    PartitionExpirationStrategy,
    resolve_key,
    unknown_key_message,
)

__all__ = [
    "OPTIONS",
    "AggregateFunction",
    "ChangelogProducer",
    "ConfigOption",
    "CoreOptions",
    "MergeEngine",
    "PartitionExpirationStrategy",
    "StatsMode",
]

T = TypeVar("T")


class _Value(Generic[T]):
    """A read-only accessor for an option with a default; its docstring is the option's."""

    def __init__(self, option: ConfigOption[T]) -> None:
        self.option = option
        self.__doc__ = f"``{option.key}``: {option.description}"

    @overload
    def __get__(self, obj: None, owner: type) -> _Value[T]: ...
    @overload
    def __get__(self, obj: CoreOptions, owner: type) -> T: ...
    def __get__(self, obj: CoreOptions | None, owner: type) -> Any:
        return self if obj is None else obj.get(self.option)


class _Optional(Generic[T]):
    """A read-only accessor for an option without a default: None when unset."""

    def __init__(self, option: ConfigOption[T]) -> None:
        self.option = option
        self.__doc__ = f"``{option.key}``: {option.description}"

    @overload
    def __get__(self, obj: None, owner: type) -> _Optional[T]: ...
    @overload
    def __get__(self, obj: CoreOptions, owner: type) -> T | None: ...
    def __get__(self, obj: CoreOptions | None, owner: type) -> Any:
        return self if obj is None else obj.get(self.option)


@dataclass(frozen=True, eq=False)
class CoreOptions:
    """A validated, immutable view of one table's option map. Build it with ``from_map``."""

    _raw: Mapping[str, str]
    _values: Mapping[str, Any]
    _field_values: Mapping[tuple[str, str], Any]  # (column, option suffix) -> value
    primary_keys: tuple[str, ...] = ()
    column_names: tuple[str, ...] = ()
    strict: bool = True
    unknown_keys: tuple[str, ...] = ()
    """Keys lakecore does not know, kept from a non-strict map (a table Paimon wrote)."""

    @staticmethod
    def from_map(
        options: Mapping[str, str],
        *,
        primary_keys: Sequence[str] = (),
        column_names: Sequence[str] = (),
        strict: bool = True,
    ) -> CoreOptions:
        """Validate ``options`` and wrap them.

        ``primary_keys`` and ``column_names`` let the options that name columns be checked
        (``sequence.field``, ``bucket-key``, ``fields.<name>.*``, ...). An empty
        ``column_names`` means the columns are not known here, and those checks are skipped.
        """
        raw = dict(options)
        values: dict[str, Any] = {}
        field_values: dict[tuple[str, str], Any] = {}
        unknown: list[str] = []
        columns = tuple(column_names)
        for key, text in raw.items():
            if not isinstance(key, str) or not isinstance(text, str):
                raise OptionError(str(key), f"keys and values must be strings, got {text!r}")
            option, column = resolve_key(key)
            if option is None:
                if strict:
                    raise OptionError(key, unknown_key_message(key, columns))
                unknown.append(key)
                continue
            value = _parse(option, key, text, strict)
            if column is None:
                _store(values, raw, option, key, value, strict)
                continue
            if strict:
                _check_column(key, column, columns)
            field_values[(column, option.field_suffix)] = value
        result = CoreOptions(
            MappingProxyType(raw),
            MappingProxyType(values),
            MappingProxyType(field_values),
            tuple(primary_keys),
            columns,
            strict,
            tuple(unknown),
        )
        if strict:
            for check in CROSS_CHECKS:
                check(result)
        return result

    def with_options(self, updates: Mapping[str, str]) -> CoreOptions:
        """These options overridden by ``updates`` (``table.copy``, e.g. for time travel).

        Each override is checked strictly (an unknown override is a typo, never a key some
        other writer left behind); the merged map keeps this map's mode for the rest.
        """
        for key, text in updates.items():
            option, column = resolve_key(key)
            if option is None:
                raise OptionError(key, unknown_key_message(key, self.column_names))
            if column is not None:
                _check_column(key, column, self.column_names)
            _parse(option, key, text, strict=True)
        merged = CoreOptions.from_map(
            {**self._raw, **updates},
            primary_keys=self.primary_keys,
            column_names=self.column_names,
            strict=self.strict,
        )
        check_scan(merged)  # time-travel choices are the caller's, whatever the base mode
        return merged

    def to_map(self) -> dict[str, str]:
        """The options exactly as given (Paimon stores strings), unknown keys included."""
        return dict(self._raw)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CoreOptions) and dict(self._raw) == dict(other._raw)

    def __hash__(self) -> int:
        return hash(frozenset(self._raw.items()))

    def __repr__(self) -> str:
        return f"CoreOptions({dict(self._raw)!r})"

    def get(self, option: ConfigOption[T]) -> T | None:
        """The typed value of ``option``: as set (under its key or an old spelling), else its
        default."""
        if option.key in self._values:
            return self._values[option.key]  # type: ignore[no-any-return]
        return option.default

    def contains(self, option: ConfigOption[Any]) -> bool:
        """Whether the option was set, under its key or an old spelling."""
        return option.key in self._values

    def field_settings(self, option: ConfigOption[T]) -> dict[str, T]:
        """Column -> value for a per-column option, for the columns that set it."""
        suffix = option.field_suffix
        return {c: v for (c, s), v in self._field_values.items() if s == suffix}

    def _field(self, option: ConfigOption[T], column: str) -> T:
        value = self._field_values.get((column, option.field_suffix), option.default)
        return value  # type: ignore[no-any-return]

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
    def bucket_key(self) -> tuple[str, ...]:
        """``bucket-key`` columns; empty when unset (the trimmed primary key applies then)."""
        return self.get(reg.BUCKET_KEY) or ()

    @property
    def sequence_field(self) -> tuple[str, ...]:
        """``sequence.field`` columns; empty when unset (arrival order decides)."""
        return self.get(reg.SEQUENCE_FIELD) or ()

    def field_aggregate_function(self, name: str) -> AggregateFunction | None:
        """The column's own function, else ``fields.default-aggregate-function`` (Paimon's
        order). Primary-key and sequence columns are never aggregated: None for them."""
        if name in self.primary_keys or name in self.sequence_field:
            return None
        own = self._field(reg.FIELD_AGGREGATE_FUNCTION, name)
        return own if own is not None else self.fields_default_aggregate_function

    def field_ignore_retract(self, name: str) -> bool:
        return self._field(reg.FIELD_IGNORE_RETRACT, name)

    def field_list_agg_delimiter(self, name: str) -> str:
        return self._field(reg.FIELD_LIST_AGG_DELIMITER, name)

    # --- writing ------------------------------------------------------------------------
    write_only = _Value(reg.WRITE_ONLY)
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
    scan_timestamp_millis = _Optional(reg.SCAN_TIMESTAMP_MILLIS)
    scan_tag_name = _Optional(reg.SCAN_TAG_NAME)
    incremental_between = _Optional(reg.INCREMENTAL_BETWEEN)
    path = _Optional(reg.PATH)


def _parse(option: ConfigOption[T], key: str, text: str, strict: bool) -> T:
    """Parse one value; in strict mode also apply lakecore's creation-time check."""
    try:
        value = option.parser(text)
    except ValueError as error:
        raise OptionError(key, f"invalid value {text!r}: {error}") from None
    if strict and option.check is not None:
        problem = option.check(value)
        if problem is not None:
            raise OptionError(key, f"invalid value {text!r}: {problem}")
    return value


def _check_column(key: str, column: str, columns: Sequence[str]) -> None:
    if columns and column not in columns:
        raise OptionError(key, f"column {column!r} is not in the table (columns: {list(columns)})")


def _store(
    values: dict[str, Any],
    raw: Mapping[str, str],
    option: ConfigOption[Any],
    key: str,
    value: Any,
    strict: bool,
) -> None:
    """Record a value. The key itself wins over its old spellings, as in Paimon; in strict
    mode, spellings that disagree are an error rather than a silent pick."""
    if key == option.key:
        values[option.key] = value
        return
    if option.key in raw:
        if strict and raw[option.key] != raw[key]:
            raise OptionError(
                key, f"is an old spelling of {option.key!r}, which is also set; keep one of them"
            )
        return
    if strict and option.key in values and values[option.key] != value:
        raise OptionError(key, f"disagrees with another old spelling of {option.key!r}")
    values[option.key] = value
