"""Which columns of a new Parquet data file get a dictionary.

Arrow's Parquet writer dictionary-encodes every column it is told to until the dictionary page
passes a size limit, and keeps the dictionary even where it saves nothing. A column of unique
values in a small file (one bucket's rows of one commit, often a few thousand) never reaches
the limit: its dictionary is built, written and decoded for nothing (about 0.3 ms of encoding
per column of 6k rows, 40 % of a small file's encoding, and a larger file).

parquet-mr, Paimon's Java writer, keeps a column's dictionary only when the first page encodes
smaller with it than plain (``FallbackValuesWriter``'s ``isCompressionSatisfying``); it falls
back to plain otherwise, and when the dictionary outgrows its page. This module makes the same
choice before the file is opened, from the first rows it gets: for each candidate column the
number of distinct values is estimated from an evenly spaced sample, and the column keeps its
dictionary when ``distinct * width + rows * index_bits / 8 < rows * width`` (the dictionary
and its indices are smaller than the plain values) and the dictionary fits in the page limit.

The estimate inverts the expected number of distinct values in a uniform sample,
``E[seen] = d * (1 - exp(-s / d))``: a sample with no repeat reads as all values distinct.
Columns of other types (nested, boolean) keep the dictionary, as before; a wrong guess costs
size or time, never correctness: both encodings read back the same values.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Generic, TypeVar

import numpy as np
import pyarrow as pa

from lakecore.io.parquet_layout import INT96_BYTES, is_int96

SAMPLE_ROWS = 512  # enough to see repeats of any dictionary that fits a 64 KiB page
# A choice made for one file serves this many more files of the same writer spec, partition
# and size class before the next file is sampled again.
CHOICE_REUSES = 16
T = TypeVar("T")


class SharedChoices(Generic[T]):
    """Judgments shared by the files one writer spec writes (one ``TableWrite``, one
    compaction) under one key: a file of about the same size (the same power of two of rows)
    in the same partition and bucket would be judged the same. Each judgment serves
    ``CHOICE_REUSES`` more files, then is made again from the file at hand, so a writer that
    lives long follows its data.

    Callers key by bucket: the buckets of one write encode side by side on several threads,
    and a judgment shared across buckets came from whichever bucket's thread asked first, so
    the same rows could be written with other encodings, hence other file sizes, from one run
    to the next; compaction picks read file sizes, so a table's history was not a function of
    its writes (issue 36). Thread-safe. Values are handed out as they are: a caller must not
    change one (``DictionaryChoices`` hands out copies)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[Hashable, tuple[T, int]] = {}

    def choose(self, key: Hashable, decide: Callable[[], T]) -> T:
        with self._lock:
            held = self._held.get(key)
            if held is not None and held[1] > 0:
                self._held[key] = (held[0], held[1] - 1)
                return self._copy(held[0])
        choice = decide()
        with self._lock:
            self._held[key] = (self._copy(choice), CHOICE_REUSES)
        return choice

    def _copy(self, value: T) -> T:
        return value

    def __getstate__(self) -> dict[str, Any]:
        return {}  # a copy (a pickled task) starts with no choices

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._lock = threading.Lock()
        self._held = {}


class DictionaryChoices(SharedChoices[list[str]]):
    """Which columns get a dictionary (``dictionary_columns``), shared as ``SharedChoices``
    shares a judgment; each caller gets its own list.

    A judgment can also be made once for every bucket of a partition (``share``): a
    ``TableWrite`` makes it from one bucket's rows before the buckets write side by side, so
    which bucket judged is fixed by the writes, not by thread timing (issue 36's rule holds),
    and a commit to many buckets judges once per partition rather than once per file. Each
    judgment costs ~0.5 ms of CPU where the file's encoding has just left the caches cold,
    as much as the rest of a small file's bookkeeping. A shared judgment serves the files
    whose first part has its size class until ``unshare``; other files judge as before."""

    def __init__(self) -> None:
        super().__init__()
        self._shared: dict[Hashable, list[str]] = {}

    def share(self, key: Hashable, choice: list[str]) -> None:
        """``choice`` serves every ``shared(key)`` until ``unshare`` (not thread-safe with
        ``shared``: called before the buckets start)."""
        self._shared[key] = list(choice)

    def shared(self, key: Hashable) -> list[str] | None:
        held = self._shared.get(key)
        return None if held is None else list(held)

    def unshare(self) -> None:
        self._shared = {}

    def _copy(self, value: list[str]) -> list[str]:
        return list(value)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._shared = {}


def dictionary_columns(part: pa.Table, candidates: Iterable[str], page_limit: int) -> list[str]:
    """The ``candidates`` (columns of ``part``) that should be written with a dictionary."""
    names = list(candidates)
    rows = part.num_rows
    if rows == 0 or not names:
        return names
    count = min(rows, SAMPLE_ROWS)
    positions = (np.arange(count, dtype=np.int64) * rows) // count  # evenly spaced rows
    # null-free fixed-width numbers are sampled and counted together in numpy (one gather
    # and one sort for all of them); the other columns one by one
    numeric = [n for n in names if _numpy_sampleable(part.column(n))]
    seen = dict(zip(numeric, _count_distinct_numeric(part, numeric, positions)))
    others = [n for n in names if n not in seen]
    sample = part.select(others)
    if rows > SAMPLE_ROWS and others:  # one gather for the other columns, evenly spaced rows
        sample = sample.take(positions)
    sampled = dict(zip(others, sample.columns))
    keep = []
    for name in names:
        column = part.column(name)
        if name in seen:
            width = _fixed_width(column.type)
            assert width is not None  # _numpy_sampleable
            verdict = _pays(width, seen[name], len(positions), rows, page_limit)
        else:
            verdict = _keeps_dictionary(column, sampled[name], page_limit)
        if verdict:
            keep.append(name)
    return keep


