"""Integer ``sum`` and ``product`` are exact, and a product retraction from a null accumulator
leaves it null, as in Paimon 2.x (FieldSumAgg, FieldProductAgg).

Expected values are Paimon's: FieldAggregatorTest pins ``agg``/``retract`` results and that
every integer overflow throws ArithmeticException (Math.addExact / multiplyExact and their
byte/short forms); lakecore raises MergeError naming the field and the key instead.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakecore.errors import MergeError
from tests.core.helpers import make_table, read, write
from tests.merge.helpers import seq_rows
from tests.merge.test_merge_functions import AGG, merge, values

LIMITS = {pa.int8(): (-(2**7), 2**7 - 1), pa.int16(): (-(2**15), 2**15 - 1),
          pa.int32(): (-(2**31), 2**31 - 1), pa.int64(): (-(2**63), 2**63 - 1)}
NAMES = {pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INT",
         pa.int64(): "BIGINT"}


def fold(type_, func, rows, **kw):
    types = {"k": pa.int32(), "v": type_}
    out = merge(seq_rows(*[(kind, 1, v) for kind, v in rows], names=("k", "v")), types, AGG,
                aggregate_functions={"v": func}, **kw)
    return values(out, "v")


@pytest.mark.parametrize("type_", list(LIMITS))
def test_sum_overflow_raises(type_):
    """FieldAggregatorTest#testFieldSum{Byte,Short,Int,Long}Overflow: agg(MAX, 1),
    retract(MIN, 1) and retract(null, MIN) (negateExact) throw ArithmeticException."""
    lo, hi = LIMITS[type_]
    for rows in ([("+I", hi), ("+I", 1)], [("+I", lo), ("-U", 1)], [("-U", lo), ("+I", None)],
                 [("+I", lo), ("+I", -1)], [("+I", 1), ("-D", lo)]):
        with pytest.raises(MergeError, match=rf"'sum' of field 'v' overflows "
                                             rf"{NAMES[type_]}.*k=1"):
            fold(type_, "sum", rows)


def test_sum_overflow_of_an_intermediate_raises_even_if_the_total_fits():
    """FieldSumAgg adds record by record (Math.addExact): MAX + 1 throws before the -1 could
    bring the total back into range."""
    lo, hi = LIMITS[pa.int32()]
    with pytest.raises(MergeError, match="overflows INT"):
        fold(pa.int32(), "sum", [("+I", hi), ("+I", 1), ("+I", -1)])
    # Right at the limits is fine: MAX - 1 + 1 = MAX, MIN + 1 - 1 = MIN, retract(null, MAX).
    assert fold(pa.int32(), "sum", [("+I", hi - 1), ("+I", 1)]) == [(hi,)]
    assert fold(pa.int32(), "sum", [("+I", lo + 1), ("-U", 1)]) == [(lo,)]
    assert fold(pa.int32(), "sum", [("-U", hi), ("+I", None)]) == [(-hi,)]


def test_sum_overflow_is_found_among_many_keys():
    """Only the key whose running sum leaves BIGINT fails the merge; columnar prefix sums must
    not confuse keys (a large positive key next to a large negative one)."""
    hi = LIMITS[pa.int64()][1]
    rows = seq_rows(("+I", 1, hi), ("+I", 2, -hi), ("+I", 2, -1), ("+I", 3, hi), ("+I", 3, 1),
                    names=("k", "v"))
    with pytest.raises(MergeError, match=r"overflows BIGINT.*k=3"):
        merge(rows, {"k": pa.int32(), "v": pa.int64()}, AGG, aggregate_functions={"v": "sum"})
    ok = merge(rows[:3], {"k": pa.int32(), "v": pa.int64()}, AGG,
               aggregate_functions={"v": "sum"})
    assert values(ok, "k", "v") == [(1, hi), (2, -hi - 1)]


@pytest.mark.parametrize("type_", list(LIMITS))
def test_product_overflow_raises(type_):
    """FieldAggregatorTest#testFieldProduct{Byte,Short,Int,Long}Overflow (agg(MAX, 2),
    agg(MIN, -1)) and #testFieldProduct*RetractOverflow (retract(MIN, -1)) throw."""
    lo, hi = LIMITS[type_]
    for rows in ([("+I", hi), ("+I", 2)], [("+I", lo), ("+I", -1)], [("+I", lo), ("-U", -1)],
                 [("+I", 2), ("-U", 1), ("+I", hi)]):
        with pytest.raises(MergeError, match=rf"'product' of field 'v' overflows "
                                             rf"{NAMES[type_]}.*k=1"):
            fold(type_, "product", rows)


def test_product_at_the_limit_and_after_a_zero():
    """multiplyExact only throws when a step leaves the type: MIN = -2**62 * 2 is fine,
    and once the product is 0 it stays 0 (0 * MAX); an overflow before the zero throws."""
    lo, hi = LIMITS[pa.int64()]
    assert fold(pa.int64(), "product", [("+I", -(2**62)), ("+I", 2)]) == [(lo,)]
    assert fold(pa.int64(), "product", [("+I", 2**31), ("+I", 2**31), ("+I", 0),
                                        ("+I", hi)]) == [(0,)]
    with pytest.raises(MergeError, match="overflows BIGINT"):
        fold(pa.int64(), "product", [("+I", -(2**62)), ("+I", -2), ("+I", 0)])
    with pytest.raises(MergeError, match="overflows INT"):
        fold(pa.int32(), "product", [("+I", 100_000), ("+I", 100_000)])


