"""What a merge needs to know about a primary-key table: the row kinds, the merge engine, and
the per-column options (``merge-engine``, ``sequence.field``, ``ignore-delete``,
``*.remove-record-on-delete``, ``fields.<f>.aggregate-function`` ...). ``MergeSpec.from_options``
takes them from a table's ``CoreOptions``, which parsed and resolved them once (Paimon's keys,
defaults and fallback keys), so the columnar merge code never reads option strings.

The function-resolution order follows Paimon's ``AggregateMergeFunction.getAggFuncName``
(aggregation) and ``PartialUpdateMergeFunction.getAggFuncName`` (partial-update, where functions
other than ``last_non_null_value`` live inside sequence groups). A read of some columns gets the
sequence groups of those columns (their sequence fields are added to the columns read, as
Paimon's ``adjustReadType`` does) and always the groups of
``partial-update.remove-record-on-sequence-group``, so that a projection never changes whether
a row is removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from lakecore.errors import OptionError, UnsupportedFeatureError
from lakecore.format.kv import KEY_PREFIX
from lakecore.options import AggregateFunction, CoreOptions, MergeEngine
from lakecore.options.registry import (
    FIELD_AGGREGATE_FUNCTION,
    FIELD_DISTINCT,
    FIELD_IGNORE_RETRACT,
    FIELD_LIST_AGG_DELIMITER,
    FIELDS_DEFAULT_AGGREGATE_FUNCTION,
    IGNORE_DELETE,
    PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE,
    PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP,
    SEQUENCE_FIELD,
    ConfigOption,
)

T = TypeVar("T")

# Aggregators whose Paimon class overrides ``retract``; the rest throw on -U/-D unless
# ``fields.<f>.ignore-retract`` wraps them in FieldIgnoreRetractAgg.
RETRACTABLE = frozenset(
    {
        AggregateFunction.PRIMARY_KEY,
        AggregateFunction.SUM,
        AggregateFunction.PRODUCT,
        AggregateFunction.LAST_VALUE,
        AggregateFunction.LAST_NON_NULL_VALUE,
    }
)
# ``fields.<f>.list-agg-delimiter`` when a column does not set it.
DEFAULT_LISTAGG_DELIMITER: str = FIELD_LIST_AGG_DELIMITER.default or ","


@dataclass(frozen=True)
class SequenceGroup:
    """A partial-update sequence group: ``fields`` take, per key, their values from the record
    with the greatest ``sequence_fields`` (compared in order, nulls first, later records
    winning ties); a record whose sequence fields are all null leaves them alone.
    ``remove_on_delete``: a -D that updates this group removes the whole row
    (``partial-update.remove-record-on-sequence-group``). ``key`` is the option's key."""

    key: str
    sequence_fields: tuple[str, ...]
    fields: tuple[str, ...] = ()
    remove_on_delete: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "sequence_fields", tuple(self.sequence_fields))
        object.__setattr__(self, "fields", tuple(self.fields))
        if not self.sequence_fields:
            raise OptionError(self.key, "a sequence group needs at least one sequence field")


