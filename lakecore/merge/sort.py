"""Order KV records the way Paimon's merge readers see them, and find where each key starts.

Paimon merges records of one key in (user sequence fields, ``_SEQUENCE_NUMBER``) order, keys
ascending with nulls first. ``sequence.field.sort-order = descending`` reverses the order of the
sequence fields' values (nulls still first, ``_SEQUENCE_NUMBER`` still ascending), as Paimon's
comparators do (its write buffer since 2.0: apache/paimon#7684; 1.4 sorted it ascending).

The common shapes get numpy fast paths because sorting is the largest cost of a flush:
integer-like keys that pack into one ``uint64`` per row are sorted
by radix passes or one plain sort of the packed value (``packed_sort``); other numeric keys
use ``np.lexsort``; anything else (strings, decimals, nulls) goes through ``pyarrow``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.format.kv import SEQUENCE_NUMBER
from lakecore.merge.spec import MergeSpec


def sort_kv(table: pa.Table, spec: MergeSpec) -> pa.Table:
    """Stable sort by key columns, then sequence fields (nulls first; descending values with
    ``spec.sequence_descending``), then sequence number."""
    if table.num_rows <= 1:
        return table
    perm = sort_permutation(table, spec)
    if perm is None:
        return table
    return table.take(pa.array(perm))


def sort_permutation(table: pa.Table, spec: MergeSpec) -> np.ndarray | None:
    """The row order :func:`sort_kv` applies, or ``None`` when the table is already sorted."""
    columns = [*spec.key_columns, *spec.sequence_fields, SEQUENCE_NUMBER]
    descending = set(spec.sequence_fields) if spec.sequence_descending else set()
    arrays = [_combined(table.column(c)) for c in columns]
    numeric = [integer_key(a) for a in arrays]
    if any(a is None for a in numeric):
        return _arrow_permutation(table, columns, descending)
    if descending:  # ~x reverses an integer order exactly (no overflow, unlike -x)
        numeric = [np.invert(k) if c in descending else k  # type: ignore[arg-type]
                   for c, k in zip(columns, numeric)]
    keys: list[np.ndarray] = numeric  # type: ignore[assignment]
    if _is_sorted(keys):
        return None
    perm = _packed_permutation(keys)
    if perm is None and not np.any(keys[-1][1:] < keys[-1][:-1]):
        # Rows already in sequence order: the row index breaks ties as the sequence would.
        perm = _packed_permutation(keys[:-1])
    return perm if perm is not None else np.lexsort(keys[::-1])


def packed_order(prefix: list[np.ndarray], table: pa.Table, columns: list[str]
                 ) -> np.ndarray | None:
    """The stable order of ``table``'s rows by (``prefix``, ``columns``), ``prefix`` a few
    non-negative integer arrays (a row's partition and bucket as one code), when every column
    is a null-free integer-like one and all of them pack into 64 bits (``packed_sort``);
    otherwise ``None``."""
    keys = list(prefix)
    for name in columns:
        key = as_numpy_key(table.column(name))
        if key is None:
            return None
        keys.append(key)
    return _packed_permutation(keys)


def group_starts(sorted_table: pa.Table, spec: MergeSpec) -> np.ndarray:
    """Indices (int64, ascending, first is 0) of the rows where a new key begins."""
    n = sorted_table.num_rows
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for name in spec.key_columns:
        change[1:] |= adjacent_differs(_combined(sorted_table.column(name)))
    return np.flatnonzero(change).astype(np.int64, copy=False)


def as_numpy_key(col: pa.ChunkedArray | pa.Array) -> np.ndarray | None:
    """``col`` as an order-preserving numpy array, if it is a null-free integer-like one."""
    return integer_key(_combined(col))


def _combined(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return col


def integer_key(arr: pa.Array) -> np.ndarray | None:
    """An order-preserving numpy view of a null-free integer-like array (one chunk), else
    ``None``."""
    if arr.null_count:
        return None
    t = arr.type
    if pa.types.is_integer(t):
        return arr.to_numpy(zero_copy_only=False)
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return arr.view(pa.int32()).to_numpy(zero_copy_only=False)
    if pa.types.is_timestamp(t) or pa.types.is_date64(t) or pa.types.is_time64(t):
        return arr.view(pa.int64()).to_numpy(zero_copy_only=False)
    if pa.types.is_duration(t):
        return arr.view(pa.int64()).to_numpy(zero_copy_only=False)
    return None


def _is_sorted(keys: list[np.ndarray]) -> bool:
    """Lexicographic non-decreasing check, vectorized over adjacent row pairs."""
    undecided = np.ones(len(keys[0]) - 1, dtype=bool)
    for k in keys:
        a, b = k[:-1], k[1:]
        if np.any(undecided & (a > b)):
            return False
        undecided &= a == b
    return True


def _packed_permutation(keys: list[np.ndarray]) -> np.ndarray | None:
    """The stable order of rows by integer ``keys`` (row order breaking ties), when the keys
    pack into 64 bits (``packed_sort``); otherwise ``None``."""
    packed = _pack(keys)
    if packed is None:
        return None
    values, bits = packed
    if _use_radix(len(values), bits):
        return _radix_order(values, bits)
    return _sort_with_rows(values)[0]


# From this many rows a packed key of at most RADIX_MAX_BITS sorts by radix passes
# (measured on 2 cores, stable order of 100k rows: a 24-bit key 0.9 ms by radix against 4.6
# ms for np.sort of the key packed with the row index, a 40-bit key 3.2 against 5.6 ms;
# 6k rows 0.08 against 0.10 ms; below ~2k rows the plain sort is as fast)
RADIX_MIN_ROWS = 2048
RADIX_MAX_BITS = 48
_DIGIT_BITS = 16


def packed_sort(keys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """The stable order of rows by integer ``keys`` (row order breaking ties) and the keys
    packed into one ``uint64`` per row (each less its minimum, the first highest) in that
    order; None when the keys do not pack into 64 bits.

    Two ways, by shape: a radix sort of the packed key, 16 bits a pass, least significant
    first (numpy's stable sort of ``uint16`` is a counting sort, O(n) a pass); or numpy's
    plain sort of the key packed with the row index below it (``(k1 - min) << .. | row``:
    unique values, so ties break by row). Radix for many rows of a key of a few digits, and
    for a key too wide to share 64 bits with the row index."""
    packed = _pack(keys)
    if packed is None:
        return None
    values, bits = packed
    if _use_radix(len(values), bits):
        order = _radix_order(values, bits)
        return order, values[order]
    return _sort_with_rows(values)


def _pack(keys: list[np.ndarray]) -> tuple[np.ndarray, int] | None:
    """The keys, each less its minimum, packed into one new ``uint64`` per row (the first
    key highest) and the bits they take; None beyond 64 bits."""
    n = len(keys[0])
    spans = []
    for k in keys:
        lo, hi = int(k.min()), int(k.max())
        spans.append((lo, (hi - lo).bit_length()))
    bits = sum(b for _, b in spans)
    if bits > 64:
        return None
    packed: np.ndarray | None = None
    for k, (lo, b) in zip(keys, spans):
        if not b:
            continue
        if packed is None:
            packed = offset_from(k, lo)
        else:
            packed <<= np.uint64(b)
            packed |= offset_from(k, lo)
    return (np.zeros(n, dtype=np.uint64) if packed is None else packed), bits


def _use_radix(rows: int, bits: int) -> bool:
    row_bits = max(int(rows - 1).bit_length(), 1)
    return bits + row_bits > 64 or (rows >= RADIX_MIN_ROWS and bits <= RADIX_MAX_BITS)


def _sort_with_rows(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(stable order, sorted values) of ``packed`` by one plain sort of each value with its
    row index in the low bits (``packed`` is consumed; the values leave room for the row)."""
    n = len(packed)
    row_bits = max(int(n - 1).bit_length(), 1)
    packed <<= np.uint64(row_bits)
    packed |= np.arange(n, dtype=np.uint64)
    packed.sort()
    order = (packed & np.uint64((1 << row_bits) - 1)).view(np.int64)  # rows fit in 63 bits
    packed >>= np.uint64(row_bits)
    return order, packed


def _radix_order(packed: np.ndarray, bits: int) -> np.ndarray:
    """The stable order of ``packed`` (``uint64``, values below ``2 ** bits``): a stable
    counting sort per 16-bit digit, least significant first, each pass ordering its digit
    as the passes before left the rows."""
    if bits <= 0:  # every key the same: rows as they are
        return np.arange(len(packed), dtype=np.int64)
    mask = np.uint64((1 << _DIGIT_BITS) - 1)
    order = np.argsort((packed & mask).astype(np.uint16), kind="stable")
    for shift in range(_DIGIT_BITS, bits, _DIGIT_BITS):
        digit = ((packed >> np.uint64(shift)) & mask).astype(np.uint16)
        order = order[np.argsort(digit[order], kind="stable")]
    return order.astype(np.int64, copy=False)


def offset_from(k: np.ndarray, lo: int) -> np.ndarray:
    """``k - lo`` as a new uint64 array, in one pass; the span fits in 63 bits, so neither
    subtraction can wrap."""
    if k.dtype.kind == "u":
        return np.subtract(k, np.uint64(lo), dtype=np.uint64)
    return np.subtract(k, np.int64(lo), dtype=np.int64).view(np.uint64)


def _arrow_permutation(table: pa.Table, columns: list[str],
                       descending: set[str] | frozenset[str] = frozenset()) -> np.ndarray:
    keys = [(c, "descending" if c in descending else "ascending", "at_start") for c in columns]
    perm = pc.sort_indices(table.select(columns), options=pc.SortOptions(sort_keys=keys))
    return perm.to_numpy()


def adjacent_differs(arr: pa.Array) -> np.ndarray:
    """``arr[i + 1] != arr[i]`` for every adjacent pair; two nulls compare equal."""
    n = len(arr)
    fast = integer_key(arr)
    if fast is None and arr.null_count == 0 and (
        pa.types.is_floating(arr.type) or pa.types.is_boolean(arr.type)
    ):
        fast = arr.to_numpy(zero_copy_only=False)
    if fast is not None:
        return fast[1:] != fast[:-1]
    after, before = arr.slice(1), arr.slice(0, n - 1)
    ne = pc.not_equal(after, before)
    if arr.null_count:
        ne = pc.or_(pc.fill_null(ne, False), pc.not_equal(after.is_valid(), before.is_valid()))
    return ne.to_numpy(zero_copy_only=False)
