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
from collections.abc import Iterable

import numpy as np
import pyarrow as pa

SAMPLE_ROWS = 512  # enough to see repeats of any dictionary that fits a 64 KiB page


def dictionary_columns(part: pa.Table, candidates: Iterable[str], page_limit: int) -> list[str]:
    """The ``candidates`` (columns of ``part``) that should be written with a dictionary."""
    names = list(candidates)
    rows = part.num_rows
    if rows == 0 or not names:
        return names
    columns = part.select(names)
    sample = columns
    if rows > SAMPLE_ROWS:  # one gather for every column, evenly spaced rows
        sample = columns.take((np.arange(SAMPLE_ROWS, dtype=np.int64) * rows) // SAMPLE_ROWS)
    return [name for name, column, sampled in zip(names, columns.columns, sample.columns)
            if _keeps_dictionary(column, sampled, page_limit)]


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
    distinct = estimate_distinct(_count_distinct(sample, numeric), len(sample), values)
    index_bytes = values * max(1, math.ceil(math.log2(max(distinct, 2)))) / 8
    dictionary = distinct * width
    return dictionary <= page_limit and dictionary + index_bytes < values * width


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
    if pa.types.is_boolean(kind) or pa.types.is_nested(kind) or pa.types.is_dictionary(kind):
        return None
    if pa.types.is_fixed_size_binary(kind):
        return int(kind.byte_width)
    try:
        bits = kind.bit_width
    except ValueError:
        return None
    return bits // 8 if bits >= 8 else None


def _is_numpy_comparable(kind: pa.DataType) -> bool:
    return (pa.types.is_integer(kind) or pa.types.is_floating(kind)
            or pa.types.is_temporal(kind))


def _is_binary(kind: pa.DataType) -> bool:
    return (pa.types.is_string(kind) or pa.types.is_binary(kind)
            or pa.types.is_large_string(kind) or pa.types.is_large_binary(kind))
