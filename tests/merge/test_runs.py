"""``merge_runs``: the k-way merge of sorted runs gives one sort-and-merge's rows, however the
runs arrive — whole files held as lists (one round takes them all), chunks streamed from
iterators (round after round, each bounded by the smallest last key in hand), on the caller's
thread or cut into key-range sections on the merge threads."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pytest

from lakecore.merge import runs as runs_module
from lakecore.merge.fast import sort_and_merge
from lakecore.merge.runs import merge_runs
from lakecore.merge.spec import MergeEngine, MergeSpec

SPEC = MergeSpec(MergeEngine.DEDUPLICATE, ("_KEY_id",), ("id", "v"), ("id",))


def _runs(n_runs: int, keys_per_run: int, key_space: int, seed: int) -> list[pa.Table]:
    """Sorted runs, newest last (higher sequence numbers), with overlapping keys and some
    retractions."""
    rng = np.random.default_rng(seed)
    out, seq = [], 0
    for r in range(n_runs):
        ids = np.sort(rng.choice(key_space, size=keys_per_run, replace=False))
        n = len(ids)
        kinds = rng.choice(np.array([0, 0, 0, 2, 3], dtype=np.int8), size=n)
        seqs = seq + rng.permutation(n)  # sequence numbers need not follow the key order
        seq += n
        out.append(pa.table({
            "_KEY_id": pa.array(ids, pa.int64()),
            "_SEQUENCE_NUMBER": pa.array(seqs, pa.int64()),
            "_VALUE_KIND": pa.array(kinds, pa.int8()),
            "id": pa.array(ids, pa.int64()),
            "v": pa.array([f"r{r}-{i}" for i in ids]),
        }))
    return out


def _chunks(t: pa.Table, size: int) -> Iterator[pa.Table]:
    for start in range(0, t.num_rows, size):
        yield t.slice(start, size)


def _expected(runs: list[pa.Table], drop: bool) -> list[dict]:
    return sort_and_merge(pa.concat_tables(runs), SPEC, drop_retracts=drop).to_pylist()


@pytest.mark.parametrize("drop", [True, False])
@pytest.mark.parametrize("shape", ["lists", "streamed", "mixed"])
def test_runs_merge_to_the_rows_of_one_sort_and_merge(shape, drop):
    runs = _runs(n_runs=7, keys_per_run=3_000, key_space=10_000, seed=len(shape) + drop)
    if shape == "lists":
        given = [[t] for t in runs]
    elif shape == "streamed":
        given = [_chunks(t, 700) for t in runs]
    else:  # some runs whole, some streamed in chunks of different sizes
        given = [[t] if i % 2 else _chunks(t, 300 + 100 * i) for i, t in enumerate(runs)]
    got = pa.concat_tables(list(merge_runs(given, SPEC, drop_retracts=drop)))
    assert got.to_pylist() == _expected(runs, drop)


@pytest.mark.parametrize("shape", ["lists", "streamed"])
def test_large_rounds_cut_into_sections_keep_key_order(monkeypatch, shape):
    """Rounds above PARALLEL_MIN_ROWS go to the merge threads in key-range pieces; the pieces
    come back in key order and no key is split between two of them."""
    monkeypatch.setattr(runs_module, "PARALLEL_MIN_ROWS", 512)
    runs = _runs(n_runs=5, keys_per_run=4_000, key_space=9_000, seed=7)
    given = [[t] for t in runs] if shape == "lists" else [_chunks(t, 1_500) for t in runs]
    pieces = list(merge_runs(given, SPEC, drop_retracts=True))
    assert len(pieces) > 1
    got = pa.concat_tables(pieces)
    assert got.to_pylist() == _expected(runs, True)
    ids = got.column("id").to_numpy()
    assert np.all(ids[1:] > ids[:-1])  # one row per key, ascending across pieces


def test_unordered_merge_keeps_the_same_rows():
    runs = _runs(n_runs=6, keys_per_run=2_000, key_space=5_000, seed=3)
    got = pa.concat_tables(list(merge_runs([[t] for t in runs], SPEC, drop_retracts=True,
                                           columns=["id", "v"], ordered=False)))
    want = [{"id": r["id"], "v": r["v"]} for r in _expected(runs, True)]
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == want
