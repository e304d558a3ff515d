"""Bad input: a clear typed error that names the problem, table unchanged."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakecore import CatalogFactory, Schema
from lakecore.errors import (
    OptionError,
    PartitionValueError,
    SchemaError,
    TableAlreadyExistError,
    TableNotExistError,
)
from tests.core.helpers import make_table, table_files, write

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
    nullable_pk = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])
    with pytest.raises(OptionError, match="'bucket'"):  # dynamic buckets, cross-partition key
        cat.create_table("db.t", Schema.from_pyarrow_schema(nullable_pk, primary_keys=["id"],
                                                            partition_keys=["dt"]))
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


# Damaged files (truncated snapshot, bad Avro block, missing or truncated data file, bad LATEST
# and EARLIEST hints, writers and orphan removal on top of them): tests/faults/test_corruption.py
