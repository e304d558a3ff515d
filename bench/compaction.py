"""Full compaction of a PK table: lakecore vs raw pyarrow (read of its inputs + write of it).

One run measures, each part in a child process (peak RSS: VmHWM, reset before each phase):

* ``main``: in ``--rounds`` interleaved rounds (best round per phase), the table of the
  write benchmark (``write_read.py``: ``--rows`` shuffled keys in ``--commits`` commits, then
  ``--upsert`` existing keys in one commit; ``--buckets`` buckets (1), ``write-only=true`` so
  each keeps ``--commits`` + 1 overlapping level-0 runs) is built afresh (untimed), then:

  - ``compact``: lakecore ``table.compact(full=True)`` (plan + merge + write + COMPACT commit);
  - ``raw compact``, the baseline: ``pq.read_table`` of every input data file plus
    ``pq.write_table`` (zstd, lakecore's default codec) of the merged result (the compacted
    file's own rows and columns, system columns included). Only I/O: the merge itself is free
    for the baseline, so this is the machine's limit for a compaction;
  - ``read``: lakecore full read of the compacted table, against ``pq.read_table`` of the
    compacted data files (the target's baseline), the two timed ``read_repeats(rows)`` times
    each (3 at 1M rows and above, up to 15 for smaller tables), interleaved; and
    ``pq.read_table`` of one plain Parquet file (zstd) holding just the same
    1M user rows (information).

  Compaction rates count the compaction's input rows (rows + upsert, 1.2M by default), for
  lakecore and the baseline alike. Round 1 checks the compacted table row by row against
  the expected rows, and that it is one sorted run at the max level.
* ``big``: a 1-bucket table with ``write-buffer-size`` = ``--big-buffer-mb`` MiB holding
  ``--big-factor`` x that much Arrow data (user columns) in ``--big-commits`` overlapping
  level-0 runs plus one upsert run (built in one child), fully compacted in a fresh child:
  that child's peak RSS (target < 2 GiB).
* ``bench/scaling.py`` runs the ``main`` child at several sizes (compaction time vs bucket
  size).
* pypaimon: no row of figures. pypaimon 2.1 has no compaction (no compact API; its commit
  rejects compaction results), which the output says.

Prints a table, writes ``bench/out/compaction.json`` and the ``## compaction`` section of
``bench/RESULTS.md``. Usage: ``.venv/bin/python bench/compaction.py [--quick] [--skip-big]
[--profile compact|read]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import traceback
from importlib.metadata import version
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
from _common import (  # noqa: E402
    PAIMON_PYTHON,
    SEED,
    Result,
    check_merged,
    child_args,
    cold_start,
    commit_slices,
    data_args,
    expected_merged,
    failures,
    finish,
    load_note,
    make_rows,
    peak_rss_mib,
    rate_label,
    read_ipc,
    reset_peak_rss,
    row,
    rss_limit,
    run_as_child,
    run_phase,
    spawn,
    start,
)
from write_read import WRITE_ONLY, _commit, _lakecore_table  # noqa: E402

TARGETS = {"compact": 0.5, "read": 0.8}  # ratios to the raw pyarrow baselines
# Each round times the compacted table's read (and its baseline) this many times, interleaved:
# a 10-150 ms read timed once per round swung by 2x between runs on a busy 2-core machine
READ_REPEATS = 3
# ... and more at small sizes, where a read is shorter than the machine's noise: at 100k rows
# (15-30 ms a read) the six samples of a run spread over 2x, led by the first ones of a round
READ_REPEAT_ROWS = 1_000_000
BIG_RSS_LIMIT_MIB = 2 * 1024


def read_repeats(rows: int) -> int:
    """Timed reads a round at ``rows`` base rows: READ_REPEATS at 1M rows and above, up to
    5x that for smaller tables (the same count on both sides)."""
    return min(5 * READ_REPEATS, max(READ_REPEATS, -(-READ_REPEATS * READ_REPEAT_ROWS // rows)))


# --- children ------------------------------------------------------------------------------


def _live_files(table: Any) -> list[tuple[str, Any]]:
    """(path, DataFileMeta) of every live data file of the latest snapshot."""
    from lakecore.io.data_file_reader import data_file_path

    splits = table.new_read_builder().new_scan().plan().splits()
    return [(data_file_path(table, s.partition, s.bucket, f), f) for s in splits for f in s.files]


def _full_read(catalog: Any, name: str) -> pa.Table:
    cold_start()  # a read job is a new process: no manifest decoded yet
    builder = catalog.get_table(name).new_read_builder()
    return builder.new_read().to_arrow(builder.new_scan().plan().splits())


def _raw_read(paths: list[str]) -> pa.Table:
    tables = [pq.read_table(p) for p in paths]
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def _check_compacted(table: Any, files: list[tuple[str, Any]]) -> str:
    """After a full compaction: one sorted run (non-overlapping files) at the max level."""
    from lakecore.format.binary_row import decode_row

    top = table.options.num_levels - 1
    levels = sorted({f.level for _, f in files})
    if levels != [top]:
        raise AssertionError(f"compacted files at levels {levels}, expected only {top}")
    key_types = [table.schema.row_type.field(k).type for k in table.schema.trimmed_primary_keys]
    by_bucket: dict[str, list[tuple[Any, Any]]] = {}
    for path, f in files:  # one sorted run per bucket (the file's directory)
        by_bucket.setdefault(os.path.dirname(path), []).append(
            (decode_row(f.min_key, key_types), decode_row(f.max_key, key_types)))
    for ranges in by_bucket.values():
        ranges.sort()
        if any(a[1] >= b[0] for a, b in zip(ranges, ranges[1:])):
            raise AssertionError("compacted files overlap: not one sorted run")
    runs = ("one sorted run" if len(by_bucket) == 1
            else f"one sorted run in each of {len(by_bucket)} buckets")
    return f"{runs}, {len(files)} file(s) at level {top}"


def child_main(args: argparse.Namespace) -> Result:
    base = read_ipc(os.path.join(args.data, "base.arrow"))
    upsert = read_ipc(os.path.join(args.data, "upsert.arrow"))
    plain = os.path.join(args.warehouse, "plain.parquet")  # the same rows, user columns only
    pq.write_table(expected_merged(base, upsert), plain, compression="zstd")
    out: Result = {"rows": base.num_rows, "upsert_rows": upsert.num_rows, "commits": args.commits}
    try:  # warm-up: one-time imports (table, write, compaction, read) are not timed
        catalog = _lakecore_table(args.warehouse, "db.warmup", **WRITE_ONLY)
        for part in (base.slice(0, 1000), upsert.slice(0, 100)):
            _commit(catalog.get_table("db.warmup"), [part])
        catalog.get_table("db.warmup").compact(full=True)
        _full_read(catalog, "db.warmup")
        out["version"] = version("lakecore")
    except Exception:
        out["error"] = traceback.format_exc()
        return out
    pq.read_table(plain)
    for round_ in range(1 if args.profile else args.rounds):
        try:
            _round(out, catalog, f"db.t{round_}", args, base, upsert, plain, first=round_ == 0)
        except Exception:
            out["error"] = traceback.format_exc()
            break
    return out


def _round(out: Result, catalog: Any, name: str, args: argparse.Namespace, base: pa.Table,
           upsert: pa.Table, plain: str, first: bool) -> None:
    """One round: build the table (untimed), lakecore compaction, reads, baseline compaction."""
    profile = args.profile
    _lakecore_table(args.warehouse, name, bucket=str(args.buckets), **WRITE_ONLY)
    table = catalog.get_table(name)
    for part in commit_slices(base, args.commits):
        _commit(table, [part])
    _commit(table, [upsert])
    inputs = _live_files(catalog.get_table(name))
    report = run_phase(out, "compact", lambda: catalog.get_table(name).compact(full=True), profile)
    compacted = _live_files(catalog.get_table(name))
    result = merged = None
    for _ in range(read_repeats(base.num_rows)):  # reads are cheap beside a round: interleaved
        result = merged = None  # the last repeat's tables are not held through the next
        result = run_phase(out, "raw-read-compacted",
                           lambda: _raw_read([p for p, _ in compacted]))
        merged = run_phase(out, "read", lambda: _full_read(catalog, name), profile)
    assert result is not None and merged is not None
    run_phase(out, "raw-read-plain", lambda: pq.read_table(plain))
    # the baseline compaction, in two timed halves; the round's sum is its time
    run_phase(out, "raw-read-inputs", lambda: _raw_read([p for p, _ in inputs]))
    target = os.path.join(args.warehouse, "raw-result.parquet")
    run_phase(out, "raw-write-result", lambda: pq.write_table(result, target, compression="zstd"))
    raw = out.setdefault("raw-compact", {"runs": [], "peak_rss_mib": 0.0})
    raw["runs"].append(out["raw-read-inputs"]["runs"][-1] + out["raw-write-result"]["runs"][-1])
    raw["seconds"] = min(raw["runs"])
    raw["peak_rss_mib"] = max(out["raw-read-inputs"]["peak_rss_mib"],
                              out["raw-write-result"]["peak_rss_mib"])
    if first:
        out["input_rows"] = sum(f.row_count for _, f in inputs)
        out["input_files"] = len(inputs)
        out["input_levels"] = sorted({f.level for _, f in inputs})
        out["input_bytes"] = sum(f.file_size for _, f in inputs)
        out["output_rows"] = sum(f.row_count for _, f in compacted)
        out["output_bytes"] = sum(f.file_size for _, f in compacted)
        out["raw_result_bytes"] = os.path.getsize(target)
        out["plain_bytes"] = os.path.getsize(plain)
        out["report"] = {k: v for k, v in report.to_dict().items() if k != "details"}
        out["check"] = (check_merged(merged, base, upsert) + "; "
                        + _check_compacted(catalog.get_table(name), compacted))


def _big_plan(args: argparse.Namespace) -> tuple[int, int]:
    """(rows per commit, upsert rows) so the base rows' Arrow size is >= factor x buffer."""
    sample = make_rows(np.arange(100_000, dtype=np.int64), np.random.default_rng(SEED))
    per_row = sample.nbytes / sample.num_rows
    want = args.big_factor * args.big_buffer_mb * 1024 * 1024
    per_commit = int(np.ceil(want / per_row / args.big_commits))
    return per_commit, per_commit * args.big_commits // 10


