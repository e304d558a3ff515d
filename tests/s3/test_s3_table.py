"""A table's whole life on an ``s3://`` warehouse (the moto server, pyarrow's S3 filesystem):
write, commit, time travel, tags, compaction, snapshot expiry, orphan removal and rollback,
under the SQL lock (SQLite, PostgreSQL) and with conditional writes (no lock); and the refusal
of a writer whose commit protocol is not the table's."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import pyarrow as pa
import pytest
from sqlalchemy import create_engine, select

from lakecore import CatalogFactory, Schema
from lakecore.errors import OptionError
from lakecore.lock.protocol import CommitProtocol
from lakecore.lock.sql import LOCKS
from lakecore.maintenance.retention import ExpireConfig
from lakecore.store.commit_protocol import read_commit_protocol, set_commit_protocol
from lakecore.table import FileStoreTable
from tests.core.helpers import write
from tests.faults.harness import read_rows, unreferenced_files
from tests.lock.backends import backend_url, unique_key
from tests.s3.server import SECRET_KEY, MotoServer

SCHEMA = pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False),
                    ("v", pa.string())])
FUTURE = datetime.now() + timedelta(days=1)


def rows(dt: str, ids: range, tag: str) -> pa.Table:
    return pa.table({"dt": [dt] * len(ids), "id": list(ids), "v": [f"{tag}{i}" for i in ids]},
                    schema=SCHEMA)


def create(options: dict[str, str], name: str = "db.t") -> FileStoreTable:
    catalog = CatalogFactory.create(options)
    catalog.create_database("db", ignore_if_exists=True)
    catalog.create_table(name, Schema.from_pyarrow_schema(
        SCHEMA, primary_keys=["dt", "id"], partition_keys=["dt"],
        options={"bucket": "2", "write-only": "true"}))
    return catalog.get_table(name)


@pytest.fixture(params=["lock-sqlite", "lock-postgresql", "conditional-put"])
def options(request, moto_server: MotoServer, bucket: str, tmp_path) -> dict[str, str]:
    base = moto_server.catalog_options(bucket)
    if request.param == "conditional-put":
        return {**base, "commit.protocol": "conditional-put"}
    url = backend_url(request.param.split("-", 1)[1], tmp_path)
    return {**base, "lock.enabled": "true", "lock.uri": url, "catalog-key": unique_key()}


def test_a_table_lives_its_whole_life_on_s3(options, caplog):
    caplog.set_level(logging.DEBUG)
    table = create(options)
    protocol = CommitProtocol(options.get("commit.protocol", "lock"))
    assert read_commit_protocol(table.file_io, table.table_path) is protocol
    assert table.table_path.startswith(options["warehouse"][len("s3://"):])

    # write: four commits over two partitions
    write(table, rows("2026-11-01", range(0, 10), "a"))
    write(table, rows("2026-11-02", range(0, 10), "a"))
    write(table, rows("2026-11-01", range(5, 15), "b"))  # upserts 5..9
    write(table, rows("2026-11-02", range(0, 3), "c"))
    assert table.snapshot_manager.latest_id() == 4
    at2, at4 = read_rows(table, 2), read_rows(table)
    assert len(at2) == 20 and len(at4) == 25
    assert {r["v"] for r in at4 if r["dt"] == "2026-11-01" and r["id"] >= 5} == {
        f"b{i}" for i in range(5, 15)}

    # time travel: by id, by time, by tag
    snap2 = table.snapshot_manager.snapshot(2)
    by_time = table.copy({"scan.timestamp-millis": str(snap2.time_millis)})
    assert read_rows(by_time) == at2
    table.create_tag("day-two", 2)
    assert read_rows(table.copy({"scan.tag-name": "day-two"})) == at2

    # compaction: one COMPACT snapshot, same rows
    report = table.compact(full=True)
    assert report.snapshot_ids == (5,) and read_rows(table) == at4

    # expiry keeps the latest snapshot and what the tag pins
    expired = table.expire_snapshots(dry_run=False, now=FUTURE,
                                     config=ExpireConfig(1, 1, timedelta(0), 1000))
    assert expired.snapshots_removed == 4
    assert table.snapshot_manager.earliest_id() == 5 and read_rows(table) == at4
    assert read_rows(table.copy({"scan.tag-name": "day-two"})) == at2

    # orphans: a stray data file and manifest (a dead writer's) go, nothing referenced does
    stray = [f"{table.table_path}/dt=2026-11-01/bucket-0/data-stray.parquet",
             f"{table.table_path}/manifest/manifest-stray"]
    for path in stray:
        table.file_io.write_bytes(path, b"left behind")
    assert set(stray) <= unreferenced_files(table)
    orphans = table.remove_orphan_files(older_than=timedelta(0), now=FUTURE, dry_run=False)
    assert set(stray) <= {f.path for f in orphans.files}
    assert not table.file_io.exists(stray[0]) and not table.file_io.exists(stray[1])
    assert read_rows(table) == at4
    assert read_rows(table.copy({"scan.tag-name": "day-two"})) == at2

    # rollback to the tag, then one more commit on top
    table.rollback_to(tag="day-two", dry_run=False)
    assert read_rows(table) == at2
    write(table, rows("2026-11-03", range(0, 2), "d"))
    assert len(read_rows(table)) == 22
    assert [s.id for s in table.snapshot_manager.snapshots()] == [2, 3]

    if protocol is CommitProtocol.LOCK:  # every lock row was released
        engine = create_engine(options["lock.uri"])
        with engine.connect() as conn:
            held = conn.execute(select(LOCKS.c.lock_id).where(
                LOCKS.c.lock_id.like(f"{options['catalog-key']}.%"))).all()
        engine.dispose()
        assert held == []
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert SECRET_KEY not in text


def _commit_fails_with_protocol_error(table: FileStoreTable, match: str) -> None:
    latest = table.snapshot_manager.latest_id()
    manifests = {s.path for s in table.file_io.list_status(table.paths.manifest_dir)}
    with pytest.raises(OptionError, match=match) as err:
        write(table, rows("2026-11-09", range(3), "x"))
    assert err.value.key == "commit.protocol"
    assert table.snapshot_manager.latest_id() == latest
    assert {s.path for s in table.file_io.list_status(table.paths.manifest_dir)} == manifests


def test_a_writer_with_the_other_protocol_is_refused(moto_server, bucket, tmp_path):
    base = moto_server.catalog_options(bucket)
    conditional = {**base, "commit.protocol": "conditional-put"}
    locked = {**base, "lock.enabled": "true", "lock.uri": f"sqlite:///{tmp_path}/l.db"}
    unlocked = {**base, "lock.enabled": "false"}  # the lock protocol, lock switched off

    t = create(conditional, "db.c")
    write(t, rows("2026-11-01", range(3), "a"))
    for opts in (locked, unlocked):
        other = CatalogFactory.create(opts).get_table("db.c")
        assert len(read_rows(other)) == 3  # reading is fine
        _commit_fails_with_protocol_error(
            other, "records commit protocol 'conditional-put', but this catalog commits with "
                   "'lock': set the catalog option commit.protocol=conditional-put")

    t = create(locked, "db.l")
    write(t, rows("2026-11-01", range(3), "a"))
    write(t, rows("2026-11-01", range(3), "b"))
    other = CatalogFactory.create(conditional).get_table("db.l")
    _commit_fails_with_protocol_error(other, "records commit protocol 'lock'")
    with pytest.raises(OptionError, match="records commit protocol 'lock'"):
        other.rollback_to(snapshot_id=1, dry_run=False)  # rollback is guarded too

    # creating a table whose protocol another creator recorded first
    t_path = CatalogFactory.create(locked).table_path("db.race")
    t.file_io.write_bytes(f"{t_path}/_lakecore/commit-protocol", b"lock\n")
    with pytest.raises(OptionError, match="records commit protocol 'lock'"):
        create(conditional, "db.race")


def test_a_table_without_a_record_commits_under_the_lock_until_moved(moto_server, bucket,
                                                                       tmp_path):
    base = moto_server.catalog_options(bucket)
    conditional = {**base, "commit.protocol": "conditional-put"}
    locked = {**base, "lock.enabled": "true", "lock.uri": f"sqlite:///{tmp_path}/l.db"}
    t = create(locked)
    t.file_io.delete(t.paths.commit_protocol_path)  # as made by pypaimon or older lakecore
    write(t, rows("2026-11-01", range(3), "a"))
    other = CatalogFactory.create(conditional).get_table("db.t")
    _commit_fails_with_protocol_error(
        other, "has no commit-protocol record, so it uses commit protocol 'lock'")

    set_commit_protocol(t.file_io, t.table_path, CommitProtocol.CONDITIONAL_PUT)
    moved = CatalogFactory.create(conditional).get_table("db.t")
    write(moved, rows("2026-11-01", range(3, 6), "b"))
    assert len(read_rows(moved)) == 6
    _commit_fails_with_protocol_error(CatalogFactory.create(locked).get_table("db.t"),
                                      "records commit protocol 'conditional-put'")


def test_pyarrow_uri_parameters_still_reach_the_server(moto_server, bucket, monkeypatch):
    """The old way (endpoint in the warehouse URI, credentials from the environment)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    uri = (f"s3://{bucket}/legacy?endpoint_override=127.0.0.1:{moto_server.port}"
           "&scheme=http&region=us-east-1")
    table = create({"warehouse": uri, "lock.enabled": "false"})
    write(table, rows("2026-11-01", range(3), "a"))
    assert len(read_rows(table)) == 3