@dataclass(frozen=True)
class MergeSpec:
    """Everything the merge functions need, resolved.

    ``key_columns`` are the ``_KEY_<k>`` columns of the data file; ``value_columns`` the table
    columns after ``_VALUE_KIND``; ``primary_keys`` the table's primary key (partition columns
    included), which the aggregation engine carries through instead of aggregating.
    ``remove_record_on_delete`` is ``partial-update.remove-record-on-delete`` or
    ``aggregation.remove-record-on-delete`` depending on the engine (ignored by the others).
    ``sequence_descending``: ``sequence.field.sort-order = descending``. ``sequence_groups``:
    the partial-update sequence groups this merge needs; ``has_sequence_groups``: the table
    has some (then -U/-D records retract group fields instead of being refused, even when
    none of the groups is read). Every value is typed: build one with ``from_options``, or
    directly in tests.
    """

    engine: MergeEngine
    key_columns: tuple[str, ...]
    value_columns: tuple[str, ...]
    primary_keys: tuple[str, ...] = ()
    sequence_fields: tuple[str, ...] = ()
    ignore_delete: bool = False
    remove_record_on_delete: bool = False
    aggregate_functions: Mapping[str, AggregateFunction] = field(default_factory=dict, hash=False)
    default_aggregate_function: AggregateFunction | None = None
    ignore_retract: frozenset[str] = frozenset()
    listagg_delimiters: Mapping[str, str] = field(default_factory=dict, hash=False)
    listagg_distinct: frozenset[str] = frozenset()
    sequence_descending: bool = False
    sequence_groups: tuple[SequenceGroup, ...] = ()
    has_sequence_groups: bool = False

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "key_columns", tuple(self.key_columns))
        set_(self, "value_columns", tuple(self.value_columns))
        set_(self, "primary_keys", tuple(self.primary_keys))
        set_(self, "sequence_fields", tuple(self.sequence_fields))
        set_(self, "ignore_retract", frozenset(self.ignore_retract))
        set_(self, "aggregate_functions", MappingProxyType(dict(self.aggregate_functions)))
        set_(self, "listagg_delimiters", MappingProxyType(dict(self.listagg_delimiters)))
        set_(self, "listagg_distinct", frozenset(self.listagg_distinct))
        set_(self, "sequence_groups", tuple(self.sequence_groups))
        if self.sequence_groups:
            set_(self, "has_sequence_groups", True)
        self._validate()

    def _validate(self) -> None:
        if not self.key_columns:
            raise OptionError("primary-key", "a primary-key table needs at least one key column")
        for k in self.key_columns:
            if not k.startswith(KEY_PREFIX):
                raise OptionError("primary-key", f"key column {k!r} must start with {KEY_PREFIX}")
        values = set(self.value_columns)
        for f in self.sequence_fields:
            if f not in values:
                raise OptionError(SEQUENCE_FIELD.key, f"field {f!r} is not a table column")
        for col in self.aggregate_functions:
            if col not in values:
                raise OptionError(_agg_key(col), f"field {col!r} is not a table column")
        if self.has_sequence_groups and self.engine is not MergeEngine.PARTIAL_UPDATE:
            raise OptionError(self.sequence_groups[0].key if self.sequence_groups
                              else "merge-engine", "sequence groups need partial-update")
        if self.engine is MergeEngine.PARTIAL_UPDATE:
            self._validate_partial_update(values)

    def _validate_partial_update(self, values: set[str]) -> None:
        """PartialUpdateMergeFunction.Factory: the delete behaviours that conflict, the
        groups' columns, and functions other than last_non_null_value only in groups."""
        if self.listagg_distinct:
            column = sorted(self.listagg_distinct)[0]
            raise UnsupportedFeatureError(
                f"table option {FIELD_DISTINCT.for_field(column)}=true: a distinct listagg in "
                "a partial-update sequence group is not supported by lakecore (only by the "
                "aggregation engine); the table was left as it is")
        if self.ignore_delete and self.remove_record_on_delete:
            raise OptionError(
                PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE.key,
                f"{IGNORE_DELETE.key} and {PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE.key} have "
                "conflicting behavior so should not be enabled at the same time",
            )
        if self.has_sequence_groups and self.remove_record_on_delete:
            raise OptionError(
                PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE.key,
                f"sequence-group and {PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE.key} have "
                "conflicting behavior so should not be enabled at the same time",
            )
        if self.ignore_delete and any(g.remove_on_delete for g in self.sequence_groups):
            raise OptionError(
                PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP.key,
                f"{IGNORE_DELETE.key} and {PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP.key} "
                "have conflicting behavior so should not be enabled at the same time",
            )
        owner: dict[str, str] = {}
        for g in self.sequence_groups:
            for name in (*g.sequence_fields, *g.fields):
                if name not in values:
                    raise OptionError(g.key, f"field {name!r} is not a table column")
                if name in self.primary_keys:
                    raise OptionError(g.key, f"contains primary key field {name!r}")
            for name in g.fields:
                if name in owner or name in g.sequence_fields:
                    raise OptionError(g.key, f"field {name!r} is defined repeatedly by "
                                             "multiple groups")
                owner[name] = g.key
            for name in g.sequence_fields:
                if name in owner:
                    raise OptionError(g.key, f"sequence field {name!r} is in another group")
                owner[name] = g.key
        grouped = self.grouped_fields
        for col in self.value_columns:
            func = self.partial_update_function(col)
            if func not in (None, AggregateFunction.LAST_NON_NULL_VALUE) and col not in grouped:
                raise OptionError(
                    _agg_key(col),
                    f"partial-update needs a sequence group for aggregation functions (field "
                    f"{col!r}, {func}, own or from {FIELDS_DEFAULT_AGGREGATE_FUNCTION.key}): "
                    "add it to a 'fields.<sequence field>.sequence-group'",
                )

    @property
    def grouped_fields(self) -> frozenset[str]:
        """The fields the sequence groups protect (their sequence fields not included)."""
        return frozenset(f for g in self.sequence_groups for f in g.fields)

    @property
    def group_sequence_fields(self) -> frozenset[str]:
        return frozenset(f for g in self.sequence_groups for f in g.sequence_fields)

    def partial_update_function(self, column: str) -> AggregateFunction | None:
        """Paimon's partial-update ``getAggFuncName``: none for the groups' sequence fields
        and primary-key columns, else the field's own function, else
        ``fields.default-aggregate-function``; None means "no aggregator" (inside a group
        the newest record's value, null included; outside, the last non-null value)."""
        if column in self.group_sequence_fields or column in self.primary_keys:
            return None
        return self.aggregate_functions.get(column, self.default_aggregate_function)

    def aggregate_function(self, column: str) -> AggregateFunction:
        """Paimon's ``getAggFuncName`` order: sequence fields are ``last_value`` (they order
        records, they are not aggregated), primary-key columns are carried through, then the
        field's own function, then ``fields.default-aggregate-function``, then
        ``last_non_null_value``."""
        if column in self.sequence_fields:
            return AggregateFunction.LAST_VALUE
        if column in self.primary_keys:
            return AggregateFunction.PRIMARY_KEY
        func = self.aggregate_functions.get(column, self.default_aggregate_function)
        return func if func is not None else AggregateFunction.LAST_NON_NULL_VALUE

    def listagg_delimiter(self, column: str) -> str:
        return self.listagg_delimiters.get(column, DEFAULT_LISTAGG_DELIMITER)

    @classmethod
    def from_options(
        cls,
        options: CoreOptions,
        *,
        key_columns: Iterable[str],
        value_columns: Iterable[str],
    ) -> MergeSpec:
        """The spec of a table with these options (its primary key is ``options.primary_keys``),
        for the data file's ``key_columns`` and the ``value_columns`` being merged. Per-column
        settings of columns outside ``value_columns`` are left out. Partial-update: the
        sequence fields of the groups of ``value_columns`` (and of the groups that remove
        records) are added to ``value_columns``; read them too."""
        values = list(value_columns)
        groups = _sequence_groups(options, values) if (
            options.merge_engine is MergeEngine.PARTIAL_UPDATE) else ()
        has_groups = bool(groups) or (options.merge_engine is MergeEngine.PARTIAL_UPDATE
                                      and bool(options.sequence_groups))
        for g in groups:
            values.extend(f for f in g.sequence_fields if f not in values)

        def of_values(option: ConfigOption[T]) -> dict[str, T]:
            return {c: v for c, v in options.field_settings(option).items() if c in values}

        return cls(
            engine=options.merge_engine,
            key_columns=tuple(key_columns),
            value_columns=tuple(values),
            primary_keys=options.primary_keys,
            sequence_fields=options.sequence_field,
            ignore_delete=options.ignore_delete,
            remove_record_on_delete=options.remove_record_on_delete,
            aggregate_functions=of_values(FIELD_AGGREGATE_FUNCTION),
            default_aggregate_function=options.fields_default_aggregate_function,
            ignore_retract=frozenset(c for c, v in of_values(FIELD_IGNORE_RETRACT).items() if v),
            listagg_delimiters=of_values(FIELD_LIST_AGG_DELIMITER),
            listagg_distinct=frozenset(c for c, v in of_values(FIELD_DISTINCT).items() if v),
            sequence_descending=bool(options.sequence_field) and (
                options.sequence_field_descending),
            sequence_groups=groups,
            has_sequence_groups=has_groups,
        )


