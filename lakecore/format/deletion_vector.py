"""Deletion-vector index files (``index/index-<uuid>-<n>``, index type ``DELETION_VECTORS``).

A deletion vector is the set of row positions of one data file that are deleted (superseded by
a newer version of their key). Paimon stores the vectors of a bucket in one index file:

* byte 0: the version, ``1``;
* per data file, at the offset its ``DeletionVectorRange`` records:
  ``<size: BE int32><magic><bitmap><crc32: BE int32>`` where ``size`` counts magic + bitmap and
  the CRC-32 covers the same bytes (magic + bitmap).

Two bitmap kinds (``deletion-vectors.bitmap64`` picks the one written; both are read):

* 32-bit (``BitmapDeletionVector``): magic ``1581511376`` as a big-endian int, then a
  RoaringBitmap in the portable format. The range's ``length`` is ``size`` (magic + bitmap).
* 64-bit (``Bitmap64DeletionVector``, Iceberg's layout): magic ``1681511377`` as a
  *little-endian* int, then the portable 64-bit roaring layout (bitmap count as LE int64, then
  per bitmap its high 32 bits as LE int32 and a portable 32-bit RoaringBitmap). The range's
  ``length`` covers the whole record: 4 + size + 4.

In memory a vector is a sorted ``numpy.uint64`` array of deleted positions (columnar: readers
turn it into a boolean mask). pyroaring's ``BitMap`` / ``BitMap64`` serialize the portable
formats Paimon uses.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyroaring

from lakecore.errors import CorruptFileError, LakecoreValidationError
from lakecore.format.index_manifest import (
    DELETION_VECTORS_INDEX,
    DeletionVectorRange,
    IndexFileMeta,
)

VERSION_ID_V1 = 1
MAGIC_32 = 1581511376
MAGIC_64 = 1681511377
MAX_POSITION_32 = 2**31 - 1  # RoaringBitmap32 holds non-negative int positions

_BE_INT = struct.Struct(">i")
_LE_INT = struct.Struct("<i")


def as_positions(values: object) -> np.ndarray:
    """Sorted unique ``uint64`` positions from any integer array-like."""
    if isinstance(values, np.ndarray) and values.dtype == np.uint64 and (
            values.size < 2 or bool(np.all(values[1:] > values[:-1]))):
        return values  # already sorted and unique (a compaction's vectors always are)
    arr = np.asarray(values, dtype=np.int64)
    if arr.size and int(arr.min()) < 0:
        raise LakecoreValidationError("a deletion vector cannot hold a negative row position")
    return np.unique(arr).astype(np.uint64)


def encode_deletion_vectors(
    vectors: Mapping[str, np.ndarray], bitmap64: bool = False
) -> tuple[bytes, dict[str, DeletionVectorRange]]:
    """The bytes of one index file holding ``vectors`` (data file name -> deleted positions)
    and the range of each vector in it. Empty vectors are left out, as Paimon does."""
    out = bytearray([VERSION_ID_V1])
    ranges: dict[str, DeletionVectorRange] = {}
    for name, positions in vectors.items():
        pos = as_positions(positions)
        if pos.size == 0:
            continue
        start = len(out)
        if bitmap64:
            record = _encode_64(pos)
            length = len(record)
        else:
            record = _encode_32(name, pos)
            length = len(record) - 8
        out += record
        ranges[name] = DeletionVectorRange(name, start, length, int(pos.size))
    return bytes(out), ranges


def split_index_file(data: bytes, ranges: Mapping[str, DeletionVectorRange], target_size: int
                     ) -> list[tuple[bytes, dict[str, DeletionVectorRange]]]:
    """One encoded index file (``encode_deletion_vectors``) rolled into files of about
    ``target_size`` bytes, as Paimon's ``DeletionVectorIndexFileWriter`` rolls: vectors go into
    a file, in order, until its size exceeds the target; the next vector starts a new one.
    Each file starts with the version byte; ranges are re-based to their file."""
    names = list(ranges)
    if len(data) <= target_size or len(names) <= 1:
        return [(data, dict(ranges))]
    starts = [ranges[n].offset for n in names] + [len(data)]
    files: list[tuple[bytes, dict[str, DeletionVectorRange]]] = []
    first = 0
    size = 1  # the version byte
    for i in range(len(names)):
        size += starts[i + 1] - starts[i]
        if size > target_size or i == len(names) - 1:
            lo, hi = starts[first], starts[i + 1]
            shift = lo - 1
            part = {n: DeletionVectorRange(n, ranges[n].offset - shift, ranges[n].length,
                                           ranges[n].cardinality)
                    for n in names[first:i + 1]}
            files.append((bytes([VERSION_ID_V1]) + data[lo:hi], part))
            first, size = i + 1, 1
    return files


def index_file_meta(file_name: str, data: bytes, ranges: Mapping[str, DeletionVectorRange],
                    external_path: str | None = None) -> IndexFileMeta:
    """The ``IndexFileMeta`` of an encoded file: size in bytes, row count = vectors held."""
    return IndexFileMeta(DELETION_VECTORS_INDEX, file_name, len(data), len(ranges),
                         dict(ranges), external_path)


def decode_deletion_vectors(
    data: bytes, ranges: Mapping[str, DeletionVectorRange], path: str
) -> dict[str, np.ndarray]:
    """Every vector ``ranges`` locates in the index file ``data`` (``path`` names it in a
    ``CorruptFileError``: bad version or magic, CRC mismatch, truncation, size mismatch)."""
    check_version(data, path)
    return {name: decode_one(data, r, path) for name, r in ranges.items()}


def decode_one(data: bytes, r: DeletionVectorRange, path: str) -> np.ndarray:
    """One vector of an index file, by its range."""
    where = f"deletion vector of {r.data_file_name} at offset {r.offset}"
    if r.offset < 1 or r.offset + 8 > len(data):
        raise CorruptFileError(path, f"{where}: truncated (file has {len(data)} bytes)")
    (size,) = _BE_INT.unpack_from(data, r.offset)
    (magic_be,) = _BE_INT.unpack_from(data, r.offset + 4)
    (magic_le,) = _LE_INT.unpack_from(data, r.offset + 4)
    if magic_be == MAGIC_32:
        if size != r.length:
            raise CorruptFileError(path, f"{where}: size {size}, index manifest says {r.length}")
    elif magic_le == MAGIC_64:
        if size + 8 != r.length:
            raise CorruptFileError(
                path, f"{where}: size {size} + 8, index manifest says {r.length}")
    else:
        raise CorruptFileError(
            path, f"{where}: bad magic number {magic_be} (expected {MAGIC_32} or, "
                  f"little-endian, {MAGIC_64})")
    if size < 4 or r.offset + 4 + size + 4 > len(data):
        raise CorruptFileError(path, f"{where}: truncated (size {size}, file has "
                                     f"{len(data)} bytes)")
    body = data[r.offset + 4: r.offset + 4 + size]
    (crc,) = struct.unpack_from(">I", data, r.offset + 4 + size)
    if zlib.crc32(body) & 0xFFFFFFFF != crc:
        raise CorruptFileError(path, f"{where}: CRC-32 mismatch")
    try:
        if magic_be == MAGIC_32:
            positions = np.frombuffer(
                pyroaring.BitMap.deserialize(body[4:]).to_array(), dtype=np.uint32)
        else:
            bm64 = pyroaring.BitMap64.deserialize(body[4:])
            positions = np.frombuffer(bm64.to_array(), dtype=np.uint64)
    except (ValueError, OverflowError, MemoryError) as exc:
        raise CorruptFileError(path, f"{where}: cannot decode bitmap: {exc}") from exc
    out = positions.astype(np.uint64)
    if r.cardinality is not None and int(r.cardinality) != out.size:
        raise CorruptFileError(path, f"{where}: holds {out.size} positions, index manifest "
                                     f"says {r.cardinality}")
    return out


def _record(body: bytes) -> bytes:
    return _BE_INT.pack(len(body)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def _encode_32(name: str, pos: np.ndarray) -> bytes:
    if int(pos[-1]) > MAX_POSITION_32:
        raise LakecoreValidationError(
            f"data file {name} has a deleted row position {int(pos[-1])} beyond the 32-bit "
            "deletion vector's limit; set deletion-vectors.bitmap64=true")
    bm = pyroaring.BitMap(pos.astype(np.uint32))
    bm.run_optimize()
    return _record(_BE_INT.pack(MAGIC_32) + bm.serialize())


def _encode_64(pos: np.ndarray) -> bytes:
    bm = pyroaring.BitMap64(pos)
    bm.run_optimize()
    return _record(_LE_INT.pack(MAGIC_64) + bm.serialize())


@dataclass(frozen=True, slots=True)
class DeletionFile:
    """Where one data file's vector is: its index file's path and the range in it (Paimon's
    ``DeletionFile``). Plain values, so splits carrying them pickle to executors."""

    path: str
    offset: int
    length: int
    cardinality: int | None = None

    def range_of(self, data_file_name: str) -> DeletionVectorRange:
        return DeletionVectorRange(data_file_name, self.offset, self.length, self.cardinality)


def check_version(data: bytes, path: str) -> None:
    """Raise ``CorruptFileError`` unless ``data`` starts with a known version byte."""
    if not data:
        raise CorruptFileError(path, "deletion-vector index file is empty")
    if data[0] != VERSION_ID_V1:
        raise CorruptFileError(
            path, f"deletion-vector index file version {data[0]}, expected {VERSION_ID_V1}")


def deletion_mask(positions: np.ndarray, num_rows: int, path: str) -> np.ndarray:
    """A boolean keep-mask of ``num_rows`` rows with ``positions`` cleared (columnar)."""
    keep = np.ones(num_rows, dtype=bool)
    if positions.size:
        if int(positions[-1]) >= num_rows:
            raise CorruptFileError(
                path, f"deletion vector holds row position {int(positions[-1])} but the data "
                      f"file has {num_rows} rows")
        keep[positions.astype(np.int64)] = False
    return keep
