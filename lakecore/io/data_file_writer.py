"""Rolling Parquet writer: sorted chunks in, data files rolled at ``target-file-size`` out.

Each file's ``DataFileMeta`` carries what readers and compaction rely on: row count, min/max
key (first/last row, since input is sorted), key and value stats and the sequence range (from
the Parquet footer, as Paimon's Java writer takes them: ``footer_stats``), level, delete count
and file source.

Encoding runs one chunk behind the caller, on a shared worker thread (Parquet encoding and
compression release the GIL): while chunk N is encoded the caller counts its retractions,
then reads, merges or sorts chunk N+1. A writer in a bucket task (one of several buckets
flushed or compacted side by side) encodes on its own thread: the other buckets keep the
cores busy. Chunks of one writer are written strictly in order, one at a time; ``close``,
``take_results`` and ``abort`` wait for the chunk in flight, and a failed chunk's error is
raised to the caller at its next call.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakecore.format.binary_row import EMPTY_ROW, encode_row
from lakecore.format.kv import KEY_PREFIX, SEQUENCE_NUMBER, VALUE_KIND
from lakecore.format.manifest import DataFileMeta, FileSource, creation_time_from_epoch_millis
from lakecore.format.stats import EMPTY_STATS
from lakecore.io.dictionary_choice import DictionaryChoices, SharedChoices, dictionary_columns
from lakecore.io.footer_stats import footer_stats, leaf_columns
from lakecore.io.parquet_footer import HoldingSink, arrow_schema_value, patch_footer
from lakecore.io.parquet_layout import ParquetLayout, parquet_layout
from lakecore.io.stats_collector import ChunkStats, StatsCollector
from lakecore.options.parse import StatsMode
from lakecore.schema.types import DataField, DataType
from lakecore.store.file_io import FileIO
from lakecore.store.paths import PathFactory
from lakecore.utils.faults import CrashStep, maybe_crash
from lakecore.utils.threads import encode_pool, in_bucket_task

# Rows per Parquet row group; also the granularity at which we check the rolling size.
ROW_GROUP_ROWS = 256 * 1024
# A column's dictionary page may grow to this before Arrow falls back to plain encoding.
DICTIONARY_PAGE_LIMIT = 64 * 1024


@dataclass(frozen=True)
class _PartStats:
    """What a written part adds to its file's metadata that the Parquet footer does not hold
    (column statistics and the sequence range come from the footer, ``footer_stats``)."""

    rows: int
    deletes: int = 0
    first_key: tuple | None = None
    last_key: tuple | None = None
    # the statistics of the columns the footer has none for (INT96 timestamps: ``_int96``)
    measured: ChunkStats | None = None


@dataclass(frozen=True)
class FileWriterSpec:
    """Everything constant across the files of one (partition, bucket) writer."""

    schema_id: int
    file_schema: pa.Schema
    key_fields: tuple[DataField, ...]  # trimmed primary key; empty for append tables
    value_fields: tuple[DataField, ...]
    target_file_size: int
    compression: str = "zstd"
    stats_mode: StatsMode = StatsMode("truncate", 16)
    # the dictionary choices of this spec's files, shared (``dictionary_choice``)
    dictionary_choices: DictionaryChoices = field(default_factory=DictionaryChoices,
                                                  compare=False, repr=False)
    # rows per row group, judged from a writer's first chunk and shared the same way (``_step``)
    row_group_rows: SharedChoices[int] = field(default_factory=SharedChoices,
                                               compare=False, repr=False)

    @property
    def is_kv(self) -> bool:
        return bool(self.key_fields)

    # what follows is derived once per spec (the writers of every bucket of a commit share it)
    @cached_property
    def layout(self) -> ParquetLayout:
        """The Parquet types the files get: Paimon's (``parquet_layout``)."""
        return parquet_layout(self.file_schema)

    @cached_property
    def dictionary_columns(self) -> tuple[str, ...]:
        """The file's columns that may get a Parquet dictionary: all but the ones unique in a
        key-value file (``_KEY_*``, ``_SEQUENCE_NUMBER``, the value of a one-field key)."""
        unique = {KEY_PREFIX + f.name for f in self.key_fields}
        if unique:
            unique.add(SEQUENCE_NUMBER)
        if len(self.key_fields) == 1:
            unique.add(self.key_fields[0].name)
        return tuple(n for n in self.file_schema.names if n not in unique)

    @cached_property
    def measured_dictionary_columns(self) -> tuple[str, ...]:
        """Of ``dictionary_columns``, the ones whose dictionary is judged per file from its
        rows (``dictionary_choice``): all but ``_VALUE_KIND``, which holds at most four
        values and always keeps its dictionary (two-bit indices)."""
        return tuple(n for n in self.dictionary_columns if not (self.is_kv and n == VALUE_KIND))

    @cached_property
    def fixed_dictionary_columns(self) -> tuple[str, ...]:
        """Of ``dictionary_columns``, the ones that always keep their dictionary."""
        measured = set(self.measured_dictionary_columns)
        return tuple(n for n in self.dictionary_columns if n not in measured)

    @cached_property
    def stats_types(self) -> dict[str, DataType]:
        """The type of each statistics column (``_KEY_*`` and the values)."""
        types = {f.name: f.type for f in self.value_fields}
        types.update((KEY_PREFIX + f.name, f.type) for f in self.key_fields)
        return types

    @cached_property
    def int96_stats_columns(self) -> tuple[str, ...]:
        """The statistics columns the footer has no statistics for (INT96 timestamps:
        measured from the rows, ``RollingFileWriter._measure``), keys first."""
        int96 = set(self.layout.int96_columns)
        return tuple(n for n in (*(KEY_PREFIX + f.name for f in self.key_fields),
                                 *(f.name for f in self.value_fields)) if n in int96)

    @cached_property
    def atomic_value_fields(self) -> tuple[DataField, ...]:
        """The value fields a file has statistics for: BinaryRow stats hold atomic values
        only, so nested columns are left out and the file names the columns it has stats for
        (``_VALUE_STATS_COLS``), as Paimon does."""
        return tuple(f for f in self.value_fields if not f.type.is_nested)

    @cached_property
    def leaves(self) -> dict[str, int]:
        """Each column's first Parquet leaf (``footer_stats.leaf_columns``)."""
        return leaf_columns(self.file_schema)


