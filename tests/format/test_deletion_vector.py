"""Deletion-vector index files: round trips, damage detection, and pypaimon's own DV code
reading ours and writing what we read (through its venv)."""

from __future__ import annotations

import json
import struct
import subprocess
import zlib

import pytest

from lakecore.errors import CorruptFileError, LakecoreValidationError
from lakecore.format.deletion_vector import (
    MAGIC_32,
    decode_deletion_vectors,
    encode_deletion_vectors,
    index_file_meta,
    split_index_file,
)
from lakecore.format.index_manifest import DELETION_VECTORS_INDEX, DeletionVectorRange
from tests.compat.pypaimon_runner import PAIMON_PYTHON, SKIP_REASON, paimon_available

VECTORS = {
    "data-a.parquet": [0, 3, 5, 70_000, 70_001],
    "data-b.parquet": list(range(10, 5000)),  # a run container
    "data-c.parquet": [2**31 - 1],
}


def _expected(vectors):
    return {k: sorted(set(v)) for k, v in vectors.items() if v}


@pytest.mark.parametrize("bitmap64", [False, True])
def test_round_trip(bitmap64):
    data, ranges = encode_deletion_vectors({**VECTORS, "empty.parquet": []}, bitmap64)
    assert data[0] == 1  # version byte
    assert set(ranges) == set(VECTORS)  # empty vectors are not stored
    back = decode_deletion_vectors(data, ranges, "f")
    assert {k: v.tolist() for k, v in back.items()} == _expected(VECTORS)
    assert {k: r.cardinality for k, r in ranges.items()} == {
        k: len(set(v)) for k, v in VECTORS.items()}
    meta = index_file_meta("index-x-0", data, ranges)
    assert (meta.index_type, meta.file_size, meta.row_count) == (
        DELETION_VECTORS_INDEX, len(data), 3)


@pytest.mark.parametrize("bitmap64", [False, True])
def test_rolled_index_files_each_decode_their_vectors(bitmap64):
    """deletion-vectors.index-file.target-size: vectors fill a file until it exceeds the
    target (Paimon's DeletionVectorIndexFileWriter); every file starts with the version byte
    and its ranges point into it."""
    data, ranges = encode_deletion_vectors(VECTORS, bitmap64)
    whole = split_index_file(data, ranges, target_size=len(data))
    assert whole == [(data, ranges)]
    parts = split_index_file(data, ranges, target_size=1)  # every vector overflows a file
    assert [sorted(r) for _, r in parts] == [[n] for n in VECTORS]
    # a and b together (up to c's offset) exceed the target by one byte: c starts a new file
    two = split_index_file(data, ranges, target_size=ranges["data-c.parquet"].offset - 1)
    assert [sorted(r) for _, r in two] == [["data-a.parquet", "data-b.parquet"],
                                          ["data-c.parquet"]]
    for parts_ in (parts, two):
        back = {}
        for blob, rs in parts_:
            assert blob[0] == 1
            back.update({k: v.tolist() for k, v in decode_deletion_vectors(blob, rs, "f").items()})
        assert back == _expected(VECTORS)
        assert sum(len(b) - 1 for b, _ in parts_) == len(data) - 1


def test_32bit_layout_size_magic_crc():
    data, ranges = encode_deletion_vectors({"f": [1, 2, 3]})
    r = ranges["f"]
    assert r.offset == 1
    size, magic = struct.unpack_from(">ii", data, r.offset)
    assert magic == MAGIC_32 and size == r.length  # length = magic + bitmap
    body = data[r.offset + 4: r.offset + 4 + size]
    assert struct.unpack_from(">I", data, r.offset + 4 + size)[0] == zlib.crc32(body)
    assert len(data) == 1 + 4 + size + 4


