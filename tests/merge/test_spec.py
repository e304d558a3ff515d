"""``MergeSpec.from_options`` takes Paimon's option keys, with Paimon's defaults, from a
table's ``CoreOptions``."""

from __future__ import annotations

import pytest

from lakecore.errors import OptionError
from lakecore.format.kv import RowKind
from lakecore.merge import AggregateFunction, MergeEngine
from tests.merge.helpers import spec_from_map

COLS = dict(key_columns=("_KEY_id",), value_columns=("dt", "id", "a", "b", "s", "ts"),
            primary_keys=("dt", "id"))


def test_defaults():
    spec = spec_from_map({}, **COLS)
    assert spec.engine is MergeEngine.DEDUPLICATE
    assert spec.sequence_fields == () and not spec.ignore_delete
    assert not spec.remove_record_on_delete


def test_aggregation_options():
    spec = spec_from_map(
        {
            "merge-engine": "aggregation",
            "sequence.field": "ts, b",
            "fields.a.aggregate-function": "sum",
            "fields.s.aggregate-function": "listagg",
            "fields.s.list-agg-delimiter": "|",
            "fields.a.ignore-retract": "true",
            "fields.b.aggregate-function": "first_not_null_value",  # legacy spelling
            "fields.default-aggregate-function": "max",
            "aggregation.remove-record-on-delete": "TRUE",
        },
        **COLS,
    )
    assert spec.sequence_fields == ("ts", "b")
    assert spec.remove_record_on_delete and spec.ignore_retract == {"a"}
    # AggregateMergeFunction.getAggFuncName: sequence field, primary key, field, default
    assert spec.aggregate_function("ts") is AggregateFunction.LAST_VALUE
    assert spec.aggregate_function("b") is AggregateFunction.LAST_VALUE
    assert spec.aggregate_function("id") is AggregateFunction.PRIMARY_KEY
    assert spec.aggregate_function("dt") is AggregateFunction.PRIMARY_KEY
    assert spec.aggregate_function("a") is AggregateFunction.SUM
    assert spec.aggregate_function("s") is AggregateFunction.LISTAGG
    assert spec.listagg_delimiter("s") == "|" and spec.listagg_delimiter("a") == ","


def test_aggregation_default_function_is_last_non_null_value():
    spec = spec_from_map({"merge-engine": "aggregation"}, **COLS)
    assert spec.aggregate_function("a") is AggregateFunction.LAST_NON_NULL_VALUE


@pytest.mark.parametrize("key", ["ignore-delete", "first-row.ignore-delete",
                                 "deduplicate.ignore-delete", "partial-update.ignore-delete"])
def test_ignore_delete_and_its_aliases(key):
    assert spec_from_map({key: "true"}, **COLS).ignore_delete


def test_ignore_delete_follows_paimons_fallback_order():
    # Options.get: the key itself, else the first old spelling set, in the declared order
    mixed = {"ignore-delete": "false", "partial-update.ignore-delete": "true"}
    assert not spec_from_map(mixed, **COLS).ignore_delete
    old = {"partial-update.ignore-delete": "false", "first-row.ignore-delete": "true"}
    assert spec_from_map(old, **COLS).ignore_delete


def test_remove_record_on_delete_is_read_for_its_own_engine():
    opts = {"partial-update.remove-record-on-delete": "true"}
    assert spec_from_map({"merge-engine": "partial-update", **opts},
                         **COLS).remove_record_on_delete
    assert not spec_from_map({"merge-engine": "aggregation", **opts},
                             **COLS).remove_record_on_delete


@pytest.mark.parametrize(
    "options, key",
    [
        ({"merge-engine": "nope"}, "merge-engine"),
        ({"ignore-delete": "yes"}, "ignore-delete"),
        ({"merge-engine": "aggregation", "fields.a.aggregate-function": "avg"},
         "fields.a.aggregate-function"),
        ({"fields.default-aggregate-function": "primary_key"}, "fields.default-aggregate-function"),
        ({"sequence.field": "nope"}, "sequence.field"),
        ({"merge-engine": "partial-update", "fields.ts.sequence-group": "nope"},
         "fields.ts.sequence-group"),
        ({"merge-engine": "partial-update", "fields.ts.sequence-group": "a",
          "partial-update.remove-record-on-delete": "true"},
         "partial-update.remove-record-on-delete"),
        ({"merge-engine": "partial-update", "fields.ts.sequence-group": "a",
          "partial-update.remove-record-on-sequence-group": "a"},
         "partial-update.remove-record-on-sequence-group"),
        ({"sequence.field": "ts", "sequence.field.sort-order": "sideways"},
         "sequence.field.sort-order"),
        ({"merge-engine": "partial-update", "fields.default-aggregate-function": "sum"},
         "fields.a.aggregate-function"),
    ],
)
def test_bad_options_name_their_key(options, key):
    with pytest.raises(OptionError) as e:
        spec_from_map(options, **COLS)
    assert e.value.key == key


def test_row_kinds():
    assert [k.short_string for k in RowKind] == ["+I", "-U", "+U", "-D"]
    assert [k.is_retract for k in RowKind] == [False, True, False, True]


def test_spec_is_frozen_and_hashable():
    spec = spec_from_map({"merge-engine": "aggregation",
                                   "fields.a.aggregate-function": "sum"}, **COLS)
    with pytest.raises(AttributeError):
        spec.engine = MergeEngine.FIRST_ROW  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.aggregate_functions["a"] = AggregateFunction.MAX  # type: ignore[index]
    assert hash(spec) == hash(spec_from_map(
        {"merge-engine": "aggregation", "fields.a.aggregate-function": "sum"}, **COLS))
