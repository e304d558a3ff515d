"""pypaimon 2.1 and lakecore agree on exact integer aggregation: where a sum or product fits,
both read the same value; where it leaves the column's type, both refuse the read.

pypaimon's FieldSumAgg / FieldProductAgg (like Java Paimon 2.x: Math.addExact /
multiplyExact) raise ArithmeticError ("long overflow" / "int overflow") rather than wrap.
Only +I rows: pypaimon 2.1.0 refuses -U/-D rows in the aggregation engine.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakecore.errors import MergeError
from tests.compat.pypaimon_runner import PaimonDriverError, paimon_read, requires_paimon
from tests.core.helpers import make_table, read, write

BIG = 2**63 - 1
INT = 2**31 - 1


def agg_table(warehouse: str):
    schema = pa.schema([pa.field("k", pa.int32(), nullable=False), ("s", pa.int64()),
                        ("p", pa.int32())])
    return make_table(warehouse, schema, primary_keys=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "write-only": "true",
        "fields.s.aggregate-function": "sum", "fields.p.aggregate-function": "product"})


@requires_paimon
def test_sums_and_products_at_the_limit_read_the_same(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    t = agg_table(wh)
    write(t, {"k": [1, 2], "s": [BIG - 1, -BIG], "p": [2**15, -(2**15)]})
    write(t, {"k": [1, 2], "s": [1, -1], "p": [2**15 - 1, 2**16]})
    expected = [(1, BIG, 2**15 * (2**15 - 1)), (2, -BIG - 1, -(2**31))]
    assert [(r["k"], r["s"], r["p"]) for r in read(t, "k")] == expected
    theirs = paimon_read(wh, "db.t").sort_by("k").to_pylist()
    assert [(r["k"], r["s"], r["p"]) for r in theirs] == expected


@requires_paimon
@pytest.mark.parametrize(("column", "rows", "pypaimon_says", "we_say"), [
    ("s", ([BIG], [1]), "long overflow", "'sum' of field 's' overflows BIGINT"),
    ("p", ([2**16], [2**16]), "int overflow", "'product' of field 'p' overflows INT"),
])
def test_overflow_is_refused_by_both(tmp_path: Path, column, rows, pypaimon_says,
                                     we_say) -> None:
    wh = str(tmp_path / "wh")
    t = agg_table(wh)
    for values in rows:
        other = "p" if column == "s" else "s"
        write(t, {"k": [1], column: values, other: [1]})
    with pytest.raises(MergeError, match=we_say):
        read(t)
    with pytest.raises(PaimonDriverError) as info:
        paimon_read(wh, "db.t")
    assert pypaimon_says in info.value.stderr