def _numpy_sampleable(column: pa.ChunkedArray) -> bool:
    kind = column.type
    return (column.null_count == 0 and column.num_chunks == 1 and _fixed_width(kind) is not None
            and _is_numpy_comparable(kind) and kind.bit_width in (8, 16, 32, 64))


def _count_distinct_numeric(part: pa.Table, names: list[str],
                            positions: np.ndarray) -> list[int]:
    """Distinct values among ``positions`` of each null-free fixed-width column (compared by
    bit pattern: a float's NaNs and signed zeros count apart, which only sharpens a guess)."""
    if not names:
        return []
    stacked = np.empty((len(names), len(positions)), dtype=np.int64)
    for i, name in enumerate(names):
        chunk = part.column(name).chunk(0)
        width = chunk.type.bit_width
        values = np.frombuffer(chunk.buffers()[1], dtype=f"<i{width // 8}",
                               count=chunk.offset + len(chunk))[chunk.offset:]
        stacked[i] = values[positions]
    stacked.sort(axis=1)
    return (1 + np.count_nonzero(stacked[:, 1:] != stacked[:, :-1], axis=1)).tolist()


def _pays(width: float, seen: int, sample: int, values: int, page_limit: int) -> bool:
    """parquet-mr's rule for a column of ``values`` non-null values ``width`` bytes wide, with
    ``seen`` distinct values in an even ``sample`` of them: the dictionary fits its page, and
    it and its indices are smaller than the plain values."""
    distinct = estimate_distinct(seen, sample, values)
    index_bytes = values * max(1, math.ceil(math.log2(max(distinct, 2)))) / 8
    dictionary = distinct * width
    return dictionary <= page_limit and dictionary + index_bytes < values * width


def _keeps_dictionary(column: pa.ChunkedArray, sample: pa.ChunkedArray, page_limit: int) -> bool:
    kind = column.type
    numeric = _is_numpy_comparable(kind)
    width = _fixed_width(kind)
    if width is None and not _is_binary(kind):
        return True  # nested or boolean: Arrow's default
    values = len(column) - column.null_count
    if sample.null_count:
        sample = sample.drop_null()
    if values == 0 or len(sample) == 0:
        return True
    if width is None:  # plain binary: a 4-byte length + the bytes (the sample's offsets + data)
        width = sample.nbytes / len(sample)
    return _pays(width, _count_distinct(sample, numeric), len(sample), values, page_limit)


def _count_distinct(sample: pa.ChunkedArray, numeric: bool) -> int:
    """Distinct values of a null-free sample (a sort in numpy for numbers and times: a hash
    kernel's setup costs more than sorting a few hundred values)."""
    if not numeric:
        return len(sample.unique())
    ordered = np.sort(sample.to_numpy())
    return 1 + int(np.count_nonzero(ordered[1:] != ordered[:-1]))


def estimate_distinct(seen: int, sample: int, rows: int) -> int:
    """Distinct values among ``rows``, from ``seen`` distinct in an even ``sample`` of them:
    the ``d`` for which a uniform sample would show ``seen`` (``d * (1 - exp(-sample/d))``);
    ``rows`` when the sample repeats nothing or is everything."""
    if sample >= rows:
        return seen
    if seen >= sample:
        return rows
    low, high = float(seen), float(rows)
    for _ in range(48):  # bisection on a monotone scalar function
        mid = (low + high) / 2
        if mid * -math.expm1(-sample / mid) < seen:
            low = mid
        else:
            high = mid
    return min(rows, math.ceil(high))


def _fixed_width(kind: pa.DataType) -> int | None:
    """A plain value's width in the file: its Parquet type's (``parquet_layout``), which is not
    always the Arrow type's (DECIMAL(p <= 18) as INT32 / INT64, TIMESTAMP(p > 6) as 12-byte
    INT96, TIME as INT32, BINARY(n) as a length-prefixed BYTE_ARRAY)."""
    if pa.types.is_boolean(kind) or pa.types.is_nested(kind) or pa.types.is_dictionary(kind):
        return None
    if pa.types.is_fixed_size_binary(kind):
        return int(kind.byte_width) + 4
    if pa.types.is_decimal(kind):
        p = kind.precision
        return 4 if p <= 9 else 8 if p <= 18 else _decimal_bytes(p)
    if is_int96(kind):
        return INT96_BYTES
    if pa.types.is_time(kind):
        return 4
    try:
        bits = kind.bit_width
    except ValueError:
        return None
    return bits // 8 if bits >= 8 else None


def _decimal_bytes(precision: int) -> int:
    """The fewest bytes of a two's-complement integer that holds ``precision`` digits."""
    return (int(10 ** precision - 1).bit_length() + 1 + 7) // 8


def _is_numpy_comparable(kind: pa.DataType) -> bool:
    return (pa.types.is_integer(kind) or pa.types.is_floating(kind)
            or pa.types.is_temporal(kind))


def _is_binary(kind: pa.DataType) -> bool:
    return (pa.types.is_string(kind) or pa.types.is_binary(kind)
            or pa.types.is_large_string(kind) or pa.types.is_large_binary(kind))
