"""Scaling curves: throughput vs buckets, commit and planning time vs history, compaction vs size.

Four parts (``--parts``), each system in child processes (peak RSS: VmHWM, reset before each
measured phase):

* ``buckets``: write and read throughput of one PK table at 1, 4, 16 buckets (``--buckets``).
  ``write_read.py``'s children on the same rows at every bucket count: ``--rows`` shuffled
  keys in ``--commits`` commits, then ``--rows``/5 existing keys upserted in one commit,
  write-only (no compaction), the merged read; raw pyarrow zstd write/read of the same rows,
  interleaved in the same child, is the ratio baseline (best of ``--rounds``). pypaimon, and
  pypaimon+rust if pypaimon-rust is installed, do the same on the first ``--paimon-rows``.
  At every bucket count, write_read.py's memory run too: ``--big-rows`` (10M) rows in one
  commit, its peak RSS against issue 17's 1 GiB.
* ``history``: commit latency and scan planning at 10, 100, 1,000 and 10,000 snapshots of
  history (``--history``). For each size, ``commit.py``'s table (append-only; that many
  OVERWRITE commits of one row, so one live file) is built once; then in each of
  ``--history-rounds`` rounds (after one warm-up round) a fresh hard-linked copy of it gets:
  an untimed streaming commit (so the streaming user's previous commit is the snapshot
  before), a timed ``streaming`` APPEND commit, a timed ``per-run`` APPEND commit (a new commit
  user, identifier 1: one Airflow run), and ``--plans`` timed
  ``new_read_builder().new_scan().plan()`` on a freshly opened table. Ratios: over the same
  system's point at the smallest history. Target (issue 4): commit latency at 1,000 snapshots
  <= 1.5x fresh; here "fresh" is the 10-snapshot point. pypaimon (``paimon_history.py``) times
  its batch commit (a new commit user each) and plans on copies of the same tables;
  pypaimon+rust its plans (its native commit serves only REST catalogs, so it is not timed).
* ``compaction``: full compaction vs bucket size: ``compaction.py``'s ``main`` child at
  ``--sizes`` rows (100k, 300k, 1M, 3M) in one bucket: ``--commits`` overlapping level-0 runs
  plus an upsert run of size/5 keys, ``table.compact(full=True)``, then a full read; the
  baseline is pyarrow reading the input files + writing the result (best of
  ``--compaction-rounds``). pypaimon cannot compact (see ``## compaction``).

* ``compaction-buckets``: full compaction vs buckets: ``compaction.py``'s ``main`` child at
  ``--rows`` rows and each of ``--buckets`` (the buckets compact side by side); issue 17's
  target, >= 0.8x the raw read + write baseline, is judged at 16 buckets.

Prints the tables, writes ``bench/out/scaling.json`` and the ``## scaling`` section of
``bench/RESULTS.md``. Usage: ``.venv/bin/python bench/scaling.py [--quick] [--parts ...]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from importlib.metadata import version

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
import compaction  # noqa: E402
import write_read  # noqa: E402
from _common import (  # noqa: E402
    OUT_DIR,
    PAIMON_PYTHON,
    TARGETS,
    Result,
    build_rows,
    child_args,
    cold_start,
    discard,
    empty_trash,
    format_table,
    link_copy,
    load_note,
    machine_info,
    machine_line,
    markdown_table,
    median_p99,
    mib,
    paimon_venv,
    peak_rss_mib,
    prepare_data,
    publish,
    reset_peak_rss,
    run_as_child,
    spawn,
    summarize,
    summary_row,
    text_table,
)
from commit import HISTORY_TARGET  # noqa: E402

PARTS = ("buckets", "history", "compaction", "compaction-buckets")
# issue 17's targets for the bucket curves: write and upsert >= 0.5x, the merged read of 11
# overlapping runs >= 0.4x at every bucket count; full compaction >= 0.8x at 16 buckets
BUCKET_TARGETS = {"write": 0.5, "upsert": 0.5, "read": 0.4}
COMPACTION_BUCKETS_TARGET = (16, 0.8)
TARGET_SNAPSHOTS = 1000  # where issue 4's commit-latency target applies
HISTORY_COLUMNS = ("snapshots", "system", "operation", "samples", "median ms", "p99 ms",
                   "vs smallest", "target", "result", "peak RSS")


# --- history child (main venv) -------------------------------------------------------------


def child_history(args: argparse.Namespace) -> Result:
    """Build the history table of ``--size`` snapshots once; time commits and plans on copies."""
    from commit import build_history, create_table, open_table, timed_commit

    from lakecore.lock import NoopLock

    template = os.path.join(args.data, f"history-{args.size}")
    create_table(template)
    start = time.perf_counter()
    build_history(open_table(template, NoopLock()), args.size)
    out: Result = {"size": args.size, "build_s": time.perf_counter() - start,
                   "streaming": [], "per-run": [], "plan": []}
    copy = os.path.join(args.data, "copy")
    row_id = 10**9
    for round_ in range(args.history_rounds + 1):  # round 0: warm-up
        if round_ == 1:
            reset_peak_rss()
        discard(copy)
        link_copy(template, copy)
        timed = {}
        for user, ident in (("stream", 1), ("stream", 2), (f"run-{round_}", 1)):
            row_id += 1
            if user != "stream":
                cold_start()  # a per-run commit is a new process's
            timed[user, ident] = timed_commit(open_table(copy, NoopLock()), user, ident, row_id)
        plans = []
        for _ in range(args.plans):
            cold_start()  # every plan starts with no manifest decoded, like pypaimon's
            table = open_table(copy, NoopLock())
            start = time.perf_counter()
            table.new_read_builder().new_scan().plan()
            plans.append(time.perf_counter() - start)
        if round_:
            out["streaming"].append(timed["stream", 2])
            out["per-run"].append(timed[f"run-{round_}", 1])
            out["plan"] += plans
    discard(copy)
    out["peak_rss_mib"] = peak_rss_mib()
    return out


CHILDREN = {"history": child_history}


# --- parent: the three parts ---------------------------------------------------------------


def run_buckets(args: argparse.Namespace, workdir: str) -> tuple[list[Result], list[str], Result]:
    """Rows (pyarrow zstd baseline, lakecore, pypaimon[+rust] per bucket count), notes, raw."""
    prepare_data(workdir, args.rows, args.rows // 5)
    rows: list[Result] = []
    raw: Result = {}
    notes: list[str] = []
    for buckets in args.buckets:
        child_args = argparse.Namespace(commits=args.commits, rounds=args.rounds, big_rows=0,
                                        buckets=buckets, compact=False)
        lake = write_read.run_child("main", child_args, workdir)
        if lake is not None and "error" in lake:
            print(f"lakecore ({buckets} buckets) FAILED:\n{lake.pop('error')}", file=sys.stderr)
        big = None
        if args.big_rows:  # the memory run: --big-rows in one commit at this bucket count
            big_args = argparse.Namespace(**{**vars(child_args), "big_rows": args.big_rows})
            big = write_read.run_child("big", big_args, workdir)
            if big is None:
                raw.setdefault("failed", []).append(f"lakecore big ({buckets} buckets)")
        paimons, skipped = write_read.paimon_runs(
            workdir, args.paimon_rows, args.rows, args.commits, buckets=buckets,
            skip=args.skip_paimon, skip_rust=args.skip_paimon_rust)
        notes += [n for n in skipped if n not in notes]
        raw[str(buckets)] = {"lakecore": lake, "big": big, "pypaimon": dict(paimons)}
        tag = f", {buckets} bucket{'s' if buckets > 1 else ''}"
        for entry in build_rows(lake, big, paimons, BUCKET_TARGETS):
            if entry["system"] != "pyarrow (snappy)":
                rows.append({**entry, "phase": entry["phase"] + tag, "buckets": buckets})
        if lake is None or "read" not in lake:
            raw.setdefault("failed", []).append(f"lakecore ({buckets} buckets)")
        raw.setdefault("failed", []).extend(
            f"{label} ({buckets} buckets)" for label, res in paimons if res is None)
    last = raw[str(args.buckets[-1])]["pypaimon"]
    notes += [
        f"{args.rows:,} rows (keys shuffled) in {args.commits} commits + {args.rows // 5:,} "
        "upserted in one commit, the same rows at every bucket count; lakecore write-only "
        "(the read merges every commit's run in each bucket); ratios over raw pyarrow zstd "
        f"write/read of all rows to/from one file, interleaved in the same child (best of "
        f"{args.rounds} rounds each). Issue 17's targets (write and upsert >= "
        f"{BUCKET_TARGETS['write']}x, merged read >= {BUCKET_TARGETS['read']}x; write_read's "
        f"own, at 1 bucket, are {TARGETS['write']}x and {TARGETS['read']}x) are judged at every "
        "bucket count. pypaimon: one write+upsert+read per bucket count.",
        f"write {args.big_rows / 1e6:g}M: write_read.py's memory run at every bucket count "
        f"({args.big_rows:,} rows in 10 write_arrow calls, one commit, default options; its "
        "ratio over the same bucket count's one-file raw write); issue 17's limit, peak RSS "
        "< 1 GiB, is judged at every bucket count." if args.big_rows else "",
        "`pyarrow (zstd, N files)` (information): raw pyarrow writing and reading the same "
        "rows as lakecore lays them out, one file per (commit, bucket), split by id % buckets "
        "before timing: the part of a bucket count's cost that is Parquet's own per-file cost. "
        "Its ratio, like lakecore's, is over the one-file baseline.",
        *write_read.paimon_notes(list(last.items())),
    ]
    return rows, [n for n in notes if n], raw


def run_history(args: argparse.Namespace, workdir: str) -> tuple[list[Result], list[str], Result]:
    venv = paimon_venv()
    systems: list[tuple[str, list[str] | None]] = [("lakecore", None)]
    notes = []
    if args.skip_paimon or venv["pypaimon"] is None:
        notes.append("pypaimon: not measured (" + ("--skip-paimon" if args.skip_paimon
                                                   else str(venv["why"])) + ")")
    else:
        systems.append(("pypaimon", []))
        if venv["rust"] is not None and not args.skip_paimon_rust:
            systems.append(("pypaimon+rust", ["--native", "--skip-commit"]))
    results: dict[str, dict[int, Result | None]] = {name: {} for name, _ in systems}
    for size in args.history:
        results["lakecore"][size] = spawn(
            [sys.executable, os.path.abspath(__file__), "--child", "history", "--size",
             str(size), "--data", workdir, "--history-rounds", str(args.history_rounds),
             "--plans", str(args.plans)], f"history {size} (lakecore)")
        template = os.path.join(workdir, f"history-{size}")
        for name, extra in systems[1:]:
            assert extra is not None
            results[name][size] = spawn(
                [PAIMON_PYTHON, os.path.join(BENCH, "paimon_history.py"), "--template",
                 template, "--workdir", workdir, "--rounds", str(args.history_rounds),
                 "--plans", str(args.plans), *extra], f"history {size} ({name})")
        discard(template)
    rows = history_rows(results)
    lake = results["lakecore"]
    built = ", ".join(f"{size:,}: {res['build_s']:.1f} s" for size, res in lake.items() if res)
    notes += [
        f"History tables (commit.py's: append-only, OVERWRITE snapshots of one row) built in "
        f"{built}. Per size: {args.history_rounds} rounds after a warm-up round, each on a "
        f"fresh hard-linked copy: 1 streaming + 1 per-run commit and {args.plans} plans "
        "(lakecore), 1 batch commit and the plans (pypaimon). Local warehouse, no lock.",
        "Commit time: commit() alone (the row's write and prepare_commit are not timed). "
        "Plan time: new_read_builder().new_scan().plan() on a freshly opened table. Ratios are "
        "over the same system's and operation's median at the smallest history; the target "
        f"(issue 4: commit latency at {TARGET_SNAPSHOTS:,} snapshots <= {HISTORY_TARGET}x "
        "fresh) is judged on lakecore's commits, with the smallest history as 'fresh'. "
        "Peak RSS: the measuring process's VmHWM over the timed rounds.",
    ]
    for name in results:
        if name != "lakecore":
            natives = [r.get("native") for r in results[name].values() if r and "native" in r]
            if natives:
                plans = [n["plan"] for n in natives]
                notes.append(f"{name}: plans that ran in Rust: {sum(p['rust'] for p in plans)} "
                             f"of {sum(p['rust'] + p['python'] for p in plans)}; its commits "
                             "are not timed: commit.native.enabled serves only REST catalogs "
                             "(pypaimon checks for one), so they would be pypaimon's Python "
                             "commits again.")
    failed = [f"history {size} ({name})" for name, by_size in results.items()
              for size, res in by_size.items() if res is None]
    return rows, notes, {"results": results, "failed": failed}


def history_rows(results: dict[str, dict[int, Result | None]]) -> list[Result]:
    rows: list[Result] = []
    for name, by_size in results.items():
        ops = ("per-run", "streaming", "plan") if name == "lakecore" else ("commit", "plan")
        for op in ops:
            first: float | None = None
            for size, res in sorted(by_size.items()):
                if res is None or not res.get(op):
                    continue
                median, p99 = median_p99(res[op])
                first = median if first is None else first
                entry: Result = {
                    "snapshots": size, "system": name, "operation": op if op == "plan" else
                    f"commit ({op})" if name == "lakecore" else "commit (batch, new user)",
                    "samples": len(res[op]), "median_ms": median, "p99_ms": p99,
                    "ratio": median / first, "base_ms": first,
                    "base_snapshots": min(s for s, r in by_size.items() if r and r.get(op)),
                    "target": None, "result": None, "peak_rss_mib": res["peak_rss_mib"]}
                if name == "lakecore" and op != "plan" and size == TARGET_SNAPSHOTS:
                    entry.update(target=f"<= {HISTORY_TARGET}x vs fresh",
                                 result="PASS" if median / first <= HISTORY_TARGET else "MISS")
                rows.append(entry)
    return rows


def _history_cells(r: Result) -> list[str]:
    return [f"{r['snapshots']:,}", r["system"], r["operation"], str(r["samples"]),
            f"{r['median_ms']:.1f}", f"{r['p99_ms']:.1f}", f"{r['ratio']:.2f}x",
            r["target"] or "-", r["result"] or "-", mib(r["peak_rss_mib"])]


def history_summary(rows: list[Result]) -> list[Result]:
    return [summary_row(f"{r['operation']} at {r['snapshots']:,} snapshots", r["system"],
                        r["median_ms"], "ms", r["ratio"],
                        f"same at {r['base_snapshots']:,} snapshots ({r['base_ms']:.1f} ms)",
                        r["target"], r["result"], r["peak_rss_mib"])
            for r in rows if r["snapshots"] != r["base_snapshots"]]


def run_compaction(args: argparse.Namespace, workdir: str
                   ) -> tuple[list[Result], list[str], Result]:
    rows: list[Result] = []
    raw: Result = {"failed": []}
    for size in args.sizes:
        data = tempfile.mkdtemp(prefix=f"compaction-{size}-", dir=workdir)
        prepare_data(data, size, size // 5)
        child_args = argparse.Namespace(commits=args.commits, rounds=args.compaction_rounds,
                                        big_buffer_mb=64, big_factor=4.0, big_commits=8)
        res = compaction.run_child("main", child_args, data)
        discard(data)
        if res is not None and "error" in res:
            print(f"compaction {size} FAILED:\n{res.pop('error')}", file=sys.stderr)
        if res is None or "compact" not in res:
            raw["failed"].append(f"compaction {size:,}")
        raw[str(size)] = res
        keep = ("pyarrow read inputs + write result", "lakecore", "pyarrow (compacted files)")
        rows += [r for r in compaction.build_rows(res, None, None, f" {size / 1e6:g}M rows")
                 if r["system"] in keep and not r["phase"].startswith(" ")]
    notes = [
        f"Compaction: per size, compaction.py's table (1 bucket, write-only: {args.commits} "
        "commits of shuffled keys + an upsert of size/5 existing keys = "
        f"{args.commits + 1} overlapping level-0 runs), table.compact(full=True); rows = the "
        "compaction's input rows (size x 1.2). Baseline: pyarrow read of the input files + "
        "write of the result (I/O only); the read row: lakecore full read of the compacted "
        f"table vs pyarrow read of its files. Best of {args.compaction_rounds} round(s) (the "
        f"reads: of {compaction.READ_REPEATS} interleaved repeats a round at 1M rows and above, "
        f"{compaction.read_repeats(100_000)} at 100k). "
        f"compaction.py's targets (compaction >= {compaction.TARGETS['compact']}x, compacted "
        f"read >= {compaction.TARGETS['read']}x) are judged at every size.",
    ]
    return rows, notes, raw


def run_compaction_buckets(args: argparse.Namespace, workdir: str
                           ) -> tuple[list[Result], list[str], Result]:
    """Full compaction of compaction.py's table at ``--rows`` rows and each bucket count."""
    rows: list[Result] = []
    raw: Result = {"failed": []}
    data = tempfile.mkdtemp(prefix="compaction-buckets-", dir=workdir)
    prepare_data(data, args.rows, args.rows // 5)
    at, goal = COMPACTION_BUCKETS_TARGET
    for buckets in args.buckets:
        child_args = argparse.Namespace(commits=args.commits, rounds=args.compaction_rounds,
                                        big_buffer_mb=64, big_factor=4.0, big_commits=8,
                                        buckets=buckets)
        res = compaction.run_child("main", child_args, data)
        if res is not None and "error" in res:
            print(f"compaction ({buckets} buckets) FAILED:\n{res.pop('error')}",
                  file=sys.stderr)
        if res is None or "compact" not in res:
            raw["failed"].append(f"compaction ({buckets} buckets)")
        raw[str(buckets)] = res
        tag = f", {buckets} bucket{'s' if buckets > 1 else ''}"
        for r in compaction.build_rows(res, None, None, tag):
            if r["phase"].startswith("compact") and r["system"] in (
                    "pyarrow read inputs + write result", "lakecore"):
                if r["system"] == "lakecore":  # issue 17's target where it applies
                    judged = buckets == at and r["ratio"] is not None
                    r.update(target=f">= {goal}x" if buckets == at else None,
                             result=("PASS" if r["ratio"] >= goal else "MISS") if judged
                             else None)
                rows.append({**r, "buckets": buckets})
    discard(data)
    notes = [
        f"Full compaction vs buckets: compaction.py's table at {args.rows:,} rows ("
        f"{args.commits} commits of shuffled keys + an upsert of {args.rows // 5:,} existing "
        "keys, write-only, so every bucket holds that many overlapping level-0 runs), "
        "table.compact(full=True), the buckets side by side; rows = the compaction's input "
        "rows. Baseline: pyarrow read of the input files + write of the result as one file "
        f"(I/O only). Best of {args.compaction_rounds} round(s). Issue 17's target: >= "
        f"{goal}x at {at} buckets.",
    ]
    return rows, notes, raw


# --- parent: report ------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    def ints(text: str) -> list[int]:
        return [int(float(x)) for x in text.split(",")]

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    p.add_argument("--buckets", type=ints, default=[1, 4, 16], help="bucket counts (1,4,16)")
    p.add_argument("--rows", type=int, default=1_000_000, help="rows of the bucket curve")
    p.add_argument("--paimon-rows", type=int, default=100_000,
                   help="pypaimon's rows in the bucket curve (it writes ~22k rows/s)")
    p.add_argument("--commits", type=int, default=10, help="commits of the base rows")
    p.add_argument("--rounds", type=int, default=3, help="rounds of the bucket curve")
    p.add_argument("--history", type=ints, default=[10, 100, 1000, 10_000],
                   help="snapshots of history (10,100,1000,10000)")
    p.add_argument("--history-rounds", type=int, default=15, help="rounds per history size")
    p.add_argument("--plans", type=int, default=4, help="plans per round")
    p.add_argument("--sizes", type=ints, default=[100_000, 300_000, 1_000_000, 3_000_000],
                   help="rows of the compacted bucket (1e5,3e5,1e6,3e6)")
    p.add_argument("--compaction-rounds", type=int, default=2)
    p.add_argument("--big-rows", type=int, default=10_000_000,
                   help="rows of the memory run at every bucket count (0: none)")
    p.add_argument("--skip-paimon", action="store_true", help="skip pypaimon")
    p.add_argument("--skip-paimon-rust", action="store_true", help="skip pypaimon+rust")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 100k rows (pypaimon 20k), 10/100/1,000 snapshots with 4 "
                   "rounds, compaction at 50k and 100k, 1 round each")
    child_args(p, CHILDREN)
    p.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        args.rows, args.paimon_rows, args.rounds, args.big_rows = 100_000, 20_000, 1, 200_000
        args.history, args.history_rounds, args.plans = [10, 100, 1000], 4, 2
        args.sizes, args.compaction_rounds = [50_000, 100_000], 1
    return args


