"""Write/upsert/merged-read throughput of a PK table: lakecore vs raw pyarrow vs pypaimon.

One run measures, each system in its own child process (so peak RSS is its own):

* raw pyarrow: ``pq.write_table`` of all base rows to one Parquet file and ``pq.read_table``
  back, best of 3, with zstd (lakecore's default ``file.compression``; the ratio baseline) and
  snappy (pyarrow's default; for information);
* lakecore: ``--commits`` commits of shuffled keys, one upsert commit of ``--upsert`` existing
  keys, then the merged read of the overlapping runs (best of ``--repeat``; checked row by row);
* pypaimon 2.1 the same, in ``.venv-paimon`` (``paimon_write_read.py``), if that venv exists;
* lakecore writing 10M rows (10 ``write_arrow`` calls of 1M, one commit, default
  ``write-buffer-size``): its peak RSS (target < 1.5 GiB).

Prints a table, writes ``bench/out/write_read.json`` and the ``## write_read`` section of
``bench/RESULTS.md``. Usage: ``.venv/bin/python bench/write_read.py [--skip-10m] [--skip-paimon]``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
from _common import (  # noqa: E402
    SCHEMA,
    best_of,
    check_merged,
    commit_slices,
    emit,
    machine_info,
    make_chunk,
    make_data,
    markdown_table,
    parse_result,
    peak_rss_mib,
    read_ipc,
    replace_section,
    reset_peak_rss,
    text_table,
    write_ipc,
)

PAIMON_PYTHON = os.path.join(os.path.dirname(BENCH), ".venv-paimon", "bin", "python")
OUT_DIR = os.path.join(BENCH, "out")
TARGETS = {"write": 0.4, "upsert": 0.4, "read": 0.35}
BIG_RSS_LIMIT_MIB = 1.5 * 1024
Result = dict[str, Any]


# --- children ------------------------------------------------------------------------------


def _phase(out: Result, name: str, fn: Callable[[], Any], profile: str | None) -> Any:
    """Run one phase; record its seconds and its own peak RSS (VmHWM reset before it)."""
    reset_peak_rss()
    profiler = cProfile.Profile() if profile == name else None
    start = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    value = fn()
    if profiler is not None:
        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(15)
        out["profile"] = text.getvalue()
    out[name] = {"seconds": time.perf_counter() - start, "peak_rss_mib": peak_rss_mib()}
    return value


def child_raw(args: argparse.Namespace) -> Result:
    base = read_ipc(os.path.join(args.data, "base.arrow"))
    path = os.path.join(args.data, "raw.parquet")
    out: Result = {"rows": base.num_rows}
    for codec in ("zstd", "snappy"):
        reset_peak_rss()
        w_best, w_runs, _ = best_of(3, lambda c=codec: pq.write_table(base, path, compression=c))
        r_best, r_runs, back = best_of(3, lambda: pq.read_table(path))
        assert back.num_rows == base.num_rows
        out[codec] = {"write_s": w_best, "write_runs": w_runs, "read_s": r_best,
                      "read_runs": r_runs, "file_mib": os.path.getsize(path) / 2**20,
                      "peak_rss_mib": peak_rss_mib()}
    return out


def _lakecore_table(warehouse: str, options: dict[str, str]) -> Any:
    from lakecore import CatalogFactory, Schema

    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database("db", ignore_if_exists=True)
    schema = Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options=options)
    catalog.create_table("db.t", schema)
    return catalog


def _commit(table: Any, parts: list[pa.Table]) -> None:
    builder = table.new_batch_write_builder()
    write = builder.new_write()
    try:
        for part in parts:
            write.write_arrow(part)
        builder.new_commit().commit(write.prepare_commit())
    finally:
        write.close()


def child_lakecore(args: argparse.Namespace) -> Result:
    base = read_ipc(os.path.join(args.data, "base.arrow"))
    upsert = read_ipc(os.path.join(args.data, "upsert.arrow"))
    catalog = _lakecore_table(args.warehouse, {"bucket": "1"})
    table = catalog.get_table("db.t")
    warm = _lakecore_table(os.path.join(args.warehouse, "warmup"), {"bucket": "1"})
    for part in (base.slice(0, 1000), upsert.slice(0, 100)):  # pay one-time imports here
        _commit(warm.get_table("db.t"), [part])
    builder = warm.get_table("db.t").new_read_builder()
    builder.new_read().to_arrow(builder.new_scan().plan().splits())
    out: Result = {"version": version("lakecore"), "rows": base.num_rows,
                   "upsert_rows": upsert.num_rows, "commits": args.commits}

    def write_all() -> None:
        for part in commit_slices(base, args.commits):
            _commit(table, [part])

    def read() -> pa.Table:
        builder = catalog.get_table("db.t").new_read_builder()
        return builder.new_read().to_arrow(builder.new_scan().plan().splits())

    _phase(out, "write", write_all, args.profile)
    _phase(out, "upsert", lambda: _commit(table, [upsert]), args.profile)
    repeat = 1 if args.profile == "read" else args.repeat
    best, runs, merged = _phase(out, "read", lambda: best_of(repeat, read), args.profile)
    out["read"].update(seconds=best, runs=runs)
    out["check"] = check_merged(merged, base, upsert)
    return out


def child_big(args: argparse.Namespace) -> Result:
    """``--big-rows`` rows in 10 write_arrow calls and one commit; input made chunk by chunk."""
    table = _lakecore_table(args.warehouse, {"bucket": "1"}).get_table("db.t")
    chunk = args.big_rows // 10
    builder = table.new_batch_write_builder()
    write = builder.new_write()
    generate_s = 0.0
    start = time.perf_counter()
    try:
        for index in range(10):
            t0 = time.perf_counter()
            data = make_chunk(index, chunk)
            generate_s += time.perf_counter() - t0
            write.write_arrow(data)
            del data
        builder.new_commit().commit(write.prepare_commit())
    finally:
        write.close()
    seconds = time.perf_counter() - start - generate_s
    return {"rows": chunk * 10, "seconds": seconds, "generate_s": generate_s,
            "peak_rss_mib": peak_rss_mib()}


CHILDREN = {"raw": child_raw, "lakecore": child_lakecore, "big": child_big}


# --- parent --------------------------------------------------------------------------------


def spawn(command: list[str], label: str) -> Result | None:
    print(f"running {label} ...", file=sys.stderr, flush=True)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"{label} FAILED (exit {done.returncode}):\n{done.stderr[-4000:]}", file=sys.stderr)
        return None
    return parse_result(done.stdout)


def run_child(kind: str, args: argparse.Namespace, workdir: str, *extra: str) -> Result | None:
    warehouse = tempfile.mkdtemp(prefix=f"{kind}-", dir=workdir)
    command = [sys.executable, os.path.abspath(__file__), "--child", kind, "--data", workdir,
               "--warehouse", warehouse, "--commits", str(args.commits), "--repeat",
               str(args.repeat), "--big-rows", str(args.big_rows), *extra]
    return spawn(command, kind)


def row(phase: str, system: str, rows: int, seconds: float, base_rate: float | None,
        target: float | None = None, rss: float | None = None) -> Result:
    rate = rows / seconds
    ratio = None if base_rate is None else rate / base_rate
    result = None if target is None or ratio is None else ("PASS" if ratio >= target else "MISS")
    return {"phase": phase, "system": system, "rows": rows, "seconds": seconds,
            "rows_per_s": rate, "ratio": ratio, "target": f">= {target}x" if target else None,
            "result": result, "peak_rss_mib": rss}


def build_rows(raw: Result | None, lake: Result | None, paimon: Result | None,
               big: Result | None, paimon_note: str) -> list[Result]:
    rows: list[Result] = []
    w_rate = r_rate = None
    if raw is not None:
        n = raw["rows"]
        w_rate, r_rate = n / raw["zstd"]["write_s"], n / raw["zstd"]["read_s"]
        for codec in ("zstd", "snappy"):
            c = raw[codec]
            rows.append(row("write", f"pyarrow ({codec})", n, c["write_s"], w_rate,
                            rss=c["peak_rss_mib"]))
            rows.append(row("read", f"pyarrow ({codec})", n, c["read_s"], r_rate))
    for system, res, targets in (("lakecore", lake, TARGETS), (paimon_note, paimon, {})):
        if res is None:
            continue
        for phase, n, base_rate in (("write", res["rows"], w_rate),
                                    ("upsert", res["upsert_rows"], w_rate),
                                    ("read", res["rows"], r_rate)):
            label = "read (merged)" if phase == "read" else phase
            rows.append(row(label, system, n, res[phase]["seconds"], base_rate,
                            targets.get(phase), res[phase]["peak_rss_mib"]))
    if big is not None:
        big_row = row("write 10M", "lakecore", big["rows"], big["seconds"], w_rate,
                      rss=big["peak_rss_mib"])
        ok = big["peak_rss_mib"] < BIG_RSS_LIMIT_MIB
        big_row.update(target="RSS < 1.5 GiB", result="PASS" if ok else "MISS")
        rows.append(big_row)
    return rows


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="base rows (default 1M)")
    p.add_argument("--commits", type=int, default=10, help="commits for the base rows")
    p.add_argument("--upsert", type=int, default=200_000, help="existing keys upserted")
    p.add_argument("--repeat", type=int, default=3, help="merged reads; the best is reported")
    p.add_argument("--big-rows", type=int, default=10_000_000, help="rows of the memory run")
    p.add_argument("--paimon-rows", type=int, default=0, help="pypaimon base rows (0 = --rows)")
    p.add_argument("--paimon-repeat", type=int, default=1, help="pypaimon merged reads")
    p.add_argument("--skip-10m", action="store_true", help="skip the 10M-row memory run")
    p.add_argument("--skip-paimon", action="store_true", help="skip pypaimon")
    p.add_argument("--profile", choices=("write", "upsert", "read"),
                   help="also profile this lakecore phase in an extra (untimed) run")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--warehouse", help=argparse.SUPPRESS)
    return p.parse_args()


def main() -> int:
    args = parse_args()
    if args.child:
        emit(CHILDREN[args.child](args))
        return 0
    os.makedirs(OUT_DIR, exist_ok=True)
    machine = machine_info()
    workdir = tempfile.mkdtemp(prefix="write_read-", dir=OUT_DIR)
    base, upsert = make_data(args.rows, args.upsert)
    for name, tbl in (("base", base), ("upsert", upsert)):
        write_ipc(os.path.join(workdir, f"{name}.arrow"), tbl)
    del base, upsert
    profile_args = () if args.profile is None else ("--profile", args.profile)
    raw = run_child("raw", args, workdir)
    lake = run_child("lakecore", args, workdir)
    paimon, paimon_note = None, "pypaimon"
    if args.skip_paimon:
        print("pypaimon skipped (--skip-paimon)", file=sys.stderr)
    elif not os.path.exists(PAIMON_PYTHON):
        print(f"pypaimon skipped: no venv at {PAIMON_PYTHON}", file=sys.stderr)
    else:
        paimon_rows = args.paimon_rows or args.rows
        if paimon_rows < args.rows:
            paimon_note = f"pypaimon (at {paimon_rows:,} rows)"
        paimon = spawn([PAIMON_PYTHON, os.path.join(BENCH, "paimon_write_read.py"), "--data",
                        workdir, "--warehouse", tempfile.mkdtemp(prefix="paimon-", dir=workdir),
                        "--rows", str(paimon_rows), "--commits", str(args.commits),
                        "--repeat", str(args.paimon_repeat)], "pypaimon")
    big = None if args.skip_10m else run_child("big", args, workdir)
    profiled = run_child("lakecore", args, workdir, *profile_args) if args.profile else None

    rows = build_rows(raw, lake, paimon, big, paimon_note)
    machine["lakecore"] = version("lakecore")
    if paimon is not None:
        machine.update(pypaimon=paimon["version"], pypaimon_pyarrow=paimon["pyarrow"])
    notes = [
        f"{args.rows:,} base rows in {args.commits} commits (keys shuffled), "
        f"{args.upsert:,} existing keys upserted in one commit; 1 bucket.",
        "Ratios: rows/s over raw pyarrow zstd (lakecore's default codec) write/read rate; "
        f"reads best of: raw 3, lakecore {args.repeat}, pypaimon {args.paimon_repeat}.",
        "Peak RSS: the phase's own VmHWM (reset before it) in that system's child process, "
        "input data included. lakecore and pypaimon first write, upsert and read a "
        "1,000-row warm-up table (one-time imports are not timed).",
        f"1-min load average: {machine['loadavg_start']:.1f} at start, "
        f"{os.getloadavg()[0]:.1f} at end (other work on the machine skews timings).",
    ]
    for name, res in (("lakecore", lake), ("pypaimon", paimon)):
        if res is not None:
            notes.append(f"{name} merged read check: {res['check']}")
    failed = [n for n, r in (("raw", raw), ("lakecore", lake), ("big", big)) if r is None
              and not (n == "big" and args.skip_10m)]
    if failed:
        notes.append(f"FAILED: {', '.join(failed)} (see stderr)")
    header = (f"{machine['date']} — {machine['nproc']} CPUs, {machine['cpu']}, Python "
              f"{machine['python']}, pyarrow {machine['pyarrow']}, lakecore {machine['lakecore']}"
              + (f", pypaimon {paimon['version']} (pyarrow {paimon['pyarrow']})" if paimon else ""))
    print(header)
    print(text_table(rows))
    print("\n".join(notes))
    with open(os.path.join(OUT_DIR, "write_read.json"), "w") as out:
        json.dump({"machine": machine, "args": vars(args), "rows": rows, "notes": notes,
                   "raw": raw, "lakecore": lake, "pypaimon": paimon, "big": big}, out, indent=2)
    body = "\n".join([header, "", markdown_table(rows), "", *(f"- {n}" for n in notes)])
    replace_section(os.path.join(BENCH, "RESULTS.md"), "## write_read", body)
    if profiled is not None:
        print(f"\nprofile of lakecore {args.profile} (extra run, cProfile):")
        print(profiled.get("profile", "(none)"))
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
