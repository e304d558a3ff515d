"""Columnar lookup of a deletion-vector compaction (Paimon's ``LookupLevels`` for DVs).

A compaction lifts level-0 rows into a level >= 1 run. A key of those rows that is still live
in a file the compaction leaves alone (a higher level) is superseded: its row there is marked
in that file's deletion vector instead of rewriting the file. With merge engines that combine
versions (partial-update, aggregation, or a ``sequence.field``) the old row is also merged into
the new one first, so it is read back and handed to the merge as the oldest run.

Everything here is columnar. ``superseded`` reads only the key and ``_VALUE_KIND`` columns
of each higher-level file and finds the new keys in them (binary search of a sorted integer
key, a hash lookup otherwise), narrowed to live rows by kind and vector: per-file position
arrays, the form vectors take. ``live_keys`` (every live key of some files, with file and
position) serves the check for a key live twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.format.deletion_vector import deletion_mask
from lakecore.format.kv import KEY_PREFIX, SEQUENCE_NUMBER, VALUE_KIND
from lakecore.format.manifest import DataFileMeta
from lakecore.io.data_file_reader import data_file_path, read_data_file
from lakecore.schema.types import to_arrow
from lakecore.store.file_store import FileStore
from lakecore.utils.arrow import bool_array
from lakecore.utils.threads import ordered_map

FILE_COLUMN = "__lakecore_file"
POS_COLUMN = "__lakecore_pos"
_LIVE_KINDS = pa.array([0, 2], pa.int8())  # +I, +U


def key_columns(table: FileStore) -> list[str]:
    return [KEY_PREFIX + k for k in table.schema.trimmed_primary_keys]


def kv_columns(table: FileStore) -> list[str]:
    return key_columns(table) + [SEQUENCE_NUMBER, VALUE_KIND] + table.schema.row_type.names


def apply_vector(t: pa.Table, positions: np.ndarray | None, offset: int = 0) -> pa.Table:
    """``t`` (rows ``offset`` .. ``offset + len`` of a file) without its deleted positions."""
    if positions is None or positions.size == 0:
        return t
    lo = np.searchsorted(positions, offset)
    hi = np.searchsorted(positions, offset + t.num_rows)
    local = positions[lo:hi].astype(np.int64) - offset
    keep = np.ones(t.num_rows, dtype=bool)
    keep[local] = False
    return t.filter(bool_array(keep))


def live_keys(table: FileStore, partition: Sequence[Any], bucket: int,
              files: Sequence[DataFileMeta], vectors: Mapping[str, np.ndarray]) -> pa.Table:
    """Key columns of the live (+I/+U, not deleted) rows of ``files``, with each row's file
    index (into ``files``) and position in its file."""
    keys = key_columns(table)
    parts = []
    for i, f in enumerate(files):
        t = read_data_file(table, partition, bucket, f, keys + [VALUE_KIND])
        n = t.num_rows
        keep = np.asarray(pc.is_in(t.column(VALUE_KIND), _LIVE_KINDS).to_numpy(
            zero_copy_only=False), dtype=bool)
        v = vectors.get(f.file_name)
        if v is not None and v.size:
            keep &= deletion_mask(v, n, data_file_path(table, partition, bucket, f))
        t = t.select(keys).append_column(FILE_COLUMN, pa.array(np.full(n, i, np.int32)))
        t = t.append_column(POS_COLUMN, pa.array(np.arange(n, dtype=np.int64)))
        parts.append(t.filter(bool_array(keep)))
    if not parts:
        return _empty(table)
    return pa.concat_tables(parts)


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """``a`` (sorted) without repeats: linear, unlike ``np.unique``, which sorts or hashes."""
    if a.size < 2:
        return a
    keep = np.empty(a.size, dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def level0_keys(table: FileStore, partition: Sequence[Any], bucket: int,
                files: Sequence[DataFileMeta]) -> pa.Table:
    """The key columns of every row of ``files`` (all row kinds: a -D supersedes too);
    a key may repeat (the lookup only tests membership)."""
    keys = key_columns(table)
    parts = [read_data_file(table, partition, bucket, f, keys) for f in files]
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts)


def superseded(table: FileStore, partition: Sequence[Any], bucket: int,
               files: Sequence[DataFileMeta], vectors: Mapping[str, np.ndarray],
               new_keys: pa.Table) -> dict[str, np.ndarray]:
    """Sorted positions, per file name of ``files``, of the live (+I/+U, not deleted) rows
    whose key is among ``new_keys``: the rows a compaction that lifts those keys supersedes.

    One file at a time, reading only its key and ``_VALUE_KIND`` columns. A single integer
    key is found by binary search of the sorted new keys in the file's keys (a data file is
    sorted by key; checked, strictly increasing), otherwise by a hash lookup (``is_in`` for
    one key column, a semi join for several); the hits are then narrowed by kind and vector."""
    keys = key_columns(table)
    out: dict[str, np.ndarray] = {}
    if new_keys.num_rows == 0:
        return out
    probe = KeyProbe(new_keys.select(keys))

    def one(f: DataFileMeta) -> np.ndarray:
        t = read_data_file(table, partition, bucket, f, keys + [VALUE_KIND])
        n = t.num_rows
        positions = probe.positions(t.select(keys)) if n else np.zeros(0, np.int64)
        if positions.size == 0:
            return positions
        kinds = t.column(VALUE_KIND).to_numpy()
        positions = positions[(kinds[positions] == 0) | (kinds[positions] == 2)]  # +I, +U
        v = vectors.get(f.file_name)
        if v is not None and v.size and positions.size:
            deleted = ~deletion_mask(v, n, data_file_path(table, partition, bucket, f))
            positions = positions[~deleted[positions]]
        return positions

    for f, positions in zip(files, ordered_map(one, files)):  # files read side by side
        if positions.size:
            out[f.file_name] = positions.astype(np.uint64)
    return out


class KeyProbe:
    """Finds the rows of a file whose key is among a fixed set of keys (see ``superseded``)."""

    def __init__(self, keys: pa.Table) -> None:
        self.names = keys.column_names
        self.keys = keys
        self.sorted: np.ndarray | None = None
        if len(self.names) == 1 and pa.types.is_integer(keys.schema.field(0).type):
            self.sorted = np.sort(keys.column(0).to_numpy())
        self.value_set = keys.column(0).combine_chunks() if len(self.names) == 1 else None

    def positions(self, t: pa.Table) -> np.ndarray:
        """Sorted row positions of ``t`` (the file's key columns) holding one of the keys."""
        n = t.num_rows
        if self.sorted is not None:
            col = t.column(0).to_numpy()
            if n < 2 or bool(np.all(col[1:] > col[:-1])):
                at = np.searchsorted(col, self.sorted)
                ok = at < n
                at = at[ok]
                at = at[col[at] == self.sorted[ok]]
                return sorted_unique(at.astype(np.int64))
        if self.value_set is not None:
            column = t.column(0)
            hit = pc.is_in(column, value_set=self.value_set.cast(column.type))
            return np.flatnonzero(np.asarray(hit.to_numpy(zero_copy_only=False), dtype=bool))
        probe = t.append_column(POS_COLUMN, pa.array(np.arange(n, dtype=np.int64)))
        hits = probe.join(self.keys.cast(t.schema), keys=self.names, join_type="left semi")
        return np.sort(hits.column(POS_COLUMN).to_numpy())


def _empty(table: FileStore) -> pa.Table:
    cols = key_columns(table)
    rt = table.schema.row_type
    fields = [pa.field(c, to_arrow(rt.field(c[len(KEY_PREFIX):]).type)) for c in cols]
    return pa.schema(fields + [pa.field(FILE_COLUMN, pa.int32()),
                               pa.field(POS_COLUMN, pa.int64())]).empty_table()


def has_duplicate_keys(live: pa.Table, keys: Sequence[str]) -> bool:
    """Whether a key is live twice (a table that had no vectors when its levels >= 1 were
    written: their overlaps were resolved by merging on read)."""
    if live.num_rows < 2:
        return False
    distinct = live.select(list(keys)).group_by(list(keys)).aggregate([])
    return bool(distinct.num_rows < live.num_rows)


def positions_by_file(hits: pa.Table, files: Sequence[DataFileMeta]) -> dict[str, np.ndarray]:
    """Matched rows as sorted positions per file name."""
    if hits.num_rows == 0:
        return {}
    idx = hits.column(FILE_COLUMN).to_numpy()
    pos = hits.column(POS_COLUMN).to_numpy()
    order = np.lexsort((pos, idx))
    idx, pos = idx[order], pos[order]
    bounds = np.flatnonzero(np.diff(idx)) + 1
    out = {}
    for chunk_idx, chunk_pos in zip(np.split(idx, bounds), np.split(pos, bounds), strict=True):
        out[files[int(chunk_idx[0])].file_name] = chunk_pos.astype(np.uint64)
    return out


def old_rows(table: FileStore, partition: Sequence[Any], bucket: int,
             files: Sequence[DataFileMeta], marks: Mapping[str, np.ndarray]) -> pa.Table:
    """The full key-value rows at ``marks`` (the superseded versions), in key order: the
    oldest run of the merge that folds them into the new rows."""
    cols = kv_columns(table)
    parts = []
    by_name = {f.file_name: f for f in files}
    for name, positions in marks.items():
        t = read_data_file(table, partition, bucket, by_name[name], cols)
        parts.append(t.take(pa.array(positions.astype(np.int64))))
    if not parts:
        return pa.schema([]).empty_table()
    out = pa.concat_tables(parts)
    order = pc.sort_indices(out, sort_keys=[(k, "ascending") for k in key_columns(table)]
                            + [(SEQUENCE_NUMBER, "ascending")])
    return out.take(order)
