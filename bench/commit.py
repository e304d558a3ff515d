"""Commit latency of small APPEND commits: fresh table vs 1,000 snapshots of history, with and
without the catalog lock (SQLite, PostgreSQL), and commits/s with 4 concurrent committers.

* ``history`` is a table of ``--history`` OVERWRITE commits of one row: that many snapshots
  but one live file, so the comparison isolates history from the number of live files. Each
  round commits to a new empty table (``fresh``) and to a hard-linked copy of the history
  table, so every sample sees the same few live files.
* Each measured commit writes one row and commits it as APPEND; only ``commit()`` is timed.
  Commit users: ``per-run`` (a new user per commit, identifier 1: one Airflow run = one
  commit user, as the Airflow pipeline does; it starts with no manifest decoded, as a new
  process does) and ``streaming`` (one user, growing identifiers, whose previous commit is
  the snapshot before; it keeps the manifests decoded so far, as a long-lived writer does).
  Lock modes (none / sqlite / postgresql) and users are interleaved round-robin, so
  machine-load drift hits every cell alike.
* ``lock ms``: the lock's own cost inside those commits (acquire + release, measured around
  the guarded function).
* Concurrency: 4 processes x ``--concurrent-commits`` streaming commits to one fresh table
  per lock mode, started together; commits/s over the wall time, plus lost races (a commit
  attempt that found a newer snapshot under the lock and had to redo its manifests).

Prints a table, writes ``bench/out/commit.json`` and the ``## commit`` section of
``bench/RESULTS.md``. Usage: ``.venv/bin/python bench/commit.py [--pg-url URL] [--profile]``
(the PostgreSQL URL defaults to ``$LAKECORE_TEST_PG_URL``; without one, PG rows are skipped).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any, TypeVar

import pyarrow as pa

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
from _common import cold_start, discard, machine_info, replace_section  # noqa: E402

OUT_DIR = os.path.join(BENCH, "out")
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])
HISTORY_TARGET = 1.5  # history median / fresh median
PG_LOCK_TARGET_MS = 10.0
T = TypeVar("T")
Result = dict[str, Any]


class TimedLock:
    """Wraps a catalog lock; records its own cost (acquire + release) per call."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.costs = inner, []  # type: ignore[var-annotated]

    def run_with_lock(self, database: str, table: str, fn: Callable[[], T]) -> T:
        inside = [0.0]

        def timed() -> T:
            start = time.perf_counter()
            try:
                return fn()
            finally:
                inside[0] = time.perf_counter() - start

        start = time.perf_counter()
        result = self.inner.run_with_lock(database, table, timed)
        self.costs.append(time.perf_counter() - start - inside[0])
        return result


def lock_options(mode: str, workdir: str, pg_url: str | None, key: str) -> dict[str, str]:
    if mode == "none":
        return {}
    uri = f"sqlite:///{workdir}/locks.db" if mode == "sqlite" else str(pg_url)
    return {"lock.enabled": "true", "lock.uri": uri, "catalog-key": key,
            "lock-check-max-sleep": "100 ms"}


def create_table(warehouse: str) -> None:
    from lakecore import CatalogFactory, Schema

    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database("db", ignore_if_exists=True)
    catalog.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA))


def one_row(i: int) -> pa.Table:
    return pa.table({"id": pa.array([i], pa.int64()), "v": pa.array([f"v{i}"])})


def build_history(table: Any, n: int) -> None:
    builder = table.new_stream_write_builder().with_commit_user("history-builder")
    commit, write = builder.new_commit(), builder.new_write()
    for ident in range(1, n + 1):
        write.write_arrow(one_row(ident))
        commit.overwrite(write.prepare_commit(ident), ident)
    write.close()


def timed_commit(table: Any, user: str, ident: int, row_id: int) -> float:
    builder = table.new_stream_write_builder().with_commit_user(user)
    write = builder.new_write()
    write.write_arrow(one_row(row_id))
    messages = write.prepare_commit(ident)
    commit = builder.new_commit()
    start = time.perf_counter()
    result = commit.commit(messages, ident)
    took = time.perf_counter() - start
    assert len(result.snapshot_ids) == 1, result
    write.close()
    return took


# -- latency --------------------------------------------------------------------------------
def open_table(warehouse: str, lock: Any) -> Any:
    from lakecore.catalog import FileSystemCatalog

    return FileSystemCatalog({"warehouse": warehouse}, lock=lock).get_table("db.t")


