"""Run every benchmark, then put one summary table at the top of ``bench/RESULTS.md``.

``make bench`` runs this. Each benchmark runs as its own process (``.venv/bin/python
bench/NAME.py``), prints its table, writes ``bench/out/NAME.json`` and its own ``## NAME``
section of ``bench/RESULTS.md``; its output is also kept in ``bench/out/NAME.log``. Then the
``## Summary`` section (at the top) is composed from the JSONs in ``bench/out``: every result
measured against a baseline or judged by a target, with the baseline (measured in the same
run), the target of the benchmark's issue (the constants in its script) and PASS/MISS, plus
date, machine and the load average at the start and end.

* ``--quick``: small sizes, a smoke test (minutes, not most of an hour). ``bench/RESULTS.md``
  is left as it was: the quick run's version goes to ``bench/out/RESULTS.quick.md``.
* ``--only NAME [NAME ...]``: run just those; the summary still shows the others' latest
  results from ``bench/out`` (each with its date, and whether it was a quick run).

PostgreSQL: ``commit.py`` times its lock when ``LAKECORE_TEST_PG_URL`` is set; if unset and a
server answers at 127.0.0.1:5432 (user postgres, database test), that URL is passed.

    .venv/bin/python bench/run_all.py [--quick] [--only write_read scaling ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from importlib.metadata import version

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
from _common import (  # noqa: E402
    DEFER_CLEANUP_ENV,
    OUT_DIR,
    RESULTS_MD,
    SUMMARY_COLUMNS,
    Result,
    empty_trash,
    format_table,
    machine_info,
    machine_line,
    replace_section,
    summary_cells,
    summary_row,
)

PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
# name: (arguments of the full run, of the quick run)
BENCHMARKS: dict[str, tuple[list[str], list[str]]] = {
    "write_read": ([], ["--quick"]),
    "compaction": ([], ["--quick"]),
    "commit": ([], ["--history", "100", "--rounds", "5", "--warmup", "1",
                    "--concurrent-commits", "5"]),
    "scaling": ([], ["--quick"]),
    "java_paimon": ([], ["--quick"]),  # Java Paimon in its own JVM (tests/javapaimon's jar)
    "spark_ingest": ([], ["--quick"]),
    "spark_datasource": ([], ["--quick"]),
    "schema_evolution": ([], ["--quick"]),
    "index_modes": ([], ["--quick"]),
    "object_store": (["--write-results"], ["--quick"]),  # moto from .venv-moto (make bench)
    # last: expiring deletes thousands of files, and on ext4 creating files near freed inodes
    # is slow for a minute after (bench/_common.discard), which would skew the writes after it
    "expire": ([], ["--quick"]),
}
STATE = os.path.join(OUT_DIR, "run_all.json")


def pg_url() -> str | None:
    """``$LAKECORE_TEST_PG_URL``, else the local test server's URL if it answers."""
    if os.environ.get("LAKECORE_TEST_PG_URL"):
        return os.environ["LAKECORE_TEST_PG_URL"]
    try:
        import psycopg

        psycopg.connect(PG_URL.replace("+psycopg", ""), connect_timeout=3).close()
        return PG_URL
    except Exception:
        return None


def run_one(name: str, args: list[str], env: dict[str, str], timeout: float,
            quick: bool) -> Result:
    """Run ``bench/NAME.py``, echoing its output and keeping it in ``bench/out/NAME.log``."""
    json_path = os.path.join(OUT_DIR, f"{name}.json")
    if os.path.exists(json_path):
        os.remove(json_path)  # so a failed run cannot pass off an old result as its own
    command = [sys.executable, os.path.join(BENCH, f"{name}.py"), *args]
    print(f"\n=== {name}: {' '.join(command[1:])}", flush=True)
    date = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    start = time.perf_counter()
    with open(os.path.join(OUT_DIR, f"{name}.log"), "w") as log:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env, start_new_session=True)
        watchdog = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        watchdog.start()
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            log.write(line)
        code = proc.wait()
        watchdog.cancel()
    seconds = time.perf_counter() - start
    status = "ok" if code == 0 else (f"killed after {timeout:.0f} s" if seconds >= timeout
                                     else f"exit {code}")
    if not os.path.exists(json_path):
        status += ", no result"
    return {"date": date, "seconds": seconds, "status": status,
            "args": args, "quick": quick}


# --- the summary ---------------------------------------------------------------------------


