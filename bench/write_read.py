"""Write/upsert/merged-read throughput of a PK table: lakecore vs raw pyarrow vs pypaimon.

One run measures, each system in a child process (peak RSS: VmHWM, reset before each phase):

* raw pyarrow and lakecore, interleaved in ``--rounds`` rounds (best round per phase):
  ``pq.write_table`` of all base rows to one Parquet file and ``pq.read_table`` back, with zstd
  (lakecore's default ``file.compression``; the ratio baseline) and snappy (pyarrow's default,
  for information); then lakecore on a fresh 1-bucket PK table: ``--commits`` commits of
  shuffled keys, one commit upserting ``--upsert`` existing keys, and the merged read of the
  overlapping runs (checked row by row against the expected rows in round 1);
* pypaimon 2.1 the same once, in ``.venv-paimon`` (``paimon_write_read.py``), if present;
* lakecore writing 10M rows (10 ``write_arrow`` calls of 1M, one commit, default
  ``write-buffer-size``): peak RSS (target < 1.5 GiB).

Prints a table, writes ``bench/out/write_read.json`` and the ``## write_read`` section of
``bench/RESULTS.md``. Usage: ``.venv/bin/python bench/write_read.py [--skip-10m] [--skip-paimon]``.
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
from importlib.metadata import version
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
from _common import (  # noqa: E402
    SCHEMA,
    TARGETS,
    build_rows,
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
    run_phase,
    text_table,
    write_ipc,
)

WRITE_ONLY = {"write-only": "true"}  # no compaction: the read merges all commits' runs
PAIMON_PYTHON = os.path.join(os.path.dirname(BENCH), ".venv-paimon", "bin", "python")
OUT_DIR = os.path.join(BENCH, "out")
Result = dict[str, Any]


# --- children ------------------------------------------------------------------------------


def _lakecore_table(warehouse: str, name: str = "db.t", **options: str) -> Any:
    """Create a 1-bucket PK table (other options default unless given); return its catalog."""
    from lakecore import CatalogFactory, Schema

    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database("db", ignore_if_exists=True)
    options = {"bucket": "1", **options}
    schema = Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options=options)
    catalog.create_table(name, schema)
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


def _raw_phases(out: Result, base: pa.Table, path: str) -> None:
    for codec in ("zstd", "snappy"):
        write = lambda c=codec: pq.write_table(base, path, compression=c)  # noqa: E731
        run_phase(out, f"raw-write-{codec}", write)
        back = run_phase(out, f"raw-read-{codec}", lambda: pq.read_table(path))
        assert back.num_rows == base.num_rows


def child_main(args: argparse.Namespace) -> Result:
    """Rounds of: raw pyarrow write+read (zstd, snappy), lakecore write, upsert, merged read.

    Interleaving the baseline with lakecore keeps the ratios fair on a machine whose load
    changes; each phase reports its best round. A lakecore error ends the lakecore phases only.
    """
    base = read_ipc(os.path.join(args.data, "base.arrow"))
    upsert = read_ipc(os.path.join(args.data, "upsert.arrow"))
    out: Result = {"rows": base.num_rows, "upsert_rows": upsert.num_rows, "commits": args.commits}
    _raw_phases({}, base.slice(0, 1000), os.path.join(args.warehouse, "raw.parquet"))  # warm-up
    try:
        catalog = _lakecore_table(args.warehouse, "db.warmup")
        for part in (base.slice(0, 1000), upsert.slice(0, 100)):  # pay one-time imports here
            _commit(catalog.get_table("db.warmup"), [part])
        builder = catalog.get_table("db.warmup").new_read_builder()
        builder.new_read().to_arrow(builder.new_scan().plan().splits())
        out["version"] = version("lakecore")
    except Exception:
        out["error"] = traceback.format_exc()
    for round_ in range(1 if args.profile else args.rounds):
        _raw_phases(out, base, os.path.join(args.warehouse, "raw.parquet"))
        if "error" in out:
            continue
        name = f"db.t{round_}"
        try:
            _lakecore_table(args.warehouse, name, **({} if args.compact else WRITE_ONLY))
            table = catalog.get_table(name)

            def write_all(table: Any = table) -> None:
                for part in commit_slices(base, args.commits):
                    _commit(table, [part])

            def read(name: str = name) -> pa.Table:
                builder = catalog.get_table(name).new_read_builder()
                return builder.new_read().to_arrow(builder.new_scan().plan().splits())

            run_phase(out, "write", write_all, args.profile)
            run_phase(out, "upsert", lambda table=table: _commit(table, [upsert]), args.profile)
            merged = run_phase(out, "read", read, args.profile)
            if round_ == 0:
                out["check"] = check_merged(merged, base, upsert)
                splits = catalog.get_table(name).new_read_builder().new_scan().plan().splits()
                out["files_read"] = sum(len(split.files) for split in splits)
            del merged
        except Exception:
            out["error"] = traceback.format_exc()
    return out


def child_big(args: argparse.Namespace) -> Result:
    """``--big-rows`` rows in 10 write_arrow calls and one commit; input made chunk by chunk."""
    table = _lakecore_table(args.warehouse).get_table("db.t")
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


CHILDREN = {"main": child_main, "big": child_big}


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
               "--warehouse", warehouse, "--commits", str(args.commits), "--rounds",
               str(args.rounds), "--big-rows", str(args.big_rows),
               *(["--compact"] if args.compact else []), *extra]
    return spawn(command, kind)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="base rows (default 1M)")
    p.add_argument("--commits", type=int, default=10, help="commits for the base rows")
    p.add_argument("--upsert", type=int, default=200_000, help="existing keys upserted")
    p.add_argument("--rounds", type=int, default=3,
                   help="lakecore write+upsert+read rounds (fresh table each); best per phase")
    p.add_argument("--big-rows", type=int, default=10_000_000, help="rows of the memory run")
    p.add_argument("--paimon-rows", type=int, default=0, help="pypaimon base rows (0 = --rows)")
    p.add_argument("--paimon-repeat", type=int, default=1, help="pypaimon merged reads")
    p.add_argument("--compact", action="store_true",
                   help="let lakecore compact while writing (default: write-only=true, so the "
                   "read merges every commit's run, as pypaimon's does)")
    p.add_argument("--skip-10m", action="store_true", help="skip the 10M-row memory run")
    p.add_argument("--skip-paimon", action="store_true", help="skip pypaimon")
    p.add_argument("--profile", choices=("write", "upsert", "read", "auto"),
                   help="also profile this lakecore phase (auto: the worst against its target) "
                   "in an extra, untimed run")
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
    profile_args = () if args.profile in (None, "auto") else ("--profile", args.profile)
    lake = run_child("main", args, workdir)
    if lake is not None and "error" in lake:
        print(f"lakecore FAILED:\n{lake['error']}", file=sys.stderr)
    paimon, paimon_note, skipped = None, "pypaimon", ""
    if args.skip_paimon:
        skipped = "pypaimon skipped (--skip-paimon)"
    elif not os.path.exists(PAIMON_PYTHON):
        skipped = f"pypaimon skipped: no venv at {PAIMON_PYTHON}"
    else:
        paimon_rows = args.paimon_rows or args.rows
        if paimon_rows < args.rows:
            paimon_note = f"pypaimon (at {paimon_rows:,} rows)"
        paimon = spawn([PAIMON_PYTHON, os.path.join(BENCH, "paimon_write_read.py"), "--data",
                        workdir, "--warehouse", tempfile.mkdtemp(prefix="paimon-", dir=workdir),
                        "--rows", str(paimon_rows), "--commits", str(args.commits),
                        "--repeat", str(args.paimon_repeat)], "pypaimon")
    big = None if args.skip_10m else run_child("big", args, workdir)
    if args.profile == "auto" and lake is not None and "read" in lake:
        worst = min(TARGETS, key=lambda p: next(
            r["ratio"] / TARGETS[p] for r in build_rows(lake, None, None, "")
            if r["system"] == "lakecore" and r["phase"].startswith(p)))
        profile_args = ("--profile", worst)
    profiled = run_child("main", args, workdir, *profile_args) if profile_args else None

    rows = build_rows(lake, paimon, big, paimon_note)
    machine["lakecore"] = (lake or {}).get("version", "?")
    if paimon is not None:
        machine.update(pypaimon=paimon["version"], pypaimon_pyarrow=paimon["pyarrow"])
    notes = [
        f"{args.rows:,} base rows in {args.commits} commits (keys shuffled), "
        f"{args.upsert:,} existing keys upserted in one commit; 1 bucket; lakecore "
        + ("compacting as it writes (default options)" if args.compact else
           "write-only=true (no compaction)")
        + f", merged read of {(lake or {}).get('files_read', '?')} data files.",
        "Ratios: rows/s over raw pyarrow zstd (lakecore's default codec) write/read rate. "
        f"Raw pyarrow and lakecore: best of {args.rounds} interleaved rounds (fresh table each); "
        f"pypaimon: one write+upsert, best of {args.paimon_repeat} read(s).",
        "Peak RSS: the phase's own VmHWM (reset before it) in that system's child process, "
        "input data included. Every system first writes (and reads) 1,000 warm-up rows, "
        "so one-time imports are not timed.",
        f"1-min load average: {machine['loadavg_start']:.1f} at start, "
        f"{os.getloadavg()[0]:.1f} at end (other work on the machine skews timings).",
    ]
    for name, res in (("lakecore", lake), ("pypaimon", paimon)):
        if res is not None and "check" in res:
            notes.append(f"{name} merged read check: {res['check']}")
    notes += [skipped] if skipped else []
    lake_ok = None if lake is None or "error" in lake else lake
    ran = (("lakecore", lake_ok, True), ("pypaimon", paimon, not skipped),
           ("big", big, not args.skip_10m))
    failed = [name for name, res, tried in ran if tried and res is None]
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
                   "main": lake, "pypaimon": paimon, "big": big}, out, indent=2)
    body = "\n".join([header, "", markdown_table(rows), "", *(f"- {n}" for n in notes)])
    replace_section(os.path.join(BENCH, "RESULTS.md"), "## write_read", body)
    if profiled is not None:
        print(f"\nprofile of lakecore {profile_args[1]} (extra run, cProfile, top 15 cumulative):")
        print(profiled.get("profile", "(none)"))
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
