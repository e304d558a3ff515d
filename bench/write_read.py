"""Write/upsert/merged-read throughput of a PK table: lakecore vs raw pyarrow vs pypaimon.

One run measures, each system in a child process (peak RSS: VmHWM, reset before each phase):

* raw pyarrow and lakecore, interleaved in ``--rounds`` rounds (best round per phase):
  ``pq.write_table`` of all base rows to one Parquet file and ``pq.read_table`` back, with zstd
  (lakecore's default ``file.compression``; the ratio baseline) and snappy (pyarrow's default,
  for information); then lakecore on a fresh PK table (``--buckets``, default 1):
  ``--commits`` commits of shuffled keys, one commit upserting ``--upsert`` existing keys, and
  the merged read of the overlapping runs (checked row by row against the expected rows in
  round 1), timed ``READ_REPEATS`` times a round, each followed by another raw zstd read, so
  the read's baseline is taken beside it from as many samples as the read has;
* pypaimon 2.1 the same once, in ``.venv-paimon`` (``paimon_write_read.py``), if present;
  and again with its optional Rust core (``pypaimon+rust``: pypaimon-rust installed, the
  table options ``*.native.enabled``), if pypaimon-rust is installed there;
* lakecore writing 10M rows (10 ``write_arrow`` calls of 1M, one commit, default
  ``write-buffer-size``): peak RSS (target < 1.5 GiB).

Prints a table, writes ``bench/out/write_read.json`` and the ``## write_read`` section of
``bench/RESULTS.md``. Usage: ``.venv/bin/python bench/write_read.py [--quick] [--skip-10m]
[--skip-paimon] [--buckets N]`` (``bench/scaling.py`` runs its children at 1, 4, 16 buckets).
"""

from __future__ import annotations

import argparse
import os
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
    PAIMON_PYTHON,
    PAIMON_RUST_OPTIONS,
    SCHEMA,
    TARGETS,
    Result,
    build_rows,
    check_merged,
    child_args,
    cold_start,
    commit_slices,
    data_args,
    discard,
    failures,
    finish,
    load_note,
    make_chunk,
    paimon_venv,
    peak_rss_mib,
    read_ipc,
    run_as_child,
    run_phase,
    spawn,
    start,
)

WRITE_ONLY = {"write-only": "true"}  # no compaction: the read merges all commits' runs
# A merged read of 1M rows takes 0.1-0.15 s, and one sample on this host varies by 10-30 %:
# timed once a round, a read's best rested on 3 samples and its baseline's on 3 others taken
# minutes apart. Reads are cheap: 3 a round, each beside a raw read, give both sides 9.
READ_REPEATS = 3


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
        file = _raw_file(path, codec)
        write = lambda c=codec, f=file: pq.write_table(base, f, compression=c)  # noqa: E731
        run_phase(out, f"raw-write-{codec}", write)
        back = run_phase(out, f"raw-read-{codec}", lambda f=file: pq.read_table(f))
        assert back.num_rows == base.num_rows


def _raw_file(path: str, codec: str) -> str:
    return path.replace(".parquet", f"-{codec}.parquet")


def _raw_layout_phases(out: Result, base: pa.Table, commits: int, buckets: int,
                       directory: str) -> None:
    """Raw pyarrow zstd writing (and reading back) the rows as lakecore lays them out: one
    file per (commit, bucket), rows split by ``id % buckets`` (split before timing). Shows what
    many small files cost Parquet itself; information, not a target's baseline."""
    files = []
    for part in commit_slices(base, commits):
        ids = part["id"].to_numpy() % buckets
        files += [part.filter(pa.array(ids == b)) for b in range(buckets)]
    out["layout_files"] = len(files)

    def write() -> None:
        discard(directory)  # not deleted now: see discard
        os.makedirs(directory)
        for i, f in enumerate(files):
            pq.write_table(f, os.path.join(directory, f"part-{i}.parquet"), compression="zstd")

    run_phase(out, "raw-write-zstd-files", write)
    back = run_phase(out, "raw-read-zstd-files", lambda: pq.read_table(directory))
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
    raw = os.path.join(args.warehouse, "raw.parquet")
    raw_zstd = _raw_file(raw, "zstd")
    for round_ in range(1 if args.profile else args.rounds):
        _raw_phases(out, base, raw)
        if args.buckets > 1:
            _raw_layout_phases(out, base, args.commits, args.buckets,
                               os.path.join(args.warehouse, "raw-files"))
        if "error" in out:
            continue
        name = f"db.t{round_}"
        try:
            _lakecore_table(args.warehouse, name, bucket=str(args.buckets),
                            **({} if args.compact else WRITE_ONLY))
            table = catalog.get_table(name)

            def write_all(table: Any = table) -> None:
                for part in commit_slices(base, args.commits):
                    _commit(table, [part])

            def read(name: str = name) -> pa.Table:
                cold_start()  # a read job is a new process: no manifest decoded yet
                builder = catalog.get_table(name).new_read_builder()
                return builder.new_read().to_arrow(builder.new_scan().plan().splits())

            run_phase(out, "write", write_all, args.profile)
            run_phase(out, "upsert", lambda table=table: _commit(table, [upsert]), args.profile)
            for repeat in range(1 if args.profile else READ_REPEATS):
                merged = run_phase(out, "read", read, args.profile)
                if round_ == 0 and repeat == 0:
                    out["check"] = check_merged(merged, base, upsert)
                    splits = (catalog.get_table(name).new_read_builder().new_scan().plan()
                              .splits())
                    out["files_read"] = sum(len(split.files) for split in splits)
                del merged
                # the baseline beside it, from as many samples as the read has
                run_phase(out, "raw-read-zstd", lambda: pq.read_table(raw_zstd))
        except Exception:
            out["error"] = traceback.format_exc()
    return out


