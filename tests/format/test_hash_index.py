"""HASH index files (dynamic-bucket tables): big-endian int32 key hashes, one file per bucket."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from lakecore.errors import CorruptFileError
from lakecore.format.hash_index import decode_hash_index, encode_hash_index


def test_encode_is_sorted_unique_big_endian_int32() -> None:
    data = encode_hash_index(np.array([7, -1, 2**31 - 1, 7, -(2**31)], np.int64))
    assert data == struct.pack(">4i", -(2**31), -1, 7, 2**31 - 1)


def test_decode_reads_what_paimon_writes() -> None:
    raw = struct.pack(">3i", -771300025, 260196596, 1447522506)  # a pypaimon 2.1 file
    got = decode_hash_index(raw, "index-x")
    assert got.dtype == np.int32
    assert got.tolist() == [-771300025, 260196596, 1447522506]
    assert decode_hash_index(b"", "index-empty").tolist() == []


@pytest.mark.parametrize("size", [1, 2, 3, 5, 13])
def test_damaged_file_is_corrupt(size: int) -> None:
    with pytest.raises(CorruptFileError) as info:
        decode_hash_index(b"\x00" * size, "wh/t/index/index-bad")
    assert "wh/t/index/index-bad" in str(info.value) and f"{size} bytes" in str(info.value)


def test_out_of_range_values_are_refused() -> None:
    with pytest.raises(ValueError):
        encode_hash_index(np.array([2**31], np.int64))
