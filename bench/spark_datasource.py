"""The ``lakecore`` Spark data source vs Spark's own Parquet, on the same rows.

One run, one local[2] session, the same DataFrame (10 Parquet source files generated up
front; 6 columns: id, dt, i32, f64, s, ts; ``dt`` has 10 values):

* write: ``df.write.parquet`` (Spark's default snappy) vs ``df.write.format("lakecore")``
  into a primary-key table (``dt``, ``id``; 4 buckets; a fresh table each round) and, for
  information, into an append table (``bucket = -1``);
* read: ``spark.read.parquet`` of the Parquet write's output vs
  ``spark.read.format("lakecore")`` of the same rows in a primary-key table compacted once
  (one sorted run per bucket, as a maintained table is) and, for information, of the table as
  ``df.write`` left it (every write task's level-0 run in every bucket: merged on read).
  Both reads end in Spark's ``noop`` sink, so every row and column crosses into the JVM.

Phases run interleaved in ``--repeat`` rounds (best kept). Peak RSS is sampled over the whole
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
from typing import Any

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

TARGET = 0.5  # data source rows/s over Spark's own Parquet rows/s, for read and for write
BUCKETS = 4


def run(args: argparse.Namespace) -> dict[str, Any]:
    from lakecore import CatalogFactory, Schema
    from lakecore.spark import register
    from lakecore.spark.compact import CompactRequest, compact_table

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

        def create(name: str, pk: bool) -> None:
            opts = {"bucket": str(BUCKETS)} if pk else {"bucket": "-1"}
            catalog.create_table(name, Schema.from_pyarrow_schema(
                SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"] if pk else None,
                options=opts))

        def lake_write(prefix: str) -> Callable[[int], None]:
            def write(r: int) -> None:
                df.write.format("lakecore").mode("append").option("warehouse", warehouse) \
                    .save(f"db.{prefix}{r}")
            return write

        def fresh(prefix: str, pk: bool) -> Callable[[int], None]:
            return lambda r: create(f"db.{prefix}{r}", pk)

        def parquet_write(_: int) -> None:
            df.write.mode("overwrite").parquet(parquet_out)

        def noop(frame: Any) -> None:
            frame.write.format("noop").mode("overwrite").save()

        def parquet_read(_: int) -> None:
            noop(spark.read.parquet(parquet_out))

        def lake_read(name: str) -> Callable[[int], None]:
            return lambda _: noop(spark.read.format("lakecore").option("warehouse", warehouse)
                                  .load(name))

        # warm-up (not timed): JIT, Python workers, imports; then the compacted read table
        small = df.limit(20_000)
        create("db.warm", True)
        small.write.format("lakecore").mode("append").option("warehouse", warehouse).save("db.warm")
        noop(spark.read.format("lakecore").option("warehouse", warehouse).load("db.warm"))
        create("db.compacted", True)
        df.write.format("lakecore").mode("append").option("warehouse", warehouse) \
            .save("db.compacted")
        compact_table(spark, catalog.get_table("db.compacted"), warehouse,
                      CompactRequest(full=True))
        phases = [
            Phase("spark df.write.parquet (snappy)", parquet_write),
            Phase("lakecore df.write (PK table)", lake_write("pk"), fresh("pk", True)),
            Phase("lakecore df.write (append table)", lake_write("log"), fresh("log", False)),
            Phase("spark.read.parquet", parquet_read),
            Phase("lakecore read (PK, compacted)", lake_read("db.compacted")),
            Phase("lakecore read (PK, as written)", lake_read("db.pk0")),
        ]
        for r in range(args.repeat):  # interleaved, so a change in machine load hits all
            for ph in phases:
                ph.run(r)
        for name in ("db.pk0", "db.log0", "db.compacted"):
            snap = catalog.get_table(name).snapshot_manager.latest()
            assert snap is not None and snap.total_record_count == args.rows, name
        result = _report(args, phases)
        spark.stop()
        return result
    finally:
        if not args.keep:
            discard(work)


def _report(args: argparse.Namespace, phases: list[Phase]) -> dict[str, Any]:
    base = {"write": args.rows / phases[0].seconds, "read": args.rows / phases[3].seconds}
    rows_out = []
    for p in phases:
        kind = "read" if "read" in p.name else "write"
        rate = args.rows / p.seconds
        row = {"phase": p.name, "kind": kind, "rows": args.rows, "seconds": round(p.seconds, 3),
               "all_seconds": [round(t, 3) for t in p.times], "rows_per_s": round(rate),
               "ratio": round(rate / base[kind], 3),
               "peak_rss_mib": round(p.peak_total / 1024),
               "peak_worker_rss_mib": round(p.peak_worker / 1024)}
        if p.name in ("lakecore df.write (PK table)", "lakecore read (PK, compacted)"):
            row.update(target=f">= {TARGET}x",
                       result="PASS" if rate / base[kind] >= TARGET else "MISS")
        rows_out.append(row)
    import pyarrow as pa
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
    """The lakecore phases, each against Spark's own Parquet write or read."""
    bases = {r["kind"]: r for r in result["phases"] if r["phase"].startswith("spark")}
    out = []
    for r in result["phases"]:
        if not r["phase"].startswith("lakecore"):
            continue
        b = bases[r["kind"]]
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
        f"{args.driver_memory}; best of {args.repeat} interleaved round(s). Ratios: rows/s "
        "over Spark's df.write.parquet (writes) or spark.read.parquet (reads) of the same "
        "rows; reads end in Spark's noop sink.",
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
