"""Spark's pushed filters as lakecore predicates.

A filter is taken over only when lakecore evaluates it exactly as Spark would (SQL null
semantics included): comparisons (``<=>`` with a non-null value too), ``IN``,
``IS [NOT] NULL``, string ``startsWith`` and the ``NOT`` of a comparison or null test, on
top-level columns of integer, boolean, string, date and decimal types.
PySpark 4.3 passes no ``AND``/``OR`` filters (a conjunction arrives split, a disjunction
is not pushed). Floating-point (NaN ordering), timestamps (time zones of the literal),
binary and nested columns stay with Spark; so does ``NOT IN`` (a null must drop the row).
Taken-over filters prune partitions and files on the driver (partition values and min/max
statistics) and rows on the executors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from lakecore.read.predicate import Predicate, PredicateBuilder
from lakecore.schema.types import TypeRoot
from lakecore.table import FileStoreTable

_EXACT_ROOTS = frozenset({TypeRoot.TINYINT, TypeRoot.SMALLINT, TypeRoot.INT, TypeRoot.BIGINT,
                          TypeRoot.BOOLEAN, TypeRoot.VARCHAR, TypeRoot.DATE, TypeRoot.DECIMAL})
_COMPARE = {EqualTo: "equal", EqualNullSafe: "equal", GreaterThan: "greater_than",
            GreaterThanOrEqual: "greater_or_equal", LessThan: "less_than",
            LessThanOrEqual: "less_or_equal"}
_NEGATED = {EqualTo: "not_equal", GreaterThan: "less_or_equal",
            GreaterThanOrEqual: "less_than", LessThan: "greater_or_equal",
            LessThanOrEqual: "greater_than"}


def _column(f: Filter, exact: set[str]) -> str | None:
    attr: tuple[str, ...] = tuple(getattr(f, "attribute", ()))
    if len(attr) != 1 or attr[0] not in exact:
        return None
    return str(attr[0])


def translate(f: Filter, pb: PredicateBuilder, exact: set[str]) -> Predicate | None:
    """The predicate equivalent to ``f``, or None when lakecore cannot take it over."""
    kind = type(f)
    if kind in _COMPARE:
        col = _column(f, exact)
        value = getattr(f, "value", None)
        if col is None or value is None:
            return None
        return Predicate(_COMPARE[kind], col, (value,))
    if kind is StringStartsWith:
        col = _column(f, exact)
        value = getattr(f, "value", None)
        if col is None or not isinstance(value, str) or col not in _strings(pb):
            return None
        return Predicate("startswith", col, (value,))
    if kind is In:
        col = _column(f, exact)
        values = tuple(getattr(f, "value", ()))
        if col is None or not values or any(v is None for v in values):
            return None
        return pb.is_in(col, list(values))
    if kind is IsNull or kind is IsNotNull:
        col = _column(f, exact)
        if col is None:
            return None
        return pb.is_null(col) if kind is IsNull else pb.is_not_null(col)
    if kind is Not:
        child: Filter = cast(Any, f).child
        return _negate(child, pb, exact)
    return None


def _strings(pb: PredicateBuilder) -> set[str]:
    return {f.name for f in pb.row_type.fields if f.type.root is TypeRoot.VARCHAR}


def _negate(f: Filter, pb: PredicateBuilder, exact: set[str]) -> Predicate | None:
    kind = type(f)
    if kind in _NEGATED:  # NOT (a > 1) is a <= 1: both drop a null a, as SQL does
        col = _column(f, exact)
        value = getattr(f, "value", None)
        if col is None or value is None:
            return None
        return Predicate(_NEGATED[kind], col, (value,))
    if kind is IsNull or kind is IsNotNull:
        col = _column(f, exact)
        if col is None:
            return None
        return pb.is_not_null(col) if kind is IsNull else pb.is_null(col)
    return None


def exact_columns(table: FileStoreTable) -> set[str]:
    """Columns whose filters lakecore evaluates exactly as Spark does."""
    return {f.name for f in table.schema.row_type.fields if f.type.root in _EXACT_ROOTS}


def translate_filters(
    filters: Sequence[Filter], pb: PredicateBuilder, table: FileStoreTable
) -> tuple[list[Predicate], list[Filter]]:
    """(the predicates taken over, the filters Spark must still apply)."""
    exact = exact_columns(table)
    handled: list[Predicate] = []
    rest: list[Filter] = []
    for f in filters:
        p = translate(f, pb, exact)
        if p is None:
            rest.append(f)
        else:
            handled.append(p)
    return handled, rest
