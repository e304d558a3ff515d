"""Reading Avro object container files (manifests, manifest lists, index manifests).

``fastavro.reader`` parses the writer's schema out of every file it opens: ``json.loads`` of a
2 KB schema and ``parse_schema``, about 80 us, half of what reading a small manifest costs. A
plan after a compaction opens a dozen manifests, each written with one of a handful of schemas,
so this module parses the container itself and keeps each distinct schema text's parsed form.

The container (Avro 1.11 spec, "Object Container Files"): the magic ``Obj\\x01``; the metadata,
an Avro ``map<bytes>`` holding ``avro.schema`` (JSON) and ``avro.codec``; a 16-byte sync marker;
then blocks of (record count: long, byte size: long, the records' bytes, the codec applied to
them, the sync marker again). Longs are zig-zag varints. The records of a block are decoded one
after another with ``fastavro.schemaless_reader``, which decodes a record as fast as
``fastavro.reader`` does, so a large manifest costs what it did.

Codecs decoded here: ``null``, ``deflate`` (raw DEFLATE), ``zstandard`` (when a zstd module
is importable), ``bzip2``, ``xz``. A file in another codec (``snappy``: its library is
optional) goes to ``fastavro.reader``.
"""

from __future__ import annotations

import bz2
import importlib
import io
import json
import lzma
import zlib
from collections.abc import Callable
from functools import lru_cache
from typing import Any, cast

import fastavro


def _zstd_decompress() -> Callable[[bytes], bytes] | None:
    """Python 3.14's ``compression.zstd``, or backports.zstd on 3.11 (requirements.txt); with
    neither, fastavro.reader reads zstd files (or says what to install)."""
    for name in ("compression.zstd", "backports.zstd"):
        try:
            return cast(Callable[[bytes], bytes], importlib.import_module(name).decompress)
        except ImportError:
            continue
    return None


MAGIC = b"Obj\x01"
SYNC_SIZE = 16


class ContainerError(ValueError):
    """The bytes are not a well-formed Avro container (the caller names the file)."""


_DECOMPRESS: dict[str, Callable[[bytes], bytes]] = {
    "null": lambda data: data,
    "deflate": lambda data: zlib.decompress(data, -15),
    "bzip2": bz2.decompress,
    "xz": lzma.decompress,
}
_ZSTD = _zstd_decompress()
if _ZSTD is not None:
    _DECOMPRESS["zstandard"] = _ZSTD


class _Cursor:
    """Zig-zag varints and length-prefixed bytes from a buffer."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def long(self) -> int:
        data, pos, shift, value = self.data, self.pos, 0, 0
        while True:
            if pos >= len(data):
                raise ContainerError("truncated: a long runs past the end")
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
            if shift > 63:
                raise ContainerError("a long longer than 10 bytes")
        self.pos = pos
        return (value >> 1) ^ -(value & 1)

    def take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise ContainerError(f"truncated: {size} bytes wanted at offset {self.pos}")
        out = self.data[self.pos:self.pos + size]
        self.pos += size
        return out

    def at_end(self) -> bool:
        return self.pos >= len(self.data)


def _metadata(cursor: _Cursor) -> dict[str, bytes]:
    meta: dict[str, bytes] = {}
    while True:
        count = cursor.long()
        if count == 0:
            return meta
        if count < 0:  # a negative count is followed by the block's byte size
            count = -count
            cursor.long()
        for _ in range(count):
            key = cursor.take(cursor.long()).decode("utf-8")
            meta[key] = cursor.take(cursor.long())


@lru_cache(maxsize=64)
def parsed_schema(text: bytes) -> Any:
    """The parsed form of a writer schema's JSON text (cached: files repeat a few schemas)."""
    return fastavro.parse_schema(json.loads(text))


def read_records(data: bytes) -> list[dict[str, Any]]:
    """Every record of an Avro container, decoded with the schema its writer stored.

    Raises ``ContainerError`` (or the decoder's own error) on malformed bytes."""
    cursor = _Cursor(data)
    if cursor.take(len(MAGIC)) != MAGIC:
        raise ContainerError("not an Avro container: bad magic")
    meta = _metadata(cursor)
    sync = cursor.take(SYNC_SIZE)
    codec = meta.get("avro.codec", b"null").decode("ascii")
    decompress = _DECOMPRESS.get(codec)
    if decompress is None:
        return cast(list[dict[str, Any]], list(fastavro.reader(io.BytesIO(data))))
    if "avro.schema" not in meta:
        raise ContainerError("no avro.schema in the header")
    schema = parsed_schema(meta["avro.schema"])
    records: list[dict[str, Any]] = []
    while not cursor.at_end():
        count = cursor.long()
        block = io.BytesIO(decompress(cursor.take(cursor.long())))
        if cursor.take(SYNC_SIZE) != sync:
            raise ContainerError(f"sync marker mismatch after the block ending at {cursor.pos}")
        records.extend(cast(dict[str, Any], fastavro.schemaless_reader(block, schema, None))
                       for _ in range(count))
    return records
