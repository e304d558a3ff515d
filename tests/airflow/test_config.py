"""The tables file: parsing, env expansion and the errors that name the offending key."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml
from lake_airflow.config import (
    CompactionStrategy,
    LakeConfigError,
    SourceFormat,
    expand_env,
    load_config,
    parse_config,
)

REPO = Path(__file__).resolve().parents[2]
ENV = {"LAKECORE_WAREHOUSE": "/wh", "LAKECORE_LANDING": "/land"}


def minimal(**table: Any) -> dict[str, Any]:
    t = {"name": "db.t", "columns": [{"name": "dt", "type": "STRING NOT NULL"},
                                     {"name": "id", "type": "BIGINT NOT NULL"}],
         "primary_key": ["dt", "id"], "partition_keys": ["dt"], "date_partition": "dt",
         "source": {"path": "/src/dt={date}"}}
    t.update(table)
    return {"warehouse": "/wh", "tables": [t]}


def test_repo_tables_file_parses_with_env() -> None:
    data = yaml.safe_load((REPO / "dags" / "lakecore_tables.yaml").read_text())
    cfg = parse_config(data, "repo", ENV)
    assert cfg.warehouse == "/wh"
    assert cfg.table_names == ["shop.orders", "shop.customers"]
    orders = cfg.table("shop.orders")
    assert orders.date_partition == "dt" and orders.slug == "shop__orders"
    assert orders.source.path_for(date(2026, 11, 1)) == "/land/orders/dt=2026-11-01"
    assert orders.partition_spec(date(2026, 11, 1)) == {"dt": "2026-11-01"}
    customers = cfg.table("shop.customers")
    assert customers.source.format is SourceFormat.JSON
    assert customers.options["sequence.field"] == "updated_at"
    assert customers.partition_spec(date(2026, 11, 1)) == {}
    assert cfg.compaction.strategy is CompactionStrategy.UNIVERSAL
    assert cfg.schedules.compaction == "0 2 * * *"
    assert cfg.lock_conn_id == "lakecore_lock"


def test_defaults_apply_without_env() -> None:
    data = yaml.safe_load((REPO / "dags" / "lakecore_tables.yaml").read_text())
    assert parse_config(data, "repo", {}).warehouse == "/opt/lakecore/warehouse"


def test_expand_env() -> None:
    assert expand_env("${A}/x/${B:-b}", {"A": "a"}) == "a/x/b"
    with pytest.raises(LakeConfigError, match="NOPE"):
        expand_env("${NOPE}", {})


@pytest.mark.parametrize(("change", "message"), [
    ({"name": "nodot"}, r"tables\[0\]\.name"),
    ({"primary_key": ["dt", "ghost"]}, r"primary_key: unknown column\(s\) \['ghost'\]"),
    ({"date_partition": "id"}, "date_partition"),
    ({"source": {"path": "/src/static"}}, r"put \{date\} in the path"),
    ({"source": {"path": "/src/{date}", "format": "avro"}}, "source.format"),
    ({"columns": []}, "at least one column"),
    ({"partition_keys": [], "date_partition": None}, "sequence.field"),
])
def test_errors_name_the_key(change: dict[str, Any], message: str) -> None:
    with pytest.raises(LakeConfigError, match=message):
        parse_config(minimal(**change), "t.yaml", {})


def test_duplicate_and_missing_tables() -> None:
    data = minimal()
    data["tables"].append(dict(data["tables"][0]))
    with pytest.raises(LakeConfigError, match="declared twice"):
        parse_config(data, "t.yaml", {})
    with pytest.raises(LakeConfigError, match="at least one table"):
        parse_config({"warehouse": "/w", "tables": []}, "t.yaml", {})
    cfg = parse_config(minimal(), "t.yaml", {})
    with pytest.raises(LakeConfigError, match="declared: db.t"):
        cfg.table("db.other")


def test_load_config_caches_by_text_and_env(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "tables.yaml"
    data = minimal()
    data["warehouse"] = "${LAKECORE_WAREHOUSE}"
    p.write_text(yaml.safe_dump(data))
    monkeypatch.setenv("LAKECORE_WAREHOUSE", "/one")
    assert load_config(p).warehouse == "/one"
    assert load_config(p) is load_config(p)
    monkeypatch.setenv("LAKECORE_WAREHOUSE", "/two")
    assert load_config(p).warehouse == "/two"
    with pytest.raises(LakeConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
