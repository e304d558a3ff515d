"""Benchmark (not a test): expire 1,000 snapshots of a table with 10,000 live files.

    .venv/bin/python bench/expire.py [--snapshots 1000] [--files 10000] [--quick]

Builds the history synthetically but in the real format (lakecore's ManifestIO, manifests
merged every ``manifest.merge-min-count`` commits as lakecore's committer does; every commit
replaces ``--churn`` files, like a compaction), with 1-byte data files on disk. Then, each in a
fresh process, times ``expire_snapshots`` over the whole history in one call and in calls of the
default ``snapshot.expire.limit`` (50), and prints wall time and peak RSS (``VmHWM``) with the
RSS before the expiry as the baseline. Writes ``bench/out/expire.json`` and the ``## expire``
section of ``bench/RESULTS.md``. Its issue set no target for it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

import pyarrow as pa

from lakecore import CatalogFactory, Schema
from lakecore.format.binary_row import encode_row
from lakecore.format.manifest import DataFileMeta, FileKind, FileSource, ManifestEntry
from lakecore.format.snapshot import CommitKind, Snapshot
from lakecore.format.stats import SimpleStats
from lakecore.store.manifest_io import merge_entries

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    OUT_DIR,
    load_note,
    machine_info,
    machine_line,
    mib,
    publish,
    render_table,
    summary_row,
)

EMPTY = SimpleStats(encode_row([], []), encode_row([], []), ())


def build(warehouse: str, snapshots: int, files: int, churn: int) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.int64())])
    cat = CatalogFactory.create({"warehouse": warehouse})
    cat.create_database("db", ignore_if_exists=True)
    cat.create_table("db.t", Schema.from_pyarrow_schema(
        schema, primary_keys=["id"], options={"bucket": "100", "write-only": "true"}))
    t = cat.get_table("db.t")
    mio, fio, sm = t.manifest_io(), t.file_io, t.snapshot_manager
    part = t.partition_codec.encode(())
    counter = iter(range(10**9))
    merge_min = t.options.manifest_merge_min_count
    rng = random.Random(7)

    def new_file(bucket: int) -> ManifestEntry:
        name = f"data-bench-{next(counter)}.parquet"
        fio.write_bytes(f"{t.paths.bucket_path((), bucket)}/{name}", b"x")
        meta = DataFileMeta(name, 1, 1, EMPTY.min_values, EMPTY.max_values, EMPTY, EMPTY, 0, 0,
                            0, 0, creation_time_millis=0, delete_row_count=0,
                            file_source=FileSource.APPEND, value_stats_cols=())
        return ManifestEntry(FileKind.ADD, part, bucket, 100, meta)

    live = {e.identifier(): e for e in (new_file(i % 100) for i in range(files))}
    base: list = []
    delta = mio.write_manifests(list(live.values()))
    start = int(time.time() * 1000) - 10 * 86_400_000
    for sid in range(1, snapshots + 1):
        if sid > 1:
            base = base + delta
            if len(base) >= merge_min:
                base = mio.write_manifests(sorted(live.values(), key=lambda e: e.bucket))
            gone = rng.sample(list(live), churn)
            changes = [_delete(live.pop(k)) for k in gone]
            added = [new_file(rng.randrange(100)) for _ in range(churn)]
            live.update((e.identifier(), e) for e in added)
            delta = mio.write_manifests(changes + added)
        b_name, b_size = mio.write_manifest_list(base)
        d_name, d_size = mio.write_manifest_list(delta)
        sm.try_create(Snapshot(
            id=sid, schema_id=0, base_manifest_list=b_name, base_manifest_list_size=b_size,
            delta_manifest_list=d_name, delta_manifest_list_size=d_size,
            commit_user="bench", commit_identifier=sid,
            commit_kind=CommitKind.APPEND if sid == 1 else CommitKind.COMPACT,
            time_millis=start + sid * 1000, total_record_count=files, delta_record_count=0))
    assert len(merge_entries(mio.read_entries(
        mio.read_manifest_list(sm.latest().base_manifest_list)
        + mio.read_manifest_list(sm.latest().delta_manifest_list)))) == files


def _delete(e: ManifestEntry) -> ManifestEntry:
    return ManifestEntry(FileKind.DELETE, e.partition, e.bucket, e.total_buckets, e.file)


CHILD = """
import json, sys, time
from datetime import datetime, timedelta
from lakecore import CatalogFactory
from lakecore.maintenance import ExpireConfig, expire_snapshots
warehouse, limit = sys.argv[1], int(sys.argv[2])
table = CatalogFactory.create({"warehouse": warehouse}).get_table("db.t")
def vm(key):  # kB from /proc (VmHWM is per address space; ru_maxrss survives fork+exec)
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
rss0 = vm("VmHWM")
cfg = ExpireConfig(1, 1, timedelta(0), limit)
t0 = time.perf_counter()
calls = removed = files = 0
while True:
    r = expire_snapshots(table, dry_run=False, config=cfg,
                         now=datetime.now() + timedelta(days=1))
    calls += 1
    removed += r.snapshots_removed
    files += r.files_removed
    if not r.snapshots_removed:
        break
