"""docker-compose.yaml, checked offline (no Docker engine here): it parses, it validates
against the Compose Specification's JSON schema (vendored: compose-spec.json, Apache-2.0), and
its wiring agrees with the code: services, volumes, dependencies, the metadata DB, the lock
connection, the Spark master, the warehouse paths and the image's Dockerfile."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml
from lake_airflow.config import parse_config
from lake_airflow.lock import url_from_connection

REPO = Path(__file__).resolve().parents[2]
AIRFLOW_SERVICES = {"airflow-apiserver": "api-server", "airflow-scheduler": "scheduler",
                    "airflow-dag-processor": "dag-processor", "airflow-triggerer": "triggerer"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "docker-compose.yaml").read_text())


def env_of(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def resolve(value: str) -> str:
    """Compose's ${VAR:-default} with nothing set: the default."""
    return re.sub(r"\$\{[A-Za-z_]+:-([^}]*)\}", r"\1", value)


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """target -> source of a service's volumes (short syntax)."""
    out = {}
    for v in service.get("volumes") or []:
        source, target = v.split(":")[:2]
        out[target] = source
    return out


def test_validates_against_the_compose_schema(compose: dict[str, Any]) -> None:
    schema = json.loads((Path(__file__).with_name("compose-spec.json")).read_text())
    validator = jsonschema.Draft201909Validator(schema)
    errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(compose)]
    assert errors == []
    # the schema is the real one: it rejects what Compose rejects
    bad = {"services": {"x": {"image": "a", "restart": 5, "bogus": True}}}
    assert list(validator.iter_errors(bad))


def test_services_and_commands(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"postgres", "airflow-init", *AIRFLOW_SERVICES, "spark-master",
                             "spark-worker"}
    for name, sub in AIRFLOW_SERVICES.items():
        assert services[name]["command"][:2] == ["airflow", sub], name
    init = " ".join(services["airflow-init"]["command"])
    assert "airflow db migrate" in init
    assert services["spark-master"]["command"][1] == "org.apache.spark.deploy.master.Master"
    assert services["spark-worker"]["command"][1] == "org.apache.spark.deploy.worker.Worker"
    assert services["airflow-apiserver"]["ports"] == ["127.0.0.1:8080:8080"]


