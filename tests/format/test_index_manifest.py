"""Index manifests: Avro round trip of pypaimon 2.1's record, Paimon's combine rules, damage.

That pypaimon reads what lakecore writes (and the reverse) is proved end to end by
``tests/compat/test_index_layer_compat.py``: lakecore rewrites a pypaimon table's index
manifest (HASH and deletion-vector entries) and pypaimon then writes and deletes through it.
"""

from __future__ import annotations

import fastavro
import pytest

from lakecore.errors import CorruptFileError
from lakecore.format.index_manifest import (
    DELETION_VECTORS_INDEX,
    HASH_INDEX,
    DeletionVectorRange,
    IndexFileMeta,
    IndexManifestEntry,
    combine_index_entries,
    decode_index_manifest,
    encode_index_manifest,
)
from lakecore.format.manifest import FileKind

P0, P1 = b"\x00" * 12, b"\x01" + b"\x00" * 11


def entry(name: str, kind: str = HASH_INDEX, partition: bytes = P0, bucket: int = 0,
          file_kind: FileKind = FileKind.ADD, **meta) -> IndexManifestEntry:
    return IndexManifestEntry(file_kind, partition, bucket,
                              IndexFileMeta(kind, name, meta.pop("size", 16),
                                            meta.pop("rows", 4), **meta))


def test_round_trip_keeps_every_field_as_paimon_names_it(tmp_path):
    dv = {"data-1.parquet": DeletionVectorRange("data-1.parquet", 1, 22, 3),
          "data-2.parquet": DeletionVectorRange("data-2.parquet", 23, 18, None)}
    entries = [entry("index-h"), entry("index-dv", DELETION_VECTORS_INDEX, P1, 3, rows=2,
                                       dv_ranges=dv, external_path="s3://b/t/index-dv")]
    data = encode_index_manifest(entries)
    back = decode_index_manifest(data, "manifest/index-manifest-x")
    assert back == entries
    assert back[1].index_file.dv_ranges == dv
    # the field names and values on disk are Paimon's
    path = tmp_path / "m"
    path.write_bytes(data)
    with open(path, "rb") as f:
        raw = list(fastavro.reader(f))
    assert [(r["_KIND"], r["_BUCKET"], r["_INDEX_TYPE"], r["_FILE_NAME"], r["_ROW_COUNT"])
            for r in raw] == [(0, 0, "HASH", "index-h", 4),
                              (0, 3, "DELETION_VECTORS", "index-dv", 2)]
    assert raw[1]["_DELETIONS_VECTORS_RANGES"] == [
        {"f0": "data-1.parquet", "f1": 1, "f2": 22, "_CARDINALITY": 3},
        {"f0": "data-2.parquet", "f1": 23, "f2": 18, "_CARDINALITY": None}]
    assert raw[1]["_EXTERNAL_PATH"] == "s3://b/t/index-dv" and raw[0]["_GLOBAL_INDEX"] is None


def test_combine_replaces_a_buckets_hash_and_vectors_and_deletes_by_name():
    h0, h1 = entry("h0"), entry("h1", bucket=1)
    dv0 = entry("dv0", DELETION_VECTORS_INDEX)
    g = entry("g0", "BTREE")
    new_h0 = entry("h0-v2")
    out = combine_index_entries([h0, h1, dv0, g], [new_h0, entry("g1", "BTREE"),
                                                  h1.as_delete()])
    assert [e.index_file.file_name for e in out] == ["dv0", "g0", "h0-v2", "g1"]
    # an added HASH replaces the bucket's HASH even when the DELETE was not sent (pypaimon
    # and Java send only the new file), but never another partition's or type's
    out = combine_index_entries([h0, entry("h0-p1", partition=P1)], [new_h0])
    assert [e.index_file.file_name for e in out] == ["h0-p1", "h0-v2"]


@pytest.mark.parametrize("data", [b"", b"garbage", b"Obj\x01\x00"])
def test_damaged_index_manifest_is_a_corrupt_file_error_naming_it(data):
    path = "/t/manifest/index-manifest-u-0"
    with pytest.raises(CorruptFileError) as info:
        decode_index_manifest(data, path)
    assert info.value.path == path and path in str(info.value)


def test_truncated_index_manifest_is_a_corrupt_file_error():
    data = encode_index_manifest([entry(f"h{i}", bucket=i) for i in range(50)])
    with pytest.raises(CorruptFileError, match="index-manifest-u-1"):
        decode_index_manifest(data[: len(data) // 2], "index-manifest-u-1")
