"""Job plumbing without Spark: arguments, summaries, errors, packaging, and the maintain job
(driver-only, so it runs in-process here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from lakecore.options.cli_text import parse_pairs
from lakecore.spark.ingest import default_commit_user
from lakecore.spark.jobs import maintain as maintain_job
from lakecore.spark.jobs.common import JobArgumentError, describe_error, parse_arg
from lakecore.spark.package import build_zip
from lakecore.spark.table_ref import executor_catalog_options
from tests.spark import helpers as h
from tests.spark.submit import REPO, hide_checkout


def test_parse_pairs():
    assert parse_arg(parse_pairs, ["a=1", "b = x=y"], "--o") == {"a": "1", "b": "x=y"}
    with pytest.raises(JobArgumentError, match="--o expects KEY=VALUE"):
        parse_arg(parse_pairs, ["novalue"], "--o")


def test_default_commit_user_is_one_per_run():
    u = default_commit_user("ingest", "db.t", 20261101)
    assert u == default_commit_user("ingest", "db.t", 20261101)
    others = {default_commit_user("ingest", "db.t", 20261102),
              default_commit_user("compact", "db.t", 20261101),
              default_commit_user("ingest", "db.u", 20261101)}
    assert u not in others and len(others) == 3


def test_executors_get_no_lock_options():
    opts = {"lock.enabled": "true", "lock.uri": "postgresql://secret@db/x",
            "lock-acquire-timeout": "1 min", "catalog-key": "k", "s3.access-key": "a"}
    assert executor_catalog_options(opts) == {"s3.access-key": "a", "lock.enabled": "false"}


def test_describe_error_finds_the_python_cause_in_a_java_trace():
    trace = ("An error occurred while calling o123.collectToPython.\n"
             ": org.apache.spark.SparkException: Job aborted due to stage failure:\n"
             "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n"
             "lakecore.errors.SchemaError: column 'amount': cannot cast string to DOUBLE\n"
             "\tat org.apache.spark.api.python.BasePythonRunner\n"
             "java.lang.IllegalStateException: later noise\n")
    assert describe_error(RuntimeError(trace)) == (
        "SchemaError: column 'amount': cannot cast string to DOUBLE")
    assert describe_error(ValueError("plain\nsecond line")) == "ValueError: plain"


def test_zip_holds_the_package_and_imports_alone(tmp_path):
    out = tmp_path / "lakecore.zip"
    n = build_zip(out, REPO)
    names = zipfile.ZipFile(out).namelist()
    assert n == len(names) and "lakecore/spark/tasks.py" in names
    assert not any("__pycache__" in x or not x.startswith("lakecore/") for x in names)
    assert out.read_bytes() == (build_zip(out, REPO) and out.read_bytes())  # reproducible
    code = ("import lakecore, lakecore.spark.tasks, lakecore.compact.job, lakecore.maintenance,"
            " lakecore.lock; print(lakecore.__file__)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([hide_checkout(tmp_path / "hide"),
                                                         str(out)])}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(str(out))


def _summary(capsys) -> dict:
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert len(lines) == 1
    return json.loads(lines[0])


def test_maintain_job_expires_snapshots_and_orphans_with_dry_run(warehouse, capsys):
    table = h.create(warehouse, **{"snapshot.num-retained.min": "1",
                                   "snapshot.num-retained.max": "2"})
    for i, b in enumerate(h.batches(4, rows=30), start=1):
        h.library_commit(table, b, i, "lib")
    stray = Path(table.table_path) / "dt=2026-11-01" / "bucket-0" / "data-stray.parquet"
    stray.write_bytes(b"junk")
    os.utime(stray, (1_000_000_000, 1_000_000_000))
    args = ["--warehouse", warehouse, "--table", "db.t", "--expire-snapshots",
            "--remove-orphans", "--older-than", "1 h"]
    assert maintain_job.main([*args, "--dry-run"]) == 0
    dry = _summary(capsys)
    assert dry["status"] == "ok" and dry["dry_run"] and dry["files"] >= 1
    assert table.snapshot_manager.earliest_id() == 1 and stray.exists()
    assert maintain_job.main(args) == 0
    done = _summary(capsys)
    assert [s["operation"] for s in done["steps"]] == ["expire-snapshots",
                                                       "remove-orphan-files"]
    assert table.snapshot_manager.earliest_id() == 3 and not stray.exists()
    assert done["files"] == dry["files"] and set(done) >= {"table", "duration_s", "stages"}
    assert h.rows(table) == h.model(h.batches(4, rows=30))


def test_maintain_job_failure_is_one_line_and_exit_1(warehouse, capsys):
    h.create(warehouse)
    assert maintain_job.main(["--warehouse", warehouse, "--table", "db.t"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip())["status"] == "failed"
    assert captured.err.strip().splitlines()[-1] == (
        "lakecore-spark maintain failed: JobArgumentError: nothing to do: give "
        "--expire-snapshots, --expire-partitions and/or --remove-orphans")


def test_ingest_merge_schema_flags_default_to_the_tables_option():
    from lakecore.spark.jobs.ingest import build_parser

    base = ["--warehouse", "w", "--table", "db.t", "--source", "s", "--commit-identifier", "1"]
    a = build_parser().parse_args(base)
    assert a.merge_schema is None and a.merge_schema_explicit_cast is None  # the table decides
    a = build_parser().parse_args([*base, "--merge-schema", "--merge-schema-explicit-cast"])
    assert a.merge_schema is True and a.merge_schema_explicit_cast is True
