"""Which columns of a written data file carry a Parquet dictionary (``io/dictionary_choice``):
columns whose values repeat keep it, columns of (nearly) unique values are written plain, as
parquet-mr, Paimon's Java writer, decides; both read back the same values."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore.io.dictionary_choice import SAMPLE_ROWS, dictionary_columns, estimate_distinct
from tests.core.helpers import make_table, write

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    ("unique_i64", pa.int64()),       # every value distinct: plain
    ("unique_s", pa.string()),        # every value distinct: plain
    ("country", pa.string()),         # 7 values: dictionary
    ("small", pa.int32()),            # 10 values: dictionary
    ("price", pa.float64()),          # random doubles: plain
    ("nothing", pa.int64()),          # all null: Arrow's default (dictionary)
    ("flag", pa.bool_()),             # booleans are never dictionary-encoded
])


def _rows(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = rng.permutation(n)
    countries = np.array(["DE", "FR", "NL", "US", "JP", "BR", "IN"])
    return pa.table({
        "id": ids,
        "unique_i64": ids * 7919 + 13,
        "unique_s": [f"user-{i:09d}" for i in ids],
        "country": countries[rng.integers(0, 7, n)],
        "small": rng.integers(0, 10, n).astype(np.int32),
        "price": rng.standard_normal(n),
        "nothing": pa.nulls(n, pa.int64()),
        "flag": rng.integers(0, 2, n).astype(bool),
    }, schema=SCHEMA)


def _data_files(t) -> list[str]:  # type: ignore[no-untyped-def]
    splits = t.new_read_builder().new_scan().plan().splits()
    return [t.paths.data_file_path(s.partition, s.bucket, f.file_name)
            for s in splits for f in s.files]


def _dictionary_encoded(path: str) -> set[str]:
    meta = pq.ParquetFile(path).metadata
    rg = meta.row_group(0)
    return {rg.column(i).path_in_schema for i in range(rg.num_columns)
            if rg.column(i).has_dictionary_page}


@pytest.mark.parametrize("rows", [6_000, 300_000])
def test_repeating_columns_keep_a_dictionary_unique_ones_are_plain(tmp_path: Path,
                                                                   rows: int) -> None:
    t = make_table(str(tmp_path), SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    data = _rows(rows, seed=rows)
    write(t, data)
    (path,) = _data_files(t)
    encoded = _dictionary_encoded(path)
    assert {"country", "small", "_VALUE_KIND"} <= encoded
    assert not encoded & {"unique_i64", "unique_s", "price", "id", "_KEY_id",
                          "_SEQUENCE_NUMBER", "flag"}
    rb = t.new_read_builder()
    got = rb.new_read().to_arrow(rb.new_scan().plan().splits()).sort_by("id")
    assert got.equals(data.sort_by("id"))


def test_plain_columns_make_smaller_files_than_dictionaries_of_unique_values(
        tmp_path: Path) -> None:
    """What the choice is for: a small file of unique values is smaller without the
    dictionary Arrow would otherwise build (and faster to write and read)."""
    data = _rows(6_000, seed=1).select(["id", "unique_i64", "unique_s", "price"])
    chosen = dictionary_columns(data, data.column_names, 64 * 1024)
    assert chosen == []
    plain, every = tmp_path / "plain.parquet", tmp_path / "every.parquet"
    pq.write_table(data, plain, compression="zstd", use_dictionary=chosen)
    pq.write_table(data, every, compression="zstd", use_dictionary=True)
    assert plain.stat().st_size < every.stat().st_size


def test_a_dictionary_larger_than_its_page_limit_is_not_started() -> None:
    """50,000 distinct longs need a 400 KB dictionary: Arrow would fall back to plain after
    64 KiB anyway, so the column is plain from its first row."""
    rng = np.random.default_rng(5)
    data = pa.table({"many": rng.integers(0, 50_000, 400_000),
                     "few": rng.integers(0, 1_000, 400_000)})
    assert dictionary_columns(data, ["many", "few"], 64 * 1024) == ["few"]


def test_nulls_are_not_counted_as_values() -> None:
    """A column of 5 values and 95 % nulls keeps its dictionary; its nulls are not values."""
    values = np.random.default_rng(2).integers(0, 5, 20_000)
    mask = np.random.default_rng(3).random(20_000) < 0.95
    data = pa.table({"sparse": pa.array(values, mask=mask)})
    assert dictionary_columns(data, ["sparse"], 64 * 1024) == ["sparse"]


def test_estimate_distinct_from_an_even_sample() -> None:
    assert estimate_distinct(SAMPLE_ROWS, SAMPLE_ROWS, 1_000_000) == 1_000_000  # no repeat
    assert estimate_distinct(40, 300, 300) == 40  # the sample is every row: exact
    rng = np.random.default_rng(11)
    for distinct in (100, 2_000, 20_000):
        rows = rng.integers(0, distinct, 1_000_000)
        picks = (np.arange(SAMPLE_ROWS) * len(rows)) // SAMPLE_ROWS
        seen = len(np.unique(rows[picks]))
        estimate = estimate_distinct(seen, SAMPLE_ROWS, len(rows))
        assert distinct / 2 < estimate < distinct * 2, (distinct, estimate)


@pytest.mark.parametrize("kind", [
    pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64(),
    pa.date32(), pa.time32("ms"), pa.time64("us"), pa.timestamp("us"),
    pa.timestamp("us", tz="UTC"), pa.timestamp("ns"), pa.decimal128(12, 2),
    pa.decimal128(38, 6), pa.string(), pa.large_string(), pa.binary(), pa.binary(16),
])
def test_every_atomic_type_is_judged_by_its_values(kind: pa.DataType) -> None:
    """Repeating values keep the dictionary and distinct ones do not, for each of Paimon's
    atomic types as Arrow holds them."""
    n = 3_000
    narrow = kind == pa.int8()
    distinct = np.arange(n) % 120 if narrow else np.arange(n)
    repeated = np.arange(n) % 7

    def column(ints: np.ndarray) -> pa.Array:
        if pa.types.is_fixed_size_binary(kind):
            return pa.array([int(i).to_bytes(16, "big") for i in ints], kind)
        if pa.types.is_binary(kind) or pa.types.is_string(kind) or \
                pa.types.is_large_string(kind):
            return pa.array([f"value-{i:06d}" for i in ints]).cast(kind)
        if pa.types.is_decimal(kind):
            return pa.array([Decimal(int(i)) for i in ints], kind)
        if pa.types.is_temporal(kind):
            return pa.array(ints.astype(np.int32 if kind.bit_width == 32 else np.int64)).cast(kind)
        return pa.array(ints).cast(kind)

    data = pa.table({"distinct": column(distinct), "repeated": column(repeated)})
    chosen = dictionary_columns(data, ["distinct", "repeated"], 64 * 1024)
    assert "repeated" in chosen
    assert ("distinct" in chosen) == narrow  # 120 bytes of dictionary pay


@pytest.mark.parametrize("kind", [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float64(),
                                  pa.date32(), pa.timestamp("us")])
def test_a_slice_is_judged_by_its_own_rows(kind: pa.DataType) -> None:
    """A routed bucket's rows are a slice of a larger table (an offset into its buffers): the
    sample is taken from the slice, not from the start of the buffer."""
    rng = np.random.default_rng(5)
    repeating = rng.integers(0, 4, 20_000)
    unique = rng.permutation(20_000) % (120 if kind == pa.int8() else 20_000)
    values = np.concatenate([repeating, unique]).astype(np.int64)
    if kind == pa.float64():
        column = pa.array(values.astype(np.float64))
    elif kind == pa.date32():
        column = pa.array(values.astype(np.int32)).view(kind)
    else:
        column = pa.array(values).cast(kind)
    table = pa.table({"c": column})
    head, tail = table.slice(0, 20_000), table.slice(20_000)
    assert dictionary_columns(head, ["c"], 64 * 1024) == ["c"]
    expect_tail = ["c"] if kind == pa.int8() else []
    assert dictionary_columns(tail, ["c"], 64 * 1024) == expect_tail
    assert dictionary_columns(pa.table({"c": tail["c"].combine_chunks()}), ["c"],
                              64 * 1024) == expect_tail


def test_a_choice_serves_the_next_files_of_its_partition_and_size_then_is_made_again() -> None:
    import pickle

    from lakecore.io.dictionary_choice import CHOICE_REUSES, DictionaryChoices

    choices = DictionaryChoices()
    calls: list[str] = []

    def decide(answer: list[str]):
        def run() -> list[str]:
            calls.append(answer[0] if answer else "-")
            return list(answer)
        return run

    assert choices.choose(("p1", 13), decide(["a"])) == ["a"]
    for _ in range(CHOICE_REUSES):  # the same partition and size class: reused
        assert choices.choose(("p1", 13), decide(["b"])) == ["a"]
    assert choices.choose(("p1", 13), decide(["b"])) == ["b"]  # then judged again
    assert choices.choose(("p2", 13), decide(["c"])) == ["c"]  # another partition
    assert choices.choose(("p1", 14), decide([])) == []  # another size class
    assert calls == ["a", "b", "c", "-"]
    copy = pickle.loads(pickle.dumps(choices))  # a pickled task starts afresh
    assert copy.choose(("p1", 13), decide(["d"])) == ["d"]
    choices.share(("p1", 13), ["s"])  # a partition's shared judgment, until unshared
    assert choices.shared(("p1", 13)) == ["s"] and choices.shared(("p1", 14)) is None
    assert pickle.loads(pickle.dumps(choices)).shared(("p1", 13)) is None
    choices.unshare()
    assert choices.shared(("p1", 13)) is None


def test_files_of_one_write_share_the_choice_and_stay_correct(tmp_path: Path) -> None:
    """16 buckets of one commit: every file's footer shows the dictionary on the repeating
    column only, whichever file made the choice."""
    schema = pa.schema([pa.field("id", pa.int64(), False), ("country", pa.string()),
                        ("v", pa.float64())])
    table = make_table(str(tmp_path), schema, primary_keys=["id"], options={"bucket": "16"})
    rng = np.random.default_rng(2)
    rows = 64_000
    write(table, pa.table({"id": pa.array(rng.permutation(rows), pa.int64()),
                           "country": pa.array(rng.choice(["de", "fr", "nl"], rows)),
                           "v": pa.array(rng.standard_normal(rows))}, schema=schema))
    files = [f for s in table.new_read_builder().new_scan().plan().splits() for f in s.files]
    assert len(files) == 16
    for split in table.new_read_builder().new_scan().plan().splits():
        for f in split.files:
            path = table.paths.data_file_path((), split.bucket, f.file_name, None)
            with table.file_io.open_input_file(path) as src:
                meta = pq.ParquetFile(src).metadata.row_group(0)
            by_name = {meta.column(i).path_in_schema: meta.column(i) for i in
                       range(meta.num_columns)}
            assert by_name["country"].has_dictionary_page
            assert not by_name["v"].has_dictionary_page


@pytest.mark.parametrize("primary_keys", [["day", "id"], None], ids=["pk", "append"])
def test_each_partition_judges_once_for_its_buckets_and_the_same_writes_make_the_same_files(
        tmp_path: Path, primary_keys: list[str] | None) -> None:
    """One commit to 8 buckets of two partitions whose rows differ: in one the column
    repeats, in the other it is unique. Each partition's files follow their own rows, every
    bucket alike; the same commit to a second table makes files of the same sizes."""
    schema = pa.schema([pa.field("day", pa.string(), False), pa.field("id", pa.int64(), False),
                        ("c", pa.int64()), ("v", pa.float64())])
    rng = np.random.default_rng(5)
    rows = 40_000
    ids = rng.permutation(rows)
    day = np.where(ids % 2 == 0, "repeats", "unique")
    data = pa.table({"day": day, "id": pa.array(ids, pa.int64()),
                     "c": np.where(ids % 2 == 0, ids % 5, ids * 31 + 7),
                     "v": rng.standard_normal(rows)}, schema=schema)
    sizes = []
    for name in ("db.a", "db.b"):
        options = {"bucket": "8"} if primary_keys else {"bucket": "8", "bucket-key": "id"}
        table = make_table(str(tmp_path), schema, primary_keys=primary_keys,
                           partition_keys=["day"], options=options, name=name)
        write(table, data)
        files = {}
        for split in table.new_read_builder().new_scan().plan().splits():
            for f in split.files:
                path = table.paths.data_file_path(split.partition, split.bucket, f.file_name)
                files[split.partition[0], split.bucket] = (path, f.file_size)
        assert len(files) == 16
        for (partition, _), (path, _) in files.items():
            assert ("c" in _dictionary_encoded(path)) == (partition == "repeats"), partition
            assert "v" not in _dictionary_encoded(path)
        sizes.append({key: size for key, (_, size) in files.items()})
    assert sizes[0] == sizes[1]
