"""The Avro container reader decodes what fastavro (and so Java's and pypaimon's Avro) writes."""

from __future__ import annotations

import io
from typing import Any

import fastavro
import pytest

from lakecore.format.avro_container import ContainerError, parsed_schema, read_records

SCHEMA = fastavro.parse_schema({
    "type": "record", "name": "r", "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"]},
        {"name": "blob", "type": "bytes"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ]})


def _records(n: int) -> list[dict[str, Any]]:
    return [{"id": i - n // 2, "name": None if i % 3 == 0 else f"n{i}",
             "blob": bytes([i % 256]) * i, "tags": [str(i)] * (i % 4),
             "at": 1_700_000_000_000 + i} for i in range(n)]


def _container(records: list[dict[str, Any]], codec: str, sync_interval: int = 16000,
               metadata: dict[str, str] | None = None) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, SCHEMA, records, codec=codec, sync_interval=sync_interval,
                    metadata=metadata)
    return buf.getvalue()


def _codecs() -> list[str]:
    codecs = ["null", "deflate", "zstandard", "bzip2", "xz"]
    try:
        import cramjam  # noqa: F401  (fastavro's snappy backend: read through fastavro.reader)
    except ImportError:
        return codecs
    return [*codecs, "snappy"]


@pytest.mark.parametrize("codec", _codecs())
@pytest.mark.parametrize("sync_interval", [16000, 200])  # one block, then many blocks
def test_reads_what_fastavro_reads(codec: str, sync_interval: int) -> None:
    data = _container(_records(300), codec, sync_interval, metadata={"x": "y" * 500})
    expected = list(fastavro.reader(io.BytesIO(data)))
    assert read_records(data) == expected
    assert len(expected) == 300


def test_empty_container_has_no_records() -> None:
    assert read_records(_container([], "zstandard")) == []


def test_metadata_map_in_blocks_with_byte_sizes() -> None:
    """Avro lets a map block carry a negative count followed by its byte size."""
    data = _container(_records(5), "null")
    magic, rest = data[:4], data[4:]
    # the header's map as fastavro writes it: a positive count; rewrite it as -count + size
    count = fastavro.schemaless_reader(io.BytesIO(rest), "long", None)
    assert isinstance(count, int) and count > 0
    head = io.BytesIO(rest)
    fastavro.schemaless_reader(head, "long", None)
    start = head.tell()
    for _ in range(count):
        fastavro.schemaless_reader(head, "string", None)
        fastavro.schemaless_reader(head, "bytes", None)
    entries = rest[start:head.tell()]
    out = io.BytesIO()
    fastavro.schemaless_writer(out, "long", -count)
    fastavro.schemaless_writer(out, "long", len(entries))
    rewritten = magic + out.getvalue() + entries + rest[head.tell():]
    assert read_records(rewritten) == list(fastavro.reader(io.BytesIO(data)))


@pytest.mark.parametrize("cut", ["magic", "truncated", "sync"])
def test_malformed_containers_raise(cut: str) -> None:
    data = _container(_records(50), "zstandard", sync_interval=200)
    if cut == "magic":
        bad = b"Obj\x02" + data[4:]
    elif cut == "truncated":
        bad = data[:-20]
    else:  # the last block's trailing sync marker smashed
        bad = data[:-16] + bytes(16)
    with pytest.raises(ContainerError):
        read_records(bad)


def test_a_schema_text_is_parsed_once() -> None:
    first = _container(_records(3), "null")
    second = _container(_records(4), "deflate")
    parsed_schema.cache_clear()
    read_records(first)
    read_records(second)
    info = parsed_schema.cache_info()
    assert (info.misses, info.hits) == (1, 1)


def test_a_codec_without_a_decoder_here_goes_to_fastavro(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a zstd module (or for snappy), fastavro.reader reads the file."""
    from lakecore.format import avro_container

    data = _container(_records(40), "zstandard", sync_interval=200)
    monkeypatch.delitem(avro_container._DECOMPRESS, "zstandard")
    assert read_records(data) == list(fastavro.reader(io.BytesIO(data)))