def child_big(args: argparse.Namespace) -> Result:
    """``--big-rows`` rows in 10 write_arrow calls and one commit into a ``--buckets`` table;
    input made chunk by chunk."""
    table = _lakecore_table(args.warehouse, bucket=str(args.buckets)).get_table("db.t")
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


def run_child(kind: str, args: argparse.Namespace, workdir: str, *extra: str) -> Result | None:
    warehouse = tempfile.mkdtemp(prefix=f"{kind}-", dir=workdir)
    command = [sys.executable, os.path.abspath(__file__), "--child", kind, "--data", workdir,
               "--warehouse", warehouse, "--commits", str(args.commits), "--rounds",
               str(args.rounds), "--big-rows", str(args.big_rows), "--buckets",
               str(args.buckets), *(["--compact"] if args.compact else []), *extra]
    return spawn(command, kind)


def run_paimon(workdir: str, rows: int, commits: int, repeat: int = 1, buckets: int = 1,
               native: bool = False) -> Result | None:
    """pypaimon (``native``: with its Rust core) on the rows in ``workdir``, in .venv-paimon."""
    label = "pypaimon+rust" if native else "pypaimon"
    return spawn([PAIMON_PYTHON, os.path.join(BENCH, "paimon_write_read.py"), "--data", workdir,
                  "--warehouse", tempfile.mkdtemp(prefix=f"{label}-", dir=workdir),
                  "--rows", str(rows), "--commits", str(commits), "--repeat", str(repeat),
                  "--buckets", str(buckets), *(["--native"] if native else [])],
                 f"{label} ({buckets} bucket(s))")


def paimon_runs(workdir: str, rows: int, all_rows: int, commits: int, repeat: int = 1,
                buckets: int = 1, skip: bool = False, skip_rust: bool = False
                ) -> tuple[list[tuple[str, Result | None]], list[str]]:
    """(label, result or None if it failed) of pypaimon and, if installed, pypaimon+rust, on
    ``rows`` of the ``all_rows`` in ``workdir``; and notes on what was not run, and why."""
    if skip:
        return [], ["pypaimon skipped (--skip-paimon)"]
    venv = paimon_venv()
    if venv["pypaimon"] is None:
        return [], [f"pypaimon skipped: {venv['why']}"]
    at = "" if rows >= all_rows else f" (at {rows:,} rows)"
    runs = [("pypaimon" + at, run_paimon(workdir, rows, commits, repeat, buckets))]
    notes = []
    if skip_rust:
        notes.append("pypaimon+rust skipped (--skip-paimon-rust)")
    elif venv["rust"] is None:
        notes.append(f"pypaimon+rust not measured: no pypaimon-rust in .venv-paimon "
                     f"({venv['why']})")
    else:
        runs.append(("pypaimon+rust" + at,
                     run_paimon(workdir, rows, commits, repeat, buckets, native=True)))
    return runs, notes