def _size_class(rows: int) -> int:
    """Files whose first parts have rows of the same power of two are judged alike."""
    return rows.bit_length()


def share_dictionary_choice(spec: FileWriterSpec, partition: Sequence[Any],
                            first: pa.Table) -> None:
    """Judge once, from ``first`` (rows of one bucket of ``partition``, in the file schema),
    which columns keep a dictionary in every file of the partition that starts with a part
    of its size, whatever its bucket, until ``spec.dictionary_choices.unshare()``."""
    choice = dictionary_columns(first, spec.measured_dictionary_columns, DICTIONARY_PAGE_LIMIT)
    spec.dictionary_choices.share((tuple(partition), _size_class(first.num_rows)), choice)


class RollingFileWriter:
    """Writes sorted rows to Parquet data files rolled at the target size, with their metadata."""

    def __init__(
        self,
        file_io: FileIO,
        paths: PathFactory,
        partition: Sequence[Any],
        bucket: int,
        spec: FileWriterSpec,
        level: int,
        file_source: FileSource,
        changelog: bool = False,
        first_sequence: int = 0,
    ) -> None:
        self.file_io, self.paths, self.spec = file_io, paths, spec
        self.partition, self.bucket = tuple(partition), bucket
        self.level, self.file_source, self.changelog = level, file_source, changelog
        self._next_seq = first_sequence  # append tables: one sequence number per row
        self._writer: pq.ParquetWriter | None = None
        self._stream: pa.NativeFile | None = None
        self._sink: HoldingSink | None = None  # files with INT96 columns: footer rewritten
        self._in_flight: Future[None] | None = None
        self._name = ""
        self._path = ""
        self._layout = spec.layout
        self._types = spec.stats_types
        self._int96 = list(spec.int96_stats_columns)
        self._int96_measure = StatsCollector(self._int96, [self._types[n] for n in self._int96],
                                             StatsMode("full"))
        self._reset_file_state()
        self.results: list[DataFileMeta] = []
        self.written_paths: list[str] = []
        self._pending: list[pa.Table] = []  # rows gathered for the next row group
        self._pending_rows = 0
        self._step_rows: int | None = None  # rows per row group, from the first chunk's width
        self._measured_dictionary = spec.measured_dictionary_columns
        self._fixed_dictionary = list(spec.fixed_dictionary_columns)
        self._leaves = spec.leaves

    def _reset_file_state(self) -> None:
        spec = self.spec
        mode = spec.stats_mode
        self._key_stats = StatsCollector([KEY_PREFIX + f.name for f in spec.key_fields],
                                         [f.type for f in spec.key_fields], mode)
        atomic = spec.atomic_value_fields
        self._value_stats_cols = (
            None if len(atomic) == len(spec.value_fields) else tuple(f.name for f in atomic)
        )
        self._value_stats = StatsCollector([f.name for f in atomic], [f.type for f in atomic], mode)
        self._int96_stats = StatsCollector(self._int96, [self._types[n] for n in self._int96],
                                           StatsMode("full"))
        self._rows = 0
        self._deletes = 0
        self._min_seq: int | None = None
        self._max_seq: int | None = None
        self._first_key: tuple | None = None
        self._last_key: tuple | None = None

    def _open(self, first: pa.Table) -> None:
        self._name = (
            self.paths.new_changelog_file_name()
            if self.changelog
            else self.paths.new_data_file_name()
        )
        self._path = self.paths.data_file_path(self.partition, self.bucket, self._name)
        self._stream = self.file_io.open_output_stream(self._path)
        self.written_paths.append(self._path)
        layout = self._layout
        self._sink = HoldingSink(self._stream) if layout.has_int96 else None
        # Columns unique within a file (the key, a single-field key's value column, sequence
        # numbers) are written without a dictionary: building one costs more than the whole
        # encoding of a small file and saves nothing. Of the others, the ones whose first rows
        # encode smaller with a dictionary keep it (parquet-mr's rule, io/dictionary_choice;
        # a choice serves the next files of this spec, partition, bucket and size), falling
        # back to plain after 64 KiB. Every column gets Paimon's Parquet type (io/
        # parquet_layout): DECIMAL(p <= 18) as INT32 / INT64 (Arrow's store_decimal_as_integer
        # is Paimon's rule); TIMESTAMP(p > 6) as INT96, without statistics, its footer
        # rewritten as the file closes (``_sink``, io/parquet_footer).
        self._writer = pq.ParquetWriter(
            self._sink if self._sink is not None else self._stream,
            layout.schema,
            compression=self.spec.compression,
            store_decimal_as_integer=layout.decimals_as_integers,
            write_statistics=layout.statistics_columns(),
            use_dictionary=self._fixed_dictionary + self._dictionary(first),
            dictionary_pagesize_limit=DICTIONARY_PAGE_LIMIT,
        )

    def _dictionary(self, first: pa.Table) -> list[str]:
        """The measured columns that keep a dictionary in a file starting with ``first``:
        the partition's shared judgment for its size (``share_dictionary_choice``), else this
        bucket's."""
        choices, size = self.spec.dictionary_choices, _size_class(first.num_rows)
        shared = choices.shared((self.partition, size))
        if shared is not None:
            return shared
        return choices.choose((self.partition, self.bucket, size), lambda: dictionary_columns(
            first, self._measured_dictionary, DICTIONARY_PAGE_LIMIT))

    def write(self, chunk: pa.Table) -> None:
        """Append a chunk (already sorted after everything written before it). Chunks are
        gathered into row groups of ``_step`` rows, whatever size they come in; each full
        group is encoded while the caller measures its statistics and goes on (the module
        docstring)."""
        if chunk.num_rows == 0:
            return
        chunk = chunk.select(self.spec.file_schema.names)
        self._pending.append(chunk)
        self._pending_rows += chunk.num_rows
        step = self._step(chunk)
        if self._pending_rows < step:
            return
        rows = pa.concat_tables(self._pending)
        full = rows.num_rows - rows.num_rows % step
        rest = rows.slice(full)
        self._pending, self._pending_rows = ([rest] if rest.num_rows else []), rest.num_rows
        self._submit(rows.slice(0, full), step)

    def _step(self, chunk: pa.Table) -> int:
        """Rows per row group: ``ROW_GROUP_ROWS``, fewer for wide rows, so that the size
        check runs at least every ~target bytes of input. Judged from a writer's first chunk
        and shared like a dictionary choice: by the spec's next files in the same partition
        and bucket (``nbytes`` of a sliced string column walks its offsets)."""
        if self._step_rows is None:
            self._step_rows = self.spec.row_group_rows.choose(
                (self.partition, self.bucket), lambda: self._rows_per_group(chunk))
        return self._step_rows

    def _rows_per_group(self, chunk: pa.Table) -> int:
        per_row = max(1, chunk.nbytes // max(1, chunk.num_rows))
        return max(1024, min(ROW_GROUP_ROWS, self.spec.target_file_size // per_row))

    def _flush_pending(self) -> None:
        """Encode what is gathered, whatever its size (the file is closing)."""
        if self._pending:
            rows = pa.concat_tables(self._pending)
            self._pending, self._pending_rows = [], 0
            self._submit(rows, self._step(rows))

    def _submit(self, chunk: pa.Table, step: int) -> None:
        self._wait()
        parts = [chunk.slice(start, step) for start in range(0, chunk.num_rows, step)]
        measured: Future[list[_PartStats]] = Future()
        if in_bucket_task():
            # the other buckets keep the cores busy: encode here, no hand-off
            measured.set_result([self._measure(p) for p in parts])
            self._write_now(parts, step, measured)
            return
        self._in_flight = encode_pool().submit(self._write_now, parts, step, measured)
        try:
            measured.set_result([self._measure(p) for p in parts])
        except BaseException as e:
            measured.set_exception(e)
            raise

    def _wait(self) -> None:
        """Wait for the chunk in flight; its error, if any, is raised here."""
        pending, self._in_flight = self._in_flight, None
        if pending is not None:
            pending.result()

    def _write_now(self, parts: list[pa.Table], step: int,
                   measured: Future[list[_PartStats]]) -> None:
        for i, part in enumerate(parts):
            if self._writer is None:
                self._open(part)
            assert self._writer is not None and self._stream is not None
            self._writer.write_table(self._layout.convert(part), step)
            maybe_crash(CrashStep.WRITE_MID_DATA_FILE)
            self._add(measured.result()[i])
            if self._stream.tell() >= self.spec.target_file_size:
                self._close_file()

    def _measure(self, part: pa.Table) -> _PartStats:
        """What one part adds besides its column statistics: retractions and its first and
        last key (pure: runs on the caller's thread during encoding)."""
        measured = self._int96_measure.measure(part) if self._int96 else None
        if not self.spec.is_kv:
            return _PartStats(part.num_rows, measured=measured)
        kinds = part.column(VALUE_KIND)
        kinds = kinds.chunk(0) if kinds.num_chunks == 1 else kinds.combine_chunks()
        # -U is 1 and -D is 3: the retractions are the odd kinds
        deletes = int(np.count_nonzero(kinds.to_numpy() & 1))
        names = [KEY_PREFIX + f.name for f in self.spec.key_fields]
        return _PartStats(part.num_rows, deletes,
                          tuple(part.column(n)[0].as_py() for n in names),
                          tuple(part.column(n)[part.num_rows - 1].as_py() for n in names),
                          measured)

    def _add(self, m: _PartStats) -> None:
        """Fold a written part into the open file's metadata."""
        self._rows += m.rows
        if m.measured is not None:
            self._int96_stats.add(m.measured)
        if self.spec.is_kv:
            self._deletes += m.deletes
            if self._first_key is None:
                self._first_key = m.first_key
            self._last_key = m.last_key
        else:
            if self._min_seq is None:
                self._min_seq = self._next_seq
            self._next_seq += m.rows
            self._max_seq = self._next_seq - 1

    def _fold_footer(self, metadata: pq.FileMetaData) -> None:
        """The file's column statistics and sequence range, from the footer Arrow wrote; a
        column the footer has no minimum/maximum for (``footer_stats``) is measured from the
        written file, an INT96 column (no footer statistics at all) from its rows."""
        names = [*self._key_stats.names, *self._value_stats.names]
        if self.spec.is_kv:
            names.append(SEQUENCE_NUMBER)
        int96 = set(self._int96)
        found = footer_stats(metadata, [n for n in names if n not in int96], self._leaves)
        stats = found.stats
        if found.unknown:
            stats = self._measure_written(names, stats, found.unknown)
        if int96:
            stats = self._with_int96(names, stats)
        keys = len(self._key_stats.names)
        values = keys + len(self._value_stats.names)
        self._key_stats.add(ChunkStats(stats.nulls[:keys], stats.mins[:keys], stats.maxs[:keys]))
        self._value_stats.add(ChunkStats(stats.nulls[keys:values], stats.mins[keys:values],
                                         stats.maxs[keys:values]))
        if self.spec.is_kv:
            self._min_seq, self._max_seq = stats.mins[values], stats.maxs[values]

    def _measure_written(self, names: list[str], stats: ChunkStats,
                         unknown: Sequence[str]) -> ChunkStats:
        """``stats`` (of ``names`` less the INT96 columns) with the ``unknown`` columns
        measured from the written file."""
        with self.file_io.open_input_file(self._path) as src:
            rows = pq.ParquetFile(src).read(columns=list(unknown))
        collector = StatsCollector(list(unknown), [self._types[n] for n in unknown],
                                   StatsMode("full"))
        measured = collector.measure(rows)
        nulls, mins, maxs = list(stats.nulls), list(stats.mins), list(stats.maxs)
        footer_names = [n for n in names if n not in set(self._int96)]
        for j, name in enumerate(unknown):
            i = footer_names.index(name)
            nulls[i], mins[i], maxs[i] = measured.nulls[j], measured.mins[j], measured.maxs[j]
        return ChunkStats(nulls, mins, maxs)

    def _with_int96(self, names: list[str], stats: ChunkStats) -> ChunkStats:
        """The statistics of ``names``: ``stats`` (from the footer, of the other columns)
        with the INT96 columns' measured from the file's rows."""
        measured = self._int96_stats
        at = {n: i for i, n in enumerate(measured.names)}
        nulls, mins, maxs = [], [], []
        footer = iter(range(len(stats.nulls)))
        for name in names:
            if name in at:
                j = at[name]
                nulls.append(measured.nulls[j])
                mins.append(measured.mins[j])
                maxs.append(measured.maxs[j])
            else:
                i = next(footer)
                nulls.append(stats.nulls[i])
                mins.append(stats.mins[i])
                maxs.append(stats.maxs[i])
        return ChunkStats(nulls, mins, maxs)

    def _close_file(self) -> None:
        if self._writer is None:
            return
        assert self._stream is not None
        if self._sink is not None:  # INT96 columns: the footer is rewritten as it is written
            self._sink.hold()
            self._writer.close()
            layout = self._layout
            self._sink.finish(lambda footer: patch_footer(
                footer, layout.int96_leaves, arrow_schema_value(layout.file_schema)))
        else:
            self._writer.close()
        size = self._stream.tell()
        self._stream.close()  # the file exists now (an object store's upload completes)
        # Arrow's view of the footer (INT96 columns as 12-byte binary without statistics)
        footer = self._writer.writer.metadata
        self._writer, self._stream, self._sink = None, None, None
        self._fold_footer(footer)
        if self.spec.is_kv:
            key_types = [f.type for f in self.spec.key_fields]
            min_key = encode_row(self._first_key or (), key_types)
            max_key = encode_row(self._last_key or (), key_types)
            key_stats = self._key_stats.result()
        else:
            min_key = max_key = EMPTY_ROW
            key_stats = EMPTY_STATS
        self.results.append(
            DataFileMeta(
                file_name=self._name,
                file_size=size,
                row_count=self._rows,
                min_key=min_key,
                max_key=max_key,
                key_stats=key_stats,
                value_stats=self._value_stats.result(),
                min_sequence_number=self._min_seq or 0,
                max_sequence_number=self._max_seq or 0,
                schema_id=self.spec.schema_id,
                level=self.level,
                extra_files=(),
                creation_time_millis=creation_time_from_epoch_millis(int(time.time() * 1000)),
                delete_row_count=self._deletes,
                embedded_index=None,
                file_source=self.file_source,
                value_stats_cols=self._value_stats_cols,
                external_path=None,
                first_row_id=None,
                write_cols=None,
            )
        )
        self._reset_file_state()
        maybe_crash(CrashStep.WRITE_AFTER_DATA_FILE)

    def close(self) -> list[DataFileMeta]:
        self._flush_pending()
        self._wait()
        self._close_file()
        return self.results

    def take_results(self) -> list[DataFileMeta]:
        """Close the open file and hand over its results; the writer can go on writing."""
        self._flush_pending()
        self._wait()
        self._close_file()
        out, self.results, self.written_paths = self.results, [], []
        return out

    def abort(self) -> None:
        self._pending, self._pending_rows = [], 0
        try:
            self._wait()
        except BaseException:  # noqa: S110 - aborting anyway; the caller has the first error
            pass
        if self._writer is not None:
            try:
                self._writer.close()
            finally:
                assert self._stream is not None
                self._stream.close()
                self._writer, self._stream, self._sink = None, None, None
        for p in self.written_paths:
            self.file_io.delete_quietly(p)
        self.results = []
