"""What a merge needs to know about a primary-key table: the row kinds, the merge engine, and
the per-column options (``merge-engine``, ``sequence.field``, ``ignore-delete``,
``*.remove-record-on-delete``, ``fields.<f>.aggregate-function`` ...). ``MergeSpec.from_options``
takes them from a table's ``CoreOptions``, which parsed and resolved them once (Paimon's keys,
defaults and fallback keys), so the columnar merge code never reads option strings.

The function-resolution order follows Paimon's ``AggregateMergeFunction.getAggFuncName``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from lakecore.errors import OptionError
from lakecore.format.kv import KEY_PREFIX
from lakecore.options import AggregateFunction, CoreOptions, MergeEngine
from lakecore.options.registry import (
    FIELD_AGGREGATE_FUNCTION,
    FIELD_IGNORE_RETRACT,
    FIELD_LIST_AGG_DELIMITER,
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
# Paimon merge features lakecore does not implement. Their keys are not in the option registry,
# so a strict map refuses them; a table another engine wrote keeps them as unknown keys.
_SEQUENCE_GROUP_SUFFIXES = (".sequence-group", "remove-record-on-sequence-group")
_SORT_ORDER_KEY = "sequence.field.sort-order"


@dataclass(frozen=True)
class MergeSpec:
    """Everything the merge functions need, resolved.

    ``key_columns`` are the ``_KEY_<k>`` columns of the data file; ``value_columns`` the table
    columns after ``_VALUE_KIND``; ``primary_keys`` the table's primary key (partition columns
    included), which the aggregation engine carries through instead of aggregating.
    ``remove_record_on_delete`` is ``partial-update.remove-record-on-delete`` or
    ``aggregation.remove-record-on-delete`` depending on the engine (ignored by the others).
    Every value is typed: build one with ``from_options``, or directly in tests.
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

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "key_columns", tuple(self.key_columns))
        set_(self, "value_columns", tuple(self.value_columns))
        set_(self, "primary_keys", tuple(self.primary_keys))
        set_(self, "sequence_fields", tuple(self.sequence_fields))
        set_(self, "ignore_retract", frozenset(self.ignore_retract))
        set_(self, "aggregate_functions", MappingProxyType(dict(self.aggregate_functions)))
        set_(self, "listagg_delimiters", MappingProxyType(dict(self.listagg_delimiters)))
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
        if self.engine is MergeEngine.PARTIAL_UPDATE:
            # PartialUpdateMergeFunction.Factory: the two delete behaviours conflict, and any
            # aggregator but last_non_null_value needs a sequence group (not supported here).
            if self.ignore_delete and self.remove_record_on_delete:
                raise OptionError(
                    "partial-update.remove-record-on-delete",
                    "ignore-delete and partial-update.remove-record-on-delete have conflicting "
                    "behavior so should not be enabled at the same time",
                )
            for col in self.value_columns:
                if col in self.primary_keys or col in self.sequence_fields:
                    continue
                func = self.aggregate_functions.get(col, self.default_aggregate_function)
                if func not in (None, AggregateFunction.LAST_NON_NULL_VALUE):
                    raise OptionError(
                        _agg_key(col),
                        "partial-update needs a sequence group for aggregation functions "
                        f"(field {col!r}); sequence groups are not supported",
                    )

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
        settings of columns outside ``value_columns`` are left out."""
        _refuse_unsupported(options)
        values = tuple(value_columns)

        def of_values(option: ConfigOption[T]) -> dict[str, T]:
            return {c: v for c, v in options.field_settings(option).items() if c in values}

        return cls(
            engine=options.merge_engine,
            key_columns=tuple(key_columns),
            value_columns=values,
            primary_keys=options.primary_keys,
            sequence_fields=options.sequence_field,
            ignore_delete=options.ignore_delete,
            remove_record_on_delete=options.remove_record_on_delete,
            aggregate_functions=of_values(FIELD_AGGREGATE_FUNCTION),
            default_aggregate_function=options.fields_default_aggregate_function,
            ignore_retract=frozenset(c for c, v in of_values(FIELD_IGNORE_RETRACT).items() if v),
            listagg_delimiters=of_values(FIELD_LIST_AGG_DELIMITER),
        )


def _refuse_unsupported(options: CoreOptions) -> None:
    """Sequence groups and a descending ``sequence.field.sort-order`` are not implemented."""
    raw = options.to_map()
    for key in raw:
        if key.endswith(_SEQUENCE_GROUP_SUFFIXES):
            raise OptionError(key, "sequence groups are not supported")
    order = raw.get(_SORT_ORDER_KEY, "ascending")
    if order.strip().lower() != "ascending":
        raise OptionError(_SORT_ORDER_KEY, "only 'ascending' is supported")


def _agg_key(column: str) -> str:
    return FIELD_AGGREGATE_FUNCTION.for_field(column)
