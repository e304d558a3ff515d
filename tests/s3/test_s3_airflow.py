"""The DAGs pointed at a bucket: the tables file's ``catalog_options`` (Paimon's ``s3.*`` keys,
``commit.protocol``) reach the catalog, the Spark driver (through its environment, never argv)
and the Lake tables page (keys only, never a credential)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi import Request
from fastapi.testclient import TestClient
from lake_airflow import spark_launch
from lake_airflow.config import CompactionStrategy, LakeConfig, LakeConfigError, parse_config
from lake_airflow.health.app import create_app
from lake_airflow.health.report import health_report
from lake_airflow.lock import LockTarget, is_secret_option
from lake_airflow.submit import RunInfo, compact_spec, ingest_spec
from lake_airflow.tables import ensure_table, open_catalog

from lakecore.store.s3 import ALIASES, is_secret_key
from tests.s3.server import SECRET_KEY, MotoServer

REPO = Path(__file__).resolve().parents[2]


def config(moto_server: MotoServer, bucket: str, protocol: str = "conditional-put"
           ) -> LakeConfig:
    """The repository's tables file, with the bucket's options in ``catalog_options`` (the
    secret from the environment, as a deployment would)."""
    data = yaml.safe_load((REPO / "dags" / "lakecore_tables.yaml").read_text())
    options = moto_server.catalog_options(bucket)
    data["warehouse"] = options.pop("warehouse")
    options["s3.secret-key"] = "${LAKE_S3_SECRET}"
    data["catalog_options"] = {**options, "commit.protocol": protocol}
    return parse_config(data, "test", {"LAKE_S3_SECRET": SECRET_KEY,
                                       "LAKECORE_LANDING": "/landing"})


def test_the_tables_file_takes_catalog_options_but_not_the_lock_or_warehouse():
    base = {"warehouse": "s3://b/wh", "tables": yaml.safe_load(
        (REPO / "dags" / "lakecore_tables.yaml").read_text())["tables"]}
    for key in ("lock.uri", "lock-acquire-timeout", "warehouse"):
        with pytest.raises(LakeConfigError, match=f"catalog_options.{key}"):
            parse_config({**base, "catalog_options": {key: "x"}}, "t", {})
    cfg = parse_config({**base, "catalog_options": {"s3.path.style.access": True}}, "t", {})
    assert cfg.catalog_options == {"s3.path.style.access": "true"} and not cfg.conditional_put


def test_the_plugins_secret_rule_covers_every_lakecore_credential_key():
    """The plugin cannot import lakecore at DAG-parse time: its copy of the rule is pinned."""
    for key, canonical in ALIASES.items():
        assert is_secret_option(key) == is_secret_key(key), (key, canonical)


def run_info() -> RunInfo:
    return RunInfo("lakecore_ingest", "ingest_shop__orders", "manual__1", "manual",
                   datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC), -1, 0)


def test_specs_carry_no_option_value_and_no_lock_under_conditional_writes(moto_server, bucket):
    cfg = config(moto_server, bucket)
    orders = cfg.table("shop.orders")
    for spec in (ingest_spec(cfg, orders, run_info(), date(2026, 11, 1), overwrite=False),
                 compact_spec(cfg, orders, strategy=CompactionStrategy.FULL)):
        argv = " ".join(spec.application_args)
        assert SECRET_KEY not in argv and "s3.endpoint" not in argv
        assert "lock.enabled" not in argv
    locked = config(moto_server, bucket, "lock")
    spec = ingest_spec(locked, orders, run_info(), date(2026, 11, 1), overwrite=False)
    assert "lock.enabled=true" in spec.application_args


def test_the_launcher_moves_catalog_options_from_env_to_the_job():
    env = {"LAKECORE_CATALOG_OPTIONS": json.dumps({"s3.secret-key": "sh", "s3.region": "r"})}
    job, args = spark_launch.job_argv(["compact", "--table", "db.t"], env)
    assert args == ["--table", "db.t", "--catalog-option", "s3.secret-key=sh",
                    "--catalog-option", "s3.region=r"]
    assert env == {}


async def _login(request: Request) -> Any:
    class User:
        def get_name(self) -> str:
            return "tester"

    return User()


def test_prepare_and_the_lake_tables_page_on_a_bucket(moto_server, bucket):
    cfg = config(moto_server, bucket)
    catalog = open_catalog(cfg, LockTarget("sqlite:////nonexistent/l.db", "x", "connection"))
    for spec in cfg.tables:
        assert ensure_table(catalog, spec) == "created"
    table = catalog.get_table("shop.orders")
    assert table.file_io.conditional_writes  # the lock target was not used
    catalog.close()

    report = health_report(cfg, lock_resolver=lambda _: pytest.fail("no lock is resolved"))
    assert report["lock"] == "none (commits use conditional writes)"
    assert [t["exists"] for t in report["tables"]] == [True, True]
    assert "s3.secret-key" in report["catalog_options"]
    client = TestClient(create_app(_login, lambda: report))
    for path in ("/", "/api/tables"):
        body = client.get(path).text
        assert SECRET_KEY not in body and "lakecore-test-access" not in body
    assert "catalog options: " in client.get("/").text
