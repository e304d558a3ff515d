"""DAG integrity (tests/dags/test_dag_integrity.py in the Astronomer template): every DAG file
imports without errors, one DAG per file, tags, retries and docs set, Params typed, titled,
described and valid, and parsing loads neither lakecore nor pyspark.

Parsing happens in a fresh interpreter, so ``sys.modules`` shows exactly what the DAG files
(and the plugin they import) load."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from lake_airflow.demo import airflow_env

from tests.airflow.conftest import REPO, run_python

HEAVY = ("lakecore", "pyspark", "pyarrow")
EXPECTED = {"lakecore_ingest", "lakecore_compaction", "lakecore_maintenance",
            "lakecore_backfill", "lakecore_orders_report", "lakecore_partition_ready"}
ASSET_SCHEDULED = {"lakecore_orders_report"}  # runs on asset events: no Params to set

PARSE = r"""
import json, sys
from airflow.dag_processing.dagbag import DagBag
from airflow.serialization.serialized_objects import DagSerialization

def uris(cond):
    if cond is None:
        return []
    if hasattr(cond, "uri"):
        return [cond.uri]
    return [u for c in cond.objects for u in uris(c)]

bag = DagBag(dag_folder=sys.argv[1])
out = {"import_errors": {k: str(v)[-500:] for k, v in bag.import_errors.items()}, "dags": {}}
for dag_id, dag in bag.dags.items():
    params = {}
    for name in dag.params:
        p = dag.params.get_param(name)
        params[name] = {"schema": p.schema, "has_default": p.has_value,
                        "value": p.value if p.has_value else None,
                        "description": p.description}
    try:
        dag.params.validate()
        defaults_valid = True
    except Exception as e:
        defaults_valid = str(e)
    DagSerialization.to_dict(dag)  # what the dag-processor stores must serialize
    out["dags"][dag_id] = {
        "file": dag.fileloc, "tags": sorted(dag.tags), "doc_md": dag.doc_md or "",
        "schedule": None if dag.schedule is None else str(dag.schedule),
        "scheduled": bool(dag.timetable.can_be_scheduled), "params": params,
        "timetable": type(dag.timetable).__name__,
        "summary": str(getattr(getattr(dag.timetable, "timetable", None), "expression", "")),
        "asset_uris": sorted(uris(getattr(dag.timetable, "asset_condition", None))),
        "outlets": {t.task_id: sorted(getattr(o, "name", "") for o in t.outlets)
                    for t in dag.tasks},
        "defaults_valid": defaults_valid,
        "tasks": {t.task_id: {"retries": t.retries, "type": type(t).__name__,
                              "doc": bool(getattr(t, "doc_md", None)),
                              "upstream": sorted(t.upstream_task_ids)} for t in dag.tasks},
    }
out["modules"] = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
if LOAD_PLUGINS:
    from airflow import plugins_manager as pm
    apps = pm.get_fastapi_plugins()[0]
    out["plugins"] = {"errors": pm.get_import_errors(), "views": pm._get_ui_plugins()[0],
                      "apps": [{k: v for k, v in a.items() if k != "app"} for a in apps],
                      "modules": sorted(m for m in sys.modules if m.split(".")[0] in
                                        ("lakecore", "pyspark"))}
