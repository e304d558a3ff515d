"""Row groups of the data files lakecore writes: a compaction merges its runs in pieces of
whatever size the merge yields, and the files still get full row groups (each piece its own
row group would make many small ones, which every later read pays for)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore.io.data_file_writer import ROW_GROUP_ROWS
from tests.core.helpers import make_table, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.int64())])


def test_compaction_output_has_full_row_groups_whatever_the_merge_pieces(tmp_path: Path) -> None:
    t = make_table(str(tmp_path), SCHEMA, primary_keys=["id"],
                   options={"bucket": "1", "write-only": "true"})
    rng = np.random.default_rng(7)
    keys = rng.permutation(300_000)
    for part in np.array_split(keys, 5):  # five overlapping level-0 runs
        write(t, pa.table({"id": part, "v": part * 2}, schema=SCHEMA))
    t.compact(full=True)
    splits = t.new_read_builder().new_scan().plan().splits()
    (split,) = splits
    (f,) = split.files
    meta = pq.ParquetFile(t.paths.data_file_path(split.partition, split.bucket,
                                                 f.file_name)).metadata
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert sizes == [ROW_GROUP_ROWS, 300_000 - ROW_GROUP_ROWS]
    rb = t.new_read_builder()
    got = rb.new_read().to_arrow(rb.new_scan().plan().splits()).sort_by("id")
    assert got.column("id").to_numpy().tolist() == list(range(300_000))
    assert got.column("v").to_numpy().tolist() == [2 * i for i in range(300_000)]


def _dv_table(tmp_path: Path):  # type: ignore[no-untyped-def]
    t = make_table(str(tmp_path), SCHEMA, primary_keys=["id"],
                   options={"bucket": "1", "deletion-vectors.enabled": "true",
                            "write-only": "true"})
    keys = np.random.default_rng(3).permutation(300_000)
    for part in np.array_split(keys, 3):
        write(t, pa.table({"id": part, "v": part}, schema=SCHEMA))
    t.compact()  # one file of two row groups at the top level
    changed = np.arange(0, 300_000, 7)  # keys in both row groups
    write(t, pa.table({"id": changed, "v": -changed}, schema=SCHEMA))
    t.compact()  # the old rows of those keys are marked in the big file's vector
    return t, changed


def test_deletion_vectors_apply_across_the_row_groups_of_a_file(tmp_path: Path) -> None:
    t, changed = _dv_table(tmp_path)
    (split,) = t.new_read_builder().new_scan().plan().splits()
    big = max(split.files, key=lambda f: f.row_count)
    path = t.paths.data_file_path(split.partition, split.bucket, big.file_name)
    assert pq.ParquetFile(path).metadata.num_row_groups == 2
    assert split.deletion_files  # the read applies vectors, it merges nothing
    rb = t.new_read_builder()
    got = rb.new_read().to_arrow(rb.new_scan().plan().splits()).sort_by("id")
    want = np.arange(300_000)
    want_v = np.where(want % 7 == 0, -want, want)
    assert got.column("id").to_numpy().tolist() == want.tolist()
    assert got.column("v").to_numpy().tolist() == want_v.tolist()


def test_a_file_shorter_than_its_manifest_entry_is_named(tmp_path: Path) -> None:
    from lakecore.errors import CorruptFileError

    t, _ = _dv_table(tmp_path)
    (split,) = t.new_read_builder().new_scan().plan().splits()
    big = max(split.files, key=lambda f: f.row_count)
    path = t.paths.data_file_path(split.partition, split.bucket, big.file_name)
    rows = pq.read_table(path)
    pq.write_table(rows.slice(0, 100_000), path, row_group_size=50_000)  # two groups, too few
    rb = t.new_read_builder()
    with pytest.raises(CorruptFileError, match="manifest says 300000") as info:
        rb.new_read().to_arrow(rb.new_scan().plan().splits())
    assert info.value.path == path