def test_the_command_line_takes_s3_options_and_never_prints_the_secret(moto_server, bucket,
                                                                        capsys):
    from lakecore.cli.main import main

    options = {**moto_server.catalog_options(bucket), "commit.protocol": "conditional-put"}
    table = create(options)
    write(table, rows("2026-11-01", range(3), "a"))
    write(table, rows("2026-11-01", range(3, 6), "b"))
    warehouse = options.pop("warehouse")
    args = ["--warehouse", warehouse, "--table", "db.t",
            *[a for k, v in options.items() for a in ("--option", f"{k}={v}")]]
    assert main(["compact", *args, "--full", "--json"]) == 0
    assert main(["inspect", *args]) == 0
    out = capsys.readouterr()
    assert '"snapshot_ids": [3]' in out.out and SECRET_KEY not in out.out + out.err
    assert main(["inspect", *args, "--option", "s3.secret.key=another"]) == 1
    err = capsys.readouterr().err
    assert "'s3.secret.key': conflicts with 's3.secret-key'" in err
    assert SECRET_KEY not in err and "another" not in err


def test_stats_the_footer_lacks_are_measured_from_the_uploaded_file(moto_server: MotoServer,
                                                                     bucket: str):
    """A value over Arrow's 4 KiB statistics limit leaves the footer without a min/max: the
    writer reads the column back, which on S3 exists only once its upload completed."""
    from lakecore.format.binary_row import decode_row

    catalog = CatalogFactory.create({**moto_server.catalog_options(bucket),
                                     "commit.protocol": "conditional-put"})
    catalog.create_database("db", ignore_if_exists=True)
    catalog.create_table("db.long", Schema.from_pyarrow_schema(
        SCHEMA, primary_keys=["dt", "id"], partition_keys=["dt"],
        options={"bucket": "1", "metadata.stats-mode": "full"}))
    table = catalog.get_table("db.long")
    write(table, pa.table({"dt": ["d", "d"], "id": [1, 2], "v": ["x" * 5000, "a"]},
                          schema=SCHEMA))
    (split,) = table.new_read_builder().new_scan().plan().splits()
    (f,) = split.files
    types = [table.schema.row_type.field(n).type for n in table.schema.row_type.names]
    assert decode_row(f.value_stats.min_values, types)[2] == "a"
    assert decode_row(f.value_stats.max_values, types)[2] == "x" * 5000
