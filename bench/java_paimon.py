"""lakecore beside Java Paimon (and raw pyarrow) on the same rows, in the same run.

The workload of ``write_read.py`` — ``--rows`` rows (1M) in ``--commits`` commits (10) of
shuffled keys, ``--upsert`` existing keys (200k) upserted in one commit, the merged read — then
a full compaction and the read after it, on primary-key tables of 1, 4 and 16 buckets and a
dynamic-bucket table (``bucket = -1``); and a deletion-vector table of 4 buckets: write-only
ingest of the base rows, a dedicated full compaction, the upsert (write-only), a dedicated
compaction of Paimon's own picks (which marks the upserted keys' old rows in deletion vectors
instead of rewriting them), then the read.

* Java Paimon (``org.apache.paimon:paimon-bundle``, the test-only jar of ``tests/javapaimon``,
  main class ``dev.lakecore.oracle.Bench``) runs every workload in one JVM, ``--rounds`` rounds
  each (a fresh table each round, best round kept). Its input rows are loaded from Parquet
  copies of the same rows before any timing. The JVM's start, the load and the first round
  (JIT warm-up) are reported apart, never folded into a phase.
* lakecore runs the same phases in a child process, interleaved with raw pyarrow (zstd write
  and read of all base rows in one file: the ratio baseline of the other benchmarks) in the
  same rounds.

Both sides write the same format options (``file.format`` parquet, ``file.compression`` zstd
at level 1 — Paimon's default level and Arrow's — and ``target-file-size``); the tables' data
files after the last phase are counted and sized. Every read is checked: lakecore's rows
against the expected merge, Java's by a checksum (rows, sum of ``id`` and ``i64``, non-null
``s``) against lakecore's.

Prints a table, writes ``bench/out/java_paimon.json`` and the ``## java_paimon`` section of
``bench/RESULTS.md``. Usage: ``.venv/bin/python bench/java_paimon.py [--quick] [--rounds N]
[--buckets 1 4 16]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
from _common import (  # noqa: E402
    SCHEMA,
    Result,
    check_merged,
    child_args,
    cold_start,
    commit_arrow,
    commit_slices,
    data_args,
    discard,
    empty_trash,
    load_note,
    machine_line,
    mib,
    publish,
    read_ipc,
    render_table,
    run_as_child,
    run_phase,
    spawn,
    start,
    summary_row,
)

JAR = os.path.join(REPO, "tests", "javapaimon", "target", "paimon-oracle.jar")
JAVA_HEAP = "-Xmx6g"
# the format options both sides write (Paimon's defaults, spelled out)
FORMAT_OPTIONS = {"file.format": "parquet", "file.compression": "zstd",
                  "target-file-size": "128 mb"}
JAVA_ONLY_OPTIONS = {"file.compression.zstd-level": "1"}  # lakecore: Arrow's zstd level, 1
WRITE_ONLY = {"write-only": "true"}  # the read merges every commit's run; compaction dedicated
TARGET = 1.0  # lakecore rows/s over Java Paimon's, same run
PK_PHASES = ("write", "upsert", "read", "compact", "read_compacted")
DV_PHASES = ("write", "compact", "upsert", "compact_minor", "read")
LABELS = {"write": "write", "upsert": "upsert", "read": "read (merged)",
          "compact": "full compaction", "read_compacted": "read (compacted)",
          "compact_minor": "compaction (Paimon's picks)", "ingest": "ingest + compaction"}


def workloads(buckets: list[int]) -> list[dict[str, Any]]:
    """The tables of the run: name, options, phases, and the phases held to ``TARGET``."""
    out = []
    for b in buckets:
        out.append({"name": f"pk_b{b}", "options": {"bucket": str(b), **WRITE_ONLY},
                    "phases": list(PK_PHASES),
                    "targets": list(PK_PHASES) if b in (1, 4) else []})
    out.append({"name": "dv_b4", "options": {"bucket": "4", "deletion-vectors.enabled": "true",
                                             **WRITE_ONLY},
                "phases": list(DV_PHASES), "targets": ["ingest", "read"]})
    out.append({"name": "dynamic", "options": {"bucket": "-1", **WRITE_ONLY},
                "phases": list(PK_PHASES), "targets": []})
    return out


def checksum(table: pa.Table) -> dict[str, int]:
    """What both sides compute over a read: rows, sums of ``id`` and ``i64``, non-null ``s``."""
    return {"rows": table.num_rows,
            "sum_id": int(pc.sum(table["id"]).as_py() or 0),
            "sum_i64": int(pc.sum(table["i64"]).as_py() or 0),
            "non_null_s": table.num_rows - table["s"].null_count}


# --- the lakecore child --------------------------------------------------------------------


def child_lakecore(args: argparse.Namespace) -> Result:
    """Rounds of: raw pyarrow zstd write + read of the base rows, then every workload's phases
    on a fresh lakecore table. Best round per phase."""
    from lakecore import CatalogFactory, Schema

    base = read_ipc(os.path.join(args.data, "base.arrow"))
    upsert = read_ipc(os.path.join(args.data, "upsert.arrow"))
    commits = commit_slices(base, args.commits)
    catalog = CatalogFactory.create({"warehouse": args.warehouse})
    catalog.create_database("db", ignore_if_exists=True)
    specs = workloads(args.buckets)
    out: Result = {"rows": base.num_rows, "upsert_rows": upsert.num_rows, "workloads": {}}

    def create(name: str, options: dict[str, str]) -> Any:
        catalog.create_table(name, Schema.from_pyarrow_schema(
            SCHEMA, primary_keys=["id"], options={**FORMAT_OPTIONS, **options}))
        return catalog.get_table(name)

    def read(name: str) -> pa.Table:
        cold_start()  # a read job is a new process: no manifest decoded yet
        builder = catalog.get_table(name).new_read_builder()
        return builder.new_read().to_arrow(builder.new_scan().plan().splits())

    # warm-up (untimed): one-time imports and first calls of every phase
    warm = create("db.warmup", {"bucket": "2", "deletion-vectors.enabled": "true", **WRITE_ONLY})
    commit_arrow(warm, base.slice(0, 1000))
    commit_arrow(warm, upsert.slice(0, 100))
    warm.compact(full=False)
    read("db.warmup")
    raw_path = os.path.join(args.warehouse, "raw.parquet")
    for round_ in range(args.rounds):
        run_phase(out.setdefault("raw", {}), "write",
                  lambda: pq.write_table(base, raw_path, compression="zstd"))
        back = run_phase(out["raw"], "read", lambda: pq.read_table(raw_path))
        assert back.num_rows == base.num_rows
        del back
        for spec in specs:
            res = out["workloads"].setdefault(spec["name"], {})
            if "error" in res:
                continue
            name = f"db.{spec['name']}_r{round_}"
            try:
                table = create(name, spec["options"])
                reads = {}
                for phase in spec["phases"]:
                    if phase == "write":
                        def fn(t: Any = table) -> None:
                            for part in commits:
                                commit_arrow(t, part)
                    elif phase == "upsert":
                        def fn(t: Any = table) -> None:
                            commit_arrow(t, upsert)
                    elif phase in ("compact", "compact_minor"):
                        def fn(full: bool = phase == "compact", n: str = name) -> None:
                            cold_start()  # a dedicated compaction job is a new process
                            catalog.get_table(n).compact(full=full)
                    else:
                        def fn(n: str = name) -> pa.Table:
                            return read(n)
                    value = run_phase(res, phase, fn)
                    if phase.startswith("read"):
                        reads[phase] = value
                if round_ == 0:
                    res["checks"] = {p: check_merged(t, base, upsert) for p, t in reads.items()}
                    res["checksums"] = {p: checksum(t) for p, t in reads.items()}
                    res["files"] = data_files(catalog.get_table(name))
                del reads
            except Exception:
                res["error"] = traceback.format_exc()
    return out


def data_files(table: Any) -> dict[str, int]:
    """The number and bytes of the data files the table's latest snapshot reads."""
    splits = table.new_read_builder().new_scan().plan().splits()
    files = [f for s in splits for f in s.files]
    return {"count": len(files), "bytes": sum(f.file_size for f in files)}


