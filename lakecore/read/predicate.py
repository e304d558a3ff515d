"""Filters in pypaimon's shape (``PredicateBuilder``), usable three ways: on rows (as a
pyarrow expression), on a partition's values, and on file statistics for pruning."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.errors import SchemaError
from lakecore.schema.types import RowType

_CMP: dict[str, Callable[[Any, Any], bool]] = {
    "equal": lambda a, b: a == b,
    "not_equal": lambda a, b: a != b,
    "less_than": lambda a, b: a < b,
    "less_or_equal": lambda a, b: a <= b,
    "greater_than": lambda a, b: a > b,
    "greater_or_equal": lambda a, b: a >= b,
}


@dataclass(frozen=True)
class Predicate:
    """A filter as a value: a leaf comparison or an and/or of predicates."""

    method: str  # a leaf comparison, is_null, is_not_null, is_in, is_not_in, between, and, or
    field: str | None = None
    literals: tuple[Any, ...] = ()
    children: tuple[Predicate, ...] = ()

    def columns(self) -> set[str]:
        if self.children:
            return set().union(*(c.columns() for c in self.children))
        return {self.field} if self.field else set()

    # -- rows ----------------------------------------------------------------------------
    def to_expression(self) -> pc.Expression:
        m = self.method
        if m == "and":
            out = self.children[0].to_expression()
            for c in self.children[1:]:
                out = out & c.to_expression()
            return out
        if m == "or":
            out = self.children[0].to_expression()
            for c in self.children[1:]:
                out = out | c.to_expression()
            return out
        f = pc.field(self.field)
        lit = tuple(_arrow_literal(v) for v in self.literals)
        if m == "equal":
            return f == lit[0]
        if m == "not_equal":
            return f != lit[0]
        if m == "less_than":
            return f < lit[0]
        if m == "less_or_equal":
            return f <= lit[0]
        if m == "greater_than":
            return f > lit[0]
        if m == "greater_or_equal":
            return f >= lit[0]
        if m == "is_null":
            return f.is_null()
        if m == "is_not_null":
            return f.is_valid()
        if m == "is_in":
            return f.isin(_value_set(self.literals))
        if m == "is_not_in":
            return ~f.isin(_value_set(self.literals))
        if m == "between":
            return (f >= lit[0]) & (f <= lit[1])
        if m == "startswith":
            return pc.starts_with(f, lit[0])
        raise SchemaError(f"unknown predicate {m!r}")

    # -- one row of values (partitions) --------------------------------------------------
    def test(self, values: dict[str, Any]) -> bool:
        m = self.method
        if m == "and":
            return all(c.test(values) for c in self.children)
        if m == "or":
            return any(c.test(values) for c in self.children)
        v = values[self.field]  # type: ignore[index]
        if m == "is_null":
            return v is None
        if m == "is_not_null":
            return v is not None
        if v is None:
            return False
        if m in _CMP:
            return _CMP[m](v, self.literals[0])
        if m == "is_in":
            return v in self.literals
        if m == "is_not_in":
            return v not in self.literals
        if m == "between":
            return self.literals[0] <= v <= self.literals[1]
        if m == "startswith":
            return str(v).startswith(self.literals[0])
        raise SchemaError(f"unknown predicate {m!r}")

    # -- statistics ----------------------------------------------------------------------
    def may_match(
        self, mins: dict[str, Any], maxs: dict[str, Any], nulls: dict[str, int | None],
        row_count: int,
    ) -> bool:
        """False only when no row with these column stats can satisfy the predicate."""
        m = self.method
        if m == "and":
            return all(c.may_match(mins, maxs, nulls, row_count) for c in self.children)
        if m == "or":
            return any(c.may_match(mins, maxs, nulls, row_count) for c in self.children)
        f = self.field
        if f not in mins:
            return True
        lo, hi, nc = mins[f], maxs[f], nulls.get(f)
        if m == "is_null":
            return nc is None or nc > 0
        if m == "is_not_null":
            return nc is None or nc < row_count
        if m == "is_in" and None in self.literals and (nc is None or nc > 0):
            return True  # a null value is in a set holding null (the row semantics')
        if lo is None or hi is None:
            # all null (when null count says so) or no stats
            return not (nc is not None and nc == row_count)
        try:
            if m == "equal":
                return lo <= self.literals[0] <= hi
            if m == "less_than":
                return lo < self.literals[0]
            if m == "less_or_equal":
                return lo <= self.literals[0]
            if m == "greater_than":
                return hi > self.literals[0]
            if m == "greater_or_equal":
                return hi >= self.literals[0]
            if m == "is_in":
                return any(lo <= x <= hi for x in self.literals if x is not None)
            if m == "between":
                return not (self.literals[1] < lo or self.literals[0] > hi)
        except TypeError:
            return True
        return True


def _arrow_literal(value: Any) -> Any:
    """A literal as pyarrow compares it with a column: a ``pandas.Timestamp`` keeps its
    nanoseconds (pyarrow infers microseconds for one and would cut a TIMESTAMP(7..9)
    literal short, so ``equal`` missed the row and ``greater_than`` took it)."""
    if isinstance(value, pd.Timestamp):
        return pa.scalar(value, type=_nanos(value))
    return value


def _value_set(literals: tuple[Any, ...]) -> Any:
    """``is_in`` values: with a ``pandas.Timestamp`` among them, a nanosecond array."""
    stamp = next((v for v in literals if isinstance(v, pd.Timestamp)), None)
    if stamp is None:
        return list(literals)
    return pa.array(list(literals), type=_nanos(stamp))


def _nanos(stamp: pd.Timestamp) -> pa.DataType:
    return pa.timestamp("ns", None if stamp.tz is None else str(stamp.tz))


class PredicateBuilder:
    """Builds predicates over a row type, checking column names (pypaimon's shape)."""

    def __init__(self, row_type: RowType) -> None:
        self.row_type = row_type

    def _leaf(self, method: str, field: str, *literals: Any) -> Predicate:
        if field not in self.row_type.names:
            raise SchemaError(f"filter names unknown column {field!r}")
        return Predicate(method, field, tuple(literals))

    def equal(self, field: str, literal: Any) -> Predicate:
        return self._leaf("equal", field, literal)

    def not_equal(self, field: str, literal: Any) -> Predicate:
        return self._leaf("not_equal", field, literal)

    def less_than(self, field: str, literal: Any) -> Predicate:
        return self._leaf("less_than", field, literal)

    def less_or_equal(self, field: str, literal: Any) -> Predicate:
        return self._leaf("less_or_equal", field, literal)

    def greater_than(self, field: str, literal: Any) -> Predicate:
        return self._leaf("greater_than", field, literal)

    def greater_or_equal(self, field: str, literal: Any) -> Predicate:
        return self._leaf("greater_or_equal", field, literal)

    def is_null(self, field: str) -> Predicate:
        return self._leaf("is_null", field)

    def is_not_null(self, field: str) -> Predicate:
        return self._leaf("is_not_null", field)

    def is_in(self, field: str, literals: Sequence[Any]) -> Predicate:
        return self._leaf("is_in", field, *literals)

    def is_not_in(self, field: str, literals: Sequence[Any]) -> Predicate:
        return self._leaf("is_not_in", field, *literals)

    def between(self, field: str, included_lower: Any, included_upper: Any) -> Predicate:
        return self._leaf("between", field, included_lower, included_upper)

    def startswith(self, field: str, prefix: str) -> Predicate:
        return self._leaf("startswith", field, prefix)

    @staticmethod
    def and_predicates(predicates: Sequence[Predicate]) -> Predicate:
        return (
            predicates[0] if len(predicates) == 1 else Predicate("and", children=tuple(predicates))
        )

    @staticmethod
    def or_predicates(predicates: Sequence[Predicate]) -> Predicate:
        return (
            predicates[0] if len(predicates) == 1 else Predicate("or", children=tuple(predicates))
        )


def split_and(p: Predicate | None) -> list[Predicate]:
    if p is None:
        return []
    if p.method == "and":
        return [x for c in p.children for x in split_and(c)]
    return [p]
