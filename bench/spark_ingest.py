"""Spark ingest throughput: lakecore's distributed write-only ingest vs Spark's own Parquet write.

One run, one local[2] session, the same DataFrame (Parquet source files generated up front,
10 files; 6 columns: id, dt, i32, f64, s, ts; ``dt`` has 10 values):

* baseline: ``df.write.parquet`` (Spark's defaults: snappy) and, for information, with zstd
  (lakecore's default ``file.compression``);
* lakecore ingest, as the ingest job runs it for ``--source DIR --source-format parquet``
  (``ingest_parquet``: executors read the files with pyarrow, cut them into (partition,
  bucket) pieces, the pieces are shuffled so one task owns each bucket, lakecore writers in
  ``mapInArrow`` tasks, one commit) into a primary-key table (``dt``, ``id``), 4 buckets,
  and the same into tables of ``--curve-buckets`` (1 and 16) buckets: the bucket-count curve,
  each point judged against the same target;
* for information, the same ingest from the DataFrame (``ingest_dataframe``: the path of
  ``--source-table`` / ``--source-query`` / CSV / JSON, where Spark's reader feeds the tasks);
* an upsert of 10% of the keys (new values) into the ingested table, then the compaction
  job's body (``compact_table``, full) on the result: it merges both runs of every bucket.

Phases run interleaved in ``--repeat`` rounds (default 3; the best of each is kept; fresh
output each time). Round 0 runs slow (Spark's own write took 8.6 s in it in one full run,
4.0 s in round 1), so two rounds left one sample of each phase. Before each phase the
driver's Python and the JVM collect their garbage (untimed), so no phase pays for the heap
the phase before it left, as every Airflow task starts a fresh ``spark-submit``. Peak RSS is
sampled over the whole process tree (driver Python + JVM + Python workers) per phase.
Prints a table, writes ``bench/out/spark_ingest.json`` and the ``## spark_ingest`` section of
``bench/RESULTS.md``.

    .venv/bin/python bench/spark_ingest.py [--rows 10000000] [--repeat 3] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

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

TARGET = 0.7  # issue 17: lakecore ingest rows/s over Spark's plain Parquet write rows/s (was 0.5)
SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("dt", pa.string(), nullable=False),
    pa.field("i32", pa.int32()),
    pa.field("f64", pa.float64()),
    pa.field("s", pa.string()),
    pa.field("ts", pa.timestamp("us")),
])
PARTITIONS = [f"2026-11-{d:02d}" for d in range(1, 11)]
BUCKETS = 4
# the ingest curve's other bucket counts (--curve-buckets): same rows, a table of N buckets
CURVE_PHASE = "lakecore ingest (parquet source), "


def curve_phase(buckets: int) -> str:
    return f"{CURVE_PHASE}{buckets} bucket{'s' if buckets > 1 else ''}"


# --- data ------------------------------------------------------------------------------------


def make_source(directory: str, rows: int, files: int = 10, seed: int = 20261122,
                ids: np.ndarray | None = None) -> None:
    """``files`` Parquet files of shuffled ids 0..rows-1 (or ``ids``), zstd, from numpy."""
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    ids = rng.permutation(rows).astype(np.int64) if ids is None else ids
    for i, chunk in enumerate(np.array_split(ids, files)):
        n = len(chunk)
        labels = pc.cast(pa.array(rng.integers(0, 10**12, n, dtype=np.int64)), pa.string())
        table = pa.table({
            "id": chunk,
            "dt": pa.array(np.array(PARTITIONS, dtype=object)[chunk % len(PARTITIONS)],
                           pa.string()),
            "i32": pa.array(rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int32)),
            "f64": rng.standard_normal(n),
            "s": pc.binary_join_element_wise("row-", labels, ""),
            "ts": pa.array(1_790_000_000_000_000 + rng.integers(0, 10**13, n), pa.timestamp("us")),
        }, schema=SCHEMA)
        pq.write_table(table, os.path.join(directory, f"part-{i:03d}.parquet"),
                       compression="zstd")


# --- memory ----------------------------------------------------------------------------------


def _tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class RssSampler:
    """Peak summed RSS of this process tree, and the peak of any one Python worker."""

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self.peak_total = self.peak_worker = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            pids = _tree(me)
            sizes = {p: _rss_kib(p) for p in pids}
            self.peak_total = max(self.peak_total, sum(sizes.values()))
            workers = [s for p, s in sizes.items() if p != me and _is_python(p)]
            self.peak_worker = max([self.peak_worker, *workers])
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _is_python(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"python" in f.read().split(b"\0")[0]
    except OSError:
        return False


class Phase:
    """One timed operation, run once per round (``before(round)`` untimed); keeps the best."""

    def __init__(self, name: str, fn: Callable[[int], Any],
                 before: Callable[[int], None] | None = None) -> None:
        self.name, self.fn, self.before = name, fn, before
        self.times: list[float] = []
        self.value: Any = None
        self.peak_total = self.peak_worker = 0

    def run(self, r: int) -> None:
        if self.before is not None:
            self.before(r)
        with RssSampler() as rss:
            start = time.perf_counter()
            value = self.fn(r)
            took = time.perf_counter() - start
        if r == 0:
            self.value = value
        self.times.append(took)
        self.peak_total = max(self.peak_total, rss.peak_total)
        self.peak_worker = max(self.peak_worker, rss.peak_worker)
        print(f"  round {r}: {self.name}: {took:.2f} s", flush=True)

    @property
    def seconds(self) -> float:
        return min(self.times)


# --- main ------------------------------------------------------------------------------------


def session(driver_memory: str, local_dir: str) -> Any:
    """local[2] with the ingest job's session defaults (``SESSION_DEFAULTS``: Spark does not
    compress the shuffle of pieces lakecore compressed already); Spark's own write shuffles
    nothing, so they do not touch the baseline. Spark's scratch (shuffle files, spills) goes
    to ``local_dir`` in the benchmark's own directory, not the machine's shared /tmp: on this
    VM's ext4 creating a file in a directory where many were deleted lately (a pip install's
    build files, say) costs up to 1 ms for a while, which only the shuffling side pays."""
    from pyspark.sql import SparkSession

    from lakecore.spark.jobs.common import with_session_defaults

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master("local[2]").appName("bench-spark-ingest")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", driver_memory)
               .config("spark.local.dir", local_dir))
    spark = with_session_defaults(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def settle(spark: Any) -> None:
    """Garbage collected in the driver's Python and the JVM (untimed, before a phase)."""
    gc.collect()
    spark.sparkContext._jvm.java.lang.System.gc()


