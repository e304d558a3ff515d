"""The data source's batch reader on incremental reads (driven directly, no Spark session):
the ``rowkind`` column carries each record's kind in every scan mode, also for a table without
a changelog producer (docs/incremental-reads.md); a diff split travels to the executor side."""

from __future__ import annotations

import pickle

import pyarrow as pa

from lakecore.spark.datasource.batch_read import make_reader
from lakecore.spark.datasource.options import SourceOptions, open_table
from lakecore.spark.datasource.source import table_spark_schema
from tests.core.helpers import make_table, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string()), ("op", pa.string())])


def _rows(data: list[tuple]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in data],
                                schema=SCHEMA)


def _read(warehouse: str, **options: str) -> list[tuple]:
    opts = SourceOptions.parse({"warehouse": warehouse, "path": "db.t", **options})
    catalog, table = open_table(opts)
    schema = table_spark_schema(table, opts)
    catalog.close()
    assert schema.names[0] == "rowkind"
    reader = make_reader(opts, schema, filter_pushdown=False)
    # Spark pickles the reader and each partition before the executors use them
    reader = pickle.loads(pickle.dumps(reader))
    out = []
    for p in reader.partitions():
        for batch in pickle.loads(pickle.dumps(reader)).read(p):
            out += zip(*(batch.column(c).to_pylist() for c in ("rowkind", "id", "v")))
    return sorted(out)


def test_rowkind_of_delta_changelog_and_diff_reads(tmp_path) -> None:
    warehouse = str(tmp_path / "wh")
    t = make_table(warehouse, SCHEMA, primary_keys=["id"],
                   options={"bucket": "2", "rowkind.field": "op"})
    write(t, _rows([(1, "a", "+I"), (2, "b", "+I"), (3, "c", "+I")]))
    write(t, _rows([(1, "a2", "+U"), (2, "b", "-D"), (4, "d", "+I")]))
    t.compact(full=True)
    between = {"incremental-between": "1,3"}
    delta = [("+I", 4, "d"), ("+U", 1, "a2"), ("-D", 2, "b")]
    assert _read(warehouse, **between) == delta
    assert _read(warehouse, **between, **{"incremental-between-scan-mode": "changelog"}) == []
    assert _read(warehouse, **between, **{"incremental-between-scan-mode": "diff"}) == [
        ("+I", 4, "d"), ("+U", 1, "a2")]
    t.create_tag("one", 1)
    t.create_tag("three", 3)
    assert _read(warehouse, **{"incremental-between": "one,three"}) == [
        ("+I", 4, "d"), ("+U", 1, "a2")]