def _sequence_groups(options: CoreOptions, values: list[str]) -> tuple[SequenceGroup, ...]:
    """The table's sequence groups a merge of ``values`` needs: those with a field among
    ``values`` (its protected fields limited to them) and those that remove records."""
    remove = set(options.partial_update_remove_record_on_sequence_group or ())
    all_sequence = {f for g in options.sequence_groups for f in g.sequence_fields}
    if remove - all_sequence:
        raise OptionError(
            PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP.key,
            f"field(s) {sorted(remove - all_sequence)} must be sequence fields of sequence groups",
        )
    wanted = set(values)
    out = []
    for g in options.sequence_groups:
        missing = [f for f in (*g.sequence_fields, *g.fields)
                   if options.column_names and f not in options.column_names]
        if missing:  # Paimon: "Field %s can not be found in table schema"
            raise OptionError(g.key, f"field(s) {missing} can not be found in the table")
        fields = tuple(f for f in g.fields if f in wanted and f not in g.sequence_fields)
        removes = bool(remove & set(g.sequence_fields))
        if fields or removes or wanted & set(g.sequence_fields):
            out.append(SequenceGroup(g.key, g.sequence_fields, fields, removes))
    return tuple(out)


def _agg_key(column: str) -> str:
    return FIELD_AGGREGATE_FUNCTION.for_field(column)
