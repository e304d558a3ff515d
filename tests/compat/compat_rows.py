"""Rows, models and small lakecore helpers shared by the two-way compatibility tests.

The "wide" schema carries one column of every type the compat tests cover, and ``wide_row``
derives every value from ``(id, version)`` so a model can rebuild the expected rows without
remembering them. ``apply`` is Paimon's deduplicate merge engine in plain Python.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lakecore.table import FileStoreTable
from tests.compat.pypaimon_runner import canonical

Row = dict[str, Any]
Model = dict[tuple[Any, ...], Row]

DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")
KEY = ("dt", "id")
T0 = dt.datetime(2024, 1, 1, 12, 0, 0)

WIDE_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("dt", pa.string(), nullable=False),
        pa.field("i8", pa.int8()),
        pa.field("i16", pa.int16()),
        pa.field("i32", pa.int32()),
        pa.field("f32", pa.float32()),
        pa.field("f64", pa.float64()),
        pa.field("s", pa.string()),
        pa.field("b", pa.binary()),
        pa.field("bo", pa.bool_()),
        pa.field("d", pa.date32()),
        pa.field("tus", pa.timestamp("us")),
        pa.field("tms", pa.timestamp("ms")),
        pa.field("m10", pa.decimal128(10, 2)),
        pa.field("m38", pa.decimal128(38, 6)),
        pa.field("rk", pa.string()),  # the rowkind.field column: +I, -U, +U, -D
    ]
)
APPEND_SCHEMA = pa.schema([f for f in WIDE_SCHEMA if f.name != "rk"])
NULLABLE = [f.name for f in WIDE_SCHEMA if f.nullable and f.name != "rk"]


def wide_row(id_: int, day: str, version: int, kind: str = "+I") -> Row:
    """A row whose every value follows from (id, version): short and long (> 7 bytes) strings
    and binaries, unicode, negative numbers, big decimals, and a null column now and then."""
    n = id_ * 31 + version * 7
    # 2 to 50 bytes; the long ones pass the 16 characters manifest stats keep (truncate(16)).
    text = "é" * (n % 3) + f"v{version}" + ("-long-ü-漢字-truncated-stats" * (n % 2))
    row: Row = {
        "id": id_,
        "dt": day,
        "i8": (n % 256) - 128,
        "i16": (n * 37 % 65536) - 32768,
        "i32": n * 1_000_003 % 2_000_000_000 - 1_000_000_000,
        "f32": (n % 1000) / 8 - 60,  # exact in float32
        "f64": n / 3 - 1000,
        "s": text,
        "b": bytes([n % 256]) * (1 + n % 12),
        "bo": n % 2 == 0,
        "d": dt.date(2024, 1, 1) + dt.timedelta(days=n % 400 - 200),
        "tus": T0 + dt.timedelta(seconds=n, microseconds=n % 999_999),
        "tms": T0 + dt.timedelta(minutes=n, milliseconds=n % 1000),
        "m10": decimal.Decimal(n * 137 % 10_000_000 - 5_000_000).scaleb(-2),
        "m38": decimal.Decimal(f"{(n * 7919) % 10**12}{n:020d}.{n % 10**6:06d}"),
        "rk": kind,
    }
    # One nullable column (rotating) is null in about every fifth row.
    if n % 5 == 0:
        row[NULLABLE[n % len(NULLABLE)]] = None
    return row


def step(op: str, warehouse: str | Path, table: str, **kwargs: Any) -> dict[str, Any]:
    """One ``paimon_script`` step."""
    return {"op": op, "warehouse": warehouse, "table": table, **kwargs}


def apply(model: Model, rows: Iterable[Row], key: Sequence[str] = KEY) -> Model:
    """Paimon's deduplicate merge engine: the last record of a key wins; -U/-D retract it."""
    merged = dict(model)
    for r in rows:
        k = tuple(r[c] for c in key)
        if r.get("rk", "+I") in ("+I", "+U"):
            merged[k] = r
        else:
            merged.pop(k, None)
    return merged


def table_of(rows: Iterable[Row], schema: pa.Schema = WIDE_SCHEMA) -> pa.Table:
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows],
                                schema=schema)


def expected(rows: Iterable[Row] | Model, schema: pa.Schema = WIDE_SCHEMA,
             key: Sequence[str] = KEY) -> list[Row]:
    values = rows.values() if isinstance(rows, dict) else rows
    return canonical(table_of(values, schema), list(key))


def lc_read(table: FileStoreTable, snapshot_id: int | None = None) -> pa.Table:
    """lakecore's full read (optionally time-travelled), as Arrow."""
    if snapshot_id is not None:
        table = table.copy({"scan.snapshot-id": str(snapshot_id)})
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


def lc_files(table: FileStoreTable, snapshot_id: int | None = None) -> set[tuple[Any, ...]]:
    """lakecore's plan as (partition, bucket, file, level, rows, min seq, max seq, deletes)."""
    if snapshot_id is not None:
        table = table.copy({"scan.snapshot-id": str(snapshot_id)})
    return {
        (tuple(s.partition), s.bucket, f.file_name, f.level, f.row_count,
         f.min_sequence_number, f.max_sequence_number, f.delete_row_count)
        for s in table.new_read_builder().new_scan().plan().splits()
        for f in s.files
    }


