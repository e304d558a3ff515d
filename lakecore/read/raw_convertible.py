"""Which planned files can be read as plain files, without a merge (Paimon's *raw convertible*
splits, ``MergeTreeSplitGenerator`` / ``DataSplit.convertToRawFiles``).

A file is read raw when no merge can change its rows:

* an append table: every file (minus its deletion-vector rows);
* a primary-key table whose split is read as it is with deletion vectors (levels >= 1, no
  retraction rows: the split ``raw_with_vectors`` and every file with ``delete_row_count == 0``,
  exactly when ``SplitRead`` reads it without a merge);
* a primary-key split whose files are all at one level >= 1 with no retraction rows (one
  sorted run, e.g. after a full compaction);
* otherwise, per section of overlapping key ranges, a section of one file at a level >= 1 with
  no retraction rows (Paimon's per-section rule; level-0 files are not trusted, as in
  ``SplitRead``: pypaimon 2.1 records 0 deletes for files that hold -D rows). The other
  sections stay a split to merge: sections share no key, so each merges on its own.

Changelog, incremental and diff splits are never divided (they carry row kinds). A value in,
values out: no I/O beyond decoding the files' key bounds from their metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from lakecore.format.deletion_vector import DeletionFile
from lakecore.format.manifest import DataFileMeta
from lakecore.io.data_file_reader import data_file_path
from lakecore.io.formats import format_of
from lakecore.read.overlap import key_sections
from lakecore.read.scan import Split
from lakecore.store.file_store import FileStore


@dataclass(frozen=True)
class RawFile:
    """One data file read as it is: where it is, its format and schema version, and where its
    deletion vector is (None: no row deleted)."""

    path: str
    file_name: str
    format: str
    schema_id: int
    row_count: int
    file_size: int
    partition: tuple[Any, ...]
    bucket: int
    meta: DataFileMeta
    deletion_file: DeletionFile | None = None


@dataclass(frozen=True)
class Division:
    """A split divided: the files read raw, and what is left to merge (None: nothing)."""

    raw: tuple[RawFile, ...]
    merge: Split | None


def _clean(f: DataFileMeta) -> bool:
    """A compacted file (level >= 1) without retraction rows (Paimon: an unknown count is 0)."""
    return f.level > 0 and not f.delete_row_count


def divide_split(table: FileStore, split: Split) -> Division:
    """``split``'s raw files and the part of it that must merge (module docstring)."""
    if split.is_changelog or split.is_diff:
        return Division((), split)
    if not table.is_primary_key_table:
        return Division(_raw(table, split, split.files), None)
    files = split.files
    if split.raw_with_vectors and all(f.delete_row_count == 0 for f in files):
        return Division(_raw(table, split, files), None)  # exactly SplitRead's raw case
    if all(_clean(f) for f in files) and len({f.level for f in files}) <= 1:
        return Division(_raw(table, split, files), None)
    schema = table.schema
    key_types = [schema.row_type.field(k).type for k in schema.trimmed_primary_keys]
    raw: list[DataFileMeta] = []
    rest: list[DataFileMeta] = []
    for section in key_sections(files, key_types):
        if len(section) == 1 and _clean(section[0].file):
            raw.append(section[0].file)
        else:
            rest.extend(b.file for b in section)
    if not rest:
        return Division(_raw(table, split, raw), None)
    order = {f.file_name: i for i, f in enumerate(files)}
    rest.sort(key=lambda f: order[f.file_name])  # the scan's order (by sequence number)
    return Division(_raw(table, split, raw), replace(split, files=tuple(rest)))


def _raw(table: FileStore, split: Split, files: tuple[DataFileMeta, ...] | list[DataFileMeta]
         ) -> tuple[RawFile, ...]:
    vectors = dict(split.deletion_files)
    out = []
    for f in files:
        path = data_file_path(table, split.partition, split.bucket, f)
        out.append(RawFile(path, f.file_name, format_of(path), f.schema_id, f.row_count,
                           f.file_size, tuple(split.partition), split.bucket, f,
                           vectors.get(f.file_name)))
    return tuple(out)