def test_dependencies(compose: dict[str, Any]) -> None:
    s = compose["services"]
    for name in AIRFLOW_SERVICES:
        deps = s[name]["depends_on"]
        assert deps["postgres"]["condition"] == "service_healthy", name
        assert deps["airflow-init"]["condition"] == "service_completed_successfully", name
    assert s["airflow-init"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "healthcheck" in s["postgres"] and "healthcheck" in s["airflow-apiserver"]
    assert "spark-master" in s["airflow-scheduler"]["depends_on"]
    assert "spark-master" in s["spark-worker"]["depends_on"]


def test_metadata_db_and_lock_connection_are_the_same_postgres(compose: dict[str, Any]
                                                               ) -> None:
    s = compose["services"]
    pg = env_of(s["postgres"])
    for name in ("airflow-init", *AIRFLOW_SERVICES):
        env = env_of(s[name])
        meta = urlsplit(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
        assert meta.scheme.startswith("postgresql") and meta.hostname == "postgres"
        assert (meta.username, meta.password, meta.path) == (
            pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"], f"/{pg['POSTGRES_DB']}")
        cfg = parse_config(yaml.safe_load((REPO / "dags" / "lakecore_tables.yaml").read_text()),
                           "repo", env)
        lock = urlsplit(env[f"AIRFLOW_CONN_{cfg.lock_conn_id.upper()}"])
        url = url_from_connection(lock.scheme, lock.hostname, lock.username, lock.password,
                                  lock.port, lock.path.lstrip("/"))
        got = urlsplit(url)
        assert (got.hostname, got.port, got.path) == (meta.hostname, meta.port or 5432,
                                                      meta.path), name
        assert got.scheme == "postgresql+psycopg"  # a driver lakecore ships


def test_spark_connection_points_at_the_master(compose: dict[str, Any]) -> None:
    s = compose["services"]
    master_cmd = s["spark-master"]["command"]
    port = master_cmd[master_cmd.index("--port") + 1]
    host = master_cmd[master_cmd.index("--host") + 1]
    assert s["spark-worker"]["command"][2] == f"spark://{host}:{port}"
    env = env_of(s["airflow-scheduler"])
    cfg = parse_config(yaml.safe_load((REPO / "dags" / "lakecore_tables.yaml").read_text()),
                       "repo", env)
    conn = json.loads(env[f"AIRFLOW_CONN_{cfg.spark.conn_id.upper()}"])
    assert conn["conn_type"] == "spark" and conn["host"] == f"spark://{host}"
    assert str(conn["port"]) == port and conn["extra"]["deploy-mode"] == "client"
    spark_conf = json.loads(env["LAKECORE_SPARK_CONF"])
    assert spark_conf["spark.driver.host"] == s["airflow-scheduler"]["hostname"]


def test_warehouse_volumes_and_folders(compose: dict[str, Any]) -> None:
    s = compose["services"]
    env = env_of(s["airflow-scheduler"])
    cfg = parse_config(yaml.safe_load((REPO / "dags" / "lakecore_tables.yaml").read_text()),
                       "repo", env)
    warehouse, landing = env["LAKECORE_WAREHOUSE"], env["LAKECORE_LANDING"]
    assert cfg.warehouse == warehouse
    for name in ("airflow-init", *AIRFLOW_SERVICES, "spark-worker"):
        m = mounts(s[name])
        assert m[warehouse] == "lake-warehouse" and m[landing] == "lake-landing", name
    for name in ("airflow-init", *AIRFLOW_SERVICES):
        m = mounts(s[name])
        env = env_of(s[name])
        assert m[env["AIRFLOW__CORE__DAGS_FOLDER"]] == "./dags"
        assert m[env["AIRFLOW__CORE__PLUGINS_FOLDER"]] == "./plugins"
    named = {src for svc in s.values() for src in mounts(svc).values()
             if not src.startswith(".")}
    assert named <= set(compose["volumes"])
    assert (REPO / "dags" / "lakecore_tables.yaml").exists()
    assert (REPO / "plugins" / "lake_airflow_plugin.py").exists()


def test_image_is_built_from_requirements_with_java(compose: dict[str, Any]) -> None:
    images = {svc.get("image") for name, svc in compose["services"].items()
              if name != "postgres"}
    assert images == {"lakecore-airflow:local"}
    for name, svc in compose["services"].items():
        if name != "postgres":
            assert svc["build"]["dockerfile"] == "Dockerfile"
    docker = (REPO / svc["build"]["dockerfile"]).read_text()
    assert re.search(r"pip install .*-r requirements\.txt", docker)
    assert "COPY requirements.txt" in docker and "jre" in docker and "JAVA_HOME" in docker
    assert "pyspark==4.3.0" in docker
    py_files = re.search(r"LAKECORE_PY_FILES=(\S+)", docker)
    assert py_files and f"lakecore.spark.package {py_files.group(1)}" in docker
    requirements = (REPO / "requirements.txt").read_text()
    assert "apache-airflow[postgres]" in requirements and "psycopg2" not in docker


def test_no_secret_from_the_repository(compose: dict[str, Any], tmp_path: Path) -> None:
    """The JWT secret and the admin password are made per installation by airflow-init (in
    the auth volume every Airflow service mounts); the compose file holds neither, and
    published ports listen on 127.0.0.1 only."""
    s = compose["services"]
    init = s["airflow-init"]["command"][-1]
    made = re.search(r"python -m lake_airflow\.installation --compose-secrets (\S+)", init)
    assert made and init.index(made.group(0)) < init.index("airflow db migrate")
    for name in ("airflow-init", *AIRFLOW_SERVICES):
        env = env_of(s[name])
        assert "AIRFLOW__API_AUTH__JWT_SECRET" not in env, name
        assert env["AIRFLOW__API_AUTH__JWT_SECRET_CMD"] == f"cat {made.group(1)}/jwt_secret"
        assert mounts(s[name])[made.group(1)] == "airflow-auth", name
        assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"] == \
            f"{made.group(1)}/passwords.json"
    assert env_of(s["airflow-init"])["AIRFLOW_ADMIN_PASSWORD"] == "${AIRFLOW_ADMIN_PASSWORD:-}"
    for svc in s.values():
        for port in svc.get("ports") or []:
            assert port.startswith("127.0.0.1:"), port
    # what airflow-init runs: random secrets per installation, kept on a later start
    from lake_airflow.installation import main as make_secrets

    for k in (1, 2):
        assert make_secrets(["--compose-secrets", str(tmp_path / f"auth{k}")]) == 0
    one, two = (tmp_path / "auth1" / "jwt_secret").read_text(), \
        (tmp_path / "auth2" / "jwt_secret").read_text()
    assert len(one) >= 64 and one != two and one not in (REPO / "docker-compose.yaml").read_text()
    assert (tmp_path / "auth1" / "jwt_secret").stat().st_mode & 0o777 == 0o600
    make_secrets(["--compose-secrets", str(tmp_path / "auth1")])
    assert (tmp_path / "auth1" / "jwt_secret").read_text() == one
    admin = json.loads((tmp_path / "auth1" / "passwords.json").read_text())["admin"]
    assert len(admin) >= 16 and admin != "admin"