def paimon_notes(runs: list[tuple[str, Result | None]]) -> list[str]:
    """Versions, and which pypaimon+rust operations really ran in Rust (it falls back to
    Python silently when it cannot)."""
    notes = []
    for label, res in runs:
        if res is None:
            continue
        notes.append(f"{label}: pypaimon {res['version']} (pyarrow {res['pyarrow']})"
                     + (f", pypaimon-rust {res['rust']}" if res.get("rust") else ""))
        if "native" in res:
            used = ", ".join(f"{op} {calls['rust']}/{calls['rust'] + calls['python']}"
                             for op, calls in res["native"].items())
            notes[-1] += (f"; table options {', '.join(PAIMON_RUST_OPTIONS)} = true; calls "
                          f"that ran in Rust: {used}")
            if not res["native"]["commit"]["rust"]:
                notes[-1] += (" (pypaimon uses its Rust commit only for a REST catalog's "
                              "tables, so commits stay in Python on a filesystem warehouse)")
    return notes


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    data_args(p, "lakecore write+upsert+read rounds (fresh table each); best per phase")
    p.add_argument("--big-rows", type=int, default=10_000_000, help="rows of the memory run")
    p.add_argument("--paimon-rows", type=int, default=0, help="pypaimon base rows (0 = --rows)")
    p.add_argument("--paimon-repeat", type=int, default=1, help="pypaimon merged reads")
    p.add_argument("--compact", action="store_true",
                   help="let lakecore compact while writing (default: write-only=true, so the "
                   "read merges every commit's run, as pypaimon's does)")
    p.add_argument("--skip-10m", action="store_true", help="skip the 10M-row memory run")
    p.add_argument("--skip-paimon", action="store_true", help="skip pypaimon")
    p.add_argument("--skip-paimon-rust", action="store_true",
                   help="skip pypaimon with its Rust core (run if pypaimon-rust is installed)")
    p.add_argument("--buckets", type=int, default=1, help="buckets of the tables")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 100k rows, 1 round, no 10M run, pypaimon at 20k rows")
    p.add_argument("--profile", choices=("write", "upsert", "read", "auto"),
                   help="also profile this lakecore phase (auto: the worst against its target) "
                   "in an extra, untimed run")
    child_args(p, CHILDREN)
    args = p.parse_args()
    if args.quick:
        args.rows, args.upsert, args.rounds, args.skip_10m = 100_000, 20_000, 1, True
        args.paimon_rows = args.paimon_rows or 20_000
    return args


def main() -> int:
    args = parse_args()
    if run_as_child(args, CHILDREN):
        return 0
    machine, workdir = start("write_read", args.rows, args.upsert)
    profile_args = () if args.profile in (None, "auto") else ("--profile", args.profile)
    lake = run_child("main", args, workdir)
    if lake is not None and "error" in lake:
        print(f"lakecore FAILED:\n{lake['error']}", file=sys.stderr)
    paimons, skipped = paimon_runs(workdir, args.paimon_rows or args.rows, args.rows,
                                   args.commits, args.paimon_repeat, args.buckets,
                                   args.skip_paimon, args.skip_paimon_rust)
    big = None if args.skip_10m else run_child("big", args, workdir)
    if args.profile == "auto" and lake is not None and "read" in lake:
        worst = min(TARGETS, key=lambda p: next(
            r["ratio"] / TARGETS[p] for r in build_rows(lake, None)
            if r["system"] == "lakecore" and r["phase"].startswith(p)))
        profile_args = ("--profile", worst)
    profiled = run_child("main", args, workdir, *profile_args) if profile_args else None

    rows = build_rows(lake, big, paimons)
    machine["lakecore"] = (lake or {}).get("version", "?")
    notes = [
        f"{args.rows:,} base rows in {args.commits} commits (keys shuffled), "
        f"{args.upsert:,} existing keys upserted in one commit; {args.buckets} bucket(s); "
        "lakecore " + ("compacting as it writes (default options)" if args.compact else
                       "write-only=true (no compaction)")
        + f", merged read of {(lake or {}).get('files_read', '?')} data files.",
        "Ratios: rows/s over raw pyarrow zstd (lakecore's default codec) write/read rate. "
        f"Raw pyarrow and lakecore: best of {args.rounds} interleaved rounds (fresh table each); "
        f"pypaimon: one write+upsert, best of {args.paimon_repeat} read(s).",
        "Peak RSS: the phase's own VmHWM (reset before it) in that system's child process, "
        "input data included. Every system first writes (and reads) 1,000 warm-up rows, "
        "so one-time imports are not timed.",
        load_note(machine),
        *paimon_notes(paimons),
    ]
    for name, res in (("lakecore", lake), *paimons):
        if res is not None and "check" in res:
            notes.append(f"{name} merged read check: {res['check']}")
    notes += skipped
    lake_ok = None if lake is None or "error" in lake else lake
    failed = failures((("lakecore", lake_ok, True), *((n, r, True) for n, r in paimons),
                       ("big", big, not args.skip_10m)))
    return finish("write_read", machine, args, workdir, rows, notes, failed,
                  (profile_args[1] if profile_args else "", profiled), main=lake, big=big,
                  pypaimon=dict(paimons))


if __name__ == "__main__":
    sys.exit(main())
