"""Validation of a user's table definition (a ``Schema``'s parts) before a table is created.

Everything that can be checked without I/O is checked here, so a bad definition fails before any
file is written, with an error that names the column or option key. The rules follow Paimon's
``Schema`` normalisation and ``SchemaValidation``; where Paimon silently ignores a mistake
(cross-partition upserts, which need a global key index) lakecore refuses it and says what to
change. Nullable
primary-key columns are made NOT NULL by ``Schema`` first, as Paimon does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from lakecore.errors import OptionError, SchemaError
from lakecore.options import AggregateFunction, CoreOptions
from lakecore.options.registry import (
    BUCKET,
    BUCKET_KEY,
    FIELD_AGGREGATE_FUNCTION,
    FIELDS_DEFAULT_AGGREGATE_FUNCTION,
    PARTITION_TIMESTAMP_PATTERN,
    PATH,
    ROWKIND_FIELD,
    SEQUENCE_FIELD,
)
from lakecore.schema.special_fields import KEY_PREFIX, SYSTEM_FIELD_NAMES
from lakecore.schema.types import DataField, DataType, TypeRoot

_NUMERIC = frozenset(
    {
        TypeRoot.TINYINT,
        TypeRoot.SMALLINT,
        TypeRoot.INT,
        TypeRoot.BIGINT,
        TypeRoot.FLOAT,
        TypeRoot.DOUBLE,
        TypeRoot.DECIMAL,
    }
)
# The types Paimon's docs list for a sequence group's sequence fields ("valid comparative data
# types", partial-update.md).
_SEQUENCE_GROUP_ROOTS = _NUMERIC | {
    TypeRoot.DATE, TypeRoot.TIME, TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ,
}
_PATTERN_REF = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def validate_schema(
    fields: Sequence[DataField],
    partition_keys: Sequence[str],
    primary_keys: Sequence[str],
    options: Mapping[str, str],
) -> None:
    """Everything checkable before a table exists, each error naming the column or key.

    Takes the parts of a ``Schema`` (``lakecore.schema.schema``), which calls it when built."""
    names = [f.name for f in fields]
    if not names:
        raise SchemaError("a table needs at least one column")
    _check_unique("column", names)
    for name in names:
        if name in SYSTEM_FIELD_NAMES or name.startswith(KEY_PREFIX):
            raise SchemaError(
                f"column name {name!r} is reserved by Paimon (system columns are "
                f"{sorted(SYSTEM_FIELD_NAMES)} and names starting with {KEY_PREFIX!r})"
            )
    by_name = {f.name: f for f in fields}
    _check_keys("partition key", partition_keys, by_name)
    _check_keys("primary key", primary_keys, by_name)
    for key in primary_keys:
        if by_name[key].type.nullable:  # ``Schema`` makes them NOT NULL before validating
            raise SchemaError(f"primary-key column {key!r} must be NOT NULL")
    if primary_keys and set(primary_keys) <= set(partition_keys):
        raise SchemaError(
            f"primary key {list(primary_keys)} must not consist of partition keys only "
            f"({list(partition_keys)}): each partition would hold a single row"
        )
    if PATH.key in options:
        raise OptionError(PATH.key, "is set by the catalog, not in the table's options")
    core = CoreOptions.from_map(options, primary_keys=primary_keys, column_names=names)
    _check_bucket(partition_keys, primary_keys, core, by_name)
    _check_merge_columns(partition_keys, primary_keys, core, by_name)
    _check_partition_pattern(partition_keys, core)


def _check_unique(what: str, names: Sequence[str]) -> None:
    repeated = sorted({n for n in names if list(names).count(n) > 1})
    if repeated:
        raise SchemaError(f"duplicate {what} name(s): {repeated}")


def _check_keys(what: str, keys: Sequence[str], by_name: Mapping[str, DataField]) -> None:
    _check_unique(what, keys)
    for key in keys:
        if key not in by_name:
            raise SchemaError(f"{what} {key!r} is not a column (columns: {list(by_name)})")
        if by_name[key].type.is_nested:
            raise SchemaError(
                f"{what} {key!r} has nested type {by_name[key].type}; "
                f"{what} columns must be of an atomic type"
            )


def _check_bucket(
    partition_keys: Sequence[str],
    primary_keys: Sequence[str],
    options: CoreOptions,
    by_name: Mapping[str, DataField],
) -> None:
    bucket = options.bucket
    if primary_keys:
        if bucket == -1:  # Paimon's default for a primary-key table: dynamic bucket mode
            _check_dynamic_bucket(partition_keys, primary_keys)
    elif bucket == -2:
        raise OptionError(BUCKET.key, "-2 (postpone bucket mode) needs a primary key")
    elif bucket >= 1 and not options.bucket_key:
        raise OptionError(
            BUCKET_KEY.key,
            f"an append table with bucket = {bucket} needs 'bucket-key' (the columns to hash)",
        )
    for key in options.bucket_key:
        if key in partition_keys:
            raise OptionError(BUCKET_KEY.key, f"{key!r} is a partition key; bucket keys cannot be")
        if key in by_name and by_name[key].type.is_nested:
            raise OptionError(BUCKET_KEY.key, f"{key!r} has nested type {by_name[key].type}")


def _check_dynamic_bucket(partition_keys: Sequence[str], primary_keys: Sequence[str]) -> None:
    """Dynamic buckets keep a HASH index per partition, so a key must stay in its partition:
    a primary key without every partition key (cross-partition upsert) needs Paimon's global
    key index, which neither pypaimon nor lakecore maintains."""
    missing = [k for k in partition_keys if k not in primary_keys]
    if missing:
        raise OptionError(
            BUCKET.key,
            f"-1 (dynamic bucket mode, the default for a primary-key table) with primary key "
            f"{list(primary_keys)} not containing partition key(s) {missing} is a "
            "cross-partition upsert: it needs a global index of every key, which lakecore "
            "(like pypaimon) does not maintain; include the partition keys in the primary key, "
            "or set a fixed number of buckets, e.g. 'bucket': '4'",
        )


def _check_merge_columns(
    partition_keys: Sequence[str],
    primary_keys: Sequence[str],
    options: CoreOptions,
    by_name: Mapping[str, DataField],
) -> None:
    """Rules that need column types or partition keys, beyond ``lakecore.options.checks``."""
    if options.sequence_field:
        if not set(partition_keys) <= set(primary_keys):
            raise OptionError(
                SEQUENCE_FIELD.key,
                f"cannot be used when the primary key {list(primary_keys)} does not "
                f"contain every partition key {list(partition_keys)}",
            )
        for name in options.sequence_field:
            if by_name[name].type.is_nested:
                raise OptionError(SEQUENCE_FIELD.key, f"{name!r} has a nested type")
    for group in options.sequence_groups:
        for name in group.sequence_fields:
            data_type = by_name[name].type
            if data_type.root not in _SEQUENCE_GROUP_ROOTS:
                raise OptionError(
                    group.key,
                    f"sequence field {name!r} is {data_type}; a sequence group compares "
                    "DECIMAL, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DATE, TIME, "
                    "TIMESTAMP or TIMESTAMP_LTZ (Paimon's partial-update docs)",
                )
    rowkind = options.rowkind_field
    if rowkind is not None and not by_name[rowkind].type.is_string:
        raise OptionError(
            ROWKIND_FIELD.key,
            f"column {rowkind!r} is {by_name[rowkind].type}; it must be a string column",
        )
    for name, column in by_name.items():
        function = options.field_aggregate_function(name)
        if function is None:
            continue
        problem = _aggregate_type_problem(function, column.type)
        if problem is not None:
            own = options.field_settings(FIELD_AGGREGATE_FUNCTION).get(name) is not None
            key = FIELD_AGGREGATE_FUNCTION.for_field(name) if own else (
                FIELDS_DEFAULT_AGGREGATE_FUNCTION.key
            )
            raise OptionError(key, f"{function} on {name!r} ({column.type}): {problem}")


def _aggregate_type_problem(function: AggregateFunction, data_type: DataType) -> str | None:
    """Paimon's type rule for each aggregate function (FieldAggregatorFactory.create)."""
    root = data_type.root
    if function in (AggregateFunction.SUM, AggregateFunction.PRODUCT) and root not in _NUMERIC:
        return "needs a numeric column"
    if function in (AggregateFunction.MIN, AggregateFunction.MAX) and data_type.is_nested:
        return "needs a comparable (atomic) column"
    if function in (AggregateFunction.BOOL_AND, AggregateFunction.BOOL_OR) and (
        root is not TypeRoot.BOOLEAN
    ):
        return "needs a BOOLEAN column"
    if function is AggregateFunction.LISTAGG and root is not TypeRoot.VARCHAR:
        return "needs a VARCHAR/STRING column"
    return None


def _check_partition_pattern(partition_keys: Sequence[str], options: CoreOptions) -> None:
    pattern = options.partition_timestamp_pattern
    if pattern is None:
        return
    if not partition_keys:
        raise OptionError(PARTITION_TIMESTAMP_PATTERN.key, "needs a partitioned table")
    unknown = [n for n in _PATTERN_REF.findall(pattern) if n not in partition_keys]
    if unknown:
        raise OptionError(
            PARTITION_TIMESTAMP_PATTERN.key,
            f"refers to {['$' + n for n in unknown]}, which are not partition keys "
            f"{list(partition_keys)}",
        )