def commit_summary(doc: Result) -> list[Result]:
    """``commit.py``'s rows in the summary's form (it writes no ``summary`` of its own)."""
    found = re.search(r"history: (\d+) OVERWRITE", " ".join(doc.get("notes", [])))
    history = f"{int(found.group(1)):,} snapshots" if found else "history"
    fresh = {(r["users"], r["lock"]): r["median_ms"] for r in doc["rows"] if r["table"] == "fresh"}
    out = []
    for r in doc["rows"]:
        users_lock = f"{r['users']} user, lock {r['lock']}"
        if r["table"] == "history":
            out.append(summary_row(
                f"commit at {history} ({users_lock})", "lakecore", r["median_ms"], "ms",
                r["ratio"], f"fresh table, same user/lock ({fresh[r['users'], r['lock']]:.1f} ms)",
                r["target"], r["result"]))
        elif r["result"] is not None:  # a lock's cost on a fresh table
            out.append(summary_row(
                f"commit, fresh table ({users_lock})", "lakecore", r["median_ms"], "ms",
                r["ratio"], f"no lock ({fresh[r['users'], 'none']:.1f} ms)", r["target"],
                r["result"], ratio_unit="ms"))
    for c in doc.get("concurrency", []):
        out.append(summary_row(f"{c['processes']} concurrent committers, lock {c['lock']}",
                               "lakecore", c["commits_per_s"], "commits/s"))
    return out


def compose_summary(state: Result, machine: Result, quick: bool, seconds: float) -> str:
    rows: list[Result] = []
    notes: list[str] = []
    for name in BENCHMARKS:
        run = state.get(name)
        path = os.path.join(OUT_DIR, f"{name}.json")
        if run is None or not os.path.exists(path):
            notes.append(f"{name}: no result" + (f" ({run['status']})" if run else
                                                 " (not run yet)"))
            continue
        with open(path) as f:
            doc = json.load(f)
        entries = doc["summary"] if "summary" in doc else commit_summary(doc)
        rows += [{**e, "benchmark": name} for e in entries]
        kind = "quick" if run.get("quick") else "full"
        notes.append(f"{name}: started {run['date']}, {kind} run, {run['seconds']:.0f} s, "
                     f"{run['status']}")
    misses = [f"{r['benchmark']}: {r['phase']} ({r['system']})" for r in rows
              if r.get("result") == "MISS"]
    lines = [
        machine_line(machine) + f"; `make bench{' BENCH_ARGS=--quick' if quick else ''}` "
        f"took {seconds / 60:.1f} min; 1-min load average {machine['loadavg_start']:.1f} at "
        f"start, {os.getloadavg()[0]:.1f} at end (2 shared cores: other work skews timings).",
        "",
        format_table(SUMMARY_COLUMNS, [summary_cells(r) for r in rows], markdown=True),
        "",
        f"- MISS ({len(misses)}): " + ("; ".join(misses) if misses else "none") + ".",
        "- Ratios are over the named baseline, measured in the same benchmark run (its rate "
        "in brackets). Targets are those of each benchmark's issue, as its script's constants "
        "hold them; rows without one are information. Details, sizes and method: each "
        "benchmark's section below.",
        "- Runs (date, size, runtime, status): " + "; ".join(notes) + ".",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    parser.add_argument("--only", nargs="+", choices=list(BENCHMARKS), metavar="NAME",
                        help=f"run only these ({', '.join(BENCHMARKS)})")
    parser.add_argument("--timeout", type=float, default=3600,
                        help="seconds one benchmark may take (default 3600)")
    args = parser.parse_args()
    os.makedirs(OUT_DIR, exist_ok=True)
    machine = machine_info()
    machine["lakecore"] = version("lakecore")
    env = dict(os.environ)
    env[DEFER_CLEANUP_ENV] = "1"  # scratch directories go when every benchmark is done
    url = pg_url()
    if url:
        env["LAKECORE_TEST_PG_URL"] = url
    print(f"PostgreSQL lock: {url.split('@')[-1] if url else 'none answers; commit.py skips it'}")
    state: Result = {}
    if os.path.exists(STATE):
        with open(STATE) as f:
            state = json.load(f)
    kept = None
    if args.quick and os.path.exists(RESULTS_MD):
        with open(RESULTS_MD) as f:
            kept = f.read()
    start = time.perf_counter()
    try:
        for name in args.only or BENCHMARKS:
            full, quick = BENCHMARKS[name]
            state[name] = run_one(name, quick if args.quick else full, env, args.timeout,
                                  args.quick)
            with open(STATE, "w") as f:
                json.dump(state, f, indent=2)
        summary = compose_summary(state, machine, args.quick, time.perf_counter() - start)
        replace_section(RESULTS_MD, "## Summary", summary, top=True)
        print("\n" + summary)
    finally:
        empty_trash(force=True)
        if kept is not None:
            shutil.copyfile(RESULTS_MD, os.path.join(OUT_DIR, "RESULTS.quick.md"))
            with open(RESULTS_MD, "w") as f:
                f.write(kept)
            print(f"\nquick run: bench/RESULTS.md left as it was; this run's version is "
                  f"{os.path.join(OUT_DIR, 'RESULTS.quick.md')}")
    failed = [name for name in args.only or BENCHMARKS if state[name]["status"] != "ok"]
    if failed:
        print(f"FAILED: {', '.join(failed)} (see bench/out/NAME.log)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
