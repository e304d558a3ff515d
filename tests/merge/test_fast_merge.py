"""``sort_and_merge`` (the deduplicate fast path) equals sort_kv + merge_sorted."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore.merge.fast import sort_and_merge
from lakecore.merge.functions import merge_sorted
from lakecore.merge.sort import sort_kv
from lakecore.merge.spec import MergeEngine, MergeSpec


def _table(ids, kinds, seqs):
    n = len(ids)
    return pa.table({
        "_KEY_id": pa.array(ids, pa.int64()),
        "_SEQUENCE_NUMBER": pa.array(seqs, pa.int64()),
        "_VALUE_KIND": pa.array(kinds, pa.int8()),
        "id": pa.array(ids, pa.int64()),
        "v": pa.array([f"v{i}" for i in range(n)]),
    })


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 20), st.sampled_from([0, 1, 2, 3])), min_size=0,
             max_size=60),
    st.booleans(),
    st.booleans(),
)
def test_fast_path_equals_reference(rows, drop, shuffle_seq):
    ids = [r[0] for r in rows]
    kinds = [r[1] for r in rows]
    seqs = list(range(len(rows)))
    if shuffle_seq:
        seqs = list(np.random.default_rng(len(rows)).permutation(len(rows)))
    t = _table(ids, kinds, seqs)
    spec = MergeSpec(MergeEngine.DEDUPLICATE, ("_KEY_id",), ("id", "v"), ("id",))
    want = merge_sorted(sort_kv(t, spec), spec, drop_retracts=drop)
    got = sort_and_merge(t, spec, drop_retracts=drop)
    assert got.to_pylist() == want.to_pylist()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.sampled_from([0, 1, 2, 3])), max_size=60))
def test_unordered_fast_path_keeps_the_same_rows(rows):
    t = _table([r[0] for r in rows], [r[1] for r in rows], list(range(len(rows))))
    spec = MergeSpec(MergeEngine.DEDUPLICATE, ("_KEY_id",), ("id", "v"), ("id",))
    want = merge_sorted(sort_kv(t, spec), spec, drop_retracts=True).to_pylist()
    got = sort_and_merge(t, spec, drop_retracts=True, ordered=False).to_pylist()
    assert sorted(got, key=lambda r: r["id"]) == want
