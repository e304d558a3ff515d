"""Data, model and table helpers shared by the Spark tests."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakecore.format.manifest import FileKind
from lakecore.table import FileStoreTable
from tests.core.helpers import make_table, read

SCHEMA = pa.schema([
    pa.field("dt", pa.string(), nullable=False),
    pa.field("id", pa.int64(), nullable=False),
    pa.field("v", pa.string()),
    pa.field("amount", pa.float64()),
    pa.field("ts", pa.timestamp("us")),
    pa.field("op", pa.string()),
])
KEY = ["dt", "id"]
OPTIONS = {"bucket": "3", "rowkind.field": "op"}
DTS = ("2026-11-01", "2026-11-02", "2026-11-03")
_TS0 = 1_790_000_000_000_000


def create(warehouse: str, name: str = "db.t", **options: str) -> FileStoreTable:
    return make_table(warehouse, SCHEMA, primary_keys=KEY, partition_keys=["dt"],
                      options={**OPTIONS, **options}, name=name)


def batch(rows: list[tuple[str, int, str]], version: int) -> pa.Table:
    """Rows of (dt, id, op); values derive from (id, version) so every update is visible."""
    dts, ids, ops = (list(x) for x in zip(*rows)) if rows else ([], [], [])
    ids_a = np.array(ids, dtype=np.int64)
    return pa.table({
        "dt": dts,
        "id": ids_a,
        "v": [f"v{i}-{version}" for i in ids],
        "amount": ids_a * 1.5 + version,
        "ts": pa.array(_TS0 + ids_a * 1_000_003 + version, pa.timestamp("us")),
        "op": ops,
    }, schema=SCHEMA)


def batches(n: int = 3, rows: int = 300, seed: int = 7) -> list[pa.Table]:
    """Batch 0 inserts; later batches insert new keys, update (+U) and delete (-D) old ones."""
    rng = np.random.default_rng(seed)
    live: set[tuple[str, int]] = set()
    out = []
    next_id = 0
    for version in range(n):
        rows_: list[tuple[str, int, str]] = []
        for _ in range(rows if version == 0 else rows // 3):
            key = (DTS[int(rng.integers(len(DTS)))], next_id)
            next_id += 1
            rows_.append((*key, "+I"))
            live.add(key)
        if version:
            old = sorted(live)
            picks = rng.choice(len(old), size=min(len(old), rows // 3), replace=False)
            for j, p in enumerate(picks):
                key = old[int(p)]
                if j % 3 == 0:
                    rows_.append((*key, "-D"))
                    live.discard(key)
                else:
                    rows_.append((*key, "+U"))
        out.append(batch(rows_, version))
    return out


def model(tables: list[pa.Table]) -> list[dict[str, Any]]:
    state: dict[tuple[str, int], dict[str, Any]] = {}
    for t in tables:
        for row in t.to_pylist():
            key = (row["dt"], row["id"])
            if row["op"] == "-D":
                state.pop(key, None)
            else:
                state[key] = row
    return [state[k] for k in sorted(state)]


def rows(table: FileStoreTable) -> list[dict[str, Any]]:
    return read(table, sort_by=KEY)


def write_parquet(directory: str, name: str, data: pa.Table) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{name}.parquet")
    pq.write_table(data, path)
    return path


def library_commit(table: FileStoreTable, data: pa.Table, identifier: int, user: str,
                   write_only: bool = True) -> None:
    """The same operation through the library alone: one writer, one commit (write-only, as
    the ingest job writes)."""
    if write_only:
        table = table.copy({"write-only": "true"})
    wb = table.new_stream_write_builder().with_commit_user(user)
    w = wb.new_write()
    w.write_arrow(data)
    wb.new_commit().commit(w.prepare_commit(), identifier)


def files_per_bucket(table: FileStoreTable, snapshot_id: int) -> Counter[tuple[bytes, int]]:
    """New data files per (partition, bucket) in one snapshot's delta."""
    snap = table.snapshot_manager.snapshot(snapshot_id)
    mio = table.manifest_io()
    entries = mio.read_entries(mio.read_manifest_list(snap.delta_manifest_list))
    return Counter((e.partition, e.bucket) for e in entries if e.kind is FileKind.ADD)


def data_files(table: FileStoreTable) -> list[str]:
    base = table.table_path
    return sorted(s.path for s in table.file_io.list_status(base, recursive=True)
                  if not s.is_dir and "/bucket-" in s.path)


@contextmanager
def session_conf(spark: Any, **settings: str | None) -> Iterator[None]:
    """The session with ``settings`` (keys with dots given as ``**{"a.b": v}``; None: unset)
    for the block; each key's own value (or its absence) comes back after."""
    before = {k: spark.conf.get(k, None) for k in settings}
    try:
        for k, v in settings.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)
        yield
    finally:
        for k, v in before.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)
