"""Data-aware pieces without a scheduler: asset names, Paimon's partition done marks on real
tables (read back by pypaimon), the per-bucket off-peak decision, and the compact job's
``--bucket`` selection on a real table. The scheduler/triggerer scenarios are in
``test_data_aware_scheduler.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from lake_airflow.assets import event_extra, table_uri
from lake_airflow.config import parse_config
from lake_airflow.demo import airflow_env
from lake_airflow.offpeak import BucketState, Window, decide

from lakecore import CatalogFactory, Schema
from lakecore.errors import OptionError, PartitionValueError
from lakecore.options.registry import PartitionMarkDoneAction
from lakecore.store.partition_done import done_mark, done_partitions, mark_partition_done
from tests.airflow.conftest import REPO, run_python
from tests.compat.pypaimon_runner import paimon_available, paimon_read

SF, DP = PartitionMarkDoneAction.SUCCESS_FILE, PartitionMarkDoneAction.DONE_PARTITION


# -- assets ----------------------------------------------------------------------------------
def test_asset_location_names_warehouse_and_table_never_credentials() -> None:
    assert table_uri("/data/wh/", "shop.orders") == "paimon+file:/data/wh/shop.db/orders"
    uri = table_uri("s3://AKIAXYZ:s3cr3t@lake:9000/wh?token=abc#frag", "shop.orders")
    assert uri == "paimon+s3://lake:9000/wh/shop.db/orders"
    assert "s3cr3t" not in uri and "AKIAXYZ" not in uri and "abc" not in uri


ASSET = """
import json
from lake_airflow.assets import compaction_asset, lakecore_asset
a, c = lakecore_asset("shop.orders"), compaction_asset("shop.orders")
try:
    lakecore_asset("shop.order")
    err = None
except Exception as e:
    err = str(e)
print("OUT " + json.dumps({"name": a.name, "uri": a.uri, "group": a.group, "extra": a.extra,
                           "compaction": c.name, "err": err}))