def run(args: argparse.Namespace) -> dict[str, Any]:
    from lakecore import CatalogFactory, Schema
    from lakecore.spark.compact import CompactRequest, compact_table
    from lakecore.spark.ingest import (
        IngestRequest,
        default_commit_user,
        ingest_dataframe,
        ingest_parquet,
    )
    from lakecore.spark.jobs.common import SESSION_DEFAULTS

    work = tempfile.mkdtemp(prefix="spark_ingest-", dir=OUT_DIR)
    try:
        src, upsert_src = os.path.join(work, "source"), os.path.join(work, "upsert")
        t0 = time.perf_counter()
        make_source(src, args.rows)
        upsert_ids = np.random.default_rng(7).choice(args.rows, args.rows // 10, replace=False)
        make_source(upsert_src, len(upsert_ids), files=2, seed=8, ids=upsert_ids)
        print(f"source: {args.rows:,} rows in {time.perf_counter() - t0:.1f} s", flush=True)
        spark = session(args.driver_memory, os.path.join(work, "spark-local"))
        df = spark.read.parquet(src)
        warehouse = os.path.join(work, "warehouse")
        catalog = CatalogFactory.create({"warehouse": warehouse})
        catalog.create_database("db", ignore_if_exists=True)
        out_dirs = {codec: os.path.join(work, f"spark-{codec}") for codec in ("snappy", "zstd")}

        def spark_write(codec: str) -> Callable[[int], None]:
            def write(_: int) -> None:
                df.write.mode("overwrite").option("compression", codec).parquet(out_dirs[codec])
            return write

        def fresh_table(name: str, buckets: int = BUCKETS) -> Callable[[int], None]:
            def create(r: int) -> None:
                catalog.create_table(f"db.{name}{r}", Schema.from_pyarrow_schema(
                    SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"],
                    options={"bucket": str(buckets)}))
            return create

        def request(table: Any, ident: int) -> Any:
            return IngestRequest(ident, default_commit_user("ingest", table.identifier, ident))

        def ingest_into(name: str) -> Callable[[int], Any]:
            def ingest(r: int) -> Any:
                table = catalog.get_table(f"db.{name}{r}")
                return ingest_parquet(spark, src, table, warehouse, request(table, 1))
            return ingest

        def ingest_df(r: int) -> Any:
            table = catalog.get_table(f"db.df{r}")
            return ingest_dataframe(spark, df, table, warehouse, request(table, 1))

        def upsert(r: int) -> Any:
            table = catalog.get_table(f"db.t{r}")
            return ingest_parquet(spark, upsert_src, table, warehouse, request(table, 2))

        def compact(r: int) -> Any:
            table = catalog.get_table(f"db.t{r}")
            out = compact_table(spark, table, warehouse, CompactRequest(full=True))
            assert out.snapshot_ids, out.skipped_reason
            return out

        # warm-up: JIT, Python workers, imports (not timed)
        small = df.limit(20_000)
        small.write.mode("overwrite").parquet(os.path.join(work, "warm"))
        catalog.create_table("db.warm", Schema.from_pyarrow_schema(
            SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"], options={"bucket": "4"}))
        ingest_dataframe(spark, small, catalog.get_table("db.warm"), warehouse,
                         IngestRequest(1, "warm"))
        ingest_parquet(spark, upsert_src, catalog.get_table("db.warm"), warehouse,
                       IngestRequest(2, "warm"))
        phases = [
            Phase("spark df.write.parquet (snappy)", spark_write("snappy")),
            Phase("lakecore ingest (parquet source)", ingest_into("t"), fresh_table("t")),
            *(Phase(curve_phase(b), ingest_into(f"b{b}_"), fresh_table(f"b{b}_", b))
              for b in args.curve_buckets),
            Phase("lakecore ingest (DataFrame source)", ingest_df, fresh_table("df")),
            Phase("spark df.write.parquet (zstd)", spark_write("zstd")),
            Phase("lakecore upsert 10% (parquet source)", upsert),
            Phase("lakecore compact (full)", compact),
        ]
        for r in range(args.repeat):  # interleaved, so a change in machine load hits all
            for ph in phases:
                settle(spark)
                ph.run(r)
        result = _report(args, phases, catalog)
        conf = spark.sparkContext.getConf()
        result["session_conf"] = {k: conf.get(k) for k in SESSION_DEFAULTS}
        spark.stop()
        return result
    finally:
        if not args.keep:
            discard(work)


def _report(args: argparse.Namespace, phases: list[Phase], catalog: Any) -> dict[str, Any]:
    base = args.rows / phases[0].seconds
    by_name = {p.name: p.value for p in phases}
    ingest = by_name["lakecore ingest (parquet source)"]
    comp = by_name["lakecore compact (full)"]
    latest = catalog.get_table("db.t0").snapshot_manager.latest()
    assert ingest.rows == args.rows, f"ingest wrote {ingest.rows} rows"
    assert by_name["lakecore ingest (DataFrame source)"].rows == args.rows
    for b in args.curve_buckets:
        assert by_name[curve_phase(b)].rows == args.rows, f"{b} buckets: row count"
        snap = catalog.get_table(f"db.b{b}_0").snapshot_manager.latest()
        assert snap is not None and snap.total_record_count == args.rows, f"{b} buckets"
    assert latest is not None and latest.total_record_count == args.rows, "row count mismatch"
    rows_out = []
    for p in phases:
        n = args.rows // 10 if p.name.startswith("lakecore upsert") else args.rows
        rate = n / p.seconds
        row = {"phase": p.name, "rows": n, "seconds": round(p.seconds, 3),
               "all_seconds": [round(t, 3) for t in p.times],
               "rows_per_s": round(rate), "ratio": round(rate / base, 3),
               "peak_rss_mib": round(p.peak_total / 1024),
               "peak_worker_rss_mib": round(p.peak_worker / 1024)}
        if p.name.startswith("lakecore ingest") or p.name.startswith("lakecore upsert"):
            row.update(files=p.value.stats.files, bytes=p.value.stats.bytes)
        if p.name == "lakecore ingest (parquet source)" or p.name.startswith(CURVE_PHASE):
            row.update(target=f">= {TARGET}x", result="PASS" if rate / base >= TARGET else "MISS")
        if p.name.startswith("lakecore compact"):
            row.update(files=comp.after.files, bytes=comp.after.bytes,
                       buckets=comp.after.buckets, files_before=comp.files_before)
        rows_out.append(row)
    import pyspark

    return {
        "rows": args.rows, "partitions": len(PARTITIONS), "buckets": BUCKETS,
        "curve_buckets": list(args.curve_buckets),
        "repeat": args.repeat, "master": "local[2]", "driver_memory": args.driver_memory,
        "machine": {"nproc": os.cpu_count(), "loadavg_end": os.getloadavg()[0],
                    "pyspark": pyspark.__version__, "pyarrow": pa.__version__,
                    "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")},
        "phases": rows_out,
        "snapshot_total_record_count": latest.total_record_count,
        "note": "compaction rows/s counts the table's rows (10M) merged from 11M records",
    }


COLUMNS = ("phase", "rows", "seconds", "rows/s", "ratio", "target", "result", "peak RSS (tree)",
           "peak RSS (one worker)")


def _cells(r: dict[str, Any]) -> list[str]:
    return [r["phase"], f"{r['rows']:,}", f"{r['seconds']:.2f}", f"{r['rows_per_s']:,}",
            f"{r['ratio']:.3f}x", r.get("target", "-"), r.get("result", "-"),
            mib(r["peak_rss_mib"]), mib(r["peak_worker_rss_mib"])]


def summary(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The lakecore phases, against Spark's own Parquet write (snappy)."""
    base = result["phases"][0]
    label = f"{base['phase']} ({base['rows_per_s']:,} rows/s)"
    return [summary_row(r["phase"].removeprefix("lakecore "), "lakecore (Spark local[2])",
                        r["rows_per_s"], "rows/s", r["ratio"], label, r.get("target"),
                        r.get("result"), r["peak_rss_mib"])
            for r in result["phases"] if r["phase"].startswith("lakecore")]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--curve-buckets", type=lambda t: [int(x) for x in t.split(",") if x],
                   default=[1, 16], help="bucket counts of the ingest curve besides 4 (1,16)")
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
        f"{args.rows:,} rows (10 Parquet source files), {len(PARTITIONS)} partitions x {BUCKETS} "
        f"buckets (the curve: also {', '.join(map(str, args.curve_buckets)) or 'none'}; the "
        "target is judged at every bucket count), PK (dt, id); Spark local[2], driver memory "
        f"{args.driver_memory}, with the "
        "ingest job's session defaults ("
        + ", ".join(f"{k}={v}" for k, v in result["session_conf"].items())
        + ": the shuffled pieces are LZ4-compressed Arrow IPC already; Spark's own write "
        "shuffles nothing), spark.local.dir in the benchmark's directory; best of "
        f"{args.repeat} interleaved round(s). Ratios: rows/s over Spark's df.write.parquet "
        "(snappy, its default); the upsert writes 10% of the keys again; compaction rows/s "
        f"counts the table's rows, merged from {args.rows * 11 // 10:,} records.",
        "Peak RSS: sampled every 0.25 s over the whole process tree (driver Python + JVM + "
        "Python workers), and the largest single Python worker.",
        f"pyspark {result['machine']['pyspark']}; " + load_note(machine),
    ]
    machine.update(pyspark=result["machine"]["pyspark"])
    cells = [_cells(r) for r in result["phases"]]
    text, body = render_table(machine_line(machine), COLUMNS, cells, notes)
    publish("spark_ingest", {**result, "machine": machine, "notes": notes,
                             "summary": summary(result)}, text, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
