"""Hand-written merge cases, most taken from Paimon's own unit tests (named in comments)."""

from __future__ import annotations

import math
from datetime import datetime
from decimal import Decimal

import pyarrow as pa
import pytest

from lakecore.errors import MergeError, OptionError, UnsupportedFeatureError
from lakecore.merge import MergeEngine, merge_sorted, sort_kv
from tests.merge.helpers import kv_table, seq_rows, spec_for, spec_from_map

DEDUP, FIRST, PARTIAL, AGG = (
    MergeEngine.DEDUPLICATE,
    MergeEngine.FIRST_ROW,
    MergeEngine.PARTIAL_UPDATE,
    MergeEngine.AGGREGATION,
)
I32 = pa.int32()


def merge(rows, types, engine, *, drop=True, keys=("k",), **kw):
    spec = spec_for(engine, types, keys, **kw)
    out = merge_sorted(sort_kv(kv_table(rows, types, keys), spec), spec, drop_retracts=drop)
    return [{c: r[c] for c in ("_VALUE_KIND", "_SEQUENCE_NUMBER", *types)} for r in
            out.to_pylist()]


def values(result, *names):
    return [tuple(r[n] for n in names) for r in result]


INT_KV = {"k": I32, "v": I32}


# --- deduplicate ------------------------------------------------------------------------------

def test_deduplicate_last_record_wins():
    # ReducerMergeFunctionWrapperTestBase.WithDeduplicateMergeFunctionTest: the last kv wins.
    rows = seq_rows(("+I", 1, 1), ("+I", 2, -1), ("+I", 2, 1), ("+I", 3, 1), ("+I", 3, 2),
                    names=("k", "v"), start=1)
    assert values(merge(rows, INT_KV, DEDUP), "k", "v", "_SEQUENCE_NUMBER") == [
        (1, 1, 1), (2, 1, 3), (3, 2, 5)]


def test_deduplicate_keeps_the_delete_for_level0_and_drops_it_on_read():
    rows = seq_rows(("+I", 1, 1), ("-D", 1, 1), ("+I", 2, 5), ("+U", 2, 6), names=("k", "v"))
    assert values(merge(rows, INT_KV, DEDUP, drop=False), "k", "v", "_VALUE_KIND") == [
        (1, 1, 3), (2, 6, 2)]
    assert values(merge(rows, INT_KV, DEDUP, drop=True), "k", "v") == [(2, 6)]


def test_deduplicate_ignore_delete_drops_retractions_before_merging():
    rows = seq_rows(("+I", 1, 1), ("-D", 1, 1), ("-U", 2, 9), names=("k", "v"))
    assert values(merge(rows, INT_KV, DEDUP, drop=False, ignore_delete=True), "k", "v") == [
        (1, 1)]


def test_sequence_field_orders_records_before_the_sequence_number():
    types = {"k": I32, "ts": pa.int64(), "v": pa.string()}
    rows = seq_rows(("+I", 1, 5, "new"), ("+I", 1, 3, "old"), ("+I", 1, None, "null-ts"),
                    names=("k", "ts", "v"))
    out = merge(rows, types, DEDUP, sequence_fields=("ts",))
    # nulls sort first, so the record with the largest ts wins; sequence number is the max
    assert values(out, "v", "ts", "_SEQUENCE_NUMBER") == [("new", 5, 2)]


def test_unique_keys_come_back_unchanged():
    rows = seq_rows(("+I", 1, 1), ("+I", 2, 2), names=("k", "v"))
    spec = spec_for(DEDUP, INT_KV)
    table = kv_table(rows, INT_KV)
    assert merge_sorted(table, spec, drop_retracts=True) is table


# --- first-row --------------------------------------------------------------------------------

def test_first_row_keeps_the_first_record():
    rows = seq_rows(("+I", 1, 1), ("+U", 1, 2), ("+I", 2, 7), names=("k", "v"))
    assert values(merge(rows, INT_KV, FIRST), "k", "v", "_SEQUENCE_NUMBER", "_VALUE_KIND") == [
        (1, 1, 1, 0), (2, 7, 2, 0)]