"""


def test_lakecore_asset_is_named_after_the_table_not_its_location(tmp_path: Path) -> None:
    """Built inside Airflow (a fresh interpreter): the asset's name is the table's, the same
    for a moved warehouse; the location is its extra; compactions have their own asset; an
    undeclared table fails at parse time naming the declared ones."""
    outs = []
    for wh in ("wh", "moved-wh"):
        env = airflow_env(tmp_path / "home", tmp_path / wh, tmp_path / "landing")
        line = [x for x in run_python(ASSET, env).splitlines() if x.startswith("OUT ")][-1]
        outs.append(json.loads(line[4:]))
    out, moved = outs
    assert out["name"] == moved["name"] == "lakecore://shop.orders"
    assert out["uri"] == moved["uri"] and out["uri"].startswith("lakecore://shop.orders")
    assert out["group"] == "lakecore" and out["compaction"] == "lakecore://shop.orders/compactions"
    assert out["extra"]["location"] == f"paimon+file:{tmp_path / 'wh'}/shop.db/orders"
    assert moved["extra"]["location"] == f"paimon+file:{tmp_path / 'moved-wh'}/shop.db/orders"
    assert "shop.order" in out["err"] and "shop.customers" in out["err"]


def test_event_extra_sums_the_commits() -> None:
    snaps = [{"id": 4, "kind": "APPEND", "rows": 200, "partitions": ["dt=2026-11-02"]},
             {"id": 5, "kind": "COMPACT", "rows": 0, "partitions": ["dt=2026-11-01",
                                                                    "dt=2026-11-02"]}]
    extra = event_extra(table="shop.orders", job="ingest", snapshots=snaps,
                        run={"dag_id": "d", "task_id": "t", "run_id": "r", "commit_user": "u"},
                        done=["dt=2026-11-02"])
    assert extra["snapshot_ids"] == [4, 5] and extra["snapshot_id"] == 5
    assert extra["commit_kinds"] == ["APPEND", "COMPACT"] and extra["commit_kind"] == "COMPACT"
    assert extra["rows"] == 200 and extra["records_merged_away"] == 0
    assert extra["partitions"] == ["dt=2026-11-01", "dt=2026-11-02"]
    assert extra["partitions_done"] == ["dt=2026-11-02"]
    json.dumps(extra)  # an asset event's extra must be JSON


def test_event_extras_say_what_changed_in_words() -> None:
    run = {"dag_id": "d", "task_id": "t", "run_id": "r", "commit_user": "u"}
    compact = event_extra(table="shop.customers", job="compact", run=run, snapshots=[
        {"id": 9, "kind": "COMPACT", "rows": -91, "partitions": [""]}])
    assert "rows" not in compact and compact["records_merged_away"] == 91  # not "rows -91"
    assert compact["partitions"] == []  # an unpartitioned table: no "" partition
    assert compact["summary"] == ("compact: COMPACT snapshot(s) 9: 91 superseded or deleted "
                                  "row versions merged away, data unchanged")
    back = event_extra(table="shop.orders", job="backfill", run=run, done=["dt=2026-11-01"],
                       snapshots=[{"id": 3, "kind": "OVERWRITE", "rows": -4,
                                   "partitions": ["dt=2026-11-01"]}])
    assert back["job"] == "backfill" and back["rows"] == -4
    assert back["summary"] == "backfill: OVERWRITE snapshot(s) 3: -4 rows (net) in dt=2026-11-01"


# -- the off-peak decision -------------------------------------------------------------------
NIGHT = Window(start_hour=22, end_hour=6, compaction_trigger=3, stop_trigger=6)


@pytest.mark.parametrize(("hour", "inside"), [(22, True), (23, True), (0, True), (5, True),
                                              (6, False), (12, False), (21, False)])
def test_window_wraps_past_midnight_end_exclusive(hour: int, inside: bool) -> None:
    assert NIGHT.contains(hour) is inside


def test_bucket_decisions_and_their_reasons() -> None:
    below = BucketState("dt=2026-11-01", 0, 2, 2, picked=False)
    past = BucketState("dt=2026-11-01", 1, 4, 4, picked=True)
    stop = BucketState("dt=2026-11-02", 0, 6, 5, picked=True)
    d = decide(below, NIGHT, hour=23)
    assert not d.compact and "not past num-sorted-run.compaction-trigger (3)" in d.reason
    d = decide(past, NIGHT, hour=12)
    assert not d.compact and "outside the off-peak 22:00-06:00 window (hour 12)" in d.reason
    d = decide(past, NIGHT, hour=2)
    assert d.compact and "inside the off-peak 22:00-06:00 window (hour 02)" in d.reason
    d = decide(stop, NIGHT, hour=12)
    assert d.compact and "reached num-sorted-run.stop-trigger (6)" in d.reason
    assert d.arg == "dt=2026-11-02:0"
    assert decide(past, NIGHT, hour=12, ignore_window=True).compact
    anytime = Window(-1, -1, 3, 6)
    assert decide(past, anytime, hour=12).compact
    assert BucketState("a=1/b=x", 3, 1, 1, True) and \
        decide(BucketState("a=1/b=x", 3, 9, 9, True), NIGHT, 1).arg == "a=1,b=x:3"
    assert decide(BucketState("", 2, 9, 9, True), NIGHT, 1).arg == "2"


# -- partition done marks ----------------------------------------------------------------------
def _orders(tmp: Path, options: dict[str, str] | None = None) -> Any:
    catalog = CatalogFactory.create({"warehouse": str(tmp / "wh")})
    catalog.create_database("shop", ignore_if_exists=True)
    schema = Schema.from_pyarrow_schema(
        pa.schema([pa.field("dt", pa.string(), nullable=False),
                   pa.field("id", pa.int64(), nullable=False), ("v", pa.string())]),
        partition_keys=["dt"], primary_keys=["dt", "id"],
        options={"bucket": "2", **(options or {})})
    catalog.create_table("shop.orders", schema)
    table = catalog.get_table("shop.orders")
    wb = table.copy({"write-only": "true"}).new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.table({"dt": ["2026-11-01"] * 3 + ["2026-11-02"], "id": [1, 2, 3, 1],
                            "v": ["a", "b", "c", "d"]}))
    wb.new_commit().commit(w.prepare_commit())
    return table


def test_success_file_and_done_partition_as_paimon_writes_them(tmp_path: Path) -> None:
    table = _orders(tmp_path, {"partition.end-input-to-done": "true",
                               "partition.mark-done-action": "success-file,done-partition"})
    assert table.options.partition_mark_done_actions == (SF, DP)
    written = mark_partition_done(table, {"dt": "2026-11-01"}, snapshot_id=1,
                                  now_millis=1_700_000_000_000)
    success = tmp_path / "wh" / "shop.db" / "orders" / "dt=2026-11-01" / "_SUCCESS"
    record = (tmp_path / "wh" / "shop.db" / "orders" / "_lakecore" / "done-partitions"
              / "dt=2026-11-01.done")
    assert sorted(written) == sorted([str(success), str(record)])
    # Paimon's SuccessFile JSON: exactly these two fields, epoch millis
    assert json.loads(success.read_text()) == {"creationTime": 1_700_000_000_000,
                                               "modificationTime": 1_700_000_000_000}
    rec = json.loads(record.read_text())
    assert rec["donePartition"] == {"dt": "2026-11-01.done"}
    assert rec["partition"] == {"dt": "2026-11-01"} and rec["snapshotId"] == 1
    # marking again keeps the creation time and moves the modification time
    mark_partition_done(table, {"dt": "2026-11-01"}, snapshot_id=2,
                        now_millis=1_700_000_500_000)
    assert json.loads(success.read_text()) == {"creationTime": 1_700_000_000_000,
                                               "modificationTime": 1_700_000_500_000}
    mark = done_mark(table, {"dt": "2026-11-01"})
    assert mark is not None and mark.marked_at == 1_700_000_500_000 and mark.snapshot_id == 2
    assert done_mark(table, {"dt": "2026-11-02"}) is None
    listed = done_partitions(table, [{"dt": "2026-11-01"}, {"dt": "2026-11-02"}])
    assert [m.to_dict()["partition"] for m in listed] == ["dt=2026-11-01"]
    # orphan-file removal leaves the marks alone
    table.remove_orphan_files(older_than=None, dry_run=False)
    assert success.exists() and record.exists()


@pytest.mark.skipif(not paimon_available(), reason="pypaimon venv missing")
def test_pypaimon_reads_a_table_with_done_marks(tmp_path: Path) -> None:
    table = _orders(tmp_path, {"partition.end-input-to-done": "true"})
    mark_partition_done(table, {"dt": "2026-11-01"})
    assert (tmp_path / "wh" / "shop.db" / "orders" / "dt=2026-11-01" / "_SUCCESS").exists()
    data = paimon_read(tmp_path / "wh", "shop.orders")
    assert sorted(zip(data["dt"].to_pylist(), data["id"].to_pylist(), strict=True)) == [
        ("2026-11-01", 1), ("2026-11-01", 2), ("2026-11-01", 3), ("2026-11-02", 1)]


def test_bad_marks_are_refused_and_write_nothing(tmp_path: Path) -> None:
    table = _orders(tmp_path)
    with pytest.raises(PartitionValueError, match=r"partition key \['dt'\]"):
        mark_partition_done(table, {"day": "2026-11-01"})
    with pytest.raises(PartitionValueError, match="path separator"):
        mark_partition_done(table, {"dt": "../x"})
    with pytest.raises(PartitionValueError, match="http-report"):
        mark_partition_done(table, {"dt": "2026-11-01"},
                            actions=[PartitionMarkDoneAction.HTTP_REPORT])
    assert not list((tmp_path / "wh" / "shop.db" / "orders").rglob("_SUCCESS"))
    catalog = CatalogFactory.create({"warehouse": str(tmp_path / "wh2")})
    catalog.create_database("d")
    with pytest.raises(OptionError, match="partition.mark-done-action"):
        catalog.create_table("d.t", Schema.from_pyarrow_schema(
            pa.schema([("a", pa.int64())]),
            options={"partition.mark-done-action": "mark-event"}))


def test_the_tables_file_marks_orders_done_with_both_actions() -> None:
    cfg = parse_config(yaml.safe_load((REPO / "dags" / "lakecore_tables.yaml").read_text()),
                       "repo", {"LAKECORE_WAREHOUSE": "/wh"})
    o = cfg.table("shop.orders").options
    assert o["partition.end-input-to-done"] == "true"
    assert o["partition.mark-done-action"] == "success-file,done-partition"
    assert (o["compaction.offpeak.start.hour"], o["compaction.offpeak.end.hour"]) == ("0", "6")


# -- the compact job compacts exactly the chosen buckets ---------------------------------------
def test_compact_request_buckets_limit_the_plan(tmp_path: Path) -> None:
    from lakecore.spark.compact import CompactRequest, plan_compact
    from lakecore.spark.jobs.compact import parse_bucket

    table = _orders(tmp_path, {"num-sorted-run.compaction-trigger": "1"})
    writer = table.copy({"write-only": "true"})  # no inline compaction
    for k in range(2):  # more level-0 runs in every bucket of both partitions
        wb = writer.new_batch_write_builder()
        w = wb.new_write()
        w.write_arrow(pa.table({"dt": ["2026-11-01"] * 3 + ["2026-11-02"] * 3,
                                "id": [1, 2, 3, 1, 2, 3], "v": [f"v{k}"] * 6}))
        wb.new_commit().commit(w.prepare_commit())
    everything = plan_compact(table, CompactRequest())
    pairs = {(t.partition[0], t.bucket) for t in everything.tasks}
    assert len(pairs) >= 3
    chosen = sorted(pairs)[0]
    only = plan_compact(table, CompactRequest(buckets=((parse_bucket(
        f"dt={chosen[0]}:{chosen[1]}", ["dt"])),)))
    assert [(t.partition[0], t.bucket) for t in only.tasks] == [chosen]
    none = plan_compact(table, CompactRequest(buckets=()))
    assert not none.tasks and none.skipped_reason == "no bucket was chosen for compaction"
    for bad, msg in (("0", "name the partition"), ("dt=x:one", "BUCKET"),
                     ("day=x:0", "not a partition key")):
        with pytest.raises(ValueError, match=msg):
            parse_bucket(bad, ["dt"])


# -- what the partition sensor waits for -------------------------------------------------------
def test_sensor_condition_done_or_a_newer_snapshot(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from lake_airflow.changes import check_partition
    from lake_airflow.tables import ensure_table, open_catalog

    data = yaml.safe_load((REPO / "dags" / "lakecore_tables.yaml").read_text())
    data["warehouse"] = str(tmp_path / "wh")
    tables = tmp_path / "tables.yaml"
    tables.write_text(yaml.safe_dump(data))
    monkeypatch.setenv("LAKECORE_TABLES_CONFIG", str(tables))
    cfg = parse_config(data, str(tables))
    assert check_partition("shop.orders", "dt=2026-11-01", None) is None  # no table yet
    ensure_table(open_catalog(cfg), cfg.table("shop.orders"))
    table = CatalogFactory.create({"warehouse": str(tmp_path / "wh")}).get_table("shop.orders")
    for day in ("2026-11-01", "2026-11-02"):  # snapshots 1 and 2, one partition each
        wb = table.new_batch_write_builder()
        w = wb.new_write()
        w.write_arrow(pa.table({"dt": [day], "order_id": [1], "customer_id": [7],
                                "amount": [1.5], "status": ["open"],
                                "updated_at": pa.array([0], pa.timestamp("us"))}))
        wb.new_commit().commit(w.prepare_commit())
    assert check_partition("shop.orders", "dt=2026-11-01", None) is None  # written, not done
    hit = check_partition("shop.orders", "dt=2026-11-01", 0)
    assert hit is not None and hit["condition"] == "snapshot" and hit["snapshot_ids"] == [1]
    assert check_partition("shop.orders", "dt=2026-11-01", 1) is None  # 2 touched only 11-02
    assert check_partition("shop.orders", "dt=2026-11-02", 1)["snapshot_ids"] == [2]
    mark_partition_done(table, {"dt": "2026-11-01"}, snapshot_id=1)
    done = check_partition("shop.orders", "dt=2026-11-01", None)
    assert done is not None and done["condition"] == "done"
    assert done["partition"] == "dt=2026-11-01" and done["done_partition"] == "dt=2026-11-01.done"
    with pytest.raises(ValueError, match="not a partition key"):
        check_partition("shop.orders", "day=2026-11-01", None)
