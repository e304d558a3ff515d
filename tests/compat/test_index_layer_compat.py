"""The index layer through lakecore's commits and maintenance, with pypaimon as the oracle.

A dynamic-bucket primary-key table (pypaimon's default ``bucket = -1``) keeps a HASH index per
(partition, bucket) that pypaimon reads before every write; a table with deletion vectors keeps
its deletion-vector files in the index manifest too. After every lakecore operation that commits
or deletes (compaction, partition expiry's OVERWRITE, a partition OVERWRITE, tags, rollback,
snapshot expiry, orphan removal) pypaimon must read the same rows and write again: a dropped or
half-deleted index shows as pypaimon's "has data files but no complete HASH index" error, a
missing file, or deleted rows coming back.

What is on disk is checked against the snapshots and tags read with json and fastavro only
(not through lakecore): every index file and index manifest a snapshot or tag names exists, and
nothing else is left under ``index/`` or among the index manifests.
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from lakecore import CatalogFactory
from lakecore.format.binary_row import encode_row
from lakecore.maintenance import ExpireConfig
from lakecore.schema.types import parse_type
from tests.compat.pypaimon_runner import (
    PAIMON_PYTHON,
    canonical,
    paimon_script,
    requires_paimon,
)

pytestmark = [pytest.mark.compat, requires_paimon]

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False),
                    ("v", pa.int64())])
OLD, NEW = "2020-01-01", "2999-01-01"  # OLD is past a 7-day partition expiry, NEW is not
EXPIRY = {"partition.expiration-time": "7 d", "partition.timestamp-formatter": "yyyy-MM-dd"}
KEEP_ONE = ExpireConfig(1, 1, timedelta(0), 100)
HELPER = Path(__file__).with_name("index_layer_paimon.py")
Model = dict[tuple[int, str], int]


def later() -> datetime:
    return datetime.now() + timedelta(days=1)


def rows(ids: range | list[int], dt: str, v: int) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "dt": [dt] * len(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def apply(model: Model, *batches: pa.Table) -> Model:
    out = dict(model)
    for b in batches:
        for r in b.to_pylist():
            out[(r["id"], r["dt"])] = r["v"]
    return out


def expected(model: Model) -> list[dict[str, Any]]:
    return canonical(pa.table({"id": [k[0] for k in model], "dt": [k[1] for k in model],
                               "v": list(model.values())}, schema=SCHEMA), ["id", "dt"])


def step(op: str, wh: str, table: str, **kw: Any) -> dict[str, Any]:
    return {"op": op, "warehouse": wh, "table": table, **kw}


def paimon_write_and_read(wh: str, table: str, *batches: pa.Table) -> list[dict[str, Any]]:
    """pypaimon commits each batch (one write each) and reads the table back."""
    steps = [step("write", wh, table, data=list(batches))] if batches else []
    result = paimon_script([*steps, step("read", wh, table)])
    return canonical(result[-1], ["id", "dt"])


# -- what the snapshots and tags name, read without lakecore -------------------------------
def table_dir(wh: str, name: str) -> Path:
    db, t = name.split(".")
    return Path(wh) / f"{db}.db" / t


def snapshot_json(tdir: Path, sid: int) -> dict[str, Any]:
    return json.loads((tdir / "snapshot" / f"snapshot-{sid}").read_text())


def index_records(tdir: Path, manifest: str | None) -> list[dict[str, Any]]:
    if not manifest:
        return []
    with open(tdir / "manifest" / manifest, "rb") as f:
        return list(fastavro.reader(f))


def referenced_index(tdir: Path) -> tuple[set[str], set[str]]:
    """(index manifests, index files) named by every snapshot and tag on disk."""
    docs = [json.loads(p.read_text()) for d in ("snapshot", "tag")
            for p in (tdir / d).glob(f"{d}-*")]
    manifests = {d["indexManifest"] for d in docs if d.get("indexManifest")}
    files = {r["_FILE_NAME"] for m in manifests for r in index_records(tdir, m)}
    return manifests, files


def on_disk_index(tdir: Path) -> tuple[set[str], set[str]]:
    """(index manifests in ``manifest/``, files in ``index/``)."""
    index_dir = tdir / "index"
    return ({p.name for p in (tdir / "manifest").glob("index-manifest-*")},
            {p.name for p in index_dir.iterdir()} if index_dir.exists() else set())


def assert_index_files_exactly_referenced(tdir: Path) -> None:
    assert on_disk_index(tdir) == referenced_index(tdir)


# -- a dynamic-bucket table ------------------------------------------------------------------
def test_dynamic_bucket_table_keeps_its_hash_index_through_every_lakecore_operation(
        tmp_path: Path) -> None:
    wh, name = str(tmp_path), "db.t"
    tdir = table_dir(wh, name)
    b1 = [rows(range(0, 6), OLD, 1), rows(range(0, 6), NEW, 1)]
    b2 = rows(range(3, 9), NEW, 2)
    paimon_script([
        step("create", wh, name, schema=SCHEMA, partition_keys=["dt"],
             primary_keys=["id", "dt"], options={}),
        step("write", wh, name, data=[pa.concat_tables(b1), b2]),
    ])
    model = apply({}, *b1, b2)
    catalog = CatalogFactory.create({"warehouse": wh})
    t = catalog.get_table(name)
    assert t.options.bucket == -1
    hash_index = snapshot_json(tdir, 2)["indexManifest"]
    assert {r["_INDEX_TYPE"] for r in index_records(tdir, hash_index)} == {"HASH"}

    # compaction: a COMPACT snapshot that changes no index carries the manifest by name
    assert t.compact(full=True).snapshot_ids == (3,)
    assert snapshot_json(tdir, 3)["indexManifest"] == hash_index
    b3 = rows(range(8, 12), NEW, 3)
    model = apply(model, b3)
    assert paimon_write_and_read(wh, name, b3) == expected(model)  # snapshot 4

    # a tag, then snapshot expiry: the HASH files only expired snapshots listed go
    t.create_tag("before", 4)
    model_at_4 = model
    report = t.expire_snapshots(dry_run=False, now=later(), config=KEEP_ONE)
    assert report.snapshots_removed == 3 and report.details["index_files"] >= 1
    assert_index_files_exactly_referenced(tdir)
    b5 = rows(range(40, 43), OLD, 5)  # new keys: a new HASH file for partition OLD
    model = apply(model, b5)
    assert paimon_write_and_read(wh, name, b5) == expected(model)  # snapshot 5

    # rollback to the tag: snapshot 5's new HASH file (partition OLD) goes with it
    rolled = t.rollback_to(tag="before", dry_run=False)
    assert rolled.snapshots_removed == 1
    assert any("/index/" in f.path for f in rolled.plan.files)
    assert_index_files_exactly_referenced(tdir)
    model = model_at_4
    assert paimon_write_and_read(wh, name) == expected(model)
    b5 = rows(range(20, 23), OLD, 6)
    model = apply(model, b5)
    assert paimon_write_and_read(wh, name, b5) == expected(model)  # snapshot 5 again

    # partition expiry (an OVERWRITE): partition OLD's HASH entries go, NEW's stay
    old = encode_row([OLD], [parse_type("STRING NOT NULL")])
    before = index_records(tdir, snapshot_json(tdir, 5)["indexManifest"])
    report = t.copy(EXPIRY).expire_partitions(dry_run=False)
    assert report.to_dict()["dry_run"] is False
    after = index_records(tdir, snapshot_json(tdir, 6)["indexManifest"])
    assert snapshot_json(tdir, 6)["commitKind"] == "OVERWRITE"
    assert any(r["_PARTITION"] == old for r in before)
    assert after == [r for r in before if r["_PARTITION"] != old]
    model = {k: v for k, v in model.items() if k[1] != OLD}
    b7 = [rows(range(0, 2), OLD, 7), rows(range(30, 32), NEW, 7)]
    model = apply(model, *b7)
    assert paimon_write_and_read(wh, name, pa.concat_tables(b7)) == expected(model)  # 7

    # the tag now pins an expired snapshot: deleting it frees the HASH files only it held
    t.expire_snapshots(dry_run=False, now=later(), config=KEEP_ONE)
    assert_index_files_exactly_referenced(tdir)
    held = referenced_index(tdir)
    deleted = t.delete_tag("before", dry_run=False)
    assert any("/index/" in f.path for f in deleted.files)
    assert_index_files_exactly_referenced(tdir)
    assert referenced_index(tdir) != held

    # orphan removal: unreferenced index files and index manifests go, referenced ones stay
    (tdir / "index" / "index-orphan-0").write_bytes(b"\x00\x00\x00\x01")
    (tdir / "manifest" / "index-manifest-orphan-0").write_bytes(b"not avro")
    removed = t.remove_orphan_files(older_than=timedelta(0), now=later(), dry_run=False)
    gone = {Path(f.path).name for f in removed.files}
    assert {"index-orphan-0", "index-manifest-orphan-0"} <= gone
    assert_index_files_exactly_referenced(tdir)
    b8 = rows(range(0, 40, 3), NEW, 8)
    model = apply(model, b8)
    assert paimon_write_and_read(wh, name, b8) == expected(model)

    # lakecore's own OVERWRITE of partition NEW: NEW's HASH entries are replaced by the
    # overwriting writer's (built from nothing), OLD's stay; pypaimon then writes into both
    new = encode_row([NEW], [parse_type("STRING NOT NULL")])
    before = index_records(tdir, t.snapshot_manager.latest().index_manifest)
    b9 = rows(range(100, 103), NEW, 9)
    wb = t.new_batch_write_builder().overwrite({"dt": NEW})
    w = wb.new_write()
    w.write_arrow(b9)
    wb.new_commit().commit(w.prepare_commit())
    w.close()
    latest = t.snapshot_manager.latest()
    assert latest.commit_kind.value == "OVERWRITE"
    after = index_records(tdir, latest.index_manifest)
    assert [r for r in after if r["_PARTITION"] != new] == [
        r for r in before if r["_PARTITION"] != new]
    assert sum(r["_ROW_COUNT"] for r in after if r["_PARTITION"] == new) == 3
    assert not {r["_FILE_NAME"] for r in after} & {
        r["_FILE_NAME"] for r in before if r["_PARTITION"] == new}
    model = apply({k: v for k, v in model.items() if k[1] != NEW}, b9)
    b10 = [rows(range(101, 106), NEW, 10), rows(range(0, 3), OLD, 10)]
    model = apply(model, *b10)
    assert paimon_write_and_read(wh, name, pa.concat_tables(b10)) == expected(model)
    catalog.close()


# -- deletion vectors ------------------------------------------------------------------------
def paimon_delete(wh: str, table: str, ids: list[int]) -> dict[str, Any]:
    args = json.dumps({"warehouse": wh, "table": table, "ids": ids})
    done = subprocess.run([str(PAIMON_PYTHON), str(HELPER), "delete-where-id-in", args],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_deletion_vectors_written_by_pypaimon_survive_lakecore_maintenance(
        tmp_path: Path) -> None:
    """pypaimon deletes rows of a data-evolution table by deletion vectors (index files);
    lakecore's tags, expiry, orphan removal, partition expiry and rollback keep them where a
    snapshot or tag still needs them, and the next snapshot carries ``nextRowId``."""
    wh, name = str(tmp_path), "db.dv"
    tdir = table_dir(wh, name)
    options = {"row-tracking.enabled": "true", "data-evolution.enabled": "true",
               "deletion-vectors.enabled": "true"}
    b1 = pa.concat_tables([rows(range(0, 6), OLD, 1), rows(range(0, 6), NEW, 1)])
    b2 = rows(range(6, 9), NEW, 2)
    paimon_script([step("create", wh, name, schema=SCHEMA, partition_keys=["dt"],
                        options=options),
                   step("write", wh, name, data=[b1, b2])])
    result = paimon_delete(wh, name, [1, 4, 7])
    assert result["snapshot_id"] == 3
    dv_manifest = result["index_manifest"]
    dv = index_records(tdir, dv_manifest)
    assert {r["_INDEX_TYPE"] for r in dv} == {"DELETION_VECTORS"} and len(dv) == 2
    full = [r for b in (b1, b2) for r in b.to_pylist()]
    remaining = [r for r in full if r["id"] not in (1, 4, 7)]
    assert paimon_write_and_read(wh, name) == canonical(
        pa.Table.from_pylist(remaining, SCHEMA), ["id", "dt"])

    catalog = CatalogFactory.create({"warehouse": wh})
    t = catalog.get_table(name)
    t.create_tag("deleted", 3)
    t.expire_snapshots(dry_run=False, now=later(), config=KEEP_ONE)
    t.remove_orphan_files(older_than=timedelta(0), now=later(), dry_run=False)
    assert snapshot_json(tdir, 3)["indexManifest"] == dv_manifest
    assert_index_files_exactly_referenced(tdir)
    assert paimon_write_and_read(wh, name) == canonical(
        pa.Table.from_pylist(remaining, SCHEMA), ["id", "dt"])

    # partition expiry commits an OVERWRITE of partition OLD: its vectors go, NEW's stay, and
    # the snapshot carries nextRowId so pypaimon's next rows get fresh row ids
    next_row_id = snapshot_json(tdir, 3)["nextRowId"]
    t.copy(EXPIRY).expire_partitions(dry_run=False)
    s4 = snapshot_json(tdir, 4)
    assert s4["nextRowId"] == next_row_id
    old = encode_row([OLD], [parse_type("STRING NOT NULL")])
    assert index_records(tdir, s4["indexManifest"]) == [r for r in dv if r["_PARTITION"] != old]
    assert_index_files_exactly_referenced(tdir)
    b5 = rows(range(20, 23), NEW, 5)
    kept = [r for r in remaining if r["dt"] == NEW] + b5.to_pylist()
    assert paimon_write_and_read(wh, name, b5) == canonical(
        pa.Table.from_pylist(kept, SCHEMA), ["id", "dt"])

    # rollback to the tag: the later snapshots' index manifests go, the tag's vectors stay
    t.rollback_to(tag="deleted", dry_run=False)
    assert_index_files_exactly_referenced(tdir)
    assert on_disk_index(tdir)[0] == {dv_manifest}
    assert paimon_write_and_read(wh, name) == canonical(
        pa.Table.from_pylist(remaining, SCHEMA), ["id", "dt"])
    catalog.close()
