"""``sort_and_merge`` (the deduplicate fast path) equals sort_kv + merge_sorted."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore.merge.fast import _latest_mask, sort_and_merge
from lakecore.merge.functions import merge_sorted
from lakecore.merge.runs import merge_runs
from lakecore.merge.sort import sort_kv
from lakecore.merge.spec import MergeEngine, MergeSpec


def _table(ids, kinds, seqs, first=0):
    n = len(ids)
    return pa.table({
        "_KEY_id": pa.array(ids, pa.int64()),
        "_SEQUENCE_NUMBER": pa.array(seqs, pa.int64()),
        "_VALUE_KIND": pa.array(kinds, pa.int8()),
        "id": pa.array(ids, pa.int64()),
        "v": pa.array([f"v{i}" for i in range(first, first + n)], pa.string()),
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


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.tuples(st.integers(-5, 20), st.sampled_from([0, 1, 2, 3])),
                      max_size=20), max_size=6),
    st.sampled_from(["rows", "runs", "shuffled"]),
    st.booleans(),
    st.sampled_from([0, 2**62]),
)
def test_unordered_fast_path_keeps_the_same_rows(runs, seq_kind, drop, spread):
    """The unordered read (``ordered=False``) keeps each key's newest row: with sequence
    numbers in row order (``rows``), one per run like a read's run-order merge (``runs``:
    ties), or out of order (``shuffled``: the general path); keys that pack and keys too far
    apart to pack (``spread``); a table of several chunks, one per run."""
    tables = []
    seq = 0
    for i, run in enumerate(runs):
        ids = [k * (1 + spread // 21) for k, _ in run]
        kinds = [kind for _, kind in run]
        if seq_kind == "runs":
            seqs = [i] * len(run)
        else:
            seqs = list(range(seq, seq + len(run)))
        tables.append(_table(ids, kinds, seqs, first=seq))
        seq += len(run)
    if not tables:
        return
    t = pa.concat_tables(tables)
    if seq_kind == "shuffled" and t.num_rows:
        order = np.random.default_rng(t.num_rows).permutation(t.num_rows)
        t = t.set_column(1, "_SEQUENCE_NUMBER", pa.array(order, pa.int64()))
    spec = MergeSpec(MergeEngine.DEDUPLICATE, ("_KEY_id",), ("id", "v"), ("id",))
    want = merge_sorted(sort_kv(t, spec), spec, drop_retracts=drop).to_pylist()
    got = sort_and_merge(t, spec, drop_retracts=drop, ordered=False).to_pylist()
    assert sorted(got, key=lambda r: (r["id"], r["v"])) == \
        sorted(want, key=lambda r: (r["id"], r["v"]))


def test_unordered_fast_path_on_date_and_int32_keys():
    for kind in (pa.date32(), pa.int32()):
        t = pa.table({
            "_KEY_k": pa.array([3, 1, 2, 1, 3], pa.int32()).cast(kind),
            "_SEQUENCE_NUMBER": pa.array([0, 0, 1, 1, 1], pa.int64()),
            "_VALUE_KIND": pa.array([0, 0, 0, 3, 2], pa.int8()),
            "v": ["a", "b", "c", "d", "e"],
        })
        spec = MergeSpec(MergeEngine.DEDUPLICATE, ("_KEY_k",), ("v",), ())
        got = sort_and_merge(t, spec, drop_retracts=True, ordered=False)
        assert sorted(got["v"].to_pylist()) == ["c", "e"]  # key 1 deleted, 3 updated
        kept = sort_and_merge(t, spec, drop_retracts=False, ordered=False)
        assert sorted(kept["v"].to_pylist()) == ["c", "d", "e"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.tuples(st.integers(-5, 20), st.sampled_from([0, 1, 2, 3])),
                      max_size=15), max_size=6),
    st.sampled_from(["int", "spread", "string"]),
    st.booleans(),
)
def test_runs_in_sequence_order_merge_without_sequence_numbers(runs, keys, drop):
    """A read of runs whose sequence ranges follow each other decodes no sequence numbers
    (``sequenced``): each key's newest row is its last row in the last run holding it (a run
    is sorted by key, then sequence; a key may repeat in it). The same rows as the reference
    merge of the runs with their sequence numbers, for keys that pack into the fast path,
    keys too far apart to pack and string keys (the general path)."""
    def key(k: int):
        return {"int": k, "spread": k * 2**58, "string": f"k{k:03d}"}[keys]

    key_type = pa.string() if keys == "string" else pa.int64()
    plain, numbered = [], []
    first = 0
    for i, run in enumerate(runs):
        rows = sorted(run, key=lambda r: r[0])  # by key, then sequence (stable: input order)
        ks = [k for k, _ in rows]
        t = pa.table({"_KEY_id": pa.array([key(k) for k in ks], key_type),
                      "_VALUE_KIND": pa.array([kind for _, kind in rows], pa.int8()),
                      "v": pa.array([f"r{i}-{j}" for j in range(len(ks))], pa.string())})
        plain.append(t)
        numbered.append(t.append_column("_SEQUENCE_NUMBER",
                                        pa.array(range(first, first + len(ks)), pa.int64())))
        first += len(ks)
    spec = MergeSpec(MergeEngine.DEDUPLICATE, ("_KEY_id",), ("v",), ())
    want = [] if not numbered or not first else merge_sorted(
        sort_kv(pa.concat_tables(numbered), spec), spec, drop_retracts=drop
    ).select(["v"]).to_pylist()
    got = [r for chunk in merge_runs([[t] for t in plain], spec, drop_retracts=drop,
                                     columns=["v"], ordered=False, sequenced=True)
           for r in chunk.to_pylist()]
    assert sorted(got, key=lambda r: r["v"]) == sorted(want, key=lambda r: r["v"])


def test_fast_path_at_radix_sizes_keeps_each_keys_newest_row():
    """Tens of thousands of rows (the radix sort of ``packed_sort``), keys repeating: the
    dedupe fast path keeps, per key, the row with the highest sequence number (numpy's
    ``lexsort`` picks the expected rows), ordered and unordered, in and out of order."""
    rng = np.random.default_rng(7)
    n = 30_000
    ids = rng.integers(-5_000, 5_000, n) * 3
    kinds = rng.choice([0, 2], n)
    spec = MergeSpec(MergeEngine.DEDUPLICATE, ("_KEY_id",), ("id", "v"), ("id",))
    for seqs in (np.arange(n), rng.permutation(n)):
        t = _table(ids, kinds, seqs)
        by_key_then_seq = np.lexsort((seqs, ids))
        sorted_ids = ids[by_key_then_seq]
        last = np.append(np.flatnonzero(sorted_ids[1:] != sorted_ids[:-1]), n - 1)
        want = [f"v{i}" for i in by_key_then_seq[last]]
        got = sort_and_merge(t, spec, drop_retracts=False)
        assert got["v"].to_pylist() == want
        assert got["id"].to_pylist() == sorted_ids[last].tolist()
        loose = sort_and_merge(t, spec, drop_retracts=False, ordered=False)
        assert sorted(loose["v"].to_pylist()) == sorted(want)


def test_distinct_ascending_keys_keep_every_row_but_retractions():
    """A flushed buffer of distinct keys in key order (routing sorts them): the merge keeps
    every row, minus -U/-D rows when retractions are dropped, as the reference merge does."""
    ids = [1, 4, 9, 16, 25, 36]
    kinds = [0, 3, 2, 1, 0, 3]
    t = _table(ids, kinds, [5, 0, 3, 1, 4, 2])
    spec = MergeSpec(MergeEngine.DEDUPLICATE, ("_KEY_id",), ("id", "v"), ("id",))
    for drop in (False, True):
        want = merge_sorted(sort_kv(t, spec), spec, drop_retracts=drop)
        got = sort_and_merge(t, spec, drop_retracts=drop)
        assert got.to_pylist() == want.to_pylist()
        assert got["id"].to_pylist() == ([1, 9, 25] if drop else ids)
        narrow = sort_and_merge(t, spec, drop_retracts=drop, columns=["v"], ordered=False)
        assert narrow.column_names == ["v"]
        assert narrow["v"].to_pylist() == want["v"].to_pylist()


def _newest_rows(keys: np.ndarray) -> np.ndarray:
    """Row order is sequence order: each key's last row (numpy's stable ``lexsort``)."""
    rows = np.arange(len(keys))
    by_key = np.lexsort((rows, keys))
    sorted_keys = keys[by_key]
    return np.sort(by_key[np.append(np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]),
                                    len(keys) - 1)])


def test_sorted_runs_of_a_dense_key_keep_each_keys_newest_row():
    """A read's runs in sequence order, each sorted by key (a key may repeat in a run): the
    merge keeps each key's last row, for keys dense enough for the table of seen values
    (``_latest_mask``) and for keys too spread out for it (the sort), in int64, int32,
    uint64 (values past 2**63) and date32 keys, with retractions dropped or kept."""
    rng = np.random.default_rng(11)
    for span, dtype in ((40_000, np.int64), (40_000, np.int32), (3_000, np.uint64),
                        (10**12, np.int64), (20_000, "date32")):
        runs = []
        for size in (9_000, 7_000, 12_000, 500, 8_000):
            keys = np.sort(rng.integers(0, span, size))
            if dtype == np.uint64:
                runs.append(keys.astype(np.uint64) + np.uint64(2**63 + 5))
            else:
                runs.append(keys)
        keys = np.concatenate(runs)
        n = len(keys)
        kinds = rng.choice([0, 0, 0, 2, 3, 1], n).astype(np.int8)
        arrow_type = pa.date32() if dtype == "date32" else pa.from_numpy_dtype(dtype)
        chunks = []
        first = 0
        for run in runs:
            rows = slice(first, first + len(run))
            chunks.append(pa.table({
                "_KEY_k": pa.array(run.astype(np.int32) if dtype in (np.int32, "date32")
                                   else run).cast(arrow_type),
                "_VALUE_KIND": pa.array(kinds[rows]),
                "v": pa.array(np.arange(first, first + len(run))),
            }))
            first += len(run)
        t = pa.concat_tables(chunks)
        spec = MergeSpec(MergeEngine.DEDUPLICATE, ("_KEY_k",), ("v",), ())
        dense = _latest_mask(t, spec, sequenced=True)
        assert (dense is None) == (span == 10**12)  # the spread key goes through the sort
        newest = _newest_rows(keys)
        if dense is not None:
            assert np.array_equal(np.flatnonzero(dense), newest)
        for drop in (False, True):
            want = newest[(kinds[newest] != 1) & (kinds[newest] != 3)] if drop else newest
            got = sort_and_merge(t, spec, drop_retracts=drop, ordered=False, sequenced=True)
            assert got["v"].to_pylist() == want.tolist()  # table order, no row twice


def test_dense_key_falls_back_when_a_chunk_is_not_sorted_or_sequence_goes_back():
    """The table of seen values needs every chunk sorted by key and rows in sequence order;
    otherwise the merge sorts, and keeps the same rows as the reference merge."""
    spec = MergeSpec(MergeEngine.DEDUPLICATE, ("_KEY_id",), ("id", "v"), ("id",))
    unsorted = pa.concat_tables([_table([5, 1, 3], [0, 0, 0], [0, 1, 2]),
                                 _table([1, 3], [0, 3], [3, 4], first=3)])
    back = pa.concat_tables([_table([1, 3, 5], [0, 0, 0], [5, 6, 7]),
                             _table([1, 3], [2, 0], [3, 4], first=3)])
    for t in (unsorted, back):
        assert _latest_mask(t, spec) is None
        for drop in (False, True):
            want = merge_sorted(sort_kv(t, spec), spec, drop_retracts=drop)
            got = sort_and_merge(t, spec, drop_retracts=drop, ordered=False)
            assert sorted(got["v"].to_pylist()) == sorted(want["v"].to_pylist())


def test_rows_kept_chunk_by_chunk_in_table_order():
    """Dropping superseded rows chunk by chunk: a chunk losing no row, one losing every row
    and one losing some come back as the rows kept, in table order."""
    spec = MergeSpec(MergeEngine.DEDUPLICATE, ("_KEY_id",), ("id", "v"), ("id",))
    t = pa.concat_tables([
        _table([1, 2, 3], [0, 0, 0], [0, 1, 2]),           # 1 and 3 come again later
        _table([4, 5], [0, 0], [3, 4], first=3),           # both come again: none kept
        _table([1, 3, 4, 5, 6], [0, 0, 0, 3, 0], [5, 6, 7, 8, 9], first=5),  # all newest
    ])
    for drop, want in ((False, ["v1", "v5", "v6", "v7", "v8", "v9"]),
                       (True, ["v1", "v5", "v6", "v7", "v9"])):
        got = sort_and_merge(t, spec, drop_retracts=drop, ordered=False)
        assert got["v"].to_pylist() == want
        assert got.column_names == t.column_names
