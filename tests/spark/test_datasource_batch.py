"""The ``lakecore`` data source on local Spark: batch read (pushdown on and off, projection,
time travel, incremental), batch write (append, overwrite, idempotence, abort, table kinds),
SQL views, pypaimon reading what Spark wrote, and ``df.write`` equal to the ingest job."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest
from pyspark.sql.datasource import EqualTo

from lakecore.errors import OptionError, UnsupportedFeatureError
from lakecore.spark import register, register_tables
from lakecore.spark.datasource.batch_read import make_reader
from lakecore.spark.datasource.batch_write import LakecoreWriter
from lakecore.spark.datasource.options import SourceOptions
from lakecore.spark.ingest import IngestRequest, ingest_dataframe
from lakecore.spark.types import spark_schema
from tests.compat.pypaimon_runner import canonical, paimon_available, paimon_read
from tests.core.helpers import make_table, read
from tests.spark import helpers as h

FMT = "lakecore"


@pytest.fixture(scope="module")
def ds(spark):
    register(spark)
    return spark


def _df(spark, data: pa.Table, parts: int = 3):
    """``data`` as a DataFrame of ``parts`` partitions (several write tasks)."""
    return spark.createDataFrame(data.to_pandas(), spark_schema(data.schema)).repartition(parts)


def _last_per_key(data: pa.Table) -> pa.Table:
    """The last row of each key: rows of one key within one write have no order (as rows of
    a DataFrame have none), so the tests give each key once per write."""
    last = {(r["dt"], r["id"]): i for i, r in enumerate(data.select(h.KEY).to_pylist())}
    return data.take(sorted(last.values()))


def _batches(n, rows):
    return [_last_per_key(b) for b in h.batches(n, rows=rows)]


def _write(df, warehouse, name="db.t", mode="append", **options):
    df.write.format(FMT).mode(mode).option("warehouse", warehouse).options(**options).save(name)


def _read(spark, warehouse, name="db.t", **options):
    return spark.read.format(FMT).option("warehouse", warehouse).options(**options).load(name)


def _rows(df, keys=h.KEY):
    return sorted((r.asDict() for r in df.collect()), key=lambda r: tuple(r[k] for k in keys))


def _planned_splits(warehouse, filters):
    """How many splits the pushing reader plans (all packed into input partitions)."""
    opts = SourceOptions.parse({"path": "db.t", "warehouse": warehouse})
    reader = make_reader(opts, spark_schema(h.SCHEMA), filter_pushdown=True)
    assert list(reader.pushFilters(filters)) == []
    return sum(len(pickle.loads(p.value)[1]) for p in reader.partitions())


def test_options_are_parsed_once_and_checked():
    opts = SourceOptions.parse(
        {"path": "db.t", "Scan.Snapshot-Id": "3", "lock.enabled": "false", "columns": "a, b",
         "overwrite.partition": "dt=2026-01-02", "consumer-id": "c1"},
        {"spark.lakecore.warehouse": "/wh", "spark.lakecore.s3.region": "eu"})
    assert (opts.warehouse, opts.identifier, opts.columns) == ("/wh", "db.t", ("a", "b"))
    assert opts.table_options == {"scan.snapshot-id": "3"}
    assert opts.catalog_options == {"lock.enabled": "false", "s3.region": "eu"}
    assert opts.overwrite_partition == (("dt", "2026-01-02"),)
    assert opts.raw["consumer-id"] == "c1"
    for bad, key in (({"scan.snapshot-id": "x"}, "scan.snapshot-id"),
                     ({"scan.snapshotid": "1"}, "scan.snapshotid"),
                     ({"commit.identifier": "1"}, "commit.identifier"),
                     ({"overwrite.partition": "dt"}, "overwrite.partition")):
        with pytest.raises(OptionError) as e:
            SourceOptions.parse({"path": "db.t", "warehouse": "/wh", **bad})
        assert e.value.key == key


def test_splits_are_packed_by_sparks_file_split_sizing():
    from types import SimpleNamespace

    from lakecore.spark.datasource.batch_read import SplitSizing

    mib = 1 << 20
    splits = [SimpleNamespace(files=[SimpleNamespace(file_size=n * mib)]) for n in
              (60, 50, 40, 30, 20, 10, 1, 1, 1, 1)]
    groups = SplitSizing(128 * mib, 4 * mib, parallelism=2).pack(splits)
    assert sorted(id(s) for g in groups for s in g) == sorted(id(s) for s in splits)
    limit = (sum(n for n in (60, 50, 40, 30, 20, 10, 1, 1, 1, 1)) + 40) * mib // 2
    assert all(sum(f.file_size + 4 * mib for s in g for f in s.files) <= limit for g in groups)
    assert 2 <= len(groups) <= 3  # first fit, largest first: about one per core
    assert len(SplitSizing(32 * mib, 4 * mib, parallelism=2).pack(splits)) > 2


def test_only_filters_lakecore_evaluates_exactly_are_taken_over(warehouse):
    from pyspark.sql.datasource import (
        EqualNullSafe,
        GreaterThan,
        In,
        IsNull,
        Not,
        StringStartsWith,
    )

    from lakecore.read.predicate import PredicateBuilder
    from lakecore.spark.datasource.filters import translate_filters

    table = h.create(warehouse)
    taken = [EqualTo(("dt",), "2026-11-01"), Not(GreaterThan(("id",), 5)),
             In(("id",), (1, 2)), IsNull(("v",)), StringStartsWith(("v",), "v1"),
             EqualNullSafe(("id",), 3)]
    left = [GreaterThan(("amount",), 1.0), Not(In(("id",), (1,))), EqualTo(("ts",), 0),
            EqualNullSafe(("id",), None), EqualTo(("x", "y"), 1)]
    handled, rest = translate_filters(taken + left, PredicateBuilder(table.schema.row_type), table)
    assert [p.method for p in handled] == [
        "equal", "less_or_equal", "is_in", "is_null", "startswith", "equal"]
    assert rest == left


def test_pk_table_write_then_read_with_pushdown_projection_time_travel(ds, warehouse):
    table = h.create(warehouse)
    data = _batches(3, rows=300)
    h.library_commit(table, data[0], 1, "lib")
    # updates and deletes of committed keys, spread over 3 tasks that share buckets
    _write(_df(ds, data[1]), warehouse)
    _write(_df(ds, data[2]), warehouse)
    assert h.rows(table) == h.model(data)
    assert _rows(_read(ds, warehouse)) == h.model(data)

    df = _read(ds, warehouse).where(f"dt = '{h.DTS[1]}' and id > 100")
    assert _rows(df) == [r for r in h.model(data) if r["dt"] == h.DTS[1] and r["id"] > 100]
    assert _read(ds, warehouse).where("dt = '1999-01-01'").count() == 0
    # pushed filters prune on the driver: one day's splits only (3 buckets of 9)
    assert _planned_splits(warehouse, []) == 9
    assert _planned_splits(warehouse, [EqualTo(("dt",), h.DTS[1])]) == 3
    assert _rows(_read(ds, warehouse, columns="dt,id,v")) == [
        {"dt": r["dt"], "id": r["id"], "v": r["v"]} for r in h.model(data)]
    old = _read(ds, warehouse, **{"scan.snapshot-id": "1"})
    assert _rows(old) == h.model(data[:1])
    # filters lakecore cannot evaluate exactly (a double column) stay with Spark
    assert _rows(_read(ds, warehouse).where("amount > 100.0 and op is not null")) == [
        r for r in h.model(data) if r["amount"] > 100.0]


def test_reads_work_without_filter_pushdown(ds, warehouse):
    table = h.create(warehouse)
    data = _batches(1, rows=60)
    h.library_commit(table, data[0], 1, "lib")
    ds.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        register(ds, filter_pushdown=False)
        got = _rows(_read(ds, warehouse).where(f"dt = '{h.DTS[0]}'"))
    finally:
        register(ds)
    assert got == [r for r in h.model(data) if r["dt"] == h.DTS[0]]


BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"


def test_register_lifts_sparks_arrow_byte_cap_only_where_the_session_sets_none(ds, warehouse):
    """Unset, the byte cap becomes Spark's "no cap" (Spark stops sizing every row it hands
    the writer); a cap the session sets is kept, and writes under it land every row; with
    ``arrow_byte_cap=True`` register leaves the conf alone."""
    table = h.create(warehouse)
    data = _batches(2, rows=200)
    try:
        with h.session_conf(ds, **{BYTES: None}):
            register(ds, arrow_byte_cap=True)
            assert ds.conf.get(BYTES, None) is None
            register(ds)
            assert ds.conf.get(BYTES) == "2147483647"
            _write(_df(ds, data[0]), warehouse)
            ds.conf.set(BYTES, "2k")  # a few rows per batch
            register(ds)
            assert ds.conf.get(BYTES) == "2k"
            _write(_df(ds, data[1]), warehouse)
    finally:
        register(ds)
    assert h.rows(table) == h.model(data)


def test_incremental_read_has_the_row_kind(ds, warehouse):
    table = h.create(warehouse, **{"changelog-producer": "input"})
    data = _batches(2, rows=60)
    h.library_commit(table, data[0], 1, "lib")
    h.library_commit(table, data[1], 2, "lib")
    got = _read(ds, warehouse, **{"incremental-between": "1,2"})
    assert got.columns[0] == "rowkind"
    rows = {(r["dt"], r["id"], r["rowkind"]) for r in got.collect()}
    assert rows == {(r["dt"], r["id"], r["op"]) for r in data[1].to_pylist()}


def test_overwrite_static_and_dynamic(ds, warehouse):
    table = h.create(warehouse)
    data = _batches(1, rows=90)[0]
    h.library_commit(table, data, 1, "lib")
    day0, day1 = h.DTS[0], h.DTS[1]
    new0 = h.batch([(day0, 10_000 + i, "+I") for i in range(5)], 9)
    _write(_df(ds, new0), warehouse, mode="overwrite", **{"overwrite.partition": f"dt={day0}"})
    after = h.rows(table)
    assert sorted(r["id"] for r in after if r["dt"] == day0) == list(range(10_000, 10_005))
    assert [r for r in after if r["dt"] != day0] == [
        r for r in h.model([data]) if r["dt"] != day0]
    new1 = h.batch([(day1, 20_000, "+I")], 9)
    _write(_df(ds, new1, 1), warehouse, mode="overwrite")  # dynamic: day1 only
    after = h.rows(table)
    assert [r["id"] for r in after if r["dt"] == day1] == [20_000]
    assert sorted(r["id"] for r in after if r["dt"] == day0) == list(range(10_000, 10_005))
    with pytest.raises(Exception, match="overwrite.partition"):
        _write(_df(ds, new1, 1), warehouse, **{"overwrite.partition": f"dt={day1}"})


def test_commit_is_idempotent_and_failed_writes_leave_no_file(ds, warehouse):
    table = h.create(warehouse)
    data = _batches(1, rows=60)[0]
    for _ in range(2):
        _write(_df(ds, data), warehouse, **{"commit.user": "u", "commit.identifier": "7"})
    assert table.snapshot_manager.latest().id == 1
    assert h.rows(table) == h.model([data])
    files = h.data_files(table)
    # an invalid row kind: the failing task deletes what it wrote, nothing is committed
    ops = data.column("op").to_pylist()
    bad = data.set_column(5, "op", pa.array(ops[:-1] + ["??"]))
    with pytest.raises(Exception, match="op"):
        _write(_df(ds, bad, 1), warehouse)
    assert h.data_files(table) == files
    assert table.snapshot_manager.latest().id == 1
    # the driver's abort deletes the files of every task that reported (tasks run here as
    # Spark runs them: the writer pickled, ``write`` over Arrow batches)
    opts = SourceOptions.parse({"path": "db.t", "warehouse": warehouse})
    writer = LakecoreWriter(opts, spark_schema(h.SCHEMA), overwrite=False)
    done = [pickle.loads(pickle.dumps(writer)).write(iter(part.to_batches()))
            for part in (data.slice(0, 30), data.slice(30))]
    assert len(h.data_files(table)) > len(files)
    writer.abort([*done, None])
    assert h.data_files(table) == files


def test_append_dv_and_dynamic_bucket_tables(ds, warehouse):
    log = pa.schema([pa.field("k", pa.int64()), pa.field("s", pa.string())])
    make_table(warehouse, log, name="db.log", options={"bucket": "-1"})
    rows = pa.table({"k": list(range(50)), "s": [f"s{i}" for i in range(50)]}, schema=log)
    _write(_df(ds, rows), warehouse, "db.log")
    _write(_df(ds, rows), warehouse, "db.log")
    assert _read(ds, warehouse, "db.log").count() == 100
    dv = h.create(warehouse, "db.dv", **{"deletion-vectors.enabled": "true"})
    data = _batches(2, rows=60)
    for b in data:
        _write(_df(ds, b), warehouse, "db.dv")
    dv.compact(full=True)  # write-only files are invisible to DV reads until compacted
    assert _rows(_read(ds, warehouse, "db.dv")) == h.model(data)
    h.create(warehouse, "db.dyn", bucket="-1")
    with pytest.raises(Exception, match="dynamic buckets") as e:
        _write(_df(ds, data[0]), warehouse, "db.dyn")
    assert "UnsupportedFeatureError" in str(e.value) or isinstance(
        e.value, UnsupportedFeatureError)


def test_sql_views_over_every_table(ds, warehouse):
    table = h.create(warehouse)
    data = _batches(1, rows=60)[0]
    h.library_commit(table, data, 1, "lib")
    assert register_tables(ds, warehouse) == ["db.t"]
    got = ds.sql(f"SELECT dt, count(*) AS n FROM `db.t` WHERE dt = '{h.DTS[2]}' GROUP BY dt")
    assert [tuple(r) for r in got.collect()] == [
        (h.DTS[2], sum(1 for r in h.model([data]) if r["dt"] == h.DTS[2]))]


def test_df_write_equals_ingest_job_and_pypaimon_reads_it(ds, warehouse):
    data = _batches(3, rows=150)
    by_ds = h.create(warehouse, "db.ds")
    by_job = h.create(warehouse, "db.job")
    for i, b in enumerate(data, start=1):
        _write(_df(ds, b), warehouse, "db.ds")
        ingest_dataframe(ds, _df(ds, b), by_job, warehouse, IngestRequest(i, "job"))
    assert read(by_ds, sort_by=h.KEY) == read(by_job, sort_by=h.KEY) == h.model(data)
    if not paimon_available():
        pytest.skip("pypaimon venv missing")
    theirs = paimon_read(warehouse, "db.ds")
    ours = pa.Table.from_pylist(h.model(data), schema=h.SCHEMA)
    assert canonical(theirs, h.KEY) == canonical(ours, h.KEY)
