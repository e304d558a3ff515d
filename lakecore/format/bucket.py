"""Paimon's fixed-bucket function, vectorized over Arrow columns.

Java: ``bucket = Math.abs(row.hashCode() % numBuckets)`` where ``row`` is the bucket key as a
BinaryRow (row kind +I) and ``hashCode`` is MurmurHash3-32 (seed 42) over the row's bytes
read as little-endian 4-byte words, finalized with the byte length (``hashBytesByWords``).
Every BinaryRow is a whole number of 8-byte words, so no tail bytes exist.

We build every row's exact bytes in one flat numpy buffer (slots computed per column,
strings > 7 bytes and non-compact decimals/timestamps copied into each row's var part) and
run the murmur rounds column-wise over all rows at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.errors import SchemaError
from lakecore.format.binary_row import (
    HEADER_SIZE_IN_BITS,
    MAX_FIX_PART_DATA_SIZE,
    NON_COMPACT_DECIMAL_BYTES,
    encode_row_body,
    is_compact_decimal,
    is_compact_timestamp,
    null_bits_size,
)
from lakecore.schema.types import DataType, TypeRoot, to_arrow

# Paimon's BucketMode.POSTPONE_BUCKET: the bucket id (and total bucket count) of the files a
# postpone-bucket table (``bucket = -2``) holds until the dedicated compaction assigns them
POSTPONE_BUCKET = -2
SEED = 42
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
_M5, _N1 = np.uint32(5), np.uint32(0xE6546B64)
_F1, _F2 = np.uint32(0x85EBCA6B), np.uint32(0xC2B2AE35)
_SCALAR_TAIL_ROWS = 8  # finish this few long rows in plain Python, not numpy steps

_UNIT_NANOS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1000, "ns": 1}
_INT_ROOTS = {
    TypeRoot.TINYINT: np.uint8,
    TypeRoot.SMALLINT: np.uint16,
    TypeRoot.INT: np.uint32,
    TypeRoot.BIGINT: np.uint64,
    TypeRoot.FLOAT: np.uint32,
    TypeRoot.DOUBLE: np.uint64,
}
_BIT_LENGTH = np.array([int(i).bit_length() for i in range(256)], dtype=np.int64)


# ----------------------------------------------------------------------------- scalar murmur


def _u32(x: int) -> int:
    return x & 0xFFFFFFFF


def _mix_word(h: int, k: int) -> int:
    k = _u32(k * 0xCC9E2D51)
    k = _u32((k << 15) | (k >> 17))
    k = _u32(k * 0x1B873593)
    h ^= k
    h = _u32((h << 13) | (h >> 19))
    return _u32(h * 5 + 0xE6546B64)


def _fmix(h: int, length: int) -> int:
    h ^= length
    h ^= h >> 16
    h = _u32(h * 0x85EBCA6B)
    h ^= h >> 13
    h = _u32(h * 0xC2B2AE35)
    return h ^ (h >> 16)


def _signed(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


def hash_bytes_by_words(data: bytes, seed: int = SEED) -> int:
    """Java ``MurmurHashUtils.hashBytesByWords`` as a signed int (length must be % 4 == 0)."""
    if len(data) % 4:
        raise ValueError("hashBytesByWords needs a whole number of 4-byte words")
    h = seed
    for k in np.frombuffer(data, dtype="<u4").tolist():
        h = _mix_word(h, k)
    return _signed(_fmix(h, len(data)))


def hash_row(values: Sequence[Any], types: Sequence[DataType]) -> int:
    """``BinaryRow.hashCode()`` of one row of Python values."""
    return hash_bytes_by_words(encode_row_body(values, types))


def bucket_of_hash(hash_code: int, num_buckets: int) -> int:
    """``Math.abs(hash % n)`` with Java's truncating ``%``."""
    return abs(hash_code) % num_buckets  # |Java remainder| == |h| mod n for either sign


# ----------------------------------------------------------------------------- column slots


@dataclass
class _VarPart:
    """One column's var-length pieces: ``sizes`` (bytes reserved per row, 8-aligned), ``low``
    (the slot's low 32 bits), and either a per-row byte ``matrix`` or a ragged source
    (``data`` zero-padded by 8 bytes, ``starts``, ``lengths``)."""

    sizes: np.ndarray
    low: np.ndarray
    matrix: np.ndarray | None = None
    data: np.ndarray | None = None
    starts: np.ndarray | None = None
    lengths: np.ndarray | None = None