CHILDREN = {"lakecore": child_lakecore}


# --- Java Paimon ---------------------------------------------------------------------------


def java_inputs(workdir: str, commits: int) -> tuple[list[str], str]:
    """Parquet copies of the commits' rows and of the upsert, for the JVM to load untimed."""
    base = read_ipc(os.path.join(workdir, "base.arrow"))
    paths = []
    for i, part in enumerate(commit_slices(base, commits)):
        paths.append(os.path.join(workdir, f"java-commit-{i}.parquet"))
        pq.write_table(part, paths[-1], compression="none")
    upsert = os.path.join(workdir, "java-upsert.parquet")
    pq.write_table(read_ipc(os.path.join(workdir, "upsert.arrow")), upsert, compression="none")
    return paths, upsert


def run_java(args: argparse.Namespace, workdir: str) -> Result | None:
    """Every workload in one JVM; its result, its wall time and its peak RSS."""
    if shutil.which("java") is None or not os.path.exists(JAR):
        print(f"Java Paimon skipped: no java or no {JAR} (make {os.path.relpath(JAR, REPO)})",
              file=sys.stderr)
        return None
    commits, upsert = java_inputs(workdir, args.commits)
    spec = {"warehouse": tempfile.mkdtemp(prefix="java-", dir=workdir), "rounds": args.rounds,
            "commits": commits, "upsert": upsert,
            "workloads": [{"name": w["name"], "phases": w["phases"],
                           "options": {**FORMAT_OPTIONS, **JAVA_ONLY_OPTIONS, **w["options"]}}
                          for w in workloads(args.buckets)]}
    spec_path = os.path.join(workdir, "java-spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    print("running Java Paimon ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    # output to files and os.wait4, so the peak RSS is the JVM's own (RUSAGE_CHILDREN would
    # give the largest of every child so far, the lakecore child's included)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(["java", JAVA_HEAP, "-cp", JAR, "dev.lakecore.oracle.Bench",
                                 spec_path], stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        print(f"Java Paimon FAILED (exit {proc.returncode}):\n{stdout[-2000:]}\n"
              f"{stderr[-4000:]}", file=sys.stderr)
        return None
    result: Result = json.loads(stdout.strip().splitlines()[-1])
    result["wall_s"] = wall
    result["peak_rss_mib"] = usage.ru_maxrss / 1024  # KiB on Linux
    return result


