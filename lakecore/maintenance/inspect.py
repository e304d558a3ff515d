"""A table's state as plain data: snapshots, live files per partition / bucket / level, the
index layer (HASH buckets of a dynamic-bucket table, deletion vectors per bucket) and what a
dedicated compaction would do now."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from lakecore.compact.job import plan_compaction
from lakecore.errors import LakecoreValidationError
from lakecore.format.index_manifest import (
    DELETION_VECTORS_INDEX,
    HASH_INDEX,
    IndexManifestEntry,
)
from lakecore.format.manifest import ManifestEntry
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
    live: list[ManifestEntry] = []
    if latest is not None:
        mio = table.manifest_io()
        metas = mio.read_manifest_list(latest.base_manifest_list) + mio.read_manifest_list(
            latest.delta_manifest_list
        )
        live = list(merge_entries(mio.read_entries(metas)).values())
        for e in live:
            label = _label(table, e.partition)
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
    index_entries = table.index_entries(latest)
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
        "index_manifest": latest.index_manifest if latest else None,
        "hash_index": _hash_index(table, index_entries),
        "deletion_vectors": _deletion_vectors(table, index_entries, live),
        "compaction": _compaction(table),
    }


def _label(table: FileStore, partition: bytes) -> str:
    codec = table.partition_codec
    return "/".join(f"{k}={partition_value_string(v, t)}"
                    for k, v, t in zip(table.partition_keys, codec.decode(partition), codec.types))


def _hash_index(table: FileStore, entries: Sequence[IndexManifestEntry]) -> list[dict[str, Any]]:
    """Per partition, the buckets a dynamic-bucket table's HASH index assigns keys to, each with
    its number of keys (the index file's row count)."""
    parts: dict[str, dict[int, int]] = defaultdict(dict)
    for e in entries:
        if e.index_file.index_type == HASH_INDEX:
            parts[_label(table, e.partition)][e.bucket] = e.index_file.row_count
    return [{"partition": p, "buckets": len(b), "keys": sum(b.values()),
             "rows_per_bucket": {str(k): v for k, v in sorted(b.items())}}
            for p, b in sorted(parts.items())]


def _deletion_vectors(table: FileStore, entries: Sequence[IndexManifestEntry],
                      live: Sequence[ManifestEntry]) -> list[dict[str, Any]]:
    """Per bucket with deletion vectors: the deleted rows (sum of the vectors' cardinalities)
    over the rows of the data files that have one. A vector without a recorded cardinality
    is counted in ``unknown_cardinality`` and left out of the ratio."""
    rows = {(e.partition, e.bucket, e.file.file_name): e.file.row_count for e in live}
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for e in entries:
        if e.index_file.index_type != DELETION_VECTORS_INDEX:
            continue
        key = (_label(table, e.partition), e.bucket)
        b = out.setdefault(key, {"partition": key[0], "bucket": e.bucket, "index_files": 0,
                                 "files_with_vectors": 0, "deleted_rows": 0, "rows": 0,
                                 "unknown_cardinality": 0})
        b["index_files"] += 1
        for r in (e.index_file.dv_ranges or {}).values():
            b["files_with_vectors"] += 1
            if r.cardinality is None:
                b["unknown_cardinality"] += 1
                continue
            b["deleted_rows"] += r.cardinality
            b["rows"] += rows.get((e.partition, e.bucket, r.data_file_name), 0)
    for b in out.values():
        b["deleted_ratio"] = round(b["deleted_rows"] / b["rows"], 4) if b["rows"] else None
    return [out[k] for k in sorted(out)]


def _compaction(table: FileStore) -> dict[str, Any]:
    """What a dedicated compaction would do now (``compact.job.plan_compaction``)."""
    try:
        plan = plan_compaction(table)
    except LakecoreValidationError as e:
        return {"error": str(e)}
    return {"snapshot_id": plan.snapshot_id, "buckets_to_compact": len(plan.tasks),
            "buckets_considered": plan.buckets_considered,
            "skipped_reason": plan.skipped_reason}


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
    lines += _format_index(r)
    return "\n".join(lines)


def _format_index(r: dict[str, Any]) -> list[str]:
    lines = []
    if r.get("index_manifest"):
        lines.append(f"  index manifest {r['index_manifest']}")
    for h in r.get("hash_index", []):
        part = h["partition"] or "(unpartitioned)"
        per = ", ".join(f"{b}: {n}" for b, n in h["rows_per_bucket"].items())
        lines.append(f"    {part:<30} HASH index: {h['buckets']} buckets, {h['keys']} keys "
                     f"(bucket: keys {per})")
    for d in r.get("deletion_vectors", []):
        part = d["partition"] or "(unpartitioned)"
        ratio = d["deleted_ratio"]
        shown = "-" if ratio is None else f"{100 * ratio:.1f}%"
        lines.append(f"    {part:<30} bucket {d['bucket']:<4} deletion vectors on "
                     f"{d['files_with_vectors']} files: {d['deleted_rows']} of {d['rows']} rows "
                     f"deleted ({shown})")
    c = r.get("compaction")
    if c:
        if "error" in c:
            lines.append(f"  compaction: cannot plan ({c['error']})")
        elif c["skipped_reason"]:
            lines.append(f"  compaction: nothing to do ({c['skipped_reason']})")
        else:
            lines.append(f"  compaction: {c['buckets_to_compact']} of "
                         f"{c['buckets_considered']} buckets to compact")
    return lines
