"""``sort_kv`` orders like Paimon's merge readers; ``group_starts`` finds key boundaries."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore.merge import MergeEngine, group_starts, sort_kv
from lakecore.merge.sort import packed_sort
from tests.merge.helpers import kv_table, spec_for


def _expected_order(rows, keys, seq_fields=()):
    def nf(v):
        return (0,) if v is None else (1, v)

    return sorted(
        range(len(rows)),
        key=lambda i: (tuple(nf(rows[i][k]) for k in keys),
                       tuple(nf(rows[i][f]) for f in seq_fields), rows[i]["seq"], i),
    )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-3, 3), st.none() | st.integers(0, 2), st.integers(0, 5)),
             max_size=40),
    st.sampled_from(["int", "wide-int", "str", "multi"]),
    st.booleans(),
    st.booleans(),
)
def test_sort_kv_is_a_stable_key_then_sequence_sort(items, mode, use_seq_field, seq_in_order):
    if seq_in_order:
        items = [(k, f, i) for i, (k, f, _) in enumerate(items)]
    key_type = {"int": pa.int32(), "wide-int": pa.int64(), "str": pa.string(),
                "multi": pa.string()}[mode]
    scale = 2**60 if mode == "wide-int" else 1
    rows = [{"k": (f"s{k}" if key_type == pa.string() else k * scale), "k2": k % 2, "f": f,
             "seq": s, "tag": i, "kind": "+I"} for i, (k, f, s) in enumerate(items)]
    keys = ("k", "k2") if mode == "multi" else ("k",)
    types = {"k": key_type, "k2": pa.int8(), "f": pa.int64(), "tag": pa.int64()}
    spec = spec_for(MergeEngine.DEDUPLICATE, types, keys,
                    sequence_fields=("f",) if use_seq_field else ())
    table = kv_table(rows, types, keys)
    got = sort_kv(table, spec).column("tag").to_pylist()
    assert got == _expected_order(rows, keys, ("f",) if use_seq_field else ())


def test_already_sorted_table_is_returned_as_is():
    types = {"k": pa.int64()}
    rows = [{"k": k, "seq": s, "kind": "+I"} for s, k in enumerate([1, 1, 2, 5])]
    table = kv_table(rows, types)
    assert sort_kv(table, spec_for(MergeEngine.DEDUPLICATE, types)) is table


def test_large_key_range_falls_back_from_packing():
    types = {"k": pa.int64()}
    keys = [2**62, -(2**62), 0, 2**62, -(2**62)]
    rows = [{"k": k, "seq": s, "kind": "+I"} for s, k in enumerate(keys)]
    out = sort_kv(kv_table(rows, types), spec_for(MergeEngine.DEDUPLICATE, types))
    assert out.column("_SEQUENCE_NUMBER").to_pylist() == [1, 4, 2, 0, 3]


@pytest.mark.parametrize(
    "type_, values",
    [
        (pa.int64(), [1, 1, 2, 3, 3, 3]),
        (pa.string(), ["a", "a", "b", "c", "c", "c"]),
        (pa.binary(), [b"a", b"a", b"\x00", b"c", b"c", b"c"]),
        (pa.date32(), [date(2024, 1, d) for d in (1, 1, 2, 3, 3, 3)]),
        (pa.timestamp("us"), [datetime(2024, 1, d) for d in (1, 1, 2, 3, 3, 3)]),
        (pa.decimal128(10, 2), [Decimal(v) for v in ("1.1", "1.1", "2", "3", "3", "3")]),
        (pa.int64(), [None, None, 2, 3, 3, 3]),
        (pa.string(), [None, None, "", "x", "x", "x"]),
    ],
)
def test_group_starts_for_key_types(type_, values):
    types = {"k": type_}
    rows = [{"k": v, "seq": i, "kind": "+I"} for i, v in enumerate(values)]
    starts = group_starts(kv_table(rows, types), spec_for(MergeEngine.DEDUPLICATE, types))
    assert starts.tolist() == [0, 2, 3]
    assert starts.dtype == np.int64


def test_group_starts_with_two_key_columns():
    types = {"a": pa.string(), "b": pa.int32()}
    pairs = [("x", 1), ("x", 1), ("x", 2), ("y", 2), ("y", 2)]
    rows = [{"a": a, "b": b, "seq": i, "kind": "+I"} for i, (a, b) in enumerate(pairs)]
    spec = spec_for(MergeEngine.DEDUPLICATE, types, ("a", "b"))
    assert group_starts(kv_table(rows, types, ("a", "b")), spec).tolist() == [0, 2, 3]


def test_group_starts_on_chunked_and_empty_tables():
    types = {"k": pa.int64()}
    rows = [{"k": k, "seq": i, "kind": "+I"} for i, k in enumerate([1, 1, 2])]
    table = kv_table(rows, types)
    chunked = pa.concat_tables([table.slice(0, 2), table.slice(2)])
    spec = spec_for(MergeEngine.DEDUPLICATE, types)
    assert group_starts(chunked, spec).tolist() == [0, 2]
    assert group_starts(table.slice(0, 0), spec).tolist() == []


@pytest.mark.parametrize("rows", [3, 2047, 2048, 5000, 70_000])
@pytest.mark.parametrize("widths", [(20,), (4, 20), (40,), (16, 32), (60,), (3, 30, 31), (0, 12)])
def test_packed_sort_is_a_stable_multi_key_sort(rows, widths):
    """Both ways of ``packed_sort`` (radix passes for many rows of a narrow key or a key too
    wide to share 64 bits with the row index; one plain sort of the key packed with the row
    index otherwise) give numpy's stable lexicographic order, duplicates in row order, and
    the packed keys in that order."""
    rng = np.random.default_rng(rows * 31 + sum(widths))
    # few distinct values per key, so rows tie and stability shows; signed, off zero
    keys = [rng.integers(0, 2**w, rows) // max(1, 2 ** max(w - 8, 0)) * max(1, 2 ** max(w - 8, 0))
            - 2 ** max(w - 1, 0) for w in widths]
    keys[0] = keys[0].astype(np.int64)
    got = packed_sort(keys)
    assert got is not None
    order, packed = got
    want = np.lexsort(keys[::-1])  # stable: equal keys keep row order
    assert order.dtype == np.int64
    assert order.tolist() == want.tolist()
    assert np.all(packed[1:] >= packed[:-1])
    assert len(np.unique(packed)) == len({tuple(k[i] for k in keys) for i in range(rows)})


def test_packed_sort_refuses_keys_wider_than_64_bits():
    keys = [np.array([0, 2**40, 5]), np.array([0, 2**30, 1])]
    assert packed_sort(keys) is None  # the caller falls back to np.lexsort