def child_big_build(args: argparse.Namespace) -> Result:
    """``--big-commits`` commits of shuffled keys over the whole key range, one upsert commit."""
    per_commit, n_upsert = _big_plan(args)
    rows = per_commit * args.big_commits
    options = {**WRITE_ONLY, "write-buffer-size": f"{args.big_buffer_mb} mb"}
    catalog = _lakecore_table(args.warehouse, "db.big", **options)
    table = catalog.get_table("db.big")
    rng = np.random.default_rng([SEED, 1])
    keys = rng.permutation(rows).astype(np.int64)
    arrow_bytes = 0
    start = time.perf_counter()
    for index in range(args.big_commits + 1):
        ids = (keys[index * per_commit:(index + 1) * per_commit] if index < args.big_commits
               else rng.choice(rows, size=n_upsert, replace=False).astype(np.int64))
        data = make_rows(ids, np.random.default_rng([SEED, 2, index]))
        arrow_bytes += data.nbytes
        _commit(table, [data])
        del data
    files = _live_files(catalog.get_table("db.big"))
    return {"rows": rows, "upsert_rows": n_upsert, "input_rows": rows + n_upsert,
            "arrow_bytes": arrow_bytes, "seconds": time.perf_counter() - start,
            "files": len(files), "levels": sorted({f.level for _, f in files}),
            "file_bytes": sum(f.file_size for _, f in files),
            "buffer_bytes": args.big_buffer_mb * 1024 * 1024,
            "peak_rss_mib": peak_rss_mib()}


