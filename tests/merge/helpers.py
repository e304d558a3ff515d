"""Tiny builders for KV tables in the data-file layout of a primary-key table."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lakecore.format.kv import SEQUENCE_NUMBER, VALUE_KIND, RowKind
from lakecore.merge import MergeEngine, MergeSpec
from lakecore.options import CoreOptions
from lakecore.options.registry import parse_aggregate_function

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
    """A spec built directly; aggregate functions may be given by their option spelling."""
    if "aggregate_functions" in kw:
        kw["aggregate_functions"] = {
            c: parse_aggregate_function(f) for c, f in kw["aggregate_functions"].items()
        }
    if kw.get("default_aggregate_function") is not None:
        kw["default_aggregate_function"] = parse_aggregate_function(
            kw["default_aggregate_function"]
        )
    return MergeSpec(
        engine=engine,
        key_columns=tuple(f"_KEY_{k}" for k in keys),
        value_columns=tuple(types),
        primary_keys=keys,
        **kw,
    )


def spec_from_map(
    options: dict[str, str],
    *,
    key_columns: tuple[str, ...],
    value_columns: tuple[str, ...],
    primary_keys: tuple[str, ...],
) -> MergeSpec:
    """``MergeSpec.from_options`` over a plain option map, read the way a stored table's map is
    (``strict=False``: only the merge's own rules refuse a setting)."""
    options = CoreOptions.from_map(
        options, primary_keys=primary_keys, column_names=value_columns, strict=False
    )
    return MergeSpec.from_options(options, key_columns=key_columns, value_columns=value_columns)


def seq_rows(*rows: tuple, names: tuple[str, ...], start: int = 0) -> list[dict[str, Any]]:
    """Rows ``(kind, v1, v2, ...)`` numbered with increasing sequence numbers."""
    return [
        {"seq": start + i, "kind": r[0], **dict(zip(names, r[1:]))} for i, r in enumerate(rows)
    ]