def test_first_row_rejects_retractions_unless_ignore_delete():
    # FirstRowMergeFunction: "First row merge engine can not accept DELETE/UPDATE_BEFORE".
    rows = seq_rows(("+I", 1, 1), ("-D", 1, 1), ("+I", 1, 3), names=("k", "v"))
    with pytest.raises(MergeError, match="k=1"):
        merge(rows, INT_KV, FIRST)
    assert values(merge(rows, INT_KV, FIRST, ignore_delete=True), "v") == [(1,)]


def test_a_lone_retraction_is_passed_through_by_every_engine():
    # ReducerMergeFunctionWrapper: a single retraction record never reaches the merge function.
    rows = seq_rows(("-U", 1, 4), names=("k", "v"))
    for engine in MergeEngine:
        kw = {"aggregate_functions": {"v": "max"}} if engine is AGG else {}
        assert values(merge(rows, INT_KV, engine, drop=False, **kw), "v", "_VALUE_KIND") == [
            (4, 1)]
        assert merge(rows, INT_KV, engine, drop=True, **kw) == []


# --- partial-update ---------------------------------------------------------------------------

PU = {"k": I32, **{f"f{i}": I32 for i in range(1, 7)}}


def test_partial_update_takes_the_last_non_null_value():
    # PartialUpdateMergeFunctionTest.testUpdateNonNull
    rows = seq_rows(("+I", 1, 1, 1, 1, 1, 1, 1), ("+I", 1, 2, 2, 2, 2, 2, None), names=tuple(PU))
    assert values(merge(rows, PU, PARTIAL), *PU) == [(1, 2, 2, 2, 2, 2, 1)]


def test_partial_update_turns_a_single_update_after_into_insert():
    rows = seq_rows(("+U", 1, 1, None, None, None, None, None), names=tuple(PU))
    assert values(merge(rows, PU, PARTIAL), "f1", "_VALUE_KIND") == [(1, 0)]


def test_partial_update_rejects_deletes_by_default():
    # PartialUpdateMergeFunction: "By default, Partial update can not accept delete records".
    rows = seq_rows(("+I", 7, 1, 1, 1, 1, 1, 1), ("-D", 7, 1, 1, 1, 1, 1, 1), names=tuple(PU))
    with pytest.raises(MergeError, match="k=7.*ignore-delete"):
        merge(rows, PU, PARTIAL)
    assert values(merge(rows, PU, PARTIAL, ignore_delete=True), "f1") == [(1,)]


def test_partial_update_remove_record_on_delete():
    types = {"k": I32, "a": I32, "b": pa.string()}
    rows = seq_rows(("+I", 1, 1, "x"), ("-D", 1, 1, "x"),
                    ("+I", 2, 1, "x"), ("-D", 2, 1, "x"), ("+I", 2, None, "y"),
                    ("+I", 3, 1, "x"), ("-U", 3, 1, "x"), ("+U", 3, None, "z"),
                    names=("k", "a", "b"))
    out = merge(rows, types, PARTIAL, drop=False, remove_record_on_delete=True)
    # key 1 ends deleted; key 2 continues from its delete's values (PartialUpdateMergeFunction:
    # initRow(row, kv.value())); -U is ignored for key 3
    assert values(out, "k", "a", "b", "_VALUE_KIND") == [
        (1, 1, "x", 3), (2, 1, "y", 0), (3, 1, "z", 0)]
    assert values(merge(rows, types, PARTIAL, remove_record_on_delete=True), "k") == [(2,), (3,)]