def child_big_compact(args: argparse.Namespace) -> Result:
    """Full compaction of the ``big`` table in a fresh process: its peak RSS."""
    from lakecore import CatalogFactory

    catalog = CatalogFactory.create({"warehouse": args.warehouse})
    table = catalog.get_table("db.big")
    reset_peak_rss()
    rss_before = peak_rss_mib()
    start = time.perf_counter()
    report = table.compact(full=True)
    seconds = time.perf_counter() - start
    peak = peak_rss_mib()
    files = _live_files(catalog.get_table("db.big"))
    return {"seconds": seconds, "peak_rss_mib": peak, "rss_before_mib": rss_before,
            "report": {k: v for k, v in report.to_dict().items() if k != "details"},
            "output_rows": sum(f.row_count for _, f in files),
            "check": _check_compacted(catalog.get_table("db.big"), files)}


CHILDREN = {"main": child_main, "big-build": child_big_build, "big-compact": child_big_compact}


# --- parent --------------------------------------------------------------------------------


def run_child(kind: str, args: argparse.Namespace, workdir: str, warehouse: str | None = None,
              *extra: str) -> Result | None:
    warehouse = warehouse or tempfile.mkdtemp(prefix=f"{kind}-", dir=workdir)
    command = [sys.executable, os.path.abspath(__file__), "--child", kind, "--data", workdir,
               "--warehouse", warehouse, "--commits", str(args.commits), "--rounds",
               str(args.rounds), "--big-buffer-mb", str(args.big_buffer_mb), "--big-factor",
               str(args.big_factor), "--big-commits", str(args.big_commits), "--buckets",
               str(getattr(args, "buckets", 1)), *extra]
    return spawn(command, kind)