def java_best(java: Result) -> dict[str, dict[str, Any]]:
    """Per workload: the best seconds of each phase over rounds after the first (round 0 is
    the JIT's warm-up; with one round, round 0 is all there is), round 0's own seconds, and
    the last round's checksums and files."""
    out: dict[str, dict[str, Any]] = {}
    for r in java["results"]:
        w = out.setdefault(r["workload"], {"best": {}, "first": {}, "rounds": 0})
        w["rounds"] += 1
        for phase, seconds in r["phases"].items():
            if r["round"] == 0:
                w["first"][phase] = seconds
            w.setdefault("all", {}).setdefault(phase, []).append((r["round"], seconds))
        w["checksums"] = r.get("checksums", {})
        w["files"] = r.get("files", {})
    for w in out.values():
        for phase, runs in w.pop("all").items():
            warm = [s for rnd, s in runs if rnd > 0] or [s for _, s in runs]
            w["best"][phase] = min(warm)
    return out


# --- the report ----------------------------------------------------------------------------

HEADER = ("table", "phase", "rows", "lakecore s", "Java s", "lakecore rows/s", "Java rows/s",
          "lakecore ÷ Java", "target", "result", "lakecore ÷ pyarrow", "lakecore peak RSS")


def phase_rows(phase: str, rows: int, upsert: int) -> int:
    """The rows a phase moves: the upsert its upserted keys, every other phase the table's."""
    return upsert if phase == "upsert" else rows


