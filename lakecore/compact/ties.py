"""Level-0 rows a compaction must not lift: they tie with a higher-level record that beats them.

On equal sequence numbers the record of a level >= 1 beats a level-0 record (Paimon's
``LookupChangelogMergeFunctionWrapper.calculateResult``; ``merge/order.py``). Paimon's lookup
compaction writes the merged result for each key of its level-0 rows, so the winner travels
with the key. lakecore lifts level-0 rows as they are and lets reads merge the levels, which
gives the same answers except here: a level-0 row lifted to a level below the record it tied
with (levels are merged lowest last) would start to win. Under deduplicate and first-row
such a row contributes nothing to the merged result (the tying record wins whole), so the
compaction drops it instead, through the same position masks deletion vectors use.

Partial-update and aggregation fold every record, so their tied rows are kept (only the order
of two tied contributions can change; sums and counts cannot).

Cheap when nothing ties: only files whose sequence ranges overlap are read, and only their
key, sequence-field and ``_SEQUENCE_NUMBER`` columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lakecore.compact.lookup import FILE_COLUMN, POS_COLUMN, key_columns, positions_by_file
from lakecore.format.kv import SEQUENCE_NUMBER
from lakecore.format.manifest import DataFileMeta
from lakecore.io.data_file_reader import read_data_file
from lakecore.options import MergeEngine
from lakecore.store.file_store import FileStore


def _overlaps(f: DataFileMeta, others: Sequence[DataFileMeta]) -> bool:
    return any(f.min_sequence_number <= o.max_sequence_number
               and o.min_sequence_number <= f.max_sequence_number for o in others)


def tied_level0_rows(table: FileStore, partition: Sequence[Any], bucket: int,
                     level0: Sequence[DataFileMeta], above: Sequence[DataFileMeta],
                     engine: MergeEngine, sequence_fields: Sequence[str] = ()
                     ) -> dict[str, np.ndarray]:
    """Positions (sorted, per level-0 file name) of the rows of ``level0`` whose key, sequence
    fields and sequence number equal those of a row in ``above`` (files at levels >= 1 the
    compaction leaves alone). Empty unless the engine keeps one whole record per key."""
    if engine not in (MergeEngine.DEDUPLICATE, MergeEngine.FIRST_ROW):
        return {}
    l0 = [f for f in level0 if _overlaps(f, above)]
    if not l0:
        return {}
    up = [f for f in above if _overlaps(f, l0)]
    cols = key_columns(table) + list(sequence_fields) + [SEQUENCE_NUMBER]
    old = pa.concat_tables(
        [read_data_file(table, partition, bucket, f, cols) for f in up]
    ).group_by(cols).aggregate([])
    parts = []
    for i, f in enumerate(l0):
        t = read_data_file(table, partition, bucket, f, cols)
        n = t.num_rows
        t = t.append_column(FILE_COLUMN, pa.array(np.full(n, i, np.int32)))
        parts.append(t.append_column(POS_COLUMN, pa.array(np.arange(n, dtype=np.int64))))
    new = pa.concat_tables(parts)
    hits = new.join(old.cast(new.select(cols).schema), keys=cols, join_type="left semi")
    return positions_by_file(hits, l0)