def pypaimon_note() -> str:
    """Why pypaimon has no compaction row (checked in its venv, not assumed)."""
    if not os.path.exists(PAIMON_PYTHON):
        return f"pypaimon: not measured (no venv at {PAIMON_PYTHON}); pypaimon cannot compact."
    probe = (
        "import importlib.metadata as m, inspect\n"
        "from pypaimon.table.file_store_table import FileStoreTable\n"
        "from pypaimon.write import file_store_commit as c\n"
        "api = [a for a in dir(FileStoreTable) if 'compact' in a.lower()]\n"
        "rejects = 'compact_before' in inspect.getsource(c._reject_compact_increment)\n"
        "print(m.version('pypaimon'), bool(api), rejects)\n"
    )
    done = subprocess.run([PAIMON_PYTHON, "-c", probe], capture_output=True, text=True)
    if done.returncode != 0:
        return "pypaimon: cannot compact (probe failed: " + done.stderr.strip()[-200:] + ")"
    ver, has_api, rejects = done.stdout.split()
    return (f"pypaimon {ver}: cannot compact, so no row: its tables have "
            f"{'a' if has_api == 'True' else 'no'} compaction API"
            + (", and its commit rejects compaction results (NotImplementedError: 'Committing "
               "a compact increment requires a separate COMPACT snapshot')"
               if rejects == "True" else "") + ".")


