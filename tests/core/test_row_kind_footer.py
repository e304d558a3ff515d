"""The row kind of a key-value file from its Parquet footer: a ``_VALUE_KIND`` column whose
statistics show one value (min = max in every row group) is not decoded, and reads as that
value; anything else is decoded. Real files: a lakecore table's level-0 file rewritten with
pyarrow the way another writer could have made it (all deletions, mixed row groups, no
statistics)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakecore.format.kv import VALUE_KIND
from tests.core.helpers import make_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])


def _table(tmp_path: Path):
    t = make_table(str(tmp_path), SCHEMA, primary_keys=["id"],
                   options={"bucket": "1", "write-only": "true"})
    write(t, {"id": list(range(10)), "v": [f"old{i}" for i in range(10)]})
    write(t, {"id": list(range(5)), "v": [f"new{i}" for i in range(5)]})
    return t


def _newest_file(t) -> str:
    (split,) = t.new_read_builder().new_scan().plan().splits()
    f = max(split.files, key=lambda f: f.max_sequence_number)
    return t.paths.data_file_path(split.partition, split.bucket, f.file_name)


def _rewrite_kinds(path: str, kinds: list[int], **options) -> None:
    rows = pq.read_table(path)
    at = rows.schema.get_field_index(VALUE_KIND)
    rows = rows.set_column(at, rows.schema.field(at), pa.array(kinds, pa.int8()))
    pq.write_table(rows, path, **options)


@pytest.mark.parametrize("layout", ["one-group", "no-statistics"])
def test_a_file_of_deletions_deletes_its_keys(tmp_path: Path, layout: str):
    """Every row of the newest file a -D (constant in its footer, or with no statistics to
    say so): its keys are gone from the merged read and after a full compaction."""
    t = _table(tmp_path)
    options = {"write_statistics": False} if layout == "no-statistics" else {}
    _rewrite_kinds(_newest_file(t), [3] * 5, **options)
    md = pq.read_metadata(_newest_file(t))
    assert md.row_group(0).column(2).path_in_schema == VALUE_KIND
    assert md.row_group(0).column(2).is_stats_set == (layout == "one-group")
    want = [{"id": i, "v": f"old{i}"} for i in range(5, 10)]
    assert read(t, sort_by="id") == want
    t.compact(full=True)
    assert read(t, sort_by="id") == want


def test_row_groups_of_different_kinds_are_decoded(tmp_path: Path):
    """Two row groups, each of one kind (+U, then -D): no single kind for the file, so the
    column is decoded row by row."""
    t = _table(tmp_path)
    _rewrite_kinds(_newest_file(t), [2, 2, 2, 3, 3], row_group_size=3)
    assert pq.read_metadata(_newest_file(t)).num_row_groups == 2
    want = [{"id": i, "v": f"new{i}"} for i in range(3)] + \
        [{"id": i, "v": f"old{i}"} for i in range(5, 10)]
    assert read(t, sort_by="id") == want
    t.compact(full=True)
    assert read(t, sort_by="id") == want


def test_a_file_read_whole_reports_the_footer_kind_in_every_row(tmp_path: Path):
    """A level-0 file read whole with its row kinds, as the merge reads it: the footer's
    kind in every row (+U here, not +I), in the column order asked for."""
    from lakecore.io.data_file_reader import read_data_file

    t = _table(tmp_path)
    _rewrite_kinds(_newest_file(t), [2] * 5)
    (split,) = t.new_read_builder().new_scan().plan().splits()
    f = max(split.files, key=lambda f: f.max_sequence_number)
    rows = read_data_file(t, split.partition, split.bucket, f, [VALUE_KIND, "id", "v"])
    assert rows.column_names == [VALUE_KIND, "id", "v"]
    assert rows.schema.field(VALUE_KIND).type == pa.int8()
    assert pc.unique(rows[VALUE_KIND]).to_pylist() == [2]
    assert rows["v"].to_pylist() == [f"new{i}" for i in range(5)]


def test_a_null_row_kind_is_a_corrupt_file_even_when_the_rest_agree(tmp_path: Path):
    """Statistics of +I with a null among them do not make the column constant: it is
    decoded, and the null row kind is reported as a corrupt file naming the column."""
    from lakecore.errors import CorruptFileError

    t = _table(tmp_path)
    path = _newest_file(t)
    rows = pq.read_table(path)
    at = rows.schema.get_field_index(VALUE_KIND)
    rows = rows.set_column(at, pa.field(VALUE_KIND, pa.int8(), True),
                           pa.array([0, None, 0, 0, 0], pa.int8()))
    pq.write_table(rows, path)
    with pytest.raises(CorruptFileError, match=VALUE_KIND):
        read(t)


def test_files_of_one_kind_larger_and_smaller_than_before_read_whole(tmp_path: Path):
    """Files of +I rows read one after another, 100k rows, then 5, then 150k: each gets its
    own row count of +I, and the merged read keeps every key's newest value."""
    from lakecore.io.data_file_reader import read_data_file

    t = make_table(str(tmp_path), SCHEMA, primary_keys=["id"],
                   options={"bucket": "1", "write-only": "true"})
    for n, tag in ((100_000, "a"), (5, "b"), (150_000, "c")):
        write(t, {"id": list(range(n)), "v": [tag] * n})
    (split,) = t.new_read_builder().new_scan().plan().splits()
    for f in sorted(split.files, key=lambda f: f.max_sequence_number):
        rows = read_data_file(t, split.partition, split.bucket, f, [VALUE_KIND, "id"])
        assert rows.num_rows == f.row_count
        assert pc.all(pc.equal(rows[VALUE_KIND], 0)).as_py()
    got = t.new_read_builder().new_read().to_arrow([split])
    assert got.num_rows == 150_000 and pc.unique(got["v"]).to_pylist() == ["c"]