def report(args: argparse.Namespace, lake: Result | None, java: Result | None
           ) -> tuple[list[list[str]], list[Result], list[str]]:
    """Table cells, summary rows and problems (a missing side, a checksum that differs)."""
    cells: list[list[str]] = []
    summary: list[Result] = []
    problems: list[str] = []
    best = java_best(java) if java is not None else {}
    n = args.rows
    raw_w = raw_r = None
    if lake is not None:
        raw_w = n / lake["raw"]["write"]["seconds"]
        raw_r = n / lake["raw"]["read"]["seconds"]
    for spec in workloads(args.buckets):
        name = spec["name"]
        mine = (lake or {}).get("workloads", {}).get(name, {})
        theirs = best.get(name)
        if "error" in mine:
            problems.append(f"lakecore {name}: {mine['error'].strip().splitlines()[-1]}")
        phases = list(spec["phases"])
        if name.startswith("dv"):
            phases.append("ingest")
        for phase in phases:
            if phase == "ingest":
                parts = [p for p in DV_PHASES if p != "read"]
                rows = n + args.upsert
                lake_s = (sum(mine[p]["seconds"] for p in parts)
                          if all(p in mine for p in parts) else None)
                java_s = (sum(theirs["best"][p] for p in parts)
                          if theirs and all(p in theirs["best"] for p in parts) else None)
                rss = max((mine[p]["peak_rss_mib"] for p in parts if p in mine), default=None)
            else:
                rows = phase_rows(phase, n, args.upsert)
                lake_s = mine[phase]["seconds"] if phase in mine else None
                java_s = theirs["best"].get(phase) if theirs else None
                rss = mine[phase]["peak_rss_mib"] if phase in mine else None
            ratio = None if lake_s is None or java_s is None else java_s / lake_s
            target = TARGET if phase in spec["targets"] else None
            result = (None if target is None or ratio is None
                      else "PASS" if ratio >= target else "MISS")
            raw_rate = raw_r if phase.startswith("read") else raw_w
            vs_raw = None if lake_s is None or raw_rate is None else rows / lake_s / raw_rate
            label = ("read (deletion vectors)" if phase == "read" and name.startswith("dv")
                     else LABELS[phase])
            cells.append([
                name, label, f"{rows:,}", _num(lake_s, ".3f"), _num(java_s, ".3f"),
                _num(None if lake_s is None else rows / lake_s, ",.0f"),
                _num(None if java_s is None else rows / java_s, ",.0f"),
                _num(ratio, ".2f", "x"), f">= {target:g}x" if target else "-", result or "-",
                _num(vs_raw, ".2f", "x"), mib(rss)])
            if lake_s is not None:
                summary.append(summary_row(
                    f"{name}: {label}", "lakecore", rows / lake_s, "rows/s", ratio,
                    "Java Paimon" + ("" if java_s is None else f" ({rows / java_s:,.0f} rows/s)"),
                    f">= {target:g}x" if target else None, result, rss))
        if theirs and "checksums" in mine:
            for phase, sums in mine["checksums"].items():
                got = theirs["checksums"].get(phase)
                if got is not None and {k: got.get(k) for k in sums} != sums:
                    problems.append(f"{name} {phase}: Java's checksum {got} != lakecore's {sums}")
    return cells, summary, problems


def _num(value: float | None, fmt: str, unit: str = "") -> str:
    return "-" if value is None else format(value, fmt) + unit


