"""Decoded manifests are kept per process (manifest files never change once written): a
commit's own manifests go in as written, identical to what a cold read decodes; repeated plans
and commits read each manifest's bytes once; the cache stays within its bound."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import CatalogFactory
from lakecore.format.manifest import decode_manifest
from lakecore.store import manifest_cache
from lakecore.store.file_io import FileIO
from lakecore.table import FileStoreTable
from tests.core.helpers import make_table

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])


def _commit(table: FileStoreTable, ids: list[int]) -> None:
    builder = table.new_batch_write_builder()
    write = builder.new_write()
    write.write_arrow(pa.table({"id": ids, "v": [f"v{i}" for i in ids]}, schema=SCHEMA))
    builder.new_commit().commit(write.prepare_commit())
    write.close()


def _read(table: FileStoreTable) -> list[dict]:
    builder = table.new_read_builder()
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
    return sorted(rows, key=lambda r: r["id"])


@pytest.fixture
def table(tmp_path: Path) -> FileStoreTable:
    manifest_cache.clear()
    t = make_table(str(tmp_path), SCHEMA, primary_keys=["id"], options={"bucket": "2"})
    for start in range(0, 40, 10):
        _commit(t, list(range(start, start + 15)))
    return t


@pytest.fixture
def manifest_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The manifest files whose bytes are read (the reads still happen)."""
    seen: list[str] = []
    real = FileIO.read_bytes

    def counting(self: FileIO, path: str) -> bytes:
        if "/manifest/manifest-" in path and "/manifest-list-" not in path:
            seen.append(path)
        return real(self, path)

    monkeypatch.setattr(FileIO, "read_bytes", counting)
    return seen


def _live_manifests(t: FileStoreTable) -> list[str]:
    snap = t.snapshot_manager.latest()
    assert snap is not None
    mio = t.manifest_io()
    metas = mio.read_manifest_list(snap.base_manifest_list)
    metas += mio.read_manifest_list(snap.delta_manifest_list)
    return [m.file_name for m in metas]


def test_written_manifests_hold_what_a_cold_read_decodes(table):
    mio = table.manifest_io()
    names = _live_manifests(table)
    assert names and all(manifest_cache.get(mio._cache_key(table.paths.manifest_path(n)))
                         for n in names)
    held = {n: mio.read_manifest(n) for n in names}
    for n in names:
        path = table.paths.manifest_path(n)
        assert held[n] == decode_manifest(Path(path).read_bytes(), path)


def test_plans_and_commits_read_each_manifest_once(table, tmp_path, manifest_reads):
    want = _read(table)
    manifest_cache.clear()
    fresh = CatalogFactory.create({"warehouse": str(tmp_path)}).get_table("db.t")
    assert _read(fresh) == want
    first = list(manifest_reads)
    assert first and len(first) == len(set(first))
    for _ in range(3):
        assert _read(CatalogFactory.create({"warehouse": str(tmp_path)})
                     .get_table("db.t")) == want
    assert manifest_reads == first  # later plans decode nothing again
    _commit(fresh, [100])
    assert manifest_reads == first  # nor does a commit, nor its writer's restore
    assert _read(fresh)[-1] == {"id": 100, "v": "v100"}


def test_a_cold_cache_reads_the_same_table(table, tmp_path):
    hot = _read(table)
    manifest_cache.clear()
    assert manifest_cache.size() == 0
    assert _read(CatalogFactory.create({"warehouse": str(tmp_path)}).get_table("db.t")) == hot
    assert manifest_cache.size() > 0


def test_the_cache_keeps_the_most_recent_manifests_within_its_bound(table, monkeypatch):
    mio = table.manifest_io()
    names = _live_manifests(table)
    assert len(names) >= 3  # so the two largest cannot hold them all
    entries = {n: mio.read_manifest(n) for n in names}
    sizes = sorted(len(e) for e in entries.values())
    monkeypatch.setattr(manifest_cache, "MAX_ENTRIES", sizes[-1] + sizes[-2])
    manifest_cache.clear()
    for n in names:
        manifest_cache.put(n, entries[n])
        assert manifest_cache.size() <= manifest_cache.MAX_ENTRIES
    assert manifest_cache.get(names[-1]) == tuple(entries[names[-1]])  # the newest stays
    assert manifest_cache.get(names[0]) is None  # the oldest went first
    manifest_cache.put("too-big", [entries[names[0]][0]] * (manifest_cache.MAX_ENTRIES + 1))
    assert manifest_cache.get("too-big") is None


def test_missing_names_the_absent_files_in_order(tmp_path):
    file_io, _ = FileIO.for_uri(str(tmp_path))
    present = [str(tmp_path / f"f{i}") for i in range(3)]
    for p in present:
        Path(p).write_bytes(b"x")
    absent = [str(tmp_path / "gone-a"), str(tmp_path / "gone-b")]
    asked = [present[0], absent[0], present[1], absent[1], present[2]]
    assert file_io.missing(asked) == absent
    assert file_io.missing(present) == []
