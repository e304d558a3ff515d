"""The one declaration of the lake's tables (``dags/lakecore_tables.yaml``), as frozen values.

Every DAG is generated from this file, so it is read at DAG parse time: this module imports
only the standard library and PyYAML (never lakecore or pyspark). ``${VAR}`` and
``${VAR:-default}`` in string values are expanded from the environment, so one file serves the
demo, the tests and docker-compose. Validation names the offending key; the table schema itself
(types, options) is validated by lakecore when the table is created.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from enum import Enum, StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

CONFIG_ENV = "LAKECORE_TABLES_CONFIG"
CONFIG_NAME = "lakecore_tables.yaml"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")
DATE_PLACEHOLDER = "{date}"
# an age in Paimon's units ('1 d', '12 h'); lakecore's parse_age accepts exactly these
DURATION_PATTERN = r"^\s*\d+\s*(ms|s|sec|min|m|h|d|day|days)\s*$"


class LakeConfigError(ValueError):
    """The tables file is malformed; the message names the key."""


class SourceFormat(StrEnum):
    PARQUET = "parquet"
    CSV = "csv"
    JSON = "json"


class CompactionStrategy(StrEnum):
    UNIVERSAL = "universal"
    FULL = "full"


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # Paimon's spelling: "BIGINT NOT NULL", "DECIMAL(10, 2)", "STRING"
    description: str | None = None


@dataclass(frozen=True)
class Source:
    path: str  # may hold {date}: the partition date a run ingests (YYYY-MM-DD)
    format: SourceFormat
    options: Mapping[str, str] = field(default_factory=dict)

    def path_for(self, day: date | None) -> str:
        if DATE_PLACEHOLDER in self.path:
            if day is None:
                raise LakeConfigError(f"source path {self.path!r} needs a date")
            return self.path.replace(DATE_PLACEHOLDER, day.isoformat())
        return self.path


@dataclass(frozen=True)
class TableSpec:
    name: str  # database.table
    description: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    partition_keys: tuple[str, ...]
    date_partition: str | None  # the partition key a run's logical date fills
    options: Mapping[str, str]
    source: Source

    @property
    def database(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def table(self) -> str:
        return self.name.split(".", 1)[1]

    @property
    def slug(self) -> str:
        """A task-id-safe name: ``shop.orders`` -> ``shop__orders``."""
        return self.name.replace(".", "__")

    @property
    def dynamic_bucket(self) -> bool:
        """A primary-key table in Paimon's dynamic bucket mode (``bucket`` -1, the default
        when unset): its writers share a HASH index, so its ingests run one at a time."""
        return bool(self.primary_key) and str(self.options.get("bucket", "-1")).strip() == "-1"

    def partition_spec(self, day: date) -> dict[str, str]:
        """The static partition a run for ``day`` owns (empty without a date partition)."""
        return {self.date_partition: day.isoformat()} if self.date_partition else {}


@dataclass(frozen=True)
class Schedules:
    ingest: str | None
    compaction: str | None
    maintenance: str | None


@dataclass(frozen=True)
class CompactionDefaults:
    strategy: CompactionStrategy = CompactionStrategy.UNIVERSAL
    parallelism: int = 2
    time_budget_minutes: int = 120


@dataclass(frozen=True)
class MaintenanceDefaults:
    orphan_older_than: str = "1 d"
    dry_run: bool = False


@dataclass(frozen=True)
class SparkDefaults:
    conn_id: str = "spark_default"
    conf: Mapping[str, str] = field(default_factory=dict)
    driver_memory: str | None = None
    executor_memory: str | None = None


@dataclass(frozen=True)
class LakeConfig:
    path: str
    warehouse: str
    tables: tuple[TableSpec, ...]
    schedules: Schedules
    compaction: CompactionDefaults
    maintenance: MaintenanceDefaults
    spark: SparkDefaults
    lock_conn_id: str = "lakecore_lock"
    # lakecore catalog options for the warehouse (Paimon's s3.* keys, commit.protocol): they
    # may hold credentials, so they reach Spark in the driver's environment, never in argv
    catalog_options: Mapping[str, str] = field(default_factory=dict)
    retries: int = 2
    retry_delay_minutes: float = 2.0
    backfill_max_days: int = 31
    # an Airflow pool (1 slot, created by the operator: ``airflow pools set NAME 1 ...``)
    # every ingest and backfill task of a dynamic-bucket table runs in; None: no pool
    dynamic_bucket_pool: str | None = None

    @property
    def table_names(self) -> list[str]:
        return [t.name for t in self.tables]

    @property
    def conditional_put(self) -> bool:
        """Whether commits use conditional writes (``commit.protocol: conditional-put``):
        then no job takes the catalog lock."""
        return self.catalog_options.get("commit.protocol", "").strip().lower() == (
            "conditional-put")

    def table(self, name: str) -> TableSpec:
        for t in self.tables:
            if t.name == name:
                return t
        raise LakeConfigError(f"table {name!r} is not declared in {self.path}; "
                              f"declared: {', '.join(self.table_names)}")


def expand_env(text: str, env: Mapping[str, str] | None = None) -> str:
    """``${VAR}`` / ``${VAR:-default}`` from the environment; an unset VAR with no default
    is an error naming it (a silently empty warehouse path would be worse)."""
    env = os.environ if env is None else env

    def sub(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        value = env.get(name)
        if value:
            return value
        if default is not None:
            return default
        raise LakeConfigError(f"environment variable {name} is not set and has no default")

    return _ENV_REF.sub(sub, text)


def _expand(value: Any, env: Mapping[str, str] | None) -> Any:
    if isinstance(value, str):
        return expand_env(value, env)
    if isinstance(value, list):
        return [_expand(v, env) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, env) for k, v in value.items()}
    return value


def _mapping(obj: Any, where: str) -> dict[str, Any]:
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise LakeConfigError(f"{where}: expected a mapping, got {type(obj).__name__}")
    return obj


def _names(obj: Any, where: str) -> tuple[str, ...]:
    if obj is None:
        return ()
    if not isinstance(obj, list) or not all(isinstance(x, str) for x in obj):
        raise LakeConfigError(f"{where}: expected a list of column names")
    return tuple(obj)


def _positive_int(obj: Any, where: str) -> int:
    if isinstance(obj, bool) or not isinstance(obj, int) or obj < 1:
        raise LakeConfigError(f"{where}: expected a positive integer, got {obj!r}")
    return obj


def _duration(obj: Any, where: str) -> str:
    text = str(obj)
    if not re.match(DURATION_PATTERN, text):
        raise LakeConfigError(f"{where}: {text!r} is not a duration; write a number and a "
                              "unit (ms, s, min, h or d), e.g. '1 d' or '12 h'")
    return text.strip()


def _strings(obj: Any, where: str) -> dict[str, str]:
    out = {}
    for k, v in _mapping(obj, where).items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        out[str(k)] = str(v)
    return out


def _enum(kind: type[Enum], value: Any, where: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(str(m.value) for m in kind)  # type: ignore[attr-defined]
        raise LakeConfigError(f"{where}: {value!r} is not one of {choices}") from None


def _table(obj: Any, i: int) -> TableSpec:
    where = f"tables[{i}]"
    t = _mapping(obj, where)
    name = t.get("name")
    if not isinstance(name, str) or not _TABLE_NAME.match(name):
        raise LakeConfigError(f"{where}.name: expected 'database.table', got {name!r}")
    where = f"tables[{name}]"
    columns = []
    for j, c in enumerate(t.get("columns") or []):
        c = _mapping(c, f"{where}.columns[{j}]")
        if not isinstance(c.get("name"), str) or not isinstance(c.get("type"), str):
            raise LakeConfigError(f"{where}.columns[{j}]: needs a name and a type")
        columns.append(Column(c["name"], c["type"], c.get("description")))
    if not columns:
        raise LakeConfigError(f"{where}.columns: a table needs at least one column")
    known = {c.name for c in columns}
    pk = _names(t.get("primary_key"), f"{where}.primary_key")
    parts = _names(t.get("partition_keys"), f"{where}.partition_keys")
    for key, group in (("primary_key", pk), ("partition_keys", parts)):
        unknown = [k for k in group if k not in known]
        if unknown:
            raise LakeConfigError(f"{where}.{key}: unknown column(s) {unknown}")
    date_partition = t.get("date_partition")
    if date_partition is not None and date_partition not in parts:
        raise LakeConfigError(f"{where}.date_partition: {date_partition!r} is not one of the "
                              f"partition keys {list(parts)}")
    options = _strings(t.get("options"), f"{where}.options")
    src = _mapping(t.get("source"), f"{where}.source")
    if not isinstance(src.get("path"), str):
        raise LakeConfigError(f"{where}.source.path: required")
    source = Source(src["path"], _enum(SourceFormat, src.get("format", "parquet"),
                                       f"{where}.source.format"),
                    _strings(src.get("options"), f"{where}.source.options"))
    if date_partition and DATE_PLACEHOLDER not in source.path:
        raise LakeConfigError(f"{where}.source.path: a table with a date_partition reads one "
                              f"partition per run; put {DATE_PLACEHOLDER} in the path")
    bucket = str(options.get("bucket", "-1")).strip()
    outside = [k for k in parts if k not in pk]
    if pk and bucket == "-1" and outside:
        # Paimon's cross-partition upsert needs a global key index lakecore does not keep
        raise LakeConfigError(
            f"{where}.options.bucket: dynamic bucket mode (bucket -1, the default for a "
            f"primary-key table) needs every partition key in the primary key; add {outside} "
            "to primary_key or set a fixed number of buckets, e.g. bucket: \"4\"")
    if not date_partition and pk and "sequence.field" not in options:
        # A run replayed out of order (a backfill) must not undo newer changes: without a
        # partition to overwrite, only a sequence field makes the replay harmless.
        raise LakeConfigError(f"{where}: a primary-key table without a date_partition needs "
                              "options.sequence.field so that backfill runs replay safely")
    return TableSpec(name, str(t.get("description") or ""), tuple(columns), pk, parts,
                     date_partition, options, source)


def _catalog_options(obj: Any) -> dict[str, str]:
    """The tables file's ``catalog_options``: the warehouse is ``warehouse:`` and the lock is
    an Airflow connection (``airflow.lock_conn_id``), so neither may be set here."""
    options = _strings(obj, "catalog_options")
    for key in options:
        if key == "warehouse" or key.startswith(("lock.", "lock-")):
            raise LakeConfigError(f"catalog_options.{key}: set the warehouse under "
                                  "'warehouse:' and the lock with airflow.lock_conn_id")
    return options


def parse_config(data: Any, path: str = "<memory>",
                 env: Mapping[str, str] | None = None) -> LakeConfig:
    root = _mapping(_expand(data, env), "the tables file")
    tables = tuple(_table(t, i) for i, t in enumerate(root.get("tables") or []))
    if not tables:
        raise LakeConfigError("tables: declare at least one table")
    seen: set[str] = set()
    for t in tables:
        if t.name in seen or t.slug in {s.replace(".", "__") for s in seen}:
            raise LakeConfigError(f"tables: {t.name!r} is declared twice")
        seen.add(t.name)
    warehouse = root.get("warehouse")
    if not isinstance(warehouse, str) or not warehouse.strip():
        raise LakeConfigError("warehouse: required (a path or URI)")
    sch = _mapping(root.get("schedules"), "schedules")
    comp = _mapping(root.get("compaction"), "compaction")
    maint = _mapping(root.get("maintenance"), "maintenance")
    spark = _mapping(root.get("spark"), "spark")
    airflow = _mapping(root.get("airflow"), "airflow")
    return LakeConfig(
        catalog_options=_catalog_options(root.get("catalog_options")),
        path=path,
        warehouse=warehouse.strip(),
        tables=tables,
        schedules=Schedules(sch.get("ingest"), sch.get("compaction"), sch.get("maintenance")),
        compaction=CompactionDefaults(
            _enum(CompactionStrategy, comp.get("strategy", "universal"), "compaction.strategy"),
            _positive_int(comp.get("parallelism", 2), "compaction.parallelism"),
            _positive_int(comp.get("time_budget_minutes", 120),
                          "compaction.time_budget_minutes"),
        ),
        maintenance=MaintenanceDefaults(_duration(maint.get("orphan_older_than", "1 d"),
                                                  "maintenance.orphan_older_than"),
                                        bool(maint.get("dry_run", False))),
        spark=SparkDefaults(str(spark.get("conn_id", "spark_default")),
                            _strings(spark.get("conf"), "spark.conf"),
                            spark.get("driver_memory"), spark.get("executor_memory")),
        lock_conn_id=str(airflow.get("lock_conn_id", "lakecore_lock")),
        retries=int(airflow.get("retries", 2)),
        retry_delay_minutes=float(airflow.get("retry_delay_minutes", 2)),
        backfill_max_days=_positive_int(airflow.get("backfill_max_days", 31),
                                        "airflow.backfill_max_days"),
        dynamic_bucket_pool=(str(airflow["dynamic_bucket_pool"])
                             if airflow.get("dynamic_bucket_pool") else None),
    )


def config_path() -> Path:
    """``$LAKECORE_TABLES_CONFIG``, else ``lakecore_tables.yaml`` in the DAGs folder."""
    explicit = os.environ.get(CONFIG_ENV)
    if explicit:
        return Path(explicit)
    from airflow.configuration import conf  # cheap: Airflow is loaded wherever this runs

    return Path(conf.get("core", "dags_folder")) / CONFIG_NAME


@lru_cache(maxsize=8)
def _parse_cached(text: str, path: str, env_key: tuple[tuple[str, str], ...]) -> LakeConfig:
    return parse_config(yaml.safe_load(text), path, dict(env_key))


def load_config(path: str | Path | None = None) -> LakeConfig:
    """The parsed tables file, cached while its text and the environment variables it
    references are unchanged (DAG files are re-parsed often)."""
    p = str(path or config_path())
    try:
        text = Path(p).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LakeConfigError(f"tables file {p} does not exist (set {CONFIG_ENV})") from None
    names = sorted({m.group(1) for m in _ENV_REF.finditer(text)})
    env_key = tuple((n, os.environ.get(n, "")) for n in names)
    return _parse_cached(text, p, env_key)
