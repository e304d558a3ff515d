"""Spark reads and writes of lake tables vs Spark's own Parquet, on the same rows.

One run, one local[2] session, the same DataFrame (10 Parquet source files generated up
front; 6 columns: id, dt, i32, f64, s, ts; ``dt`` has 10 values):

* write: ``df.write.parquet`` (Spark's default snappy) vs ``df.write.format("lakecore")``
  into a primary-key table (``dt``, ``id``; 4 buckets; a fresh table each round) and, for
  information, into an append table (``bucket = -1``);
* read through ``lakecore.spark.read_table`` (native Parquet scans of the files that need no
  merge, lakecore's merge for the rest; docs/spark-datasource.md, "Native reads"), each beside
  ``spark.read.parquet`` of the same rows: a primary-key table compacted once (one sorted run
  per bucket), a deletion-vector table compacted, then 10% of its rows deleted and compacted
  again (vectors, no rewrite; its baseline is a Parquet copy of the 90% that remain), an append
  table, and the primary-key table as ``df.write`` left it (level-0 runs in every bucket:
  every bucket merges, reported as it is);
* read through ``spark.read.format("lakecore")`` (the Python data source) of the compacted
  table, for comparison.
  Every read ends in Spark's ``noop`` sink, so every row and column crosses into the JVM.

Phases run interleaved in ``--repeat`` rounds (best kept), after an untimed warm-up that reads
a small table each way (the deletion-vector filter included); a round runs the reads
``READ_PASSES`` times, each pass interleaved with its baseline (a read takes 1-2 s, and its
baseline alone moved 1.32-1.57 s between two runs of 2 samples). Peak RSS is sampled over the whole
process tree (driver Python + the JVM, which runs the executors in local mode + the Python
workers, i.e. the executors' Python) and for the largest single Python worker.
Prints a table, writes ``bench/out/spark_datasource.json`` and the ``## spark_datasource``
section of ``bench/RESULTS.md``.

    .venv/bin/python bench/spark_datasource.py [--rows 10000000] [--repeat 2] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, REPO)
sys.path.insert(0, BENCH)
from _common import (  # noqa: E402
    OUT_DIR,
    discard,
    load_note,
    machine_info,
    machine_line,
    mib,
    publish,
    render_table,
    summary_row,
)
from spark_ingest import SCHEMA, Phase, make_source, session  # noqa: E402

WRITE_TARGET = 0.5  # df.write.format("lakecore") rows/s over df.write.parquet rows/s
# spark.read.format("lakecore") over spark.read.parquet (issue 16, blocked on it: PySpark's
# Python data source path caps even a source yielding in-memory Arrow batches near 0.48x)
SOURCE_TARGET = 0.5
# read_table over spark.read.parquet of the same rows (issue 32)
NATIVE_TARGETS = {"compacted": 0.9, "dv": 0.8, "append": 0.9}
BUCKETS = 4
READ_PASSES = 2  # read phases per round (module docstring)
# the DV table loses 10% of its rows in every partition (``dt`` follows ``id % 10``)
DELETED_DIGIT = 3


@dataclass(frozen=True)
class Meta:
    """What a phase is measured against: its kind, the rows it moves, its baseline phase and
    its target ratio (None: reported as it is)."""

    kind: str
    rows: int
    baseline: str | None = None
    target: float | None = None


def run(args: argparse.Namespace) -> dict[str, Any]:
    from pyspark.sql import functions as F  # noqa: N812

    from lakecore import CatalogFactory, Schema
    from lakecore.spark import read_table, register
    from lakecore.spark.compact import CompactRequest, compact_table
    from lakecore.spark.read import plan_read

    work = tempfile.mkdtemp(prefix="spark_datasource-", dir=OUT_DIR)
    try:
        src = os.path.join(work, "source")
        t0 = time.perf_counter()
        make_source(src, args.rows)
        print(f"source: {args.rows:,} rows in {time.perf_counter() - t0:.1f} s", flush=True)
        spark = session(args.driver_memory, os.path.join(work, "spark-local"))
        register(spark)
        df = spark.read.parquet(src)
        warehouse = os.path.join(work, "warehouse")
        catalog = CatalogFactory.create({"warehouse": warehouse})
        catalog.create_database("db", ignore_if_exists=True)
        parquet_out = os.path.join(work, "spark-parquet")
        parquet_dv = os.path.join(work, "spark-parquet-dv")
        kept = args.rows - int(np.count_nonzero(np.arange(args.rows) // 10 % 10 == DELETED_DIGIT))

        def create(name: str, pk: bool, **options: str) -> None:
            opts = {"bucket": str(BUCKETS)} if pk else {"bucket": "-1"}
            schema = SCHEMA
            if "rowkind.field" in options:
                schema = SCHEMA.append(pa.field("op", pa.string()))
            catalog.create_table(name, Schema.from_pyarrow_schema(
                schema, partition_keys=["dt"], primary_keys=["dt", "id"] if pk else None,
                options={**opts, **options}))

        def save(frame: Any, name: str) -> None:
            frame.write.format("lakecore").mode("append").option("warehouse", warehouse) \
                .save(name)

        def lake_write(prefix: str) -> Callable[[int], None]:
            return lambda r: save(df, f"db.{prefix}{r}")

        def fresh(prefix: str, pk: bool) -> Callable[[int], None]:
            return lambda r: create(f"db.{prefix}{r}", pk)

        def parquet_write(_: int) -> None:
            df.write.mode("overwrite").parquet(parquet_out)

        def noop(frame: Any) -> None:
            frame.write.format("noop").mode("overwrite").save()

        def parquet_read(path: str) -> Callable[[int], None]:
            return lambda _: noop(spark.read.parquet(path))

        def source_read(name: str) -> Callable[[int], None]:
            return lambda _: noop(spark.read.format("lakecore").option("warehouse", warehouse)
                                  .load(name))

        def native_read(name: str) -> Callable[[int], None]:
            return lambda _: noop(read_table(spark, warehouse, name))

        # warm-up (not timed): JIT, Python workers, imports
        small = df.limit(20_000)
        create("db.warm", True)
        save(small, "db.warm")
        noop(spark.read.format("lakecore").option("warehouse", warehouse).load("db.warm"))
        noop(read_table(spark, warehouse, "db.warm"))
        # ... and the deletion-vector filter's code (its first read took 2x the next ones)
        gone = F.floor(F.col("id") / 10) % 10 == DELETED_DIGIT
        create("db.warm_dv", True, **{"deletion-vectors.enabled": "true", "rowkind.field": "op"})
        save(small.withColumn("op", F.lit("+I")), "db.warm_dv")
        compact_table(spark, catalog.get_table("db.warm_dv"), warehouse,
                      CompactRequest(full=True))
        save(small.where(gone).withColumn("op", F.lit("-D")), "db.warm_dv")
        compact_table(spark, catalog.get_table("db.warm_dv"), warehouse, CompactRequest())
        assert any(f.deletion_file is not None
                   for f in plan_read(warehouse, "db.warm_dv").plan.native_files)
        noop(read_table(spark, warehouse, "db.warm_dv"))
        # the read tables (untimed): compacted PK; DV compacted, 10% deleted, compacted again
        create("db.compacted", True)
        save(df, "db.compacted")
        compact_table(spark, catalog.get_table("db.compacted"), warehouse,
                      CompactRequest(full=True))
        create("db.dv", True, **{"deletion-vectors.enabled": "true", "rowkind.field": "op"})
        save(df.withColumn("op", F.lit("+I")), "db.dv")
        compact_table(spark, catalog.get_table("db.dv"), warehouse, CompactRequest(full=True))
        save(df.where(gone).withColumn("op", F.lit("-D")), "db.dv")
        compact_table(spark, catalog.get_table("db.dv"), warehouse, CompactRequest())
        df.where(~gone).withColumn("op", F.lit("+I")).write.mode("overwrite").parquet(parquet_dv)
        parquet_write(0)  # the baseline's files exist before the first read round
        phases = [
            Phase("spark df.write.parquet (snappy)", parquet_write),
            Phase("lakecore df.write (PK table)", lake_write("pk"), fresh("pk", True)),
            Phase("lakecore df.write (append table)", lake_write("log"), fresh("log", False)),
            Phase("spark.read.parquet", parquet_read(parquet_out)),
            Phase("read_table (PK, compacted)", native_read("db.compacted")),
            Phase("read_table (append)", native_read("db.log0")),
            Phase("read_table (PK, every bucket merging)", native_read("db.pk0")),
            Phase("spark.read.parquet (the DV table's 90%)", parquet_read(parquet_dv)),
            Phase("read_table (DV, 10% deleted)", native_read("db.dv")),
            Phase("lakecore data source read (PK, compacted)", source_read("db.compacted")),
        ]
        meta = {
            "spark df.write.parquet (snappy)": Meta("write", args.rows),
            "lakecore df.write (PK table)": Meta(
                "write", args.rows, "spark df.write.parquet (snappy)", WRITE_TARGET),
            "lakecore df.write (append table)": Meta(
                "write", args.rows, "spark df.write.parquet (snappy)"),
            "spark.read.parquet": Meta("read", args.rows),
            "read_table (PK, compacted)": Meta(
                "read", args.rows, "spark.read.parquet", NATIVE_TARGETS["compacted"]),
            "read_table (append)": Meta(
                "read", args.rows, "spark.read.parquet", NATIVE_TARGETS["append"]),
            "read_table (PK, every bucket merging)": Meta(
                "read", args.rows, "spark.read.parquet"),
            "spark.read.parquet (the DV table's 90%)": Meta("read", kept),
            "read_table (DV, 10% deleted)": Meta(
                "read", kept, "spark.read.parquet (the DV table's 90%)", NATIVE_TARGETS["dv"]),
            "lakecore data source read (PK, compacted)": Meta(
                "read", args.rows, "spark.read.parquet", SOURCE_TARGET),
        }
        for r in range(args.repeat):  # interleaved, so a change in machine load hits all
            for ph in phases:
                ph.run(r)
            for _ in range(READ_PASSES - 1):  # the reads again, baselines beside them
                for ph in phases:
                    if meta[ph.name].kind == "read":
                        ph.run(r)
        for name, rows in (("db.pk0", args.rows), ("db.log0", args.rows),
                           ("db.compacted", args.rows)):
            snap = catalog.get_table(name).snapshot_manager.latest()
            assert snap is not None and snap.total_record_count == rows, name
        assert read_table(spark, warehouse, "db.dv").count() == kept
        paths = {}
        for name in ("db.compacted", "db.log0", "db.pk0", "db.dv"):
            plan = plan_read(warehouse, name).plan
            paths[name] = {"native_files": len(plan.native_files),
                           "native_rows": plan.native_rows,
                           "deletion_vectors": sum(1 for f in plan.native_files
                                                   if f.deletion_file is not None),
                           "merge_splits": len(plan.merge_splits)}
            print(f"  plan of {name}: {paths[name]}", flush=True)
        result = _report(args, phases, meta)
        result["plans"] = paths
        spark.stop()
        return result
    finally:
        if not args.keep:
            discard(work)


def _report(args: argparse.Namespace, phases: list[Phase], meta: dict[str, Meta]
            ) -> dict[str, Any]:
    rates = {p.name: meta[p.name].rows / p.seconds for p in phases}
    rows_out = []
    for p in phases:
        m = meta[p.name]
        rate = rates[p.name]
        ratio = rate / rates[m.baseline] if m.baseline else 1.0
        row = {"phase": p.name, "kind": m.kind, "rows": m.rows, "seconds": round(p.seconds, 3),
               "all_seconds": [round(t, 3) for t in p.times], "rows_per_s": round(rate),
               "ratio": round(ratio, 3), "baseline": m.baseline,
               "peak_rss_mib": round(p.peak_total / 1024),
               "peak_worker_rss_mib": round(p.peak_worker / 1024)}
        if m.target is not None:
            row.update(target=f">= {m.target}x", result="PASS" if ratio >= m.target else "MISS")
        rows_out.append(row)
    import pyspark

    return {
        "rows": args.rows, "buckets": BUCKETS, "repeat": args.repeat, "master": "local[2]",
        "driver_memory": args.driver_memory,
        "machine": {"nproc": os.cpu_count(), "loadavg_end": os.getloadavg()[0],
                    "pyspark": pyspark.__version__, "pyarrow": pa.__version__,
                    "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")},
        "phases": rows_out,
    }


COLUMNS = ("phase", "rows", "seconds", "rows/s", "ratio", "target", "result",
           "peak RSS (tree)", "peak RSS (one worker)")


def _cells(r: dict[str, Any]) -> list[str]:
    return [r["phase"], f"{r['rows']:,}", f"{r['seconds']:.2f}", f"{r['rows_per_s']:,}",
            f"{r['ratio']:.3f}x", r.get("target", "-"), r.get("result", "-"),
            mib(r["peak_rss_mib"]), mib(r["peak_worker_rss_mib"])]


def summary(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every measured phase against its baseline (Spark's own Parquet write or read of the
    same rows)."""
    by_name = {r["phase"]: r for r in result["phases"]}
    out = []
    for r in result["phases"]:
        if not r.get("baseline"):
            continue
        b = by_name[r["baseline"]]
        out.append(summary_row(r["phase"].removeprefix("lakecore "), "lakecore (Spark local[2])",
                               r["rows_per_s"], "rows/s", r["ratio"],
                               f"{b['phase']} ({b['rows_per_s']:,} rows/s)", r.get("target"),
                               r.get("result"), r["peak_rss_mib"]))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--quick", action="store_true", help="smoke test: 200k rows, 1 round")
    args = p.parse_args()
    if args.quick:
        args.rows, args.repeat = 200_000, 1
    machine = machine_info()
    os.makedirs(OUT_DIR, exist_ok=True)
    result = run(args)
    notes = [
        f"{args.rows:,} rows (10 Parquet source files), 10 partitions; PK (dt, id) tables "
        f"with {BUCKETS} buckets, append table with bucket -1; Spark local[2], driver memory "
        f"{args.driver_memory}; best of {args.repeat} interleaved round(s), the reads "
        f"{READ_PASSES} times a round. Ratios: rows/s "
        "over Spark's df.write.parquet (writes) or spark.read.parquet (reads) of the same "
        "rows (the DV table: a Parquet copy of its 90% live rows); reads end in Spark's noop "
        "sink. read_table: native Parquet scans of the files that need no merge "
        "(docs/spark-datasource.md).",
        "Peak RSS: sampled every 0.25 s over the whole process tree (driver Python + JVM, "
        "which hosts the executors in local mode, + Python workers) and the largest single "
        "Python worker (executor-side Python).",
        f"pyspark {result['machine']['pyspark']}; " + load_note(machine),
    ]
    machine.update(pyspark=result["machine"]["pyspark"])
    cells = [_cells(r) for r in result["phases"]]
    text, body = render_table(machine_line(machine), COLUMNS, cells, notes)
    publish("spark_datasource", {**result, "machine": machine, "notes": notes,
                                 "summary": summary(result)}, text, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
