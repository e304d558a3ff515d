"""Bad input and damaged files: a clear typed error that names the problem, table unchanged."""

from __future__ import annotations

import glob
import os

import pyarrow as pa
import pytest

from lakecore import CatalogFactory, Schema
from lakecore.errors import (
    CorruptFileError,
    OptionError,
    PartitionValueError,
    SchemaError,
    TableAlreadyExistError,
    TableNotExistError,
)
from tests.core.helpers import make_table, read, table_files, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False),
                    ("v", pa.int64())])


@pytest.fixture
def t(tmp_path):
    return make_table(str(tmp_path), SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                      options={"bucket": "2"})


@pytest.mark.parametrize("bad", ["a/b", "..", "../x", "x\x01"])
def test_partition_value_that_escapes_the_table_is_refused(t, bad):
    before = table_files(t)
    with pytest.raises(PartitionValueError, match="dt"):
        write(t, pa.table({"id": [1, 2], "dt": ["ok", bad], "v": [1, 2]}, schema=SCHEMA))
    assert table_files(t) == before
    assert t.snapshot_manager.latest_id() is None


def test_wrong_type_missing_and_extra_columns_are_named(t):
    with pytest.raises(SchemaError, match="'v'"):
        write(t, pa.table({"id": [1], "dt": ["a"], "v": ["not a number"]}))
    with pytest.raises(SchemaError, match=r"missing column\(s\) \['v'\]"):
        write(t, pa.table({"id": [1], "dt": ["a"]}))
    with pytest.raises(SchemaError, match="'extra'"):
        write(t, pa.table({"id": [1], "dt": ["a"], "v": [1], "extra": [1]}))
    with pytest.raises(SchemaError, match="primary key column 'id' has 1 null"):
        write(t, pa.table({"id": pa.array([None], pa.int64()), "dt": ["a"], "v": [1]}))
    assert t.snapshot_manager.latest_id() is None


def test_create_table_rejects_bad_schemas_with_the_key_named(tmp_path):
    cat = CatalogFactory.create({"warehouse": str(tmp_path)})
    cat.create_database("db")
    nullable_pk = pa.schema([("id", pa.int64()), ("v", pa.string())])
    with pytest.raises(SchemaError, match="'id'"):
        cat.create_table("db.t", Schema.from_pyarrow_schema(nullable_pk, primary_keys=["id"]))
    with pytest.raises(SchemaError, match="'nope'"):
        Schema.from_pyarrow_schema(SCHEMA, primary_keys=["nope"])
    with pytest.raises(SchemaError, match="'zz'"):
        Schema.from_pyarrow_schema(SCHEMA, partition_keys=["zz"])
    with pytest.raises(OptionError, match="'bucket'"):
        Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={"bucket": "many"})
    with pytest.raises(OptionError, match="'no-such-option'"):
        Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={"no-such-option": "1"})
    assert cat.list_tables("db") == []


def test_catalog_errors(tmp_path):
    cat = CatalogFactory.create({"warehouse": str(tmp_path)})
    cat.create_database("db")
    s = Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    cat.create_table("db.t", s)
    with pytest.raises(TableAlreadyExistError):
        cat.create_table("db.t", s)
    cat.create_table("db.t", s, ignore_if_exists=True)
    with pytest.raises(TableNotExistError):
        cat.get_table("db.missing")
    assert cat.list_tables("db") == ["t"]
    cat.drop_table("db.t")
    assert cat.list_tables("db") == []


def _two_snapshots(t):
    write(t, pa.table({"id": [1], "dt": ["a"], "v": [1]}, schema=SCHEMA))
    write(t, pa.table({"id": [2], "dt": ["a"], "v": [2]}, schema=SCHEMA))


def test_truncated_snapshot_is_a_corrupt_file_error_and_older_snapshots_still_read(t):
    _two_snapshots(t)
    path = t.paths.snapshot_path(2)
    with open(path, "r+b") as f:
        f.truncate(20)
    with pytest.raises(CorruptFileError, match="snapshot-2"):
        read(t)
    assert [r["id"] for r in read(t.copy({"scan.snapshot-id": 1}))] == [1]
    # writers never build on a corrupt snapshot
    with pytest.raises(CorruptFileError, match="snapshot-2"):
        write(t, pa.table({"id": [3], "dt": ["a"], "v": [3]}, schema=SCHEMA))
    assert t.snapshot_manager.list_ids() == [1, 2]


def test_manifest_with_bad_avro_block_names_the_file(t):
    _two_snapshots(t)
    snap = t.snapshot_manager.snapshot(2)
    metas = t.manifest_io().read_manifest_list(snap.delta_manifest_list)
    path = t.paths.manifest_path(metas[0].file_name)
    raw = bytearray(open(path, "rb").read())
    for i in range(len(raw) - 40, len(raw) - 20):
        raw[i] ^= 0xFF
    open(path, "wb").write(bytes(raw))
    with pytest.raises(CorruptFileError, match=metas[0].file_name):
        read(t)
    assert [r["id"] for r in read(t.copy({"scan.snapshot-id": 1}))] == [1]


def test_missing_and_truncated_data_files_name_the_file(t):
    _two_snapshots(t)
    files = sorted(glob.glob(os.path.join(t.table_path, "dt=a", "bucket-*", "data-*")),
                   key=os.path.getmtime)
    os.remove(files[-1])
    with pytest.raises(CorruptFileError, match=os.path.basename(files[-1])):
        read(t)
    with open(files[0], "r+b") as f:
        f.truncate(30)
    with pytest.raises(CorruptFileError, match=os.path.basename(files[0])):
        read(t.copy({"scan.snapshot-id": 1}))


def test_latest_hint_past_the_end_or_garbage_falls_back_to_listing(t):
    _two_snapshots(t)
    with open(t.paths.latest_hint, "w") as f:
        f.write("99")
    assert t.snapshot_manager.latest_id() == 2
    with open(t.paths.latest_hint, "w") as f:
        f.write("garbage")
    assert t.snapshot_manager.latest_id() == 2
    os.remove(t.paths.latest_hint)
    assert t.snapshot_manager.latest_id() == 2
    assert sorted(r["id"] for r in read(t)) == [1, 2]