def test_product_overflow_is_checked_among_many_keys():
    """Every key is folded on its own: 3**39 fits in BIGINT, 3**40 does not."""
    rows = [("+I", 1, 3)] * 39 + [("+I", 2, 3)] * 40 + [("+I", 3, 7)]
    types = {"k": pa.int32(), "v": pa.int64()}
    fine = seq_rows(*rows[:39], *rows[-1:], names=("k", "v"))
    assert values(merge(fine, types, AGG, aggregate_functions={"v": "product"}), "k", "v") == [
        (1, 3**39), (3, 7)]
    with pytest.raises(MergeError, match=r"overflows BIGINT.*k=2"):
        merge(seq_rows(*rows, names=("k", "v")), types, AGG,
              aggregate_functions={"v": "product"})


@pytest.mark.parametrize("type_", [pa.int8(), pa.int32(), pa.int64(), pa.float64()])
def test_product_retraction_from_null_leaves_null(type_):
    """FieldAggregatorTest#testFieldProduct{Byte,Int,Long}Agg: retract(null, 5) is null (Paimon
    #4842); then agg(null, 7) = 7. A retraction of a value divides: retract(10, 5) = 2."""
    five, seven, ten = (5.0, 7.0, 10.0) if pa.types.is_floating(type_) else (5, 7, 10)
    assert fold(type_, "product", [("-U", five), ("+U", seven)]) == [(seven,)]
    assert fold(type_, "product", [("-U", five), ("-U", seven)], drop=False) == [(None,)]
    assert fold(type_, "product", [("+I", ten), ("-U", five), ("+U", seven)]) == [(14,)]


def test_product_division_by_zero_only_with_a_value_to_divide():
    """FieldProductAgg.retract divides only a non-null accumulator: retract(null, 0) is null,
    retract(4, 0) throws ArithmeticException (/ by zero)."""
    assert fold(pa.int32(), "product", [("-U", 0), ("+U", 3)]) == [(3,)]
    with pytest.raises(MergeError, match="divides by zero.*k=1"):
        fold(pa.int32(), "product", [("+I", 4), ("-U", 0)])


def test_sum_overflow_before_a_delete_still_raises_with_remove_record_on_delete():
    """AggregateMergeFunction.add folds every record; a -D only resets the row afterwards, so
    an overflow among records the -D discards still throws."""
    hi = LIMITS[pa.int32()][1]
    with pytest.raises(MergeError, match="overflows INT"):
        fold(pa.int32(), "sum", [("+I", hi), ("+I", 1), ("-D", 0), ("+I", 5)],
             remove_record_on_delete=True)
    assert fold(pa.int32(), "sum", [("+I", hi), ("-D", 0), ("+I", 1), ("+I", 5)],
                remove_record_on_delete=True) == [(6,)]


def product_table(tmp_path, type_: pa.DataType):
    schema = pa.schema([pa.field("k", pa.int32(), nullable=False), ("v", type_),
                        ("op", pa.string())])
    return make_table(str(tmp_path), schema, primary_keys=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "fields.v.aggregate-function": "product",
        "rowkind.field": "op", "write-only": "true"})


def test_upsert_of_a_product_column_through_a_table(tmp_path):
    """The write buffer merges the upsert's -U 5 / +U 7 on their own first, as Paimon's
    MergeTreeWriter does: retract(null, 5) stays null (FieldProductAgg), agg(null, 7) = 7;
    the read then multiplies the flushed 7 into the committed 5: Paimon reads 35 (lakecore read
    0 before: 1 / 5 truncated to 0, times 7). A -U against the committed value in one buffer
    with it divides: 5 / 5 * 7 = 7."""
    t = product_table(tmp_path, pa.int64())
    write(t, {"k": [1, 2], "v": [5, 5], "op": ["+I", "+I"]})
    write(t, {"k": [1, 1], "v": [5, 7], "op": ["-U", "+U"]})
    assert [(r["k"], r["v"]) for r in read(t, "k")] == [(1, 35), (2, 5)]
    t.compact(full=True)
    assert [(r["k"], r["v"]) for r in read(t, "k")] == [(1, 35), (2, 5)]
    write(t, {"k": [2, 2, 2], "v": [3, 3, 7], "op": ["+I", "-U", "+U"]})
    assert [(r["k"], r["v"]) for r in read(t, "k")] == [(1, 35), (2, 35)]


def test_sum_overflow_through_a_table_raises_on_read(tmp_path):
    """A read whose merge overflows raises MergeError naming the field instead of returning a
    wrapped sum (FieldSumAgg: "long overflow"), and sums up to MAX read fine."""
    schema = pa.schema([pa.field("k", pa.int32(), nullable=False), ("n", pa.int64())])
    t = make_table(str(tmp_path), schema, primary_keys=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "fields.n.aggregate-function": "sum",
        "write-only": "true"})
    hi = int(np.iinfo(np.int64).max)
    write(t, {"k": [1, 2], "n": [hi, 1]})
    write(t, {"k": [2], "n": [2]})
    assert [(r["k"], r["n"]) for r in read(t, "k")] == [(1, hi), (2, 3)]
    write(t, {"k": [1], "n": [1]})
    with pytest.raises(MergeError, match=r"'sum' of field 'n' overflows BIGINT"):
        read(t)