def build_rows(main: Result | None, big: Result | None, big_build: Result | None,
               tag: str = "") -> list[Result]:
    """The report's rows; ``tag`` is appended to the phase names (``scaling.py``: the size)."""
    rows: list[Result] = []
    c_rate = c_label = None
    if main is not None and "raw-compact" in main:
        n_in = main["input_rows"]
        n_out = main["output_rows"]
        c_rate = n_in / main["raw-compact"]["seconds"]
        compacted_rate = n_out / main["raw-read-compacted"]["seconds"]
        plain_rate = n_out / main["raw-read-plain"]["seconds"]
        raw = main["raw-compact"]
        c_label = rate_label("pyarrow read inputs + write result", c_rate)
        r_label = rate_label("pyarrow read of the compacted files", compacted_rate)
        rows += [
            row("compact" + tag, "pyarrow read inputs + write result", n_in, raw["seconds"],
                c_rate, rss=raw["peak_rss_mib"]),
            row("  of which read", f"pyarrow ({main['input_files']} files)", n_in,
                main["raw-read-inputs"]["seconds"], None,
                rss=main["raw-read-inputs"]["peak_rss_mib"]),
            row("  of which write", "pyarrow (zstd, 1 file)", n_out,
                main["raw-write-result"]["seconds"], None,
                rss=main["raw-write-result"]["peak_rss_mib"]),
        ]
        if "compact" in main:
            rows.append(row("compact (full)" + tag, "lakecore", n_in, main["compact"]["seconds"],
                            c_rate, TARGETS["compact"], main["compact"]["peak_rss_mib"],
                            c_label))
        rows.append(row("read" + tag, "pyarrow (compacted files)", n_out,
                        main["raw-read-compacted"]["seconds"], compacted_rate,
                        rss=main["raw-read-compacted"]["peak_rss_mib"]))
        rows.append(row("read" + tag, "pyarrow (plain file)", n_out,
                        main["raw-read-plain"]["seconds"], compacted_rate,
                        rss=main["raw-read-plain"]["peak_rss_mib"]))
        if "read" in main:
            rows.append(row("read (compacted)" + tag, "lakecore", n_out, main["read"]["seconds"],
                            compacted_rate, TARGETS["read"], main["read"]["peak_rss_mib"],
                            r_label))
            info = row("read (compacted)" + tag, "lakecore vs plain file", n_out,
                       main["read"]["seconds"], plain_rate, rss=main["read"]["peak_rss_mib"])
            rows.append(info)
    if big is not None and big_build is not None:
        label = f"compact big ({big_build['input_rows'] / 1e6:.2f}M)"
        rows.append(rss_limit(row(label, "lakecore", big_build["input_rows"], big["seconds"],
                                  c_rate, rss=big["peak_rss_mib"], baseline=c_label),
                              BIG_RSS_LIMIT_MIB))
    return rows


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    data_args(p, "interleaved rounds (fresh table each); best per phase")
    p.add_argument("--big-buffer-mb", type=int, default=64, help="write-buffer-size of big")
    p.add_argument("--big-factor", type=float, default=4.0,
                   help="big table's Arrow size (user columns) / write-buffer-size")
    p.add_argument("--big-commits", type=int, default=8, help="base commits of big (+1 upsert)")
    p.add_argument("--skip-big", action="store_true", help="skip the big memory run")
    p.add_argument("--buckets", type=int, default=1, help="buckets of the main table")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 100k rows, 1 round, big run with an 8 MiB buffer")
    p.add_argument("--profile", choices=("compact", "read"),
                   help="also profile this lakecore phase in an extra, untimed run")
    child_args(p, CHILDREN)
    args = p.parse_args()
    if args.quick:
        args.rows, args.upsert, args.rounds, args.big_buffer_mb = 100_000, 20_000, 1, 8
    return args


