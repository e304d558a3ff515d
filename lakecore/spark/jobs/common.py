"""What every job shares: table arguments, the Spark session, per-stage logs, the one JSON
summary line on stdout and the exit status (non-zero with the error as the last line)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from lakecore.catalog import FileSystemCatalog
from lakecore.options.cli_text import parse_pairs
from lakecore.spark.messages import python_error
from lakecore.spark.table_ref import normalize_warehouse, open_catalog
from lakecore.table import FileStoreTable

log = logging.getLogger("lakecore.spark")
_MAX_ERROR_CHARS = 2000
# What the jobs set on their Spark session unless spark-submit (--conf, spark-defaults.conf)
# or the builder already sets it. The ingest shuffles its rows as LZ4-compressed Arrow IPC
# pieces (``lakecore.spark.shuffle``): Spark compressing them again only costs CPU on both
# sides of the shuffle (measured on the 10M-row ingest bench: about 0.7 CPU-s of 9, 8 % of
# the ingest's time). Spills stay compressed (``spark.shuffle.spill.compress``).
SESSION_DEFAULTS = {"spark.shuffle.compress": "false"}
T = TypeVar("T")


class JobArgumentError(ValueError):
    """A malformed argument the parser could not catch (e.g. ``--catalog-option x``)."""


def parse_arg(parse: Callable[..., T], *args: Any) -> T:
    """``parse(*args)`` with one of ``lakecore.options.cli_text``'s parsers; a malformed text
    becomes a ``JobArgumentError`` (the job's summary and last line name it so)."""
    try:
        return parse(*args)
    except ValueError as e:
        raise JobArgumentError(str(e)) from None


def table_parser(prog: str, description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--warehouse", required=True, help="warehouse URI or path")
    p.add_argument("--table", required=True, help="database.table")
    p.add_argument("--catalog-option", action="append", default=[], metavar="KEY=VALUE",
                   help="catalog option, e.g. the lock's lock.enabled / lock.uri (repeatable)")
    p.add_argument("--table-option", action="append", default=[], metavar="KEY=VALUE",
                   help="dynamic table option for this job, e.g. target-file-size (repeatable)")
    p.add_argument("--master", default=None,
                   help="Spark master when run with python -m (spark-submit sets its own)")
    p.add_argument("--spark-log-level", default="WARN",
                   help="Spark's log level once the session is up (default WARN)")
    return p


def describe_error(error: BaseException) -> str:
    """One line naming the error. Executor failures arrive as long Java/Python traces; the
    last ``SomeError: message`` line in them is the cause."""
    text = str(error)
    found = python_error(text)
    if found is not None:
        message = f"{found[0]}: {found[1]}"
    else:
        first = text.strip().splitlines()[0] if text.strip() else ""
        message = f"{type(error).__name__}: {first}" if first else type(error).__name__
    return message[:_MAX_ERROR_CHARS]


def _under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def with_session_defaults(builder: Any) -> Any:
    """``builder`` with each of ``SESSION_DEFAULTS`` that nothing has set yet (spark-submit's
    ``--conf`` and spark-defaults.conf reach the driver as ``SparkConf()``'s defaults, the
    builder's own settings are in its options). With a Spark context already running, static
    settings cannot change: the builder is returned as it is."""
    from pyspark import SparkConf, SparkContext

    if SparkContext._active_spark_context is not None:
        return builder
    if _under_spark_submit():  # the submitting JVM is up: its SparkConf holds --conf
        SparkContext._ensure_initialized()
    submitted = SparkConf()  # empty before a JVM exists (python -m): the builder decides
    options = getattr(builder, "_options", {})
    for key, value in SESSION_DEFAULTS.items():
        if not submitted.contains(key) and key not in options:
            builder = builder.config(key, value)
    return builder


def start_session(app_name: str, master: str | None, log_level: str) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    if not _under_spark_submit() and not os.environ.get("PYSPARK_PYTHON"):
        # python -m: executors should run this interpreter (it has lakecore's dependencies)
        builder = builder.config("spark.pyspark.python", sys.executable)
    spark = with_session_defaults(builder).getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    conf = spark.sparkContext.getConf()
    log.info("session: %s", ", ".join(f"{k}={conf.get(k)}" for k in SESSION_DEFAULTS))
    from lakecore.spark import register

    register(spark)  # the `lakecore` data source, for job bodies and sources that read tables
    return spark


@dataclass
class JobContext:
    """One job run: its arguments, its Spark session (started lazily) and its stages."""

    job: str
    args: argparse.Namespace
    spark: Any = None
    stages: dict[str, float] = field(default_factory=dict)
    _catalogs: list[FileSystemCatalog] = field(default_factory=list)

    def session(self) -> Any:
        """The Spark session, started on first use: a job that finds nothing to do (a rerun
        of a committed run, no bucket to compact) never pays for one."""
        if self.spark is None:
            with self.stage("session"):
                self.spark = start_session(f"lakecore-{self.job}-{self.args.table}",
                                           self.args.master, self.args.spark_log_level)
        return self.spark

    @property
    def warehouse(self) -> str:
        return normalize_warehouse(self.args.warehouse)

    @property
    def catalog_options(self) -> dict[str, str]:
        return parse_arg(parse_pairs, self.args.catalog_option, "--catalog-option")

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        log.info("%s: stage %s started", self.job, name)
        start = time.perf_counter()
        try:
            yield
        finally:
            took = time.perf_counter() - start
            self.stages[name] = round(self.stages.get(name, 0.0) + took, 3)
            log.info("%s: stage %s finished in %.2f s", self.job, name, took)

    def open_table(self) -> FileStoreTable:
        catalog = open_catalog(self.warehouse, self.catalog_options)
        self._catalogs.append(catalog)
        table = catalog.get_table(self.args.table)
        dynamic = parse_arg(parse_pairs, self.args.table_option, "--table-option")
        return table.copy(dynamic) if dynamic else table

    def close(self) -> None:
        for c in self._catalogs:
            c.close()
        self._catalogs.clear()
        if self.spark is not None:
            self.spark.stop()
            self.spark = None


def _configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)


def run_job(
    job: str,
    parser: argparse.ArgumentParser,
    body: Callable[[JobContext], Mapping[str, Any]],
    argv: Sequence[str] | None = None,
) -> int:
    """Parse, run ``body`` (which starts Spark through ``ctx.session()`` when it needs it),
    print one JSON summary line; 0 on success, 1 on failure with ``lakecore-spark <job>
    failed: <error>`` as the last line (stderr; spark-submit merges it into stdout)."""
    args = parser.parse_args(argv)
    _configure_logging()
    started = time.perf_counter()
    ctx = JobContext(job, args)
    summary: dict[str, Any] = {"job": job, "status": "ok", "table": args.table}
    error: str | None = None
    try:
        summary.update(body(ctx))
    except BaseException as e:  # every failure becomes the summary and exit 1
        error = describe_error(e)
        log.error("%s failed", job, exc_info=not isinstance(e, KeyboardInterrupt))
        summary.update(status="failed", error=error)
    finally:
        try:
            ctx.close()
        except Exception:  # the job's own outcome matters more
            log.warning("closing the session failed", exc_info=True)
    summary["duration_s"] = round(time.perf_counter() - started, 3)
    summary["stages"] = ctx.stages
    sys.stderr.flush()
    print(json.dumps(summary, default=str), flush=True)
    if error is not None:
        print(f"lakecore-spark {job} failed: {error}", file=sys.stderr, flush=True)
        return 1
    return 0

