"""Row routing: rows -> the table's columns and types, each row's kind, partition and Paimon
bucket, cut into one slice per (partition, bucket).

``route`` is the one routing of lakecore's writers: ``TableWrite.write_arrow`` routes with it,
and so does the Spark ingest's first stage, whose second stage hands the slices it receives
to ``TableWrite.write_slices`` without routing them again. It is columnar (pyarrow and numpy:
one cast per column, one hash per bucket key, one sort to group), with no per-row Python.

A dynamic-bucket table (``bucket = -1`` with a primary key) has no bucket function: each
partition's key hashes go to an ``assign`` callback (the writer's ``DynamicBucketIndex``),
or, in the Spark ingest's first stage, to ``channels``: each row then gets the assigner
channel that owns its key (Paimon's ``computeAssigner``), as ``Slice.assign_id`` with bucket
``UNASSIGNED``, and the write task that owns the channel assigns the buckets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.errors import SchemaError
from lakecore.format.bucket import POSTPONE_BUCKET, bucket_ids, hash_row, hash_rows
from lakecore.format.kv import RowKind
from lakecore.merge.sort import packed_order
from lakecore.store.file_store import FileStore
from lakecore.utils.arrow import Groups, constant_columns, gather, group_by_columns, group_codes
from lakecore.write.bucket_assigner import compute_assigner
from lakecore.write.conform import conform, row_kinds
from lakecore.write.dynamic_bucket import is_dynamic_bucket_table

BUCKET_COLUMN = "__lakecore_bucket"
KIND_COLUMN = "__lakecore_kind"
UNASSIGNED = -1  # a dynamic-bucket slice whose bucket its assigner has yet to pick
KeyAssigner = Callable[[tuple[Any, ...], np.ndarray], np.ndarray]
"""(partition, int32 key hashes) -> int32 bucket per row: a dynamic-bucket writer's index."""


@dataclass(frozen=True)
class AssignerChannels:
    """The Spark ingest's assigner layout: ``num_channels`` tasks, ``num_assigners`` of which
    share each partition (``bucket_assigner.num_assigners_for``)."""

    num_channels: int
    num_assigners: int


@dataclass(frozen=True)
class Slice:
    """Rows of one (partition, bucket): the table's columns in its types, and their kinds."""

    partition: tuple[Any, ...]
    bucket: int
    rows: pa.Table
    kinds: pa.Array | None  # int8 RowKind of each row (primary-key tables); None: append table
    assign_id: int | None = None  # dynamic buckets, bucket UNASSIGNED: the owning assigner

    @property
    def key(self) -> tuple[tuple[Any, ...], int]:
        return self.partition, self.bucket


def route(table: FileStore, data: pa.Table,
          static_partition: Mapping[str, Any] | None = None, *,
          assign: KeyAssigner | None = None,
          channels: AssignerChannels | None = None) -> list[Slice]:
    """Check and cast ``data`` to the table (every check the writers would make, made now),
    compute each row's kind (primary-key tables), partition and bucket, and return one
    ``Slice`` per (partition, bucket), ordered by partition values (nulls first) then bucket.
    Within a slice, rows of one key keep their input order; a primary-key table's slices may
    come sorted by key (``_cut``), an append table's rows keep their input order.

    Every partition is checked before anything is returned: its values must make a path, and
    with ``static_partition`` (an overwrite) every row must belong to that partition.
    A dynamic-bucket table needs ``assign`` or ``channels`` (see the module docstring).
    """
    schema = table.schema
    rows = conform(data, schema.row_type, list(schema.primary_keys))
    kinds = row_kinds(rows, table.options.rowkind_field) if table.is_primary_key_table else None
    if kinds is not None and table.options.ignore_delete:
        # Paimon's RowKindFilter: with ignore-delete, -U/-D rows never reach a writer, so they
        # neither enter the input changelog nor touch a partition or a dynamic bucket's index
        keep = pc.or_(pc.equal(kinds, RowKind.INSERT.value),
                      pc.equal(kinds, RowKind.UPDATE_AFTER.value))
        if not pc.all(keep).as_py():
            rows, kinds = rows.filter(keep), kinds.filter(keep)
    if is_dynamic_bucket_table(table):
        return _route_dynamic(table, rows, kinds, static_partition, assign, channels)
    bucket_count = table.options.bucket
    if bucket_count > 0:
        keys = list(schema.bucket_keys)
        types = [schema.row_type.field(k).type for k in keys]
        ids = bucket_ids([rows.column(k) for k in keys], types, bucket_count)
    elif bucket_count == POSTPONE_BUCKET:  # the dedicated compaction assigns real buckets
        ids = np.full(rows.num_rows, POSTPONE_BUCKET, dtype=np.int32)
    else:
        ids = np.zeros(rows.num_rows, dtype=np.int32)
    partition_keys = list(schema.partition_keys)
    parts = group_codes(rows, partition_keys)
    for values in parts.values:
        _check_partition(table, values, static_partition)
    keys = list(schema.trimmed_primary_keys) if kinds is not None else []
    return [
        Slice(parts.values[code], bucket, part, None if kinds is None else part_kinds)
        for code, bucket, part, part_kinds in _cut(rows, kinds, partition_keys, parts, ids, keys)
    ]