def _as_array(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return col.dictionary_decode() if pa.types.is_dictionary(col.type) else col


def _fixed_values(arr: pa.Array, dtype: Any) -> np.ndarray:
    """Zero-copy view of a fixed-width array's values (nulls not zeroed)."""
    buf = arr.buffers()[1]
    if buf is None or len(arr) == 0:
        return np.zeros(len(arr), dtype=dtype)
    return np.frombuffer(buf, dtype=dtype)[arr.offset : arr.offset + len(arr)]


def _split_units(v: np.ndarray, per_unit: int) -> tuple[np.ndarray, np.ndarray]:
    """Integers in units of ``per_unit`` ns -> (millis, nano-of-millisecond), floored."""
    v = v.astype(np.int64)
    if per_unit >= 1_000_000:  # ms or coarser: exact millis, no sub-ms part
        return v * (per_unit // 1_000_000), np.zeros(len(v), np.int64)
    div = 1_000_000 // per_unit
    return np.floor_divide(v, div), np.remainder(v, div) * per_unit


def _timestamp_parts(arr: pa.Array, t: DataType) -> tuple[np.ndarray, np.ndarray]:
    """(epoch millis, nano-of-millisecond), floored. Arrow stores UTC epoch for any tz."""
    if not pa.types.is_timestamp(arr.type):
        arr = arr.cast(to_arrow(t))
    return _split_units(_fixed_values(arr, np.int64), _UNIT_NANOS[arr.type.unit])


def _decimal_words(arr: pa.Array, t: DataType) -> np.ndarray:
    """(n, 2) int64: low and high words of each unscaled value at the type's scale."""
    target = pa.decimal128(t.precision or 10, t.scale or 0)
    if arr.type != target:
        arr = arr.cast(target)
    if len(arr) == 0:
        return np.zeros((0, 2), np.int64)
    raw = np.frombuffer(arr.buffers()[1], dtype="<i8").reshape(-1, 2)
    return raw[arr.offset : arr.offset + len(arr)]


def _big_decimal_bytes(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Java ``BigInteger.toByteArray()`` of each 128-bit value: a (n, 16) matrix holding the
    minimal big-endian two's complement bytes left-aligned (zero padded), and their lengths."""
    n = len(words)
    be = np.empty((n, 16), np.uint8)
    be[:, :8] = words[:, 1].astype(">i8").view(np.uint8).reshape(n, 8)
    be[:, 8:] = words[:, 0].astype(">i8").view(np.uint8).reshape(n, 8)
    magnitude = np.where((words[:, 1] < 0)[:, None], be ^ np.uint8(0xFF), be)
    nonzero = magnitude != 0
    first = np.where(nonzero.any(axis=1), nonzero.argmax(axis=1), 16)
    lead = magnitude[np.arange(n), np.minimum(first, 15)]
    bits = np.where(first < 16, (15 - first) * 8 + _BIT_LENGTH[lead], 0)
    lengths = bits // 8 + 1
    idx = (16 - lengths)[:, None] + np.arange(16)
    out = np.where(idx < 16, np.take_along_axis(be, np.minimum(idx, 15), axis=1), 0)
    return out.astype(np.uint8), lengths


def _string_slots(arr: pa.Array, valid: np.ndarray) -> tuple[np.ndarray, _VarPart]:
    """Slots of a string/binary column; bytes > 7 go to the var part."""
    if not pa.types.is_large_binary(arr.type):
        arr = arr.cast(pa.large_binary())
    offsets = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset : arr.offset + len(arr) + 1]
    starts, lengths = offsets[:-1], np.where(valid, np.diff(offsets), 0)
    buf = arr.buffers()[2]
    data = np.frombuffer(buf, np.uint8) if buf is not None else np.zeros(0, np.uint8)
    padded = np.concatenate([data, np.zeros(8, np.uint8)])  # 8-byte reads never overrun
    inline = valid & (lengths <= MAX_FIX_PART_DATA_SIZE)
    slots = np.zeros(len(arr), np.uint64)
    if inline.any():
        rows = np.flatnonzero(inline)
        windows = np.lib.stride_tricks.sliding_window_view(padded, 8)
        words = windows[starts[rows]].copy().view("<u8").ravel()
        nbytes = lengths[rows].astype(np.uint64)
        mask = (np.uint64(1) << (nbytes * np.uint64(8))) - np.uint64(1)
        slots[rows] = (words & mask) | ((np.uint64(0x80) | nbytes) << np.uint64(56))
    var_lengths = np.where(valid & ~inline, lengths, 0)
    sizes = (var_lengths + 7) & ~7
    return slots, _VarPart(sizes, var_lengths, data=padded, starts=starts, lengths=var_lengths)


def _column_slots(col: Any, t: DataType) -> tuple[np.ndarray, np.ndarray, _VarPart | None]:
    """(slot words, null mask, var part or None) of one key column."""
    arr = _as_array(col)
    n = len(arr)
    nulls = arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else np.zeros(n, bool)
    valid = ~nulls
    r = t.root
    if t.is_nested:
        raise SchemaError(f"bucket key fields must be atomic, got {t}")
    if r in _INT_ROOTS:
        target = to_arrow(t)
        if arr.type != target:
            arr = arr.cast(target)
        slots = _fixed_values(arr, _INT_ROOTS[r]).astype(np.uint64, copy=False)
    elif r is TypeRoot.BOOLEAN:
        slots = pc.fill_null(arr.cast(pa.bool_()), False).to_numpy(zero_copy_only=False)
        slots = slots.astype(np.uint64)
    elif r is TypeRoot.DATE:
        if not pa.types.is_date32(arr.type):
            arr = arr.cast(pa.date32())
        slots = _fixed_values(arr, np.uint32).astype(np.uint64)
    elif r is TypeRoot.TIME:
        if not pa.types.is_time(arr.type):
            arr = arr.cast(to_arrow(t))
        dtype = np.int32 if pa.types.is_time32(arr.type) else np.int64
        millis = _split_units(_fixed_values(arr, dtype), _UNIT_NANOS[arr.type.unit])[0]
        slots = millis.astype(np.int32).view(np.uint32).astype(np.uint64)
    elif r in (TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.BINARY, TypeRoot.VARBINARY):
        slots, var = _string_slots(arr, valid)
        return slots, nulls, var
    elif r is TypeRoot.DECIMAL:
        words = _decimal_words(arr, t)
        if is_compact_decimal(t):
            slots = words[:, 0].view(np.uint64).copy()
        else:
            matrix, lengths = _big_decimal_bytes(np.where(valid[:, None], words, 0))
            matrix[nulls] = 0  # Java: a null big decimal still reserves 16 zero bytes
            sizes = np.full(n, NON_COMPACT_DECIMAL_BYTES, np.int64)
            return (
                np.zeros(n, np.uint64),
                nulls,
                _VarPart(sizes, np.where(valid, lengths, 0), matrix=matrix),
            )
    elif r in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        millis, nanos = _timestamp_parts(arr, t)
        if is_compact_timestamp(t):
            slots = millis.view(np.uint64)
        else:
            millis = np.where(valid, millis, 0)
            matrix = millis.astype("<i8").view(np.uint8).reshape(n, 8)
            return (
                np.zeros(n, np.uint64),
                nulls,
                _VarPart(np.full(n, 8, np.int64), np.where(valid, nanos, 0), matrix=matrix),
            )
    else:
        raise SchemaError(f"cannot bucket on {t}")
    return (np.where(valid, slots, np.uint64(0)) if arr.null_count else slots), nulls, None


# ----------------------------------------------------------------------------- rows -> bytes


def binary_rows(
    columns: Sequence[pa.Array | pa.ChunkedArray], types: Sequence[DataType]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Every row's BinaryRow bytes (no arity prefix), concatenated: (flat uint8 buffer,
    row starts, row lengths, whether the header words are all zero)."""
    if not columns or len(columns) != len(types):
        raise SchemaError(f"need one column per type, got {len(columns)} for {len(types)}")
    n = len(columns[0])
    if any(len(c) != n for c in columns):
        raise SchemaError("bucket key columns differ in length")
    arity = len(types)
    nb_words = null_bits_size(arity) // 8
    fixed = np.zeros((n, nb_words + arity), np.uint64)
    fixed_size = fixed.shape[1] * 8
    var_parts: list[tuple[int, _VarPart]] = []
    any_null = False
    for i, (col, t) in enumerate(zip(columns, types)):
        slots, nulls, var = _column_slots(col, t)
        fixed[:, nb_words + i] = slots
        if nulls.any():
            any_null = True
            bit = i + HEADER_SIZE_IN_BITS
            fixed[:, bit // 64] |= nulls.astype(np.uint64) << np.uint64(bit % 64)
        if var is not None and var.sizes.any():
            var_parts.append((i, var))
    if not var_parts:
        lengths = np.full(n, fixed_size, np.int64)
        return fixed.view(np.uint8).ravel(), np.arange(n) * fixed_size, lengths, not any_null

    cursor = np.full(n, fixed_size, np.int64)  # per-row offset of the next var piece
    offsets = []
    for i, var in var_parts:
        offsets.append(cursor.copy())
        used = var.sizes > 0
        fixed[:, nb_words + i] = np.where(
            used,
            (cursor.astype(np.uint64) << np.uint64(32)) | var.low.astype(np.uint64),
            fixed[:, nb_words + i],
        )
        cursor += var.sizes
    lengths = cursor
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    flat = np.zeros(int(lengths.sum()), np.uint8)
    flat64 = flat.view(np.uint64)
    flat64[(starts // 8)[:, None] + np.arange(fixed.shape[1])] = fixed
    for (_, var), off in zip(var_parts, offsets):
        dst = starts + off
        if var.matrix is not None:
            flat[dst[:, None] + np.arange(var.matrix.shape[1])] = var.matrix
        else:
            _copy_ragged(flat, dst, var)
    return flat, starts, lengths, not any_null


def _copy_ragged(flat: np.ndarray, dst: np.ndarray, var: _VarPart) -> None:
    """Copy each row's source bytes [start, start+len) to its 8-aligned spot ``dst`` in flat,
    zero-padding the last word; moves whole 8-byte words (unaligned reads), no Python loop."""
    assert var.data is not None and var.starts is not None and var.lengths is not None
    rows = np.flatnonzero(var.lengths)
    lens = var.lengths[rows]
    nwords = (lens + 7) // 8
    ends = np.cumsum(nwords)
    total = int(ends[-1]) if len(ends) else 0
    seg = np.zeros(total, np.int64)  # which row each output word belongs to
    seg[ends[:-1]] = 1
    seg = np.cumsum(seg)
    within = np.arange(total) - (ends - nwords)[seg]
    windows = np.lib.stride_tricks.sliding_window_view(var.data, 8)
    words = windows[var.starts[rows][seg] + within * 8].view("<u8").ravel()
    tail = ends - 1  # last word of each row: keep only its real bytes
    rem = (lens % 8).astype(np.uint64)
    words[tail] &= np.where(
        rem > 0,
        (np.uint64(1) << (rem * np.uint64(8))) - np.uint64(1),
        np.uint64(0xFFFFFFFFFFFFFFFF),
    )
    flat.view(np.uint64)[(dst[rows] // 8)[seg] + within] = words


# ----------------------------------------------------------------------------- murmur


def _mix_columns(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    """One murmur round for many rows; ``k`` is consumed."""
    k *= _C1
    k = (k << np.uint32(15)) | (k >> np.uint32(17))
    k *= _C2
    h ^= k
    h = (h << np.uint32(13)) | (h >> np.uint32(19))
    h *= _M5
    h += _N1
    return h


def _fmix_columns(h: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    h ^= lengths.astype(np.uint32)
    h ^= h >> np.uint32(16)
    h *= _F1
    h ^= h >> np.uint32(13)
    h *= _F2
    h ^= h >> np.uint32(16)
    return h


def _is_fixed(t: DataType) -> bool:
    """Whether a value of ``t`` always fits its row's 8-byte slot (no var part)."""
    r = t.root
    if r is TypeRoot.DECIMAL:
        return is_compact_decimal(t)
    if r in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        return is_compact_timestamp(t)
    return r in _INT_ROOTS or r in (TypeRoot.BOOLEAN, TypeRoot.DATE, TypeRoot.TIME)


def _mix_into(h: np.ndarray, k: np.ndarray, t1: np.ndarray, t2: np.ndarray) -> None:
    """``_mix_columns`` in place: ``h`` updated, ``k`` only read (a strided view will do),
    ``t1`` and ``t2`` scratch space; no array is allocated."""
    np.multiply(k, _C1, out=t1)
    np.left_shift(t1, np.uint32(15), out=t2)
    np.right_shift(t1, np.uint32(17), out=t1)
    np.bitwise_or(t1, t2, out=t1)
    np.multiply(t1, _C2, out=t1)
    np.bitwise_xor(h, t1, out=h)
    np.left_shift(h, np.uint32(13), out=t2)
    np.right_shift(h, np.uint32(19), out=h)
    np.bitwise_or(h, t2, out=h)
    np.multiply(h, _M5, out=h)
    np.add(h, _N1, out=h)


def _hash_fixed(
    columns: Sequence[pa.Array | pa.ChunkedArray], types: Sequence[DataType]
) -> np.ndarray:
    """``hash_rows`` for keys whose values all fit their slots: the row is its header words
    then one 8-byte slot per field, so each 4-byte word is read straight from the column's
    values (a strided view), never laid out as rows; the murmur rounds run in place."""
    n = len(columns[0])
    arity = len(types)
    header_words = null_bits_size(arity) // 8
    header = np.zeros((header_words, n), np.uint64)
    slots = []
    for i, (col, t) in enumerate(zip(columns, types)):
        values, nulls, _ = _column_slots(col, t)
        slots.append(np.ascontiguousarray(values, dtype=np.uint64))
        if nulls.any():
            bit = i + HEADER_SIZE_IN_BITS
            header[bit // 64] |= nulls.astype(np.uint64) << np.uint64(bit % 64)
    words: list[np.ndarray] = []
    h_start = SEED
    for w in range(header_words):
        if words or header[w].any():
            words.append(header[w])
        else:  # a leading zero word in every row: mix it once, as a scalar
            h_start = _mix_word(_mix_word(h_start, 0), 0)
    words += slots
    h = np.full(n, h_start, np.uint32)
    t1, t2 = np.empty(n, np.uint32), np.empty(n, np.uint32)
    for w64 in words:
        halves = w64.view(np.uint32)  # little-endian: the low word first
        _mix_into(h, halves[0::2], t1, t2)
        _mix_into(h, halves[1::2], t1, t2)
    return _fmix_columns(h, np.full(1, (header_words + arity) * 8, np.int64)).view(np.int32)


def hash_rows(
    columns: Sequence[pa.Array | pa.ChunkedArray], types: Sequence[DataType]
) -> np.ndarray:
    """``BinaryRow.hashCode()`` of every row of the key columns, as int32."""
    if columns and len(columns) == len(types) and all(_is_fixed(t) for t in types) and \
            len({len(c) for c in columns}) == 1 and len(columns[0]):
        return _hash_fixed(columns, types)
    flat, starts, lengths, header_zero = binary_rows(columns, types)
    n = len(lengths)
    words = flat.view("<u4")
    nwords = lengths // 4
    if n == 0:
        return np.zeros(0, np.int32)
    if (nwords == nwords[0]).all():
        matrix = words.reshape(n, int(nwords[0]))
        first = 0
        h_scalar = SEED
        if header_zero:  # no nulls: the header words are zero in every row
            for _ in range(null_bits_size(len(types)) // 4):
                h_scalar = _mix_word(h_scalar, 0)
            first = null_bits_size(len(types)) // 4
        h = np.full(n, h_scalar, np.uint32)
        for j in range(first, matrix.shape[1]):
            h = _mix_columns(h, matrix[:, j].copy())
        return _fmix_columns(h, lengths).view(np.int32)

    key = np.negative(nwords.astype(np.int16 if nwords.max() < 2**15 else np.int64))
    order = np.argsort(key, kind="stable")  # longest rows first: active rows are a prefix
    wstart = (starts // 4)[order]
    nw_sorted = nwords[order]
    ascending = nw_sorted[::-1]
    h = np.full(n, SEED, np.uint32)
    for t in range(int(nw_sorted[0])):
        active = n - int(np.searchsorted(ascending, t, side="right"))
        if active <= _SCALAR_TAIL_ROWS and int(nw_sorted[0]) - t > 4 * _SCALAR_TAIL_ROWS:
            for r in range(active):
                hv = int(h[r])
                for k in words[wstart[r] + t : wstart[r] + nw_sorted[r]].tolist():
                    hv = _mix_word(hv, k)
                h[r] = hv
            break
        h[:active] = _mix_columns(h[:active], words[wstart[:active] + t])
    out = np.empty(n, np.uint32)
    out[order] = _fmix_columns(h, lengths[order])
    return out.view(np.int32)


def bucket_ids(
    columns: Sequence[pa.Array | pa.ChunkedArray], types: Sequence[DataType], num_buckets: int
) -> np.ndarray:
    """Paimon's fixed bucket of every row: ``Math.abs(hashCode % numBuckets)`` (int32)."""
    if num_buckets <= 0:
        raise SchemaError(f"fixed bucket count must be > 0, got {num_buckets}")
    if num_buckets == 1:  # every hash lands in bucket 0
        return np.zeros(len(columns[0]) if columns else 0, np.int32)
    # int32 throughout: |h % n| < n, so the absolute value cannot overflow
    return np.abs(np.fmod(hash_rows(columns, types), np.int32(num_buckets)))
