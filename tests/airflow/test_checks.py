"""The run checks of the DAGs' first task (``lake_airflow.checks``) on real landing folders and
a real table, and, through Airflow itself, refused runs that start nothing: no ``prepare``, no
Spark, no table, no tag, no retry."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from lake_airflow.changes import live_partitions
from lake_airflow.checks import (
    RunRefused,
    backfill_dates,
    check_partition_keys,
    check_partitions_exist,
    check_sources,
    landing_dates,
)
from lake_airflow.config import LakeConfig, parse_config
from lake_airflow.demo import orders_extract, write_orders
from lake_airflow.tables import ensure_table, open_catalog

from tests.airflow.conftest import REPO
from tests.airflow.test_pipeline import Lake, task

D1, D2 = "2026-11-01", "2026-11-02"


def config(tmp: Path) -> LakeConfig:
    return parse_config(yaml.safe_load((REPO / "dags" / "lakecore_tables.yaml").read_text()),
                        "repo", {"LAKECORE_WAREHOUSE": str(tmp / "wh"),
                                 "LAKECORE_LANDING": str(tmp / "landing")})


def test_backfill_range() -> None:
    assert backfill_dates("2026-10-30", "2026-11-02", 31) == [
        "2026-10-30", "2026-10-31", "2026-11-01", "2026-11-02"]
    assert backfill_dates(D1, D1, 1) == [D1]
    with pytest.raises(RunRefused, match="End date 2026-11-01 is before Start date 2026-11-02"):
        backfill_dates(D2, D1, 31)
    with pytest.raises(RunRefused, match="60 partitions; a backfill rewrites at most 31"):
        backfill_dates("2026-01-01", "2026-03-01", 31)
    with pytest.raises(RunRefused, match="must be dates"):
        backfill_dates("11/01/2026", D2, 31)


def test_missing_landing_data_names_the_path_and_the_dates_that_exist(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    orders, customers = cfg.table("shop.orders"), cfg.table("shop.customers")
    with pytest.raises(RunRefused) as e:
        check_sources([orders], date(2026, 11, 2))
    assert str(e.value).startswith("no landing data for 2026-11-02: shop.orders reads "
                                   f"{tmp_path / 'landing' / 'orders' / 'dt=2026-11-02'}, "
                                   "which does not exist; no date has landing data yet")
    for day in (D1, "2026-10-30"):
        write_orders(tmp_path / "landing", day)
    (tmp_path / "landing" / "orders" / "dt=junk").mkdir()
    assert landing_dates(orders) == [D1, "2026-10-30"]
    check_sources([orders], date(2026, 11, 1))  # there: nothing raised
    with pytest.raises(RunRefused) as e:
        check_sources([orders, customers], date(2026, 11, 2))
    message = str(e.value)
    assert "dates with landing data: 2026-11-01, 2026-10-30" in message
    assert f"shop.customers reads {tmp_path / 'landing' / 'customers' / 'batch=2026-11-02'}" \
        in message
    assert "\n" not in message  # one line


def test_partitions_must_fit_the_chosen_tables(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    orders, customers = cfg.table("shop.orders"), cfg.table("shop.customers")
    assert check_partition_keys([orders, customers], []) == {"shop.orders": [],
                                                             "shop.customers": []}
    assert check_partition_keys([orders], [f"dt={D1}"]) == {"shop.orders": [{"dt": D1}]}
    with pytest.raises(RunRefused, match=r"shop.customers is not partitioned: choose only "
                       r"partitioned tables in Tables \(shop.orders\)"):
        check_partition_keys([orders, customers], [f"dt={D1}"])
    with pytest.raises(RunRefused, match="'region' is not a partition key.*its partition keys "
                       "are dt"):
        check_partition_keys([orders], ["region=eu"])


def test_partitions_must_exist(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    catalog = open_catalog(cfg)
    ensure_table(catalog, cfg.table("shop.orders"))
    table = catalog.get_table("shop.orders")
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.concat_tables([orders_extract(D1), orders_extract(D2)]))
    wb.new_commit().commit(w.prepare_commit())
    live = live_partitions(table)
    assert live == [{"dt": D1}, {"dt": D2}]
    check_partitions_exist("shop.orders", [{"dt": D2}], live)
    with pytest.raises(RunRefused, match="shop.orders has no partition dt=2026-11-05 "
                       r"\(newest partitions: dt=2026-11-01, dt=2026-11-02\)"):
        check_partitions_exist("shop.orders", [{"dt": D2}, {"dt": "2026-11-05"}], live)


@pytest.mark.slow
def test_refused_runs_start_nothing(tmp_path: Path) -> None:
    """Through Airflow (one process, four runs): each bad run fails in its first task, once
    (no retry), and every task after it is upstream_failed: no prepare, no Spark job, no
    table, no tag."""
    lake = Lake(tmp_path)
    write_orders(lake.landing, D1)
    back, ingest, compact_all, compact_key = lake.run(
        {"dag": "lakecore_backfill", "date": "2026-11-20",
         "conf": {"table": "shop.orders", "start_date": D2, "end_date": D1}},
        {"dag": "lakecore_ingest", "date": D2, "conf": {"tables": ["shop.orders"]}},
        {"dag": "lakecore_compaction", "date": D2, "conf": {"partitions": [f"dt={D1}"]}},
        {"dag": "lakecore_compaction", "date": D2,
         "conf": {"tables": ["shop.orders"], "partitions": ["region=eu"]}},
        check=False)
    for run, first in ((back, "plan_partitions"), (ingest, "check"), (compact_all, "check"),
                       (compact_key, "check")):
        assert run["state"] == "failed", run
        t = task(run, first)
        assert t["state"] == "failed" and t["try_number"] == 1, t
        others = {x["state"] for x in run["tasks"] if x["task_id"] != first}
        assert others == {"upstream_failed"}, run["tasks"]
    assert not (lake.warehouse / "shop.db").exists()  # no table created, tagged or written
    log = "\n".join(lake.output)
    for message in ("End date 2026-11-01 is before Start date 2026-11-02",
                    "no landing data for 2026-11-02: shop.orders reads "
                    f"{lake.landing / 'orders' / 'dt=2026-11-02'}, which does not exist; "
                    "dates with landing data: 2026-11-01",
                    "shop.customers is not partitioned",
                    "'region' is not a partition key"):
        assert message in log, message
    assert "spark-submit" not in log
