"""A table's state as plain data: snapshots, and live files per partition / bucket / level."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from lakecore.format.partition_string import partition_value_string
from lakecore.store.file_store import FileStore
from lakecore.store.manifest_io import merge_entries


def inspect_table(table: FileStore, max_snapshots: int = 20) -> dict[str, Any]:
    sm = table.snapshot_manager
    snaps = []
    for snap in sm.snapshots_backward():
        snaps.append(
            {
                "id": snap.id,
                "kind": snap.commit_kind.value,
                "commit_user": snap.commit_user,
                "commit_identifier": snap.commit_identifier,
                "time_millis": snap.time_millis,
                "total_record_count": snap.total_record_count,
                "delta_record_count": snap.delta_record_count,
            }
        )
        if len(snaps) >= max_snapshots:
            break
    latest = sm.latest()
    buckets: dict[tuple[str, int], dict[int, dict[str, int]]] = defaultdict(
        lambda: defaultdict(lambda: {"files": 0, "rows": 0, "bytes": 0})
    )
    if latest is not None:
        mio = table.manifest_io()
        metas = mio.read_manifest_list(latest.base_manifest_list) + mio.read_manifest_list(
            latest.delta_manifest_list
        )
        types = table.partition_codec.types
        for e in merge_entries(mio.read_entries(metas)).values():
            values = table.partition_codec.decode(e.partition)
            label = "/".join(
                f"{k}={partition_value_string(v, t)}"
                for k, v, t in zip(table.partition_keys, values, types)
            )
            lv = buckets[(label, e.bucket)][e.file.level]
            lv["files"] += 1
            lv["rows"] += e.file.row_count
            lv["bytes"] += e.file.file_size
    files = [
        {"partition": p, "bucket": b, "level": lvl, **stats}
        for (p, b), levels in sorted(buckets.items())
        for lvl, stats in sorted(levels.items())
    ]
    bucket_health = [_bucket_health(p, b, levels) for (p, b), levels in sorted(buckets.items())]
    return {
        "table": table.identifier,
        "path": table.table_path,
        "primary_keys": table.primary_keys,
        "partition_keys": table.partition_keys,
        "bucket": table.bucket,
        "latest_snapshot": latest.id if latest else None,
        "earliest_snapshot": sm.earliest_id(),
        "snapshots": snaps,
        "files": files,
        "buckets": bucket_health,
        "level0_files_pending": sum(b["level0_files"] for b in bucket_health),
        "total_files": sum(f["files"] for f in files),
        "total_rows_in_files": sum(f["rows"] for f in files),
        "total_bytes": sum(f["bytes"] for f in files),
    }


def _bucket_health(partition: str, bucket: int, levels: dict[int, dict[str, int]]
                   ) -> dict[str, Any]:
    """What compaction sees: sorted runs (each level-0 file is one; each level >= 1 is one),
    level-0 backlog, and size amplification (everything above the highest level, relative to
    it, in percent, as Paimon's universal compaction computes it)."""
    l0 = levels.get(0, {"files": 0, "bytes": 0})["files"]
    upper = [lvl for lvl in levels if lvl > 0]
    top = max(upper) if upper else None
    total = sum(v["bytes"] for v in levels.values())
    top_bytes = levels[top]["bytes"] if top is not None else 0
    amp = round(100.0 * (total - top_bytes) / top_bytes, 1) if top_bytes else None
    return {"partition": partition, "bucket": bucket, "sorted_runs": l0 + len(upper),
            "level0_files": l0, "size_amplification_percent": amp}


def format_report(r: dict[str, Any]) -> str:
    lines = [
        f"table {r['table']} at {r['path']}",
        f"  primary keys {r['primary_keys']}, partition keys {r['partition_keys']}, "
        f"bucket {r['bucket']}",
        f"  snapshots {r['earliest_snapshot']}..{r['latest_snapshot']}",
    ]
    for s in r["snapshots"]:
        lines.append(
            f"    #{s['id']:<5} {s['kind']:<9} records {s['total_record_count']:>12} "
            f"(delta {s['delta_record_count']:>+10})  by {s['commit_user']}"
            f"/{s['commit_identifier']}"
        )
    lines.append(f"  live files {r['total_files']}, rows {r['total_rows_in_files']}, "
                 f"bytes {r['total_bytes']}")
    for f in r["files"]:
        part = f["partition"] or "(unpartitioned)"
        lines.append(f"    {part:<30} bucket {f['bucket']:<4} level {f['level']}: "
                     f"{f['files']} files, {f['rows']} rows, {f['bytes']} bytes")
    lines.append(f"  level-0 files awaiting compaction: {r['level0_files_pending']}")
    for b in r["buckets"]:
        part = b["partition"] or "(unpartitioned)"
        amp = b["size_amplification_percent"]
        lines.append(f"    {part:<30} bucket {b['bucket']:<4} sorted runs {b['sorted_runs']}, "
                     f"level-0 {b['level0_files']}, size amp "
                     f"{'-' if amp is None else f'{amp}%'}")
    return "\n".join(lines)