def files_line(args: argparse.Namespace, lake: Result | None, java: Result | None) -> str:
    best = java_best(java) if java is not None else {}
    parts = []
    for spec in workloads(args.buckets):
        mine = (lake or {}).get("workloads", {}).get(spec["name"], {}).get("files")
        theirs = best.get(spec["name"], {}).get("files")
        fmt = lambda f: "-" if not f else f"{f['count']} files, {f['bytes'] / 2**20:.1f} MiB"  # noqa: E731
        parts.append(f"{spec['name']} lakecore {fmt(mine)} / Java {fmt(theirs)}")
    return "Data files after the last phase (round 0): " + "; ".join(parts) + "."


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    data_args(p, "rounds per workload (a fresh table each); best kept, Java's first apart")
    p.add_argument("--buckets", type=int, nargs="+", default=[1, 4, 16],
                   help="bucket counts of the primary-key tables")
    p.add_argument("--quick", action="store_true", help="smoke test: 50k rows, 2 rounds")
    child_args(p, CHILDREN)
    args = p.parse_args()
    if args.quick:
        args.rows, args.upsert, args.rounds = 50_000, 10_000, 2
    return args


def main() -> int:
    args = parse_args()
    if run_as_child(args, CHILDREN):
        return 0
    machine, workdir = start("java_paimon", args.rows, args.upsert)
    lake = spawn([sys.executable, os.path.abspath(__file__), "--child", "lakecore",
                  "--data", workdir, "--warehouse", tempfile.mkdtemp(prefix="lake-", dir=workdir),
                  "--rows", str(args.rows), "--upsert", str(args.upsert), "--commits",
                  str(args.commits), "--rounds", str(args.rounds), "--buckets",
                  *map(str, args.buckets)], "lakecore")
    java = run_java(args, workdir)
    cells, summary, problems = report(args, lake, java)
    notes = [
        f"{args.rows:,} base rows in {args.commits} commits (keys shuffled), {args.upsert:,} "
        "existing keys upserted in one commit; tables: primary key `id`, write-only ingest "
        "(every read before a compaction merges all commits' runs), dedicated compactions. "
        f"Options on both sides: {', '.join(f'{k}={v}' for k, v in FORMAT_OPTIONS.items())} "
        "(zstd level 1 on both).",
        "dv_b4: deletion vectors, 4 buckets: write, full compaction, upsert, compaction of "
        "Paimon's own picks (the upserted keys' old rows go into deletion vectors), read; "
        "'ingest + compaction' is the sum of the four.",
        f"lakecore ÷ Java: lakecore's rows/s over Java Paimon's, best of {args.rounds} rounds "
        "each (Java: best of the rounds after its first). lakecore ÷ pyarrow: over raw "
        "pyarrow zstd write (writes, compactions) or read (reads) of all base rows in one "
        "file, interleaved in lakecore's child.",
    ]
    if java is not None:
        first = java_best(java)
        warm = "; ".join(f"{w}: " + ", ".join(f"{p} {s:.2f}" for p, s in v["first"].items())
                         for w, v in first.items())
        notes.append(
            f"Java Paimon {java.get('paimon_version', '?')}, {JAVA_HEAP}, one JVM "
            f"({java['wall_s']:.1f} s wall, peak RSS {java['peak_rss_mib']:,.0f} MiB): JVM "
            f"start to main {java['jvm_uptime_at_main_s']:.2f} s, loading "
            f"{java['rows_loaded']:,} input rows {java['load_s']:.2f} s (untimed); round 0 "
            f"(JIT warm-up, not in the figures) took, in s: {warm}.")
    notes.append(files_line(args, lake, java))
    if lake is not None:
        for name, res in lake["workloads"].items():
            for phase, check in res.get("checks", {}).items():
                if not check.startswith("ok"):
                    problems.append(f"lakecore {name} {phase}: {check}")
    notes.append(load_note(machine))
    notes += [f"PROBLEM: {p}" for p in problems]
    text, body = render_table(machine_line(machine), HEADER, cells, notes)
    publish("java_paimon", {"machine": machine, "args": vars(args), "lakecore": lake,
                            "java": java, "notes": notes, "summary": summary}, text, body)
    if not args.keep:
        discard(workdir)
    empty_trash()
    return 1 if lake is None or java is None or problems else 0


if __name__ == "__main__":
    sys.exit(main())
