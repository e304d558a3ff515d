"""Reading and writing manifests and manifest lists through FileIO; merging entries."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from lakecore.format.binary_row import decode_row, encode_row
from lakecore.format.index_manifest import (
    IndexManifestEntry,
    decode_index_manifest,
    encode_index_manifest,
)
from lakecore.format.manifest import (
    FileKind,
    ManifestEntry,
    decode_manifest,
    encode_manifest,
)
from lakecore.format.manifest_list import (
    ManifestFileMeta,
    decode_manifest_list,
    encode_manifest_list,
)
from lakecore.format.stats import SimpleStats
from lakecore.schema.types import DataType
from lakecore.store import manifest_cache
from lakecore.store.file_io import FileIO
from lakecore.store.paths import PathFactory


class PartitionCodec:
    """BinaryRow bytes <-> partition value tuples, memoized (few distinct partitions)."""

    def __init__(self, types: Sequence[DataType]) -> None:
        self.types = list(types)
        self._dec: dict[bytes, tuple] = {}
        self._enc: dict[tuple, bytes] = {}

    def encode(self, values: Sequence[Any]) -> bytes:
        key = tuple(values)
        out = self._enc.get(key)
        if out is None:
            out = self._enc[key] = encode_row(key, self.types)
        return out

    def decode(self, data: bytes) -> tuple:
        out = self._dec.get(data)
        if out is None:
            out = self._dec[data] = tuple(decode_row(data, self.types))
        return out


def _partition_stats(
    partitions: Iterable[tuple], codec: PartitionCodec
) -> SimpleStats:
    n = len(codec.types)
    mins: list[Any] = [None] * n
    maxs: list[Any] = [None] * n
    nulls = [0] * n
    for values in partitions:
        for i, v in enumerate(values):
            if v is None:
                nulls[i] += 1
                continue
            if mins[i] is None or v < mins[i]:
                mins[i] = v
            if maxs[i] is None or v > maxs[i]:
                maxs[i] = v
    return SimpleStats(encode_row(mins, codec.types), encode_row(maxs, codec.types), tuple(nulls))


class ManifestIO:
    """Reads and writes a table's manifests and manifest lists."""

    def __init__(
        self,
        file_io: FileIO,
        paths: PathFactory,
        partition: PartitionCodec,
        schema_id: int,
        target_file_size: int,
        codec: str = "zstandard",
    ) -> None:
        self.file_io, self.paths, self.partition = file_io, paths, partition
        self.schema_id, self.target_file_size, self.codec = schema_id, target_file_size, codec

    # -- manifests -----------------------------------------------------------------------
    def read_manifest(self, name: str) -> list[ManifestEntry]:
        """The manifest's entries, decoded once per process (``manifest_cache``)."""
        path = self.paths.manifest_path(name)
        key = self._cache_key(path)
        held = manifest_cache.get(key)
        if held is not None:
            return list(held)
        entries = decode_manifest(self.file_io.read_bytes(path), path)
        manifest_cache.put(key, entries)
        return entries

    def _cache_key(self, path: str) -> str:
        return f"{self.file_io.fs.type_name}:{path}"

    def write_manifests(self, entries: Sequence[ManifestEntry]) -> list[ManifestFileMeta]:
        """Write ``entries`` into manifests rolled near ``manifest.target-file-size``."""
        if not entries:
            return []
        out: list[ManifestFileMeta] = []
        # ~ 250 bytes per compressed entry is typical; roll by count, then measure.
        per_file = max(1, self.target_file_size // 250)
        for start in range(0, len(entries), per_file):
            out.append(self._write_one(entries[start : start + per_file]))
        return out

    def _write_one(self, entries: Sequence[ManifestEntry]) -> ManifestFileMeta:
        name = self.paths.new_manifest_name()
        data = encode_manifest(list(entries), self.codec)
        path = self.paths.manifest_path(name)
        self.file_io.write_bytes(path, data)
        manifest_cache.put(self._cache_key(path), entries)
        added = sum(1 for e in entries if e.kind is FileKind.ADD)
        buckets = [e.bucket for e in entries]
        levels = [e.file.level for e in entries]
        counts = {e.total_buckets for e in entries}
        total_buckets = counts.pop() if len(counts) == 1 else None
        return ManifestFileMeta(
            file_name=name,
            file_size=len(data),
            num_added_files=added,
            num_deleted_files=len(entries) - added,
            partition_stats=_partition_stats(
                {self.partition.decode(e.partition) for e in entries}, self.partition
            ),
            schema_id=self.schema_id,
            min_bucket=min(buckets),
            max_bucket=max(buckets),
            min_level=min(levels),
            max_level=max(levels),
            total_buckets=total_buckets,
        )

    # -- manifest lists ------------------------------------------------------------------
    def read_manifest_list(self, name: str | None) -> list[ManifestFileMeta]:
        if not name:
            return []
        path = self.paths.manifest_path(name)
        return decode_manifest_list(self.file_io.read_bytes(path), path)

    def write_manifest_list(self, metas: Sequence[ManifestFileMeta]) -> tuple[str, int]:
        name = self.paths.new_manifest_list_name()
        data = encode_manifest_list(list(metas), self.codec)
        self.file_io.write_bytes(self.paths.manifest_path(name), data)
        return name, len(data)

    # -- index manifests -----------------------------------------------------------------
    def read_index_manifest(self, name: str | None) -> list[IndexManifestEntry]:
        """The live index entries a snapshot's ``indexManifest`` names (none: empty)."""
        if not name:
            return []
        path = self.paths.manifest_path(name)
        return decode_index_manifest(self.file_io.read_bytes(path), path)

    def write_index_manifest(self, entries: Sequence[IndexManifestEntry]) -> str | None:
        """Write the live index entries; None when there are none (no ``indexManifest``)."""
        if not entries:
            return None
        name = self.paths.new_index_manifest_name()
        data = encode_index_manifest(list(entries), self.codec)
        self.file_io.write_bytes(self.paths.manifest_path(name), data)
        return name

    def read_entries(self, metas: Iterable[ManifestFileMeta]) -> list[ManifestEntry]:
        out: list[ManifestEntry] = []
        for m in metas:
            out.extend(self.read_manifest(m.file_name))
        return out


def merge_entries(entries: Iterable[ManifestEntry]) -> dict[tuple, ManifestEntry]:
    """Apply ADD/DELETE in order: the live files, keyed by Paimon's file identifier."""
    live: dict[tuple, ManifestEntry] = {}
    for e in entries:
        ident = e.identifier()
        if e.kind is FileKind.ADD:
            live[ident] = e
        else:
            live.pop(ident, None)
    return live