def measure_latency(args: argparse.Namespace, workdir: str, modes: list[str]) -> Result:
    """Every round gets a new empty table and a hard-linked copy of the history template, so
    each sample sees the same small number of live files and only the history differs."""
    from lakecore.lock import NoopLock, lock_from_options

    template = os.path.join(workdir, "history-template")
    create_table(template)
    start = time.perf_counter()
    build_history(open_table(template, NoopLock()), args.history)
    built = time.perf_counter() - start
    empty = os.path.join(workdir, "empty")
    create_table(empty)
    idem = {"fresh": idempotence_check_cost(open_table(empty, NoopLock())),
            "history": idempotence_check_cost(open_table(template, NoopLock()))}
    locks = {mode: TimedLock(lock_from_options(
        lock_options(mode, workdir, args.pg_url, f"bench-{uuid.uuid4().hex[:8]}")))
        for mode in modes}
    samples: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    row_id = 10**9
    for rnd in range(args.warmup + args.rounds):
        if rnd == args.warmup:
            for lock in locks.values():
                lock.costs.clear()
        dirs = {"fresh": os.path.join(workdir, "fresh"),
                "history": os.path.join(workdir, "history")}
        for d in dirs.values():
            discard(d)
        create_table(dirs["fresh"])
        shutil.copytree(template, dirs["history"], copy_function=os.link)
        for mode in modes:
            for kind in ("fresh", "history"):  # the streaming user's previous commit
                row_id += 1
                timed_commit(open_table(dirs[kind], locks[mode]), f"stream-{mode}",
                             2 * rnd + 1, row_id)
            for users in ("per-run", "streaming"):
                for kind in ("fresh", "history"):
                    user = f"run-{mode}-{rnd}" if users == "per-run" else f"stream-{mode}"
                    ident = 1 if users == "per-run" else 2 * rnd + 2
                    row_id += 1
                    if users == "per-run":
                        cold_start()
                    took = timed_commit(open_table(dirs[kind], locks[mode]), user, ident,
                                        row_id)
                    if rnd >= args.warmup:
                        samples[kind, users, mode].append(took)
    alone = {}  # acquire + release back to back: the lock's cost without commit noise
    for mode in modes[1:]:
        times = []
        for _ in range(200):
            start = time.perf_counter()
            locks[mode].inner.run_with_lock("db", "t", lambda: None)
            times.append(time.perf_counter() - start)
        alone[mode] = statistics.median(times) * 1000
    return {"samples": {"|".join(k): v for k, v in samples.items()},
            "lock_costs": {mode: lock.costs for mode, lock in locks.items()},
            "lock_alone_ms": alone, "history_build_s": built, "is_committed_ms": idem}


def idempotence_check_cost(table: Any) -> float:
    """Median ms of the idempotence check alone for a never-seen commit user."""
    from lakecore.commit.file_store_commit import FileStoreCommit

    commit = FileStoreCommit(table, f"never-seen-{uuid.uuid4().hex}")
    times = []
    for _ in range(7):
        start = time.perf_counter()
        commit.is_committed(1)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def profile_history_commit(args: argparse.Namespace, workdir: str) -> str:
    from lakecore.lock import NoopLock

    warehouse = os.path.join(workdir, "profile")
    shutil.copytree(os.path.join(workdir, "history-template"), warehouse,
                    copy_function=os.link)
    table = open_table(warehouse, NoopLock())
    prof = cProfile.Profile()
    for i in range(10):
        builder = table.new_stream_write_builder().with_commit_user(f"profiled-run-{i}")
        write = builder.new_write()
        write.write_arrow(one_row(2 * 10**9 + i))
        messages = write.prepare_commit(1)
        prof.enable()
        builder.new_commit().commit(messages, 1)
        prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(14)
    return buf.getvalue()