def test_partial_update_option_conflicts():
    # PartialUpdateMergeFunction.Factory checkState; paimon-cpp TestConflictsInDeleteConfig.
    with pytest.raises(OptionError, match="conflicting"):
        spec_for(PARTIAL, PU, ignore_delete=True, remove_record_on_delete=True)
    # SchemaValidationTest.testPartialUpdateTableAggregateFunctionWithoutSequenceGroup
    with pytest.raises(OptionError, match="sequence group"):
        spec_for(PARTIAL, PU, aggregate_functions={"f3": "max"})
    spec_for(PARTIAL, PU, aggregate_functions={"f3": "last_non_null_value"})


# --- aggregation ------------------------------------------------------------------------------

AG = {"k": I32, "a": I32, "b": I32, "c": I32, "d": I32}


def test_default_aggregate_function():
    # AggregateMergeFunctionTest.testDefaultAggFunc
    rows = seq_rows(("+I", 1, None, 1, 1, 1), ("+I", 1, 2, None, 2, 2), ("+I", 1, 3, 3, None, 3),
                    ("+I", 1, 4, 4, 4, None), ("+I", 1, 5, 5, 5, 5), names=tuple(AG))
    out = merge(rows, AG, AGG, default_aggregate_function="first_non_null_value",
                aggregate_functions={"b": "sum"})
    assert values(out, *AG) == [(1, 2, 13, 1, 1)]


def test_listagg_with_delimiters():
    # AggregateMergeFunctionTest.tesListAggFunc
    types = {"k": I32, "a": pa.string(), "b": pa.string(), "c": I32, "d": pa.string()}
    rows = seq_rows(*[("+I", 1, str(i), str(i), i, str(i)) for i in range(1, 6)],
                    names=tuple(types))
    out = merge(rows, types, AGG, aggregate_functions={"a": "listagg", "b": "listagg",
                "d": "listagg"}, listagg_delimiters={"b": "-", "d": "/"})
    assert values(out, *types) == [(1, "1,2,3,4,5", "1-2-3-4-5", 5, "1/2/3/4/5")]


def test_listagg_skips_empty_strings():
    # FieldListaggAgg.agg (Paimon 1.4): an input of zero bytes keeps the accumulator, an empty
    # accumulator takes the input; checked against Java in tests/javapaimon
    types = {"k": I32, "a": pa.string()}
    rows = seq_rows(("+I", 1, "a"), ("+I", 1, ""), ("+I", 1, "b"), ("+I", 2, ""),
                    ("+I", 2, None), ("+I", 2, ""), ("+I", 3, None), ("+I", 4, ""),
                    ("+I", 4, "c"), names=tuple(types))
    out = merge(rows, types, AGG, aggregate_functions={"a": "listagg"})
    assert values(out, *types) == [(1, "a,b"), (2, ""), (3, None), (4, "c")]


def test_listagg_distinct():
    # FieldListaggAgg with fields.<f>.distinct: the first value whole, then only new non-empty
    # parts; the same inputs through Java 1.4.2 gave these (tests/javapaimon)
    types = {"k": I32, "a": pa.string()}
    rows = seq_rows(*[("+I", 1, v) for v in ("a,b,a", "b", "c,a,,d", "a", None, "d,e")],
                    *[("+I", 2, v) for v in ("x", "", ",,", " ", "x, y", "y")],
                    ("+I", 3, ""), ("+I", 3, "p,p"), names=tuple(types))
    out = merge(rows, types, AGG, aggregate_functions={"a": "listagg"},
                listagg_distinct={"a"})
    assert values(out, *types) == [(1, "a,b,a,c,d,e"), (2, "x, , y,y"), (3, "p,p")]


def test_listagg_distinct_in_a_sequence_group_is_refused():
    with pytest.raises(UnsupportedFeatureError, match="fields.a.distinct"):
        spec_from_map({"merge-engine": "partial-update", "fields.s.sequence-group": "a",
                       "fields.a.aggregate-function": "listagg", "fields.a.distinct": "true"},
                      key_columns=("_KEY_k",), value_columns=("s", "a"), primary_keys=("k",))


