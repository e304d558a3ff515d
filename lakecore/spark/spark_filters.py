"""A lakecore ``Predicate`` as a Spark column expression with lakecore's own row semantics
(``Predicate.to_expression``: pyarrow's), for the files Spark reads natively.

Translated: comparisons, ``between``, ``is_null`` / ``is_not_null``, ``is_in`` / ``is_not_in``
(pyarrow's: a null value is in the set exactly when the set holds a null, so ``NOT IN`` keeps
a null row unless the set holds one), ``startswith``, and / or (both three-valued), on
integer, boolean, string, decimal and date columns. Not translated (the read then goes the
Python way): floating point (NaN orders and compares differently in Spark), timestamps (a
literal's time zone), binary and nested columns.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F  # noqa: N812

from lakecore.read.predicate import Predicate
from lakecore.schema import TableSchema
from lakecore.schema.types import TypeRoot

_ROOTS = frozenset({
    TypeRoot.BOOLEAN, TypeRoot.TINYINT, TypeRoot.SMALLINT, TypeRoot.INT, TypeRoot.BIGINT,
    TypeRoot.DECIMAL, TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.DATE,
})
_LITERALS = (bool, int, str, decimal.Decimal, dt.date)
_COMPARE = {
    "equal": lambda c, v: c == v, "not_equal": lambda c, v: c != v,
    "less_than": lambda c, v: c < v, "less_or_equal": lambda c, v: c <= v,
    "greater_than": lambda c, v: c > v, "greater_or_equal": lambda c, v: c >= v,
}


def translatable(p: Predicate, schema: TableSchema) -> bool:
    """Whether ``to_column`` gives exactly lakecore's rows for ``p`` over ``schema``."""
    if p.method in ("and", "or"):
        return all(translatable(c, schema) for c in p.children)
    if p.field is None or p.field not in schema.row_type.names:
        return False
    if schema.row_type.field(p.field).type.root not in _ROOTS:
        return False
    if p.method in ("is_null", "is_not_null"):
        return True
    if p.method not in (*_COMPARE, "between", "is_in", "is_not_in", "startswith"):
        return False
    nulls_ok = p.method in ("is_in", "is_not_in")
    return all((v is None and nulls_ok) or (isinstance(v, _LITERALS)
                                            and not isinstance(v, dt.datetime))
               for v in p.literals)


def to_column(p: Predicate) -> Column:
    """``p`` as a Spark condition (check ``translatable`` first)."""
    m = p.method
    if m in ("and", "or"):
        out = to_column(p.children[0])
        for c in p.children[1:]:
            out = (out & to_column(c)) if m == "and" else (out | to_column(c))
        return out
    col = F.col(_quoted(p.field))
    if m == "is_null":
        return col.isNull()
    if m == "is_not_null":
        return col.isNotNull()
    if m in _COMPARE:
        return _COMPARE[m](col, _lit(p.literals[0]))
    if m == "between":
        return (col >= _lit(p.literals[0])) & (col <= _lit(p.literals[1]))
    if m == "startswith":
        return col.startswith(p.literals[0])
    values = [_lit(v) for v in p.literals if v is not None]
    holds_null = any(v is None for v in p.literals)
    found = col.isin(values) if values else F.lit(False)
    member = F.when(col.isNull(), F.lit(holds_null)).otherwise(found)
    return member if m == "is_in" else ~member


def _lit(v: Any) -> Column:
    return F.lit(v)


def _quoted(name: str | None) -> str:
    assert name is not None
    return "`" + name.replace("`", "``") + "`"