# -- concurrency ----------------------------------------------------------------------------
def child_concurrent(spec: Result) -> Result:
    """One of the concurrent committers (runs in its own process)."""
    from lakecore import CatalogFactory
    from lakecore.commit import file_store_commit as fsc
    from lakecore.errors import CommitRetryableError

    counts = {"attempts": 0, "lost": 0}
    original = fsc.FileStoreCommit._try_commit_once

    def counting(self: Any, *a: Any, **k: Any) -> int:
        counts["attempts"] += 1
        try:
            return original(self, *a, **k)
        except CommitRetryableError:
            counts["lost"] += 1
            raise

    fsc.FileStoreCommit._try_commit_once = counting  # type: ignore[method-assign]
    catalog = CatalogFactory.create(spec["catalog"])
    lock = catalog.lock = TimedLock(catalog.lock)  # type: ignore[assignment]
    table = catalog.get_table("db.t")
    builder = table.new_stream_write_builder().with_commit_user(spec["user"])
    commit = builder.new_commit()
    slept = [0.0]
    inner_sleep = commit._commit.sleep

    def sleep(seconds: float) -> None:
        slept[0] += seconds
        inner_sleep(seconds)

    commit._commit.sleep = sleep
    while time.time() < spec["start_at"]:
        time.sleep(0.002)
    for ident in range(1, spec["commits"] + 1):
        write = builder.new_write()
        write.write_arrow(one_row(spec["base"] + ident))
        commit.commit(write.prepare_commit(ident), ident)
        write.close()
    return {"end": time.time(), "lock_s": sum(lock.costs), "retry_sleep_s": slept[0], **counts}


def measure_concurrency(args: argparse.Namespace, workdir: str, modes: list[str]) -> list[Result]:
    out = []
    for mode in modes:
        warehouse = os.path.join(workdir, f"concurrent-{mode}")
        create_table(warehouse)
        catalog = {"warehouse": warehouse,
                   **lock_options(mode, workdir, args.pg_url, f"bench-{uuid.uuid4().hex[:8]}")}
        start_at = time.time() + 6.0  # after every child has imported lakecore
        procs = [subprocess.Popen(
            [sys.executable, __file__, "--child", json.dumps({
                "catalog": catalog, "user": f"committer-{i}", "commits": args.concurrent_commits,
                "base": (i + 1) * 10**6, "start_at": start_at})],
            stdout=subprocess.PIPE, text=True) for i in range(args.processes)]
        results = [json.loads(p.communicate(timeout=900)[0].strip().splitlines()[-1])
                   for p in procs]
        wall = max(r["end"] for r in results) - start_at
        total = args.processes * args.concurrent_commits
        out.append({"lock": mode, "processes": args.processes, "commits": total,
                    "seconds": wall, "commits_per_s": total / wall,
                    "attempts": sum(r["attempts"] for r in results),
                    "lost": sum(r["lost"] for r in results),
                    "lock_s": sum(r["lock_s"] for r in results),
                    "retry_sleep_s": sum(r["retry_sleep_s"] for r in results)})
    return out


# -- report ---------------------------------------------------------------------------------
def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def build_rows(lat: Result, modes: list[str]) -> list[Result]:
    rows = []
    med = {k: statistics.median(v) * 1000 for k, v in lat["samples"].items()}
    for users in ("per-run", "streaming"):
        for mode in modes:
            for kind in ("fresh", "history"):
                key = f"{kind}|{users}|{mode}"
                values = lat["samples"][key]
                costs = lat["lock_costs"][mode]
                row: Result = {"table": kind, "users": users, "lock": mode,
                               "commits": len(values), "median_ms": med[key],
                               "p99_ms": p99(values) * 1000,
                               "lock_ms": statistics.median(costs) * 1000 if mode != "none"
                               and costs else None,
                               "ratio": None, "target": None, "result": None}
                if kind == "history":
                    ratio = med[key] / med[f"fresh|{users}|{mode}"]
                    row.update(ratio=ratio, target=f"<= {HISTORY_TARGET}x vs fresh",
                               result="PASS" if ratio <= HISTORY_TARGET else "MISS")
                elif mode == "postgresql":
                    added = med[key] - med[f"fresh|{users}|none"]
                    row.update(ratio=added, target=f"adds < {PG_LOCK_TARGET_MS:.0f} ms",
                               result="PASS" if added < PG_LOCK_TARGET_MS else "MISS")
                rows.append(row)
    return rows


COLUMNS = ("table", "users", "lock", "commits", "median ms", "p99 ms", "lock ms", "vs fresh /"
           " added", "target", "result")


def _cells(r: Result) -> list[str]:
    def num(v: float | None, fmt: str = ".1f") -> str:
        return "-" if v is None else format(v, fmt)

    ratio = "-" if r["ratio"] is None else (
        f"{r['ratio']:.2f}x" if r["table"] == "history" else f"+{r['ratio']:.1f} ms")
    return [r["table"], r["users"], r["lock"], str(r["commits"]), num(r["median_ms"]),
            num(r["p99_ms"]), num(r["lock_ms"], ".2f"), ratio, r["target"] or "-",
            r["result"] or "-"]