def main() -> int:
    args = parse_args()
    if run_as_child(args, CHILDREN):
        return 0
    machine, workdir = start("compaction", args.rows, args.upsert)
    lake = run_child("main", args, workdir)
    if lake is not None and "error" in lake:
        print(f"lakecore FAILED:\n{lake['error']}", file=sys.stderr)
    big_build = big = None
    if not args.skip_big:
        big_wh = tempfile.mkdtemp(prefix="big-", dir=workdir)
        big_build = run_child("big-build", args, workdir, big_wh)
        big = run_child("big-compact", args, workdir, big_wh) if big_build else None
    profiled = (run_child("main", args, workdir, None, "--profile", args.profile)
                if args.profile else None)

    rows = build_rows(lake, big, big_build)
    machine["lakecore"] = (lake or {}).get("version", "?")
    notes = []
    if lake is not None and "input_rows" in lake:
        rep = lake["report"]
        notes += [
            f"Table of the write benchmark: {args.rows:,} base rows in {args.commits} commits "
            f"(keys shuffled) + {args.upsert:,} existing keys upserted in one commit; "
            f"{args.buckets} bucket(s), "
            f"write-only=true: {lake['input_files']} overlapping data files at level(s) "
            f"{lake['input_levels']}, {lake['input_bytes'] / 2**20:.1f} MiB.",
            f"Compaction rows = its input rows ({lake['input_rows']:,}, all runs), for lakecore "
            f"and the baseline alike; it outputs {lake['output_rows']:,} rows. lakecore "
            f"table.compact(full=True): plan + merge + write + COMPACT commit; report: "
            f"{rep['files_before']} files -> {rep['files_after']}, "
            f"{rep['bytes_before'] / 2**20:.1f} -> {rep['bytes_after'] / 2**20:.1f} MiB.",
            f"Baseline: pq.read_table of the {lake['input_files']} input files + pq.write_table "
            f"(zstd) of the merged result (the compacted file's rows and 9 columns, "
            f"{lake['raw_result_bytes'] / 2**20:.1f} MiB); I/O only, the merge is free for it. "
            "Its time is the best round's read + write.",
            "Read baselines: pq.read_table of the compacted data files (all 9 columns, incl. "
            "_KEY_id/_SEQUENCE_NUMBER/_VALUE_KIND; the target's baseline) and of one plain "
            f"Parquet file (zstd) of the same {lake['output_rows']:,} rows, user columns only "
            f"({lake['plain_bytes'] / 2**20:.1f} MiB; information).",
            f"Best of {args.rounds} interleaved rounds, fresh table each; within a round the "
            f"compacted read and its baseline are timed {read_repeats(args.rows)} times each, "
            "interleaved. "
            "Peak RSS: the phase's "
            "own VmHWM (reset before it) in the child process, input data included; one-time "
            "imports paid in an untimed warm-up.",
        ]
        if "check" in lake:
            notes.append(f"lakecore check after compaction: {lake['check']}")
    if big is not None and big_build is not None:
        notes.append(
            f"Big: write-buffer-size {args.big_buffer_mb} MiB; {big_build['rows']:,} rows in "
            f"{args.big_commits} commits (keys shuffled over the whole range) + "
            f"{big_build['upsert_rows']:,} upserted = {big_build['arrow_bytes'] / 2**20:.0f} MiB "
            f"of Arrow data ({big_build['arrow_bytes'] / big_build['buffer_bytes']:.1f}x the "
            f"buffer), {big_build['files']} level-0 files, {big_build['file_bytes'] / 2**20:.0f} "
            f"MiB on disk; built in one child, fully compacted in a fresh child whose whole-"
            f"process peak RSS is shown (imports included; {big['rss_before_mib']:.0f} MiB "
            f"before compacting). Output: {big['report']['files_after']} file(s), "
            f"{big['output_rows']:,} rows; {big['check']}. Ratio vs the rate of the "
            f"{args.rows:,}-row table's baseline.")
    elif args.skip_big:
        notes.append("big memory run skipped (--skip-big)")
    notes.append(pypaimon_note())
    notes.append(load_note(machine))
    lake_ok = None if lake is None or "error" in lake else lake
    failed = failures((("lakecore", lake_ok, True), ("big-build", big_build, not args.skip_big),
                       ("big-compact", big, not args.skip_big and big_build is not None)))
    return finish("compaction", machine, args, workdir, rows, notes, failed,
                  (args.profile, profiled), main=lake, big_build=big_build, big=big,
                  profile=(profiled or {}).get("profile"))


if __name__ == "__main__":
    sys.exit(main())