print(json.dumps({"limit": limit, "calls": calls, "snapshots_removed": removed,
                  "files_removed": files, "seconds": round(time.perf_counter() - t0, 2),
                  "rss_before_mb": round(rss0 / 1024, 1),
                  "peak_rss_mb": round(vm("VmHWM") / 1024, 1)}))
"""


COLUMNS = ("limit", "calls", "snapshots removed", "files removed", "seconds", "RSS before",
           "peak RSS", "history built in")


def _cells(res: dict[str, Any]) -> list[str]:
    return [str(res["limit"]), str(res["calls"]), f"{res['snapshots_removed']:,}",
            f"{res['files_removed']:,}", f"{res['seconds']:.2f}", mib(res["rss_before_mb"]),
            mib(res["peak_rss_mb"]), f"{res['build_seconds']:.1f} s"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--snapshots", type=int, default=1000)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--churn", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="smoke test: 100 x 1,000 files")
    args = ap.parse_args()
    if args.quick:
        args.snapshots, args.files = 100, 1000
    machine = machine_info()
    os.makedirs(OUT_DIR, exist_ok=True)
    results = []
    for limit in (args.snapshots + 1, 50):
        with tempfile.TemporaryDirectory(prefix="bench-expire-", dir=OUT_DIR) as wh:
            t0 = time.perf_counter()
            build(wh, args.snapshots, args.files, args.churn)
            built = round(time.perf_counter() - t0, 1)
            out = subprocess.run([sys.executable, "-c", CHILD, wh, str(limit)],
                                 capture_output=True, text=True, check=True)
            res = json.loads(out.stdout)
            res["build_seconds"] = built
            results.append(res)
    notes = [
        f"{args.snapshots:,} snapshots x {args.files:,} live files (100 buckets), {args.churn} "
        "files replaced per commit, 1-byte data files; expire_snapshots over the whole history "
        f"in one call (limit {args.snapshots + 1}) and in calls of the default "
        "snapshot.expire.limit (50), each in a fresh process: wall time and that process's "
        "VmHWM; its RSS before the expiry is the baseline.",
        f"parent (history builder) peak RSS "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB.",
        load_note(machine),
    ]
    summary = [summary_row(f"expire {r['snapshots_removed']:,} snapshots (limit {r['limit']})",
                           "lakecore", r["seconds"] * 1000, "ms", rss=r["peak_rss_mb"])
               for r in results]
    cells = [_cells(r) for r in results]
    text, body = render_table(machine_line(machine), COLUMNS, cells, notes)
    publish("expire", {"machine": machine, "args": vars(args), "results": results,
                       "notes": notes, "summary": summary}, text, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
