"""HASH index files of a dynamic-bucket table (``bucket = -1``): ``<table>/index/index-<uuid>-N``.

One file per (partition, bucket) holds the key hash of every key in that bucket as big-endian
4-byte signed ints, nothing else (Java ``HashIndexFile``; pypaimon 2.1 writes them sorted and
unique). The hash is the trimmed primary key's ``BinaryRow.hashCode()``
(``lakecore.format.bucket.hash_rows``). The index manifest entry's row count is the number of
hashes. Reading and writing are columnar (numpy ``'>i4'``).
"""

from __future__ import annotations

import numpy as np

from lakecore.errors import CorruptFileError

_BIG_ENDIAN_INT32 = np.dtype(">i4")


def encode_hash_index(hashes: np.ndarray) -> bytes:
    """The file's bytes: ``hashes`` (any int dtype holding int32 values) sorted, unique,
    big-endian."""
    values = np.asarray(hashes, dtype=np.int64)
    if values.size > 1 and bool(np.any(values[1:] < values[:-1])):  # a writer's are sorted
        values = np.sort(values)
    if values.size > 1:
        distinct = np.empty(values.size, dtype=bool)
        distinct[0] = True
        np.not_equal(values[1:], values[:-1], out=distinct[1:])
        if not distinct.all():
            values = values[distinct]
    if values.size and (values[0] < -(2**31) or values[-1] >= 2**31):
        raise ValueError("HASH index values must be 32-bit signed ints")
    return values.astype(_BIG_ENDIAN_INT32).tobytes()


def decode_hash_index(data: bytes, path: str) -> np.ndarray:
    """The hashes of a HASH index file as native int32 (file order). ``path`` names a damaged
    file (length not a multiple of 4) in the ``CorruptFileError``."""
    if len(data) % 4:
        raise CorruptFileError(
            path, f"HASH index of {len(data)} bytes: not a whole number of 4-byte key hashes")
    return np.frombuffer(data, dtype=_BIG_ENDIAN_INT32).astype(np.int32)