print("REPORT " + json.dumps(out, default=str))
""".replace("HEAVY", repr(HEAVY))


def parse(env: dict[str, str], dags: Path, plugins: bool = False) -> dict[str, Any]:
    code = PARSE.replace("sys.argv[1]", repr(str(dags))).replace("LOAD_PLUGINS",
                                                                   repr(plugins))
    line = [x for x in run_python(code, env).splitlines() if x.startswith("REPORT ")][-1]
    return json.loads(line[len("REPORT "):])


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("integrity")
    env = airflow_env(tmp / "home", tmp / "warehouse", tmp / "landing")
    return {**parse(env, REPO / "dags", plugins=True), "warehouse": str(tmp / "warehouse"),
            "landing": str(tmp / "landing")}


def test_every_dag_file_imports(report: dict[str, Any]) -> None:
    assert report["import_errors"] == {}
    assert set(report["dags"]) == EXPECTED
    files = [Path(d["file"]).name for d in report["dags"].values()]
    assert sorted(files) == sorted(f"{d}.py" for d in EXPECTED)  # one DAG per file


def test_no_lakecore_or_pyspark_at_parse_time(report: dict[str, Any]) -> None:
    assert report["modules"] == []


FIRST = {"lakecore_ingest": "check", "lakecore_compaction": "check",
         "lakecore_backfill": "plan_partitions"}  # changes nothing, refuses bad runs


def test_tags_retries_docs(report: dict[str, Any]) -> None:
    for dag_id, dag in report["dags"].items():
        assert "lakecore" in dag["tags"] and len(dag["tags"]) >= 2, dag_id
        assert len(dag["doc_md"]) > 200 and "shop.orders" in dag["doc_md"], dag_id
        for task_id, task in dag["tasks"].items():
            if FIRST.get(dag_id) == task_id:  # a refused run is not transient: no retry
                assert task["retries"] == 0, (dag_id, task_id)
            else:
                assert task["retries"] >= 1, (dag_id, task_id)


def test_the_checks_run_first_before_prepare(report: dict[str, Any]) -> None:
    for dag_id, first in FIRST.items():
        tasks = report["dags"][dag_id]["tasks"]
        assert tasks[first]["upstream"] == [], dag_id
        assert tasks["prepare"]["upstream"] == [first], dag_id
    for dag_id in ("lakecore_ingest", "lakecore_maintenance", "lakecore_backfill"):
        assert "Unpause on trigger" in report["dags"][dag_id]["doc_md"], dag_id


def test_params_are_typed_titled_described_and_valid(report: dict[str, Any]) -> None:
    for dag_id, dag in report["dags"].items():
        assert dag["params"] or dag_id in ASSET_SCHEDULED, dag_id
        for name, p in dag["params"].items():
            s = p["schema"]
            assert s.get("type") and s.get("title") and p["description"], (dag_id, name)
        if dag["scheduled"]:
            assert dag["defaults_valid"] is True, dag_id  # scheduled runs use the defaults
    b = report["dags"]["lakecore_backfill"]["params"]
    assert b["table"]["schema"]["enum"] == ["shop.orders"]  # only date-partitioned tables
    assert "only the tables partitioned by date" in b["table"]["description"]
    for name in ("start_date", "end_date"):
        assert b[name]["schema"]["format"] == "date" and not b[name]["has_default"]
    c = report["dags"]["lakecore_compaction"]["params"]
    assert c["strategy"]["schema"]["enum"] == ["universal", "full"]
    assert c["parallelism"]["schema"]["minimum"] == 1
    for dag_id in ("lakecore_ingest", "lakecore_compaction", "lakecore_maintenance"):
        # a multi-select of the declared tables; optional (null allowed) since empty = all
        t = report["dags"][dag_id]["params"]["tables"]
        assert t["schema"]["type"] == ["array", "null"], dag_id
        assert t["schema"]["items"]["enum"] == ["shop.orders", "shop.customers"]
        assert t["schema"]["examples"] == ["shop.orders", "shop.customers"]
        assert "Empty (the default): every declared table" in t["description"]
        assert t["value"] == []
    parts = c["partitions"]["schema"]
    assert parts["type"] == ["array", "null"] and parts["items"]["pattern"]
    m = report["dags"]["lakecore_ingest"]["params"]["merge_schema"]
    assert m["schema"]["type"] == "boolean" and m["has_default"]  # default off
    assert "landing" in report["dags"]["lakecore_ingest"]["doc_md"]
    assert (f"The run's logical date picks the landing folder each table reads (shop.orders: "
            f"{report['landing']}/orders/dt=<date>;") in \
        report["dags"]["lakecore_ingest"]["params"]["tables"]["description"]
    maint = report["dags"]["lakecore_maintenance"]
    dry = maint["params"]["dry_run"]  # a run you trigger: dry unless asked; schedule: YAML
    assert dry["schema"]["type"] == "boolean" and dry["value"] is True
    assert "Scheduled runs ignore this box" in dry["description"]
    assert "dry run unless you untick" in maint["doc_md"]
    age = maint["params"]["orphan_older_than"]["schema"]
    assert "1 d" in age["enum"] and "12 h" in age["enum"]  # a choice: no regex in errors
    ready = report["dags"]["lakecore_partition_ready"]["params"]["partition"]["schema"]
    assert ready["pattern"] and ready["minLength"] == 3


def test_generated_from_the_tables_file(report: dict[str, Any]) -> None:
    ingest = report["dags"]["lakecore_ingest"]["tasks"]
    assert {t: v["type"] for t, v in ingest.items() if t.startswith("ingest_")} == {
        "ingest_shop__orders": "LakeIngestOperator",
        "ingest_shop__customers": "LakeIngestOperator"}
    maint = report["dags"]["lakecore_maintenance"]["tasks"]
    for table in ("shop__orders", "shop__customers"):
        for step in ("expire_snapshots", "expire_partitions", "remove_orphans"):
            assert maint[f"{table}.{step}"]["type"] == "LakeMaintainOperator"
        assert report["dags"]["lakecore_compaction"]["tasks"][f"{table}.compact"]["type"] == \
            "LakeCompactOperator"
    comp = report["dags"]["lakecore_compaction"]
    assert comp["timetable"] == "AssetOrTimeSchedule"  # nightly cron or any table's event
    assert "0 2 * * *" in comp["summary"]
    assert comp["asset_uris"] == ["lakecore://shop.customers/", "lakecore://shop.orders/"]
    assert report["dags"]["lakecore_orders_report"]["asset_uris"] == ["lakecore://shop.orders/"]


def test_committing_tasks_declare_their_tables_asset(report: dict[str, Any]) -> None:
    """Ingest declares its table's asset (its page lists the producing tasks); compaction
    its table's compaction asset, which nothing is scheduled on (no self-trigger); maintenance
    and the backfill (a Param table) emit through aliases; nothing else declares outlets."""
    dags = report["dags"]
    assert dags["lakecore_ingest"]["outlets"]["ingest_shop__orders"] == [
        "lakecore://shop.orders"]
    assert dags["lakecore_compaction"]["outlets"]["shop__customers.compact"] == [
        "lakecore://shop.customers/compactions"]
    assert not any("compactions" in u for d in dags.values() for u in d["asset_uris"])
    assert dags["lakecore_maintenance"]["outlets"]["shop__orders.expire_partitions"] == [
        "lakecore-commits:shop.orders"]
    assert dags["lakecore_backfill"]["outlets"]["overwrite_partition"] == [
        "lakecore-backfill-commits"]
    assert dags["lakecore_ingest"]["outlets"]["prepare"] == []


def test_airflowignore_keeps_job_scripts_out(tmp_path: Path) -> None:
    dags = tmp_path / "dags"
    shutil.copytree(REPO / "dags", dags)
    (dags / "spark").mkdir()
    (dags / "spark" / "ingest.py").write_text("import pyspark\nimport lakecore.spark\n")
    (dags / "nightly_job.py").write_text("import pyspark\n")
    env = airflow_env(tmp_path / "home", tmp_path / "wh", tmp_path / "landing")
    r = parse(env, dags)
    assert r["import_errors"] == {} and set(r["dags"]) == EXPECTED and r["modules"] == []


def test_plugin_registers_without_heavy_imports(report: dict[str, Any]) -> None:
    r = report["plugins"]
    assert r["errors"] == {}
    assert {"url_prefix": "/lake", "name": "Lake table health"}.items() <= r["apps"][0].items()
    assert any(v.get("url_route") == "lake-tables" and v.get("category") == "browse"
               and v.get("href") == "/lake/" for v in r["views"])
    assert r["modules"] == []