def _cut(rows: pa.Table, kinds: pa.Array | None, partition_keys: list[str], parts: Groups,
         ids: np.ndarray, keys: list[str]
         ) -> Iterator[tuple[int, int, pa.Table, pa.Array | None]]:
    """(partition code, bucket, rows, kinds) of every (partition, bucket), in that order, from
    one packed sort and one gather. With ``keys`` (a primary-key table's trimmed key) each
    slice's rows come sorted by key, rows of one key in input order (a stable sort): the
    writers then find their buffers sorted (``merge.sort``). An append table's rows, and keys
    that do not pack into 64 bits, keep their input order. The partition columns are not
    gathered: a slice's are its partition's values repeated (``constant_columns``)."""
    n = rows.num_rows
    if n == 0:
        return
    if isinstance(kinds, pa.ChunkedArray):
        kinds = kinds.combine_chunks()
    codes = parts.codes
    if not codes.any() and ids.min() == ids.max():
        yield 0, int(ids[0]), rows, kinds  # one partition, one bucket: nothing to move
        return
    low = int(ids.min())
    span = int(ids.max()) - low + 1
    group = codes * span + (ids - low)  # each row's (partition, bucket), as one number
    order = packed_order([group], rows, keys) if keys else None
    if order is None:
        order = packed_order([group], rows, [])
    if order is None:  # more groups than 64 bits can pack
        order = np.argsort(group, kind="stable")
    taken = pa.array(order)
    moved = gather(rows.drop_columns(partition_keys), taken)
    kinds = None if kinds is None else kinds.take(taken)
    groups = group[order]
    bounds = [0, *(np.flatnonzero(groups[1:] != groups[:-1]) + 1).tolist(), n]
    for start, end in zip(bounds, bounds[1:]):
        code, bucket = divmod(int(groups[start]), span)
        piece = constant_columns(moved.slice(start, end - start), rows.schema,
                                 {name: parts.arrays[j][code]
                                  for j, name in enumerate(partition_keys)})
        yield (code, bucket + low, piece,
               None if kinds is None else kinds.slice(start, end - start))


def _route_dynamic(table: FileStore, rows: pa.Table, kinds: pa.Array | None,
                   static_partition: Mapping[str, Any] | None, assign: KeyAssigner | None,
                   channels: AssignerChannels | None) -> list[Slice]:
    """Dynamic buckets: key hashes per partition to the writer's index (``assign``) or to
    assigner channels (``channels``); slices ordered by partition, then bucket/channel."""
    if (assign is None) == (channels is None):
        raise ValueError("a dynamic-bucket table routes with exactly one of assign, channels")
    schema = table.schema
    keys = list(schema.bucket_keys)
    hashes = hash_rows([rows.column(k) for k in keys],
                       [schema.row_type.field(k).type for k in keys])
    names = schema.row_type.names
    routed = rows if kinds is None else rows.append_column(KIND_COLUMN, kinds)
    routed = routed.append_column(BUCKET_COLUMN, pa.array(hashes, pa.int32()))
    parts = group_by_columns(routed, list(schema.partition_keys))
    for values, _ in parts:
        _check_partition(table, values, static_partition)
    part_types = [schema.row_type.field(k).type for k in schema.partition_keys]
    out = []
    for values, part in parts:
        h = part.column(BUCKET_COLUMN).to_numpy()
        if channels is not None:
            ids = compute_assigner(hash_row(values, part_types), h, channels.num_channels,
                                   channels.num_assigners)
        else:
            assert assign is not None
            ids = assign(values, h)
        part = part.set_column(part.schema.get_field_index(BUCKET_COLUMN), BUCKET_COLUMN,
                               pa.array(ids, pa.int32()))
        for (bucket,), piece in group_by_columns(part, [BUCKET_COLUMN]):
            piece_kinds = None if kinds is None else piece.column(KIND_COLUMN).combine_chunks()
            if channels is not None:
                out.append(Slice(values, UNASSIGNED, piece.select(names), piece_kinds,
                                 int(bucket)))
            else:
                out.append(Slice(values, int(bucket), piece.select(names), piece_kinds))
    return out


def assign_slice(table: FileStore, s: Slice, assign: KeyAssigner) -> list[Slice]:
    """A dynamic-bucket slice routed to an assigner channel, cut by the buckets ``assign``
    gives its keys (the Spark ingest's write task); rows keep their order."""
    keys = list(table.schema.bucket_keys)
    hashes = hash_rows([s.rows.column(k) for k in keys],
                       [table.schema.row_type.field(k).type for k in keys])
    ids = pa.array(assign(s.partition, hashes), pa.int32())
    rows = s.rows if s.kinds is None else s.rows.append_column(KIND_COLUMN, s.kinds)
    rows = rows.append_column(BUCKET_COLUMN, ids)
    names = table.schema.row_type.names
    return [Slice(s.partition, int(b), piece.select(names),
                  None if s.kinds is None else piece.column(KIND_COLUMN).combine_chunks())
            for (b,), piece in group_by_columns(rows, [BUCKET_COLUMN])]


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
    by_key: dict[tuple[tuple[Any, ...], int, int | None], list[Slice]] = {}
    for s in slices:
        by_key.setdefault((*s.key, s.assign_id), []).append(s)
    joined = [_join(group) for group in by_key.values()]
    return sorted(joined, key=lambda s: (tuple((v is not None, v) for v in s.partition),
                                         s.bucket, -1 if s.assign_id is None else s.assign_id))


def _join(group: list[Slice]) -> Slice:
    if len(group) == 1:
        return group[0]
    first = group[0]
    rows = pa.concat_tables([s.rows for s in group])
    kinds = None if first.kinds is None else pa.concat_arrays([s.kinds for s in group
                                                               if s.kinds is not None])
    return Slice(first.partition, first.bucket, rows, kinds, first.assign_id)