def main() -> int:
    args = parse_args()
    if run_as_child(args, CHILDREN):
        return 0
    machine = machine_info()
    machine["lakecore"] = version("lakecore")
    os.makedirs(OUT_DIR, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="scaling-", dir=OUT_DIR)
    doc: Result = {"machine": machine, "args": vars(args), "summary": []}
    text: list[str] = []
    body: list[str] = []
    failed: list[str] = []
    timings: dict[str, float] = {}
    try:
        for part in args.parts:
            start = time.perf_counter()
            if part == "history":
                rows, notes, raw = run_history(args, workdir)
                cells = [_history_cells(r) for r in rows]
                table_text = format_table(HISTORY_COLUMNS, cells)
                table_md = format_table(HISTORY_COLUMNS, cells, markdown=True)
                doc["summary"] += history_summary(rows)
            else:
                run = {"buckets": run_buckets, "compaction": run_compaction,
                       "compaction-buckets": run_compaction_buckets}[part]
                rows, notes, raw = run(args, workdir)
                table_text, table_md = text_table(rows), markdown_table(rows)
                doc["summary"] += summarize(rows)
            timings[part] = time.perf_counter() - start
            failed += raw.get("failed", [])
            doc[part] = {"rows": rows, "notes": notes, "raw": raw}
            title = {"buckets": "Write and read throughput vs buckets",
                     "history": "Commit latency and scan planning vs snapshots of history",
                     "compaction": "Full compaction vs bucket size",
                     "compaction-buckets": "Full compaction vs buckets"}[part]
            text += ["", f"{title} ({timings[part]:.0f} s)", table_text, *notes]
            body += ["", f"### {title}", "", table_md, "", *(f"- {n}" for n in notes)]
    finally:
        if not args.keep:
            discard(workdir)
        empty_trash()
    end_notes = [load_note(machine)] + ([f"FAILED: {', '.join(failed)} (see stderr)"]
                                       if failed else [])
    head = machine_line(machine)
    publish("scaling", {**doc, "notes": end_notes, "part_seconds": timings},
            "\n".join([head, *text, "", *end_notes]),
            "\n".join([head, *body, "", *(f"- {n}" for n in end_notes)]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
