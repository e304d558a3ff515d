"""The core operations and commit latency on an ``s3://`` warehouse (the moto server on
127.0.0.1) beside the same on local disk.

Targets (``--target``, repeatable; default all four): ``local`` (local disk, no lock),
``s3-lock`` (S3 under the SQL lock in SQLite), ``s3-lock-pg`` (under the PostgreSQL lock, when
``--pg-url`` / ``$LAKECORE_TEST_PG_URL`` is set) and ``s3-cond`` (S3 with conditional PUTs, no
lock). For each target, on a fresh table (primary key, ``--buckets`` buckets, write-only):

* ``write``: ``--rows`` rows in one batch commit; ``upsert``: ``--upsert`` rows over them;
* ``read``: the merged full read (checked against the model);
* ``compact``: one full compaction; ``read compacted``: the read after it;
* ``commit``: ``--rounds`` small APPEND commits of one row, only ``commit()`` timed (median,
  p99), and the S3 requests one commit makes (counted in the server's log);
* ``concurrent``: ``--processes`` processes x ``--concurrent-commits`` one-row commits to one
  table, started together: commits/s from the first commit's start to the last one's end.

moto is an in-process Python server on the same two cores, so S3 figures measure lakecore's
request pattern (how many round trips, how much waits on them), not a real S3's latency:
a real endpoint adds its round-trip time per request (the requests/commit column).

Usage: ``.venv/bin/python bench/object_store.py [--quick] [--write-results]`` (needs
``make moto-venv``). Prints a table and writes ``bench/out/object_store.json``; with
``--write-results`` also the ``## object_store`` section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
sys.path.insert(0, REPO)

import pyarrow as pa  # noqa: E402
from _common import (  # noqa: E402
    OUT_DIR,
    RESULTS_MD,
    SCHEMA,
    Result,
    check_merged,
    cold_start,
    discard,
    format_table,
    machine_info,
    machine_line,
    make_data,
    replace_section,
    summary_row,
)

TARGETS = ("local", "s3-lock", "s3-lock-pg", "s3-cond")


def catalog_options(target: str, server: Any, workdir: str, pg_url: str | None) -> dict[str, str]:
    name = f"{target}-{uuid.uuid4().hex[:8]}"
    if target == "local":
        return {"warehouse": os.path.join(workdir, name)}
    options = server.catalog_options(server.new_bucket())
    if target == "s3-cond":
        return {**options, "commit.protocol": "conditional-put"}
    url = f"sqlite:///{workdir}/{name}-locks.db" if target == "s3-lock" else str(pg_url)
    return {**options, "lock.enabled": "true", "lock.uri": url, "catalog-key": name}


def new_table(options: dict[str, str], buckets: int) -> Any:
    from lakecore import CatalogFactory, Schema

    catalog = CatalogFactory.create(options)
    catalog.create_database("db", ignore_if_exists=True)
    catalog.create_table("db.t", Schema.from_pyarrow_schema(
        SCHEMA, primary_keys=["id"], options={"bucket": str(buckets), "write-only": "true"}))
    return catalog.get_table("db.t")


def commit_batch(table: Any, data: pa.Table) -> None:
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(data)
    wb.new_commit().commit(w.prepare_commit())
    w.close()


def read_all(table: Any) -> pa.Table:
    cold_start()  # a read job is a new process: no manifest decoded yet
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


def timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def one_row(i: int) -> pa.Table:
    return pa.table({"id": pa.array([10**9 + i], pa.int64()), "i32": [i], "i64": [i],
                     "f64": [float(i)], "s": [f"c{i}"],
                     "ts": pa.array([0], pa.timestamp("us"))}, schema=SCHEMA)


def measure_commits(table: Any, rounds: int, server: Any) -> Result:
    builder = table.new_stream_write_builder().with_commit_user(f"bench-{uuid.uuid4().hex}")
    commit = builder.new_commit()
    times, requests = [], []
    for i in range(1, rounds + 1):
        w = builder.new_write()
        w.write_arrow(one_row(i))
        messages = w.prepare_commit(i)
        before = server.request_count() if server is not None else 0
        start = time.perf_counter()
        commit.commit(messages, i)
        times.append(time.perf_counter() - start)
        if server is not None:
            requests.append(server.request_count() - before)
        w.close()
    times.sort()
    return {"median_ms": statistics.median(times) * 1000,
            "p99_ms": times[min(len(times) - 1, int(len(times) * 0.99))] * 1000,
            "requests_per_commit": statistics.median(requests) if requests else None}


def child_commits(spec: Result) -> Result:
    """One concurrent committer (a process of its own)."""
    from lakecore import CatalogFactory
    from lakecore.errors import CommitTimeoutError

    table = CatalogFactory.create(spec["options"]).get_table("db.t")
    builder = table.new_stream_write_builder().with_commit_user(spec["user"])
    commit = builder.new_commit()
    lost = 0
    first = time.time()
    for i in range(1, spec["n"] + 1):
        w = builder.new_write()
        w.write_arrow(one_row(spec["base"] + i))
        messages = w.prepare_commit(i)
        while True:
            try:
                commit.commit(messages, i)
                break
            except CommitTimeoutError:
                lost += 1
        w.close()
    return {"lost": lost, "first": first, "last": time.time()}


def measure_concurrency(options: dict[str, str], processes: int, commits: int) -> Result:
    table = new_table(options, 1)
    del table
    procs = [subprocess.Popen(
        [sys.executable, __file__, "--child", json.dumps({
            "options": options, "user": f"c{p}", "n": commits, "base": p * 10_000})],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for p in range(processes)]
    outs = [p.communicate(timeout=1800) for p in procs]
    for p, (_, err) in zip(procs, outs):
        if p.returncode != 0:
            raise RuntimeError(f"concurrent committer failed: {err[-2000:]}")
    done = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    # from the first commit of any process to the last one's end (interpreter start-up and
    # imports, which differ per process, are not commits)
    wall = max(d["last"] for d in done) - min(d["first"] for d in done)
    return {"commits_per_s": processes * commits / wall, "wall_s": wall,
            "lost_races": sum(d["lost"] for d in done)}


def run_target(target: str, args: argparse.Namespace, server: Any, workdir: str,
               base: pa.Table, upsert: pa.Table) -> Result:
    options = catalog_options(target, server, workdir, args.pg_url)
    table = new_table(options, args.buckets)
    out: Result = {"target": target}
    out["write_s"], _ = timed(lambda: commit_batch(table, base))
    out["upsert_s"], _ = timed(lambda: commit_batch(table, upsert))
    out["read_s"], merged = timed(lambda: read_all(table))
    check_merged(merged, base, upsert)
    out["compact_s"], _ = timed(lambda: table.compact(full=True))
    out["read_compacted_s"], merged = timed(lambda: read_all(table))
    check_merged(merged, base, upsert)
    srv = server if target != "local" else None
    out.update(measure_commits(table, args.rounds, srv))
    out.update(measure_concurrency(catalog_options(target, server, workdir, args.pg_url),
                                   args.processes, args.concurrent_commits))
    return out


def rows_table(results: list[Result], rows: int, upsert: int, markdown: bool) -> str:
    header = ("target", "write rows/s", "upsert rows/s", "read rows/s", "compact s",
              "read compacted rows/s", "commit median ms", "commit p99 ms", "requests/commit",
              "concurrent commits/s")
    cells = []
    for r in results:
        cells.append([
            r["target"], f"{rows / r['write_s']:,.0f}", f"{upsert / r['upsert_s']:,.0f}",
            f"{rows / r['read_s']:,.0f}", f"{r['compact_s']:.2f}",
            f"{rows / r['read_compacted_s']:,.0f}", f"{r['median_ms']:.1f}",
            f"{r['p99_ms']:.1f}",
            "-" if r["requests_per_commit"] is None else f"{r['requests_per_commit']:.0f}",
            f"{r['commits_per_s']:.1f}"])
    return format_table(header, cells, markdown)


def summary(results: list[Result], rows: int) -> list[Result]:
    """Rows for ``run_all``'s summary: each S3 target over local disk (information: no
    target is set for a Python S3 server on the same two cores)."""
    local = next((r for r in results if r["target"] == "local"), None)
    out = []
    for r in results:
        if r["target"] == "local" or local is None:
            continue
        out.append(summary_row(f"write {rows:,} rows, {r['target']}", "lakecore",
                               rows / r["write_s"], "rows/s", local["write_s"] / r["write_s"],
                               f"local disk ({rows / local['write_s']:,.0f} rows/s)"))
        out.append(summary_row(f"merged read, {r['target']}", "lakecore", rows / r["read_s"],
                               "rows/s", local["read_s"] / r["read_s"],
                               f"local disk ({rows / local['read_s']:,.0f} rows/s)"))
        out.append(summary_row(f"one-row commit, {r['target']}", "lakecore", r["median_ms"],
                               "ms", r["median_ms"] / local["median_ms"],
                               f"local disk ({local['median_ms']:.1f} ms)"))
    return out


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--upsert", type=int, default=100_000)
    p.add_argument("--buckets", type=int, default=2)
    p.add_argument("--rounds", type=int, default=30, help="timed single-row commits")
    p.add_argument("--processes", type=int, default=4)
    p.add_argument("--concurrent-commits", type=int, default=10)
    p.add_argument("--target", action="append", choices=TARGETS)
    p.add_argument("--pg-url", default=os.environ.get("LAKECORE_TEST_PG_URL"))
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    p.add_argument("--write-results", action="store_true",
                   help="also write the ## object_store section of bench/RESULTS.md")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        args.rows, args.upsert, args.rounds = 50_000, 5_000, 10
        args.concurrent_commits = 5
    return args


def main() -> int:
    args = parse_args()
    if args.child:
        print(json.dumps(child_commits(json.loads(args.child))))
        return 0
    from tests.s3.server import MotoServer

    targets = args.target or [t for t in TARGETS if t != "s3-lock-pg" or args.pg_url]
    base, upsert = make_data(args.rows, args.upsert)
    os.makedirs(OUT_DIR, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="object_store-", dir=OUT_DIR)
    machine = machine_info()
    results = []
    try:
        with MotoServer(workdir) as server:
            for target in targets:
                print(f"... {target}", flush=True)
                results.append(run_target(target, args, server, workdir, base, upsert))
    finally:
        discard(workdir)
    notes = [f"{args.rows:,} rows + {args.upsert:,} upserted, {args.buckets} buckets; "
             f"{args.rounds} timed one-row commits; {args.processes} x "
             f"{args.concurrent_commits} concurrent commits",
             "S3 = moto 5.2.5 on 127.0.0.1, sharing the two cores with lakecore",
             machine_line(machine)]
    print(rows_table(results, args.rows, args.upsert, markdown=False))
    for n in notes:
        print(n)
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, "object_store.json"), "w") as f:
        json.dump({"rows": results, "notes": notes, "quick": args.quick,
                   "summary": summary(results, args.rows)}, f, indent=1)
    if args.write_results and not args.quick:
        body = rows_table(results, args.rows, args.upsert, markdown=True) + "\n\n" + "\n".join(
            f"- {n}" for n in notes)
        replace_section(RESULTS_MD, "## object_store", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