def paimon_files(plan: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
    """The same tuples from a ``paimon_plan`` result."""
    return {
        (tuple(s["partition"]), s["bucket"], f["file_name"], f["level"], f["row_count"],
         f["min_sequence_number"], f["max_sequence_number"], f["delete_row_count"])
        for s in plan
        for f in s["files"]
    }


def lc_snapshots(table: FileStoreTable) -> list[dict[str, Any]]:
    """lakecore's snapshots in the shape of ``paimon_snapshots`` (the fields both decode)."""
    return [
        {
            "id": s.id,
            "schema_id": s.schema_id,
            "commit_kind": s.commit_kind.value,
            "commit_user": s.commit_user,
            "commit_identifier": s.commit_identifier,
            "total_record_count": s.total_record_count,
            "delta_record_count": s.delta_record_count,
            "time_millis": s.time_millis,
            "base_manifest_list": s.base_manifest_list,
            "delta_manifest_list": s.delta_manifest_list,
        }
        for s in table.snapshot_manager.snapshots()
    ]


def comparable_snapshots(snapshots: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keys = ("id", "schema_id", "commit_kind", "commit_user", "commit_identifier",
            "total_record_count", "delta_record_count", "time_millis", "base_manifest_list",
            "delta_manifest_list")
    return [{k: s[k] for k in keys} for s in snapshots]


def keys_by_bucket_dir(table_dir: Path, key: Sequence[str]) -> dict[tuple[Any, ...], str]:
    """Which ``[partition/]bucket-N`` directory each key's data files sit in, read straight
    from the Parquet files (neither reader involved)."""
    placed: dict[tuple[Any, ...], str] = {}
    for path in sorted(table_dir.rglob("bucket-*/data-*.parquet")):
        where = str(path.parent.relative_to(table_dir))
        for row in pq.read_table(path, columns=list(key)).to_pylist():
            k = tuple(row[c] for c in key)
            assert placed.setdefault(k, where) == where, f"{k} in {placed[k]} and {where}"
    return placed


def lc_predicate(table: FileStoreTable, terms: Sequence[Sequence[Any]]) -> Any:
    """The AND of ``[field, method, *literals]`` terms (the driver's filter form) in lakecore."""
    builder = table.new_read_builder().new_predicate_builder()
    return builder.and_predicates(
        [getattr(builder, method)(field, *args) for field, method, *args in terms]
    )


def lc_filtered_read(table: FileStoreTable, terms: Sequence[Sequence[Any]]) -> pa.Table:
    rb = table.new_read_builder().with_filter(lc_predicate(table, terms))
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


_COMPARE = {
    "equal": lambda v, a: v == a,
    "not_equal": lambda v, a: v != a,
    "less_than": lambda v, a: v < a,
    "less_or_equal": lambda v, a: v <= a,
    "greater_than": lambda v, a: v > a,
    "greater_or_equal": lambda v, a: v >= a,
    "startswith": lambda v, a: v.startswith(a),
    "is_in": lambda v, a: v in a,
}


def matches(row: Row, terms: Sequence[Sequence[Any]]) -> bool:
    """The model's side of a filter: SQL semantics, a null never matches a comparison."""
    for field, method, *args in terms:
        value = row.get(field)
        if method in ("is_null", "is_not_null"):
            ok = (value is None) == (method == "is_null")
        elif value is None:
            ok = False
        elif method == "between":
            ok = args[0] <= value <= args[1]
        else:
            ok = _COMPARE[method](value, args[0])
        if not ok:
            return False
    return True


def filters_for(rows: list[Row]) -> list[list[list[Any]]]:
    """Filters (the driver's form) over every stats type: both readers prune files by the stats
    the writer recorded (value stats for append tables, key stats for primary-key tables),
    so a wrong min/max/null count loses rows."""
    middle = rows[len(rows) // 2 :] + rows
    some = next(r for r in middle if all(v is not None for v in r.values()))
    long_text = next(r["s"] for r in middle if r["s"] and len(r["s"]) > 16)
    return [
        [["id", "between", 3, 12]],
        [["id", "is_in", [1, 5, 29, 1000]]],
        [["s", "equal", some["s"]]],
        [["s", "equal", long_text]],
        [["s", "less_than", long_text]],
        [["s", "startswith", "é"]],
        [["i8", "less_than", 0], ["bo", "equal", True]],
        [["i16", "greater_or_equal", some["i16"]]],
        [["i32", "greater_than", 0]],
        [["f32", "less_than", -30.0]],
        [["f64", "greater_or_equal", some["f64"]]],
        [["dt", "equal", DAYS[1]], ["b", "is_not_null"]],
        [["s", "is_null"]],
        [["id", "greater_than", 10_000]],  # matches nothing: every file is pruned
    ]