def test_remove_record_on_delete_returns_the_delete():
    # AggregateMergeFunctionTest.testInitRowWithNullableFieldOnDelete
    types = {"k": I32, "a": I32, "b": I32, "c": I32}
    rows = seq_rows(("+I", 1, 0, 0, 5), ("-D", 1, 2, 2, None), names=tuple(types))
    kw = {"default_aggregate_function": "sum", "remove_record_on_delete": True}
    assert values(merge(rows, types, AGG, drop=False, **kw), *types, "_VALUE_KIND") == [
        (1, 2, 2, None, 3)]
    assert merge(rows, types, AGG, **kw) == []
    # the records after the -D fold onto its values (AggregateMergeFunction: initRow)
    rows += seq_rows(("+I", 1, 7, None, 1), names=tuple(types), start=2)
    assert values(merge(rows, types, AGG, **kw), *types) == [(1, 9, 2, 1)]


@pytest.mark.parametrize(
    "type_, func, rows, expected",
    [
        # FieldAggregatorTest.testFieldSumIntAgg: agg(1, 10) = 11, retract(10, 5) = 5,
        # retract(null, 5) = -5
        (I32, "sum", [("+I", 1), ("+I", 10)], 11),
        (I32, "sum", [("+I", 10), ("-U", 5)], 5),
        (I32, "sum", [("-U", 5), ("+I", None)], -5),
        # FieldAggregatorTest.testFieldProductIntAgg / LongAgg / DoubleAgg: agg(1, 10) = 10,
        # retract(10, 5) = 2, retract(null, 5) is null
        (I32, "product", [("+I", 1), ("+I", 10)], 10),
        (I32, "product", [("+I", 10), ("-U", 5)], 2),
        (pa.int64(), "product", [("-U", 5), ("+I", None)], None),
        (pa.float64(), "product", [("-U", 5.0), ("+I", None)], None),
        (I32, "product", [("+I", -7), ("-D", 2)], -3),  # Java truncates toward zero
        # FieldAggregatorRetractNullTest.testLastValueAgg / testLastNonNullValueAgg
        (I32, "last_value", [("+I", 1), ("-U", 1)], None),
        (I32, "last_non_null_value", [("+I", 1), ("-U", 1)], None),
        (I32, "last_non_null_value", [("+I", 1), ("-U", None)], 1),
        # FieldAggregatorTest: first_value / first_non_null_value / max / min / bool
        (I32, "first_value", [("+I", None), ("+I", 2)], None),
        (I32, "first_non_null_value", [("+I", None), ("+I", 2), ("+I", 3)], 2),
        (I32, "max", [("+I", 1), ("+I", 10), ("+I", None)], 10),
        (I32, "min", [("+I", 1), ("+I", 10), ("+I", None)], 1),
        (pa.bool_(), "bool_and", [("+I", False), ("+I", True)], False),
        (pa.bool_(), "bool_or", [("+I", False), ("+I", True), ("+I", None)], True),
        (pa.string(), "listagg", [("+I", "user1"), ("+I", None), ("+I", "user2")], "user1,user2"),
        (pa.string(), "max", [("+I", "b"), ("+I", "ab"), ("+I", None)], "b"),
        (pa.timestamp("us"), "min", [("+I", datetime(2024, 5, 1)), ("+I", datetime(2023, 1, 1))],
         datetime(2023, 1, 1)),
        (pa.decimal128(5, 2), "max", [("+I", Decimal("1.50")), ("+I", Decimal("-3.00"))],
         Decimal("1.50")),
        (pa.decimal128(5, 2), "sum", [("+I", Decimal("1.50")), ("-U", Decimal("3.25"))],
         Decimal("-1.75")),
        (pa.decimal128(5, 2), "sum", [("+I", Decimal("999.99")), ("+I", Decimal("0.01"))],
         None),  # beyond DECIMAL(5, 2): Decimal.fromBigDecimal gives null
        (pa.float64(), "max", [("+I", 1.0), ("+I", math.nan)], math.nan),  # Double.compare
        (pa.float64(), "min", [("+I", 1.0), ("+I", math.nan)], 1.0),
    ],
)
def test_field_aggregators(type_, func, rows, expected):
    types = {"k": I32, "v": type_}
    out = merge(seq_rows(*[(kind, 1, v) for kind, v in rows], names=("k", "v")), types, AGG,
                aggregate_functions={"v": func})
    (got,) = values(out, "v")
    if isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(got[0])
    else:
        assert got == (pytest.approx(expected) if isinstance(expected, float) else expected,)


