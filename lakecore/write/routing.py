"""Row routing: rows -> the table's columns and types, each row's kind, partition and Paimon
bucket, cut into one slice per (partition, bucket).

``route`` is the one routing of lakecore's writers: ``TableWrite.write_arrow`` routes with it,
and so does the Spark ingest's first stage, whose second stage hands the slices it receives
to ``TableWrite.write_slices`` without routing them again. It is columnar (pyarrow and numpy:
one cast per column, one hash per bucket key, one sort to group), with no per-row Python.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lakecore.errors import SchemaError
from lakecore.format.bucket import POSTPONE_BUCKET, bucket_ids
from lakecore.store.file_store import FileStore
from lakecore.utils.arrow import group_by_columns
from lakecore.write.conform import conform, row_kinds

BUCKET_COLUMN = "__lakecore_bucket"
KIND_COLUMN = "__lakecore_kind"


@dataclass(frozen=True)
class Slice:
    """Rows of one (partition, bucket): the table's columns in its types, and their kinds."""

    partition: tuple[Any, ...]
    bucket: int
    rows: pa.Table
    kinds: pa.Array | None  # int8 RowKind of each row (primary-key tables); None: append table

    @property
    def key(self) -> tuple[tuple[Any, ...], int]:
        return self.partition, self.bucket


def route(table: FileStore, data: pa.Table,
          static_partition: Mapping[str, Any] | None = None) -> list[Slice]:
    """Check and cast ``data`` to the table (every check the writers would make, made now),
    compute each row's kind (primary-key tables), partition and bucket, and return one
    ``Slice`` per (partition, bucket), ordered by partition values (nulls first) then bucket;
    rows keep their input order within a slice.

    Every partition is checked before anything is returned: its values must make a path, and
    with ``static_partition`` (an overwrite) every row must belong to that partition.
    """
    schema = table.schema
    rows = conform(data, schema.row_type, list(schema.primary_keys))
    kinds = row_kinds(rows, table.options.rowkind_field) if table.is_primary_key_table else None
    bucket_count = table.options.bucket
    if bucket_count > 0:
        keys = list(schema.bucket_keys)
        types = [schema.row_type.field(k).type for k in keys]
        ids = bucket_ids([rows.column(k) for k in keys], types, bucket_count)
    elif bucket_count == POSTPONE_BUCKET:  # the dedicated compaction assigns real buckets
        ids = np.full(rows.num_rows, POSTPONE_BUCKET, dtype=np.int32)
    else:
        ids = np.zeros(rows.num_rows, dtype=np.int32)
    routed = rows if kinds is None else rows.append_column(KIND_COLUMN, kinds)
    routed = routed.append_column(BUCKET_COLUMN, pa.array(ids, pa.int32()))
    groups = group_by_columns(routed, [*schema.partition_keys, BUCKET_COLUMN])
    for values, _ in groups:
        _check_partition(table, values[:-1], static_partition)
    names = schema.row_type.names
    return [
        Slice(tuple(values[:-1]), int(values[-1]), part.select(names),
              None if kinds is None else part.column(KIND_COLUMN).combine_chunks())
        for values, part in groups
    ]


def _check_partition(table: FileStore, partition: tuple[Any, ...],
                     static_partition: Mapping[str, Any] | None) -> None:
    table.paths.partition_path(partition)  # rejects values that cannot be a path
    keys = table.partition_keys
    for k, v in (static_partition or {}).items():
        got = partition[keys.index(k)]
        if str(got) != str(v):
            raise SchemaError(f"row with {k}={got!r} does not belong to the overwritten "
                              f"partition {dict(static_partition or {})}")


def join_slices(slices: Iterable[Slice]) -> list[Slice]:
    """Slices of the same (partition, bucket) joined into one, their rows in arrival order;
    ordered as ``route`` orders them (partition values, nulls first, then bucket)."""
    by_key: dict[tuple[tuple[Any, ...], int], list[Slice]] = {}
    for s in slices:
        by_key.setdefault(s.key, []).append(s)
    joined = [_join(group) for group in by_key.values()]
    return sorted(joined, key=lambda s: (tuple((v is not None, v) for v in s.partition),
                                         s.bucket))


def _join(group: list[Slice]) -> Slice:
    if len(group) == 1:
        return group[0]
    first = group[0]
    rows = pa.concat_tables([s.rows for s in group])
    kinds = None if first.kinds is None else pa.concat_arrays([s.kinds for s in group
                                                               if s.kinds is not None])
    return Slice(first.partition, first.bucket, rows, kinds)
