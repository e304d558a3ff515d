"""Row groups of the data files lakecore writes: a compaction merges its runs in pieces of
whatever size the merge yields, and the files still get full row groups (each piece its own
row group would make many small ones, which every later read pays for)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

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
