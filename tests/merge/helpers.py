"""Tiny builders for KV tables in the data-file layout of a primary-key table."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lakecore.format.kv import SEQUENCE_NUMBER, VALUE_KIND, RowKind
from lakecore.merge import MergeEngine, MergeSpec

KIND = {"+I": RowKind.INSERT, "-U": RowKind.UPDATE_BEFORE, "+U": RowKind.UPDATE_AFTER,
        "-D": RowKind.DELETE}


def kv_table(
    rows: list[dict[str, Any]], types: dict[str, pa.DataType], keys: tuple[str, ...] = ("k",)
) -> pa.Table:
    """``rows`` hold the table columns plus ``seq`` and ``kind`` (``"+I"`` ... or an int)."""
    cols: dict[str, pa.Array] = {}
    for k in keys:
        cols[f"_KEY_{k}"] = pa.array([r[k] for r in rows], types[k])
    cols[SEQUENCE_NUMBER] = pa.array([r["seq"] for r in rows], pa.int64())
    cols[VALUE_KIND] = pa.array(
        [int(KIND[r["kind"]]) if isinstance(r["kind"], str) else r["kind"] for r in rows],
        pa.int8(),
    )
    for name, t in types.items():
        cols[name] = pa.array([r.get(name) for r in rows], t)
    return pa.table(cols)


def spec_for(
    engine: MergeEngine, types: dict[str, pa.DataType], keys: tuple[str, ...] = ("k",), **kw: Any
) -> MergeSpec:
    return MergeSpec(
        engine=engine,
        key_columns=tuple(f"_KEY_{k}" for k in keys),
        value_columns=tuple(types),
        primary_keys=keys,
        **kw,
    )


def seq_rows(*rows: tuple, names: tuple[str, ...], start: int = 0) -> list[dict[str, Any]]:
    """Rows ``(kind, v1, v2, ...)`` numbered with increasing sequence numbers."""
    return [
        {"seq": start + i, "kind": r[0], **dict(zip(names, r[1:]))} for i, r in enumerate(rows)
    ]
