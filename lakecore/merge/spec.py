"""What a merge needs to know about a primary-key table: the row kinds, the merge engine, and
the per-column options (``merge-engine``, ``sequence.field``, ``ignore-delete``,
``*.remove-record-on-delete``, ``fields.<f>.aggregate-function`` ...), resolved once so the
columnar merge code never parses option strings.

Option keys, defaults and the function-resolution order follow Paimon's ``CoreOptions`` and
``AggregateMergeFunction.getAggFuncName``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

from lakecore.errors import OptionError
from lakecore.format.kv import KEY_PREFIX
from lakecore.options.registry import AggregateFunction, parse_aggregate_function


class MergeEngine(Enum):
    """The ``merge-engine`` option's values."""

    DEDUPLICATE = "deduplicate"
    PARTIAL_UPDATE = "partial-update"
    AGGREGATE = "aggregation"
    FIRST_ROW = "first-row"


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

DEFAULT_LISTAGG_DELIMITER = ","
_IGNORE_DELETE_KEYS = (
    "ignore-delete",
    "first-row.ignore-delete",
    "deduplicate.ignore-delete",
    "partial-update.ignore-delete",
)


def parse_agg_func(name: str, key: str) -> AggregateFunction:
    """An aggregate function by its option spelling; ``key`` names the option on error."""
    try:
        return parse_aggregate_function(name.strip().lower())
    except ValueError as e:
        raise OptionError(key, f"unsupported aggregate function {name!r}: {e}") from None


@dataclass(frozen=True)
class MergeSpec:
    """Everything the merge functions need, resolved.

    ``key_columns`` are the ``_KEY_<k>`` columns of the data file; ``value_columns`` the table
    columns after ``_VALUE_KIND``; ``primary_keys`` the table's primary key (partition columns
    included), which the aggregation engine carries through instead of aggregating.
    ``remove_record_on_delete`` is ``partial-update.remove-record-on-delete`` or
    ``aggregation.remove-record-on-delete`` depending on the engine (ignored by the others).
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
        funcs = {
            col: f if isinstance(f, AggregateFunction) else parse_agg_func(f, _agg_key(col))
            for col, f in self.aggregate_functions.items()
        }
        set_(self, "aggregate_functions", MappingProxyType(funcs))
        set_(self, "listagg_delimiters", MappingProxyType(dict(self.listagg_delimiters)))
        default = self.default_aggregate_function
        if default is not None and not isinstance(default, AggregateFunction):
            set_(self, "default_aggregate_function",
                 parse_agg_func(default, "fields.default-aggregate-function"))
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
                raise OptionError("sequence.field", f"field {f!r} is not a table column")
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
        options: Mapping[str, str],
        *,
        key_columns: Iterable[str],
        value_columns: Iterable[str],
        primary_keys: Iterable[str],
    ) -> MergeSpec:
        """Build a spec from a table's option map (Paimon's keys, Paimon's defaults)."""
        raw = {k: str(v) for k, v in options.items()}
        value_columns = tuple(value_columns)
        try:
            engine = MergeEngine(raw.get("merge-engine", MergeEngine.DEDUPLICATE.value).strip())
        except ValueError:
            raise OptionError("merge-engine", f"unknown merge engine {raw['merge-engine']!r}") \
                from None
        for k in raw:
            if k.endswith(".sequence-group") or k.endswith("remove-record-on-sequence-group"):
                raise OptionError(k, "sequence groups are not supported")
        if raw.get("sequence.field.sort-order", "ascending").strip().lower() != "ascending":
            raise OptionError("sequence.field.sort-order", "only 'ascending' is supported")
        seq = tuple(s.strip() for s in raw.get("sequence.field", "").split(",") if s.strip())
        ignore_delete = any(_bool(raw, k) for k in _IGNORE_DELETE_KEYS)
        remove_key = {
            MergeEngine.PARTIAL_UPDATE: "partial-update.remove-record-on-delete",
            MergeEngine.AGGREGATE: "aggregation.remove-record-on-delete",
        }.get(engine)
        funcs: dict[str, AggregateFunction] = {}
        ignore_retract: set[str] = set()
        delimiters: dict[str, str] = {}
        for col in value_columns:
            if (name := raw.get(_agg_key(col))) is not None:
                funcs[col] = parse_agg_func(name, _agg_key(col))
            if _bool(raw, f"fields.{col}.ignore-retract"):
                ignore_retract.add(col)
            if (delim := raw.get(f"fields.{col}.list-agg-delimiter")) is not None:
                delimiters[col] = delim
        default = raw.get("fields.default-aggregate-function")
        return cls(
            engine=engine,
            key_columns=tuple(key_columns),
            value_columns=value_columns,
            primary_keys=tuple(primary_keys),
            sequence_fields=seq,
            ignore_delete=ignore_delete,
            remove_record_on_delete=_bool(raw, remove_key) if remove_key else False,
            aggregate_functions=funcs,
            default_aggregate_function=(
                parse_agg_func(default, "fields.default-aggregate-function") if default else None
            ),
            ignore_retract=frozenset(ignore_retract),
            listagg_delimiters=delimiters,
        )


def _agg_key(column: str) -> str:
    return f"fields.{column}.aggregate-function"


def _bool(raw: Mapping[str, str], key: str) -> bool:
    value = raw.get(key)
    if value is None:
        return False
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise OptionError(key, f"expected 'true' or 'false', got {value!r}")
    return text == "true"