@pytest.mark.parametrize(
    "func", ["first_value", "first_non_null_value", "min", "max", "bool_and", "bool_or",
             "listagg"])
def test_aggregators_without_retract_reject_it_unless_ignore_retract(func):
    # FieldAggregatorRetractNullTest: "Aggregate function '...' does not support retraction"
    type_ = {"bool_and": pa.bool_(), "bool_or": pa.bool_(), "listagg": pa.string()}.get(func, I32)
    v = {pa.bool_(): True, pa.string(): "x"}.get(type_, 3)
    types = {"k": I32, "v": type_}
    rows = seq_rows(("+I", 1, v), ("-U", 1, v), names=("k", "v"))
    with pytest.raises(MergeError, match=f"'{func}'.*'v'.*k=1.*ignore-retract"):
        merge(rows, types, AGG, aggregate_functions={"v": func})
    out = merge(rows, types, AGG, aggregate_functions={"v": func}, ignore_retract={"v"})
    assert values(out, "v", "_VALUE_KIND") == [(v, 0)]


def test_aggregation_normalizes_kinds_and_carries_keys():
    types = {"k": I32, "v": pa.int64()}
    rows = seq_rows(("+U", 1, 2), ("+I", 2, 3), ("-U", 2, 1), names=("k", "v"))
    out = merge(rows, types, AGG, aggregate_functions={"v": "sum"})
    assert values(out, "k", "v", "_VALUE_KIND", "_SEQUENCE_NUMBER") == [(1, 2, 0, 0), (2, 2, 0, 2)]


def test_sequence_field_is_last_value_in_aggregation():
    types = {"k": I32, "ts": pa.int64(), "v": pa.int64()}
    rows = seq_rows(("+I", 1, 9, 1), ("+I", 1, 4, 2), names=tuple(types))
    out = merge(rows, types, AGG, sequence_fields=("ts",), default_aggregate_function="sum")
    assert values(out, "ts", "v", "_SEQUENCE_NUMBER") == [(9, 3, 1)]


def test_multi_column_and_string_keys():
    types = {"p": pa.string(), "id": pa.int64(), "v": pa.int64()}
    rows = seq_rows(("+I", "b", 1, 1), ("+I", "a", 2, 1), ("+I", "b", 1, 5), ("+I", "a", 1, 7),
                    ("+I", "a", 2, 2), names=tuple(types))
    out = merge(rows, types, AGG, keys=("p", "id"), aggregate_functions={"v": "sum"})
    assert values(out, "p", "id", "v") == [("a", 1, 7), ("a", 2, 3), ("b", 1, 6)]


def test_integer_product_division_by_zero_is_an_error():
    rows = seq_rows(("+I", 1, 4), ("-U", 1, 0), names=("k", "v"))
    with pytest.raises(MergeError, match="divides by zero.*k=1"):
        merge(rows, INT_KV, AGG, aggregate_functions={"v": "product"})


def test_type_mismatch_is_an_error():
    types = {"k": I32, "v": pa.string()}
    rows = seq_rows(("+I", 1, "a"), ("+I", 1, "b"), names=("k", "v"))
    with pytest.raises(MergeError, match="numeric"):
        merge(rows, types, AGG, aggregate_functions={"v": "sum"})


def test_unknown_value_kind_is_an_error():
    rows = seq_rows((5, 1, 1), names=("k", "v"))
    with pytest.raises(MergeError, match="_VALUE_KIND 5"):
        merge(rows, INT_KV, DEDUP)
