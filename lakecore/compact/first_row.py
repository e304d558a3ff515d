"""The lookup of a first-row compaction (Paimon's ``FirstRowMergeFunctionWrapper``).

Paimon compacts a first-row table through ``LookupMergeTreeCompactRewriter``: every key a
compaction lifts out of level 0 is looked up in the levels above the output level
(``LookupLevels.lookup(key, outputLevel + 1)``, key-only: ``PersistEmptyProcessor``), and a key
found there is dropped, since the record up there came first. So no key is held by two levels
>= 1 of a first-row bucket, and Java reads a bucket without level-0 files raw, file by file
(``MergeTreeSplitGenerator``). Every record of such a compaction goes through
``FirstRowMergeFunction.add``, which refuses -U/-D unless ``ignore-delete``: a retraction in a
level-0 file fails the compaction (and a writer's compaction on write fails the write).

Columnar: only key columns (and ``_VALUE_KIND``) are read. The level-0 keys are probed into
each higher-level file (binary search or hash lookup, ``lookup.KeyProbe``), and the keys found
there are probed back into the level-0 files, so memory follows level 0, not the bucket.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.compact.lookup import KeyProbe, key_columns, level0_keys
from lakecore.errors import MergeError
from lakecore.format.kv import KEY_PREFIX, VALUE_KIND, RowKind
from lakecore.format.manifest import DataFileMeta
from lakecore.io.data_file_reader import read_data_file
from lakecore.store.file_store import FileStore
from lakecore.utils.threads import ordered_map


def refuse_retractions(table: FileStore, partition: Sequence[Any], bucket: int,
                       files: Sequence[DataFileMeta]) -> None:
    """MergeError naming the first -U/-D of ``files`` (those whose ``delete_row_count`` is not
    known to be 0), as ``FirstRowMergeFunction.add`` refuses it without ``ignore-delete``."""
    keys = key_columns(table)
    for f in files:
        if f.delete_row_count == 0:
            continue
        t = read_data_file(table, partition, bucket, f, keys + [VALUE_KIND])
        kinds = t.column(VALUE_KIND)
        retract = pc.or_(pc.equal(kinds, RowKind.UPDATE_BEFORE.value),
                         pc.equal(kinds, RowKind.DELETE.value))
        hits = np.flatnonzero(retract.to_numpy(zero_copy_only=False))
        if hits.size:
            row = int(hits[0])
            raise MergeError(
                "first-row merge engine can not accept DELETE/UPDATE_BEFORE records "
                f"(key {_key_text(t, keys, row)}, "
                f"{RowKind(int(kinds[row].as_py())).short_string}, level-0 file "
                f"{f.file_name}); configure 'ignore-delete' to ignore them"
            )


def _key_text(t: pa.Table, keys: Sequence[str], row: int) -> str:
    return ", ".join(f"{c.removeprefix(KEY_PREFIX)}={t.column(c)[row].as_py()!r}" for c in keys)


def known_level0_rows(table: FileStore, partition: Sequence[Any], bucket: int,
                      level0: Sequence[DataFileMeta], higher: Sequence[DataFileMeta]
                      ) -> dict[str, np.ndarray]:
    """Sorted positions, per file name of ``level0``, of the rows whose key some file of
    ``higher`` (the bucket's files above the output level) holds in any row."""
    if not level0 or not higher:
        return {}
    keys = key_columns(table)
    new_keys = level0_keys(table, partition, bucket, level0)
    if new_keys.num_rows == 0:
        return {}
    probe = KeyProbe(new_keys)

    def found_in(f: DataFileMeta) -> pa.Table:
        t = read_data_file(table, partition, bucket, f, keys)
        if t.num_rows == 0:
            return t
        return t.take(pa.array(probe.positions(t)))

    found = [t for t in ordered_map(found_in, higher) if t.num_rows]
    if not found:
        return {}
    back = KeyProbe(pa.concat_tables(found) if len(found) > 1 else found[0])
    out: dict[str, np.ndarray] = {}
    for f in level0:
        t = read_data_file(table, partition, bucket, f, keys)
        positions = back.positions(t) if t.num_rows else np.zeros(0, np.int64)
        if positions.size:
            out[f.file_name] = positions.astype(np.uint64)
    return out
