"""The Spark ingest, compaction and maintenance jobs against an ``s3://`` warehouse, through
the real ``spark-submit`` (lakecore from ``dist/lakecore.zip``): the driver and the executors
reach the moto server with the ``s3.*`` catalog options (``--catalog-option``), and the driver
commits with conditional writes, no lock."""

from __future__ import annotations

import shutil

import pytest

from lakecore import CatalogFactory, Schema
from tests.s3.server import SECRET_KEY
from tests.spark import helpers as h
from tests.spark import submit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def zip_path():
    if shutil.which("java") is None:
        pytest.skip("Java is not on the PATH")
    return submit.build_zip()


def test_spark_jobs_ingest_compact_and_maintain_an_s3_table(zip_path, moto_server, bucket,
                                                            tmp_path):
    options = {**moto_server.catalog_options(bucket), "commit.protocol": "conditional-put"}
    warehouse = options.pop("warehouse")
    catalog = CatalogFactory.create({"warehouse": warehouse, **options})
    catalog.create_database("db")
    catalog.create_table("db.t", Schema.from_pyarrow_schema(
        h.SCHEMA, primary_keys=h.KEY, partition_keys=["dt"],
        options={**h.OPTIONS, "snapshot.num-retained.min": "1",
                 "snapshot.num-retained.max": "1"}))
    table = catalog.get_table("db.t")
    data = h.batches(2, rows=300)
    catalog_args = [a for k, v in options.items() for a in ("--catalog-option", f"{k}={v}")]
    base = ["--warehouse", warehouse, "--table", "db.t", *catalog_args]

    # the first batch through the library, the second through the job: its commit is a
    # conditional PUT onto an existing snapshot (one spark-submit fewer: each costs 15-40 s)
    h.library_commit(table, data[0], 1, "library")
    src = h.write_parquet(str(tmp_path / "src2"), "part-0", data[1])
    done = submit.run("ingest", [*base, "--source", src, "--commit-identifier", "2"],
                      zip_path, tmp_path)
    assert done.returncode == 0, done.output[-5000:]
    assert done.summary["snapshot_ids"] == [2]
    assert SECRET_KEY not in done.output  # never logged, not even by the job's summary
    assert h.rows(table) == h.model(data)

    done = submit.run("compact", [*base, "--full"], zip_path, tmp_path)
    assert done.returncode == 0, done.output[-5000:]
    assert done.summary["snapshot_ids"] == [3]
    done = submit.run("maintain", [*base, "--expire-snapshots"], zip_path, tmp_path)
    assert done.returncode == 0, done.output[-5000:]
    assert table.snapshot_manager.list_ids() == [3]
    assert h.rows(table) == h.model(data)
    paths = [s.path for s in table.file_io.list_status(table.table_path, recursive=True)]
    assert any(p.endswith(".parquet") for p in paths)  # the executors wrote to the bucket
    catalog.close()