def test_64bit_positions_beyond_int():
    data, ranges = encode_deletion_vectors({"f": [1, 2**33 + 7]}, bitmap64=True)
    r = ranges["f"]
    assert r.length == len(data) - 1  # the whole record
    assert decode_deletion_vectors(data, ranges, "f")["f"].tolist() == [1, 2**33 + 7]
    with pytest.raises(LakecoreValidationError, match="bitmap64"):
        encode_deletion_vectors({"f": [2**31]})


def test_damage_is_a_corrupt_file_error_naming_the_file():
    data, ranges = encode_deletion_vectors({"f": [1, 2, 3]})
    r = ranges["f"]
    flipped = bytearray(data)
    flipped[r.offset + 10] ^= 0xFF
    with pytest.raises(CorruptFileError, match="CRC") as e:
        decode_deletion_vectors(bytes(flipped), ranges, "/t/index/index-1")
    assert e.value.path == "/t/index/index-1"
    bad_magic = bytearray(data)
    bad_magic[r.offset + 4] ^= 0x01
    with pytest.raises(CorruptFileError, match="magic"):
        decode_deletion_vectors(bytes(bad_magic), ranges, "p")
    with pytest.raises(CorruptFileError, match="truncated"):
        decode_deletion_vectors(data[:-3], ranges, "p")
    with pytest.raises(CorruptFileError, match="version"):
        decode_deletion_vectors(b"\x02" + data[1:], ranges, "p")
    wrong_len = {"f": DeletionVectorRange("f", r.offset, r.length + 1, 3)}
    with pytest.raises(CorruptFileError, match="size"):
        decode_deletion_vectors(data, wrong_len, "p")


# -- pypaimon's own deletion-vector classes ---------------------------------------------------

_THEIR_READ = """
import json, sys
from pypaimon.common.file_io import FileIO
from pypaimon.deletionvectors.deletion_vector import DeletionVector
from pypaimon.table.source.deletion_file import DeletionFile
args = json.loads(sys.argv[1])
fio = FileIO.get(args["path"])
out = {}
for name, (offset, length) in args["ranges"].items():
    dv = DeletionVector.read(fio, DeletionFile(args["path"], offset, length))
    out[name] = sorted(dv.bit_map())
print(json.dumps(out))
"""

_THEIR_WRITE = """
import json, sys
from pypaimon.deletionvectors.bitmap_deletion_vector import BitmapDeletionVector
args = json.loads(sys.argv[1])
data = bytearray([1])
ranges = {}
for name, positions in args["vectors"].items():
    dv = BitmapDeletionVector()
    for p in positions:
        dv.delete(p)
    rec = dv.serialize()
    ranges[name] = [len(data), len(rec) - 8, dv.get_cardinality()]
    data += rec
open(args["path"], "wb").write(bytes(data))
print(json.dumps(ranges))
"""


def _paimon(script: str, args: dict) -> dict:
    out = subprocess.run([str(PAIMON_PYTHON), "-c", script, json.dumps(args)],
                         capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout)


@pytest.mark.skipif(not paimon_available(), reason=SKIP_REASON)
def test_pypaimon_reads_ours(tmp_path):
    data, ranges = encode_deletion_vectors(VECTORS)
    path = tmp_path / "index-ours-0"
    path.write_bytes(data)
    theirs = _paimon(_THEIR_READ, {"path": str(path), "ranges": {
        k: [r.offset, r.length] for k, r in ranges.items()}})
    assert theirs == _expected(VECTORS)


@pytest.mark.skipif(not paimon_available(), reason=SKIP_REASON)
def test_we_read_pypaimons(tmp_path):
    path = tmp_path / "index-theirs-0"
    raw = _paimon(_THEIR_WRITE, {"path": str(path), "vectors": VECTORS})
    ranges = {k: DeletionVectorRange(k, o, n, c) for k, (o, n, c) in raw.items()}
    back = decode_deletion_vectors(path.read_bytes(), ranges, str(path))
    assert {k: v.tolist() for k, v in back.items()} == _expected(VECTORS)