def text_table(rows: list[Result]) -> str:
    cells = [list(COLUMNS)] + [_cells(r) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown(rows: list[Result], conc: list[Result], notes: list[str]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in rows]
    lines += ["", "| lock | processes | commits | seconds | commits/s | attempts | lost races "
              "| s in lock calls | s in retry sleeps |", "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {c['lock']} | {c['processes']} | {c['commits']} | {c['seconds']:.1f} | "
              f"{c['commits_per_s']:.1f} | {c['attempts']} | {c['lost']} | {c['lock_s']:.1f} | "
              f"{c['retry_sleep_s']:.1f} |" for c in conc]
    return "\n".join(lines + [""] + [f"- {n}" for n in notes])


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--history", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--processes", type=int, default=4)
    p.add_argument("--concurrent-commits", type=int, default=25)
    p.add_argument("--pg-url", default=os.environ.get("LAKECORE_TEST_PG_URL"))
    p.add_argument("--profile", action="store_true", help="profile history commits too")
    p.add_argument("--child", help=argparse.SUPPRESS)
    return p.parse_args()


def main() -> int:
    args = parse_args()
    if args.child:
        print(json.dumps(child_concurrent(json.loads(args.child))))
        return 0
    os.makedirs(OUT_DIR, exist_ok=True)
    machine = machine_info()
    modes = ["none", "sqlite"] + (["postgresql"] if args.pg_url else [])
    with tempfile.TemporaryDirectory(prefix="commit-", dir=OUT_DIR) as workdir:
        lat = measure_latency(args, workdir, modes)
        conc = measure_concurrency(args, workdir, modes)
        profile = profile_history_commit(args, workdir) if args.profile else None
    rows = build_rows(lat, modes)
    machine["loadavg_end"] = os.getloadavg()[0]
    idem = lat["is_committed_ms"]
    notes = [
        f"{machine['date']} - {machine['nproc']} CPUs, {machine['cpu']}, Python "
        f"{machine['python']}, pyarrow {machine['pyarrow']}; 1-min load average "
        f"{machine['loadavg_start']:.1f} at start, {machine['loadavg_end']:.1f} at end.",
        f"history: {args.history} OVERWRITE snapshots of one row (built in "
        f"{lat['history_build_s']:.1f} s); each round commits to a new empty table and a "
        f"hard-linked copy of the history table; {args.rounds} measured commits per cell "
        f"after {args.warmup} warm-up rounds; local warehouse.",
        f"idempotence check for a never-seen commit user (is_committed): "
        f"{idem['fresh']:.2f} ms on an empty table, {idem['history']:.1f} ms on the history "
        "table (no commit-user marker: no snapshot is read; see lakecore/commit/commit_users.py).",
        "lock alone (acquire + release back to back, median of 200): " + ", ".join(
            f"{m} {v:.2f} ms" for m, v in lat["lock_alone_ms"].items()) + ".",
        "PostgreSQL rows skipped: no --pg-url / LAKECORE_TEST_PG_URL" if "postgresql"
        not in modes else f"PostgreSQL lock: {args.pg_url.split('@')[-1]}",
    ]
    print(text_table(rows))
    print()
    for c in conc:
        print(f"concurrent  lock={c['lock']:<10} {c['processes']} processes  {c['commits']} "
              f"commits  {c['seconds']:.1f} s  {c['commits_per_s']:.1f} commits/s  "
              f"attempts {c['attempts']}  lost races {c['lost']}  in lock calls "
              f"{c['lock_s']:.1f} s  retry sleeps {c['retry_sleep_s']:.1f} s (all processes)")
    print("\n".join(["", *notes]))
    if profile:
        print("\nprofile: 10 per-run commits on the history table\n" + profile)
    with open(os.path.join(OUT_DIR, "commit.json"), "w") as f:
        json.dump({"machine": machine, "rows": rows, "concurrency": conc, "notes": notes,
                   "is_committed_ms": idem, "lock_alone_ms": lat["lock_alone_ms"],
                   "profile": profile}, f, indent=2)
    replace_section(os.path.join(BENCH, "RESULTS.md"), "## commit", markdown(rows, conc, notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
