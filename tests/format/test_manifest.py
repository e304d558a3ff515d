"""Manifest and manifest-list codecs: round trips, tolerance, corruption, and pypaimon as oracle."""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import subprocess
from dataclasses import replace
from datetime import UTC, timedelta, timezone
from pathlib import Path
from typing import Any

import fastavro
import pytest

from lakecore.errors import CorruptFileError, OptionError
from lakecore.format.manifest import (
    DATA_FILE_META_SCHEMA,
    MANIFEST_ENTRY_SCHEMA,
    DataFileMeta,
    FileKind,
    FileSource,
    ManifestEntry,
    creation_time_from_epoch_millis,
    decode_manifest,
    encode_manifest,
)
from lakecore.format.manifest_list import (
    ManifestFileMeta,
    decode_manifest_list,
    encode_manifest_list,
)
from lakecore.format.snapshot import CommitKind, Snapshot
from lakecore.format.stats import EMPTY_STATS, SimpleStats

PAIMON_PY = Path(__file__).resolve().parents[2] / ".venv-paimon" / "bin" / "python"
needs_paimon = pytest.mark.skipif(
    not PAIMON_PY.is_file(), reason=f"pypaimon venv missing ({PAIMON_PY}): run make .venv-paimon"
)
IST = timezone(timedelta(hours=5, minutes=30))  # POSIX TZ "IST-5:30" in the subprocess


# --- tiny helpers -------------------------------------------------------------------------------


def long_row(*values: int) -> bytes:
    """BinaryRow bytes of BIGINT fields (fixed-width, so no variable part)."""
    header = ((len(values) + 63 + 8) // 64) * 8
    return struct.pack(">i", len(values)) + bytes(header) + b"".join(
        struct.pack("<q", v) for v in values
    )


def str_row(text: str) -> bytes:
    """BinaryRow bytes of one short (inline, <= 7 bytes) STRING field."""
    raw = text.encode()
    return struct.pack(">i", 1) + bytes(8) + raw + bytes(7 - len(raw)) + bytes([0x80 | len(raw)])


def inline_str(row: bytes) -> str:
    return row[12 : 12 + (row[19] & 0x7F)].decode()


def full_file(name: str = "data-1.parquet", level: int = 1) -> DataFileMeta:
    """A file with every optional field set."""
    return DataFileMeta(
        file_name=name, file_size=4096, row_count=10, min_key=long_row(1), max_key=long_row(9),
        key_stats=SimpleStats(long_row(1), long_row(9), (0,)),
        value_stats=SimpleStats(str_row("a"), str_row("z"), (None,)),
        min_sequence_number=5, max_sequence_number=14, schema_id=0, level=level,
        extra_files=("data-1.parquet.index",), creation_time_millis=1_700_000_000_123,
        delete_row_count=2, embedded_index=b"\x01\x02", file_source=FileSource.COMPACT,
        value_stats_cols=("v",), external_path="file:/ext/data-1.parquet", first_row_id=100,
        write_cols=("dt", "id", "v"), write_cols_sequences=(3, 4),
    )


def bare_file(name: str = "data-2.parquet") -> DataFileMeta:
    """A file with every optional field left unset."""
    return DataFileMeta(name, 10, 1, long_row(3), long_row(3), EMPTY_STATS, EMPTY_STATS, 0, 0, 0, 0)


def raw_records(data: bytes) -> tuple[Any, list[dict[str, Any]]]:
    reader = fastavro.reader(io.BytesIO(data))
    return reader.writer_schema, list(reader)


# --- pure round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["zstd", "null", "deflate"])
def test_manifest_round_trip(codec: str) -> None:
    entries = [
        ManifestEntry(FileKind.ADD, str_row("a"), 0, 2, full_file()),
        ManifestEntry(FileKind.DELETE, str_row("b"), 1, 2, bare_file()),
    ]
    assert decode_manifest(encode_manifest(entries, codec), "m") == entries


def test_default_codec_is_zstd_like_paimon() -> None:
    assert fastavro.reader(io.BytesIO(encode_manifest([]))).codec == "zstandard"
    assert decode_manifest(encode_manifest([]), "m") == []


def test_unknown_codec_is_an_option_error() -> None:
    with pytest.raises(OptionError, match="manifest.compression"):
        encode_manifest([], "lzo")


def test_codec_without_its_library_says_what_to_install() -> None:
    entries = [ManifestEntry(FileKind.ADD, str_row("a"), 0, 1, bare_file())]
    try:
        import cramjam  # noqa: F401  (fastavro's snappy backend)
    except ImportError:
        with pytest.raises(ModuleNotFoundError, match="cramjam"):
            encode_manifest(entries, "snappy")
    else:
        assert decode_manifest(encode_manifest(entries, "snappy"), "m") == entries


def test_manifest_list_round_trip() -> None:
    metas = [
        ManifestFileMeta("manifest-1", 2048, 3, 1, SimpleStats(str_row("a"), str_row("b"), (0,)),
                         0, 0, 1, 0, 5, 10, 20, 2, ("manifest-1.sidecar",)),
        ManifestFileMeta("manifest-2", 100, 0, 0, EMPTY_STATS, 1),
    ]
    assert decode_manifest_list(encode_manifest_list(metas), "l") == metas


def test_upgrade_and_identity() -> None:
    f = full_file(level=0)
    up = f.upgrade(3)
    assert (up.level, up.file_name, replace(up, level=0)) == (3, f.file_name, f)
    a = ManifestEntry(FileKind.ADD, str_row("a"), 1, 2, f)
    b = ManifestEntry(FileKind.DELETE, str_row("a"), 1, 2, f)
    assert a.identifier() == b.identifier()  # kind is not part of the identity
    assert a.identifier()[:5] == (str_row("a"), 1, 0, f.file_name, f.extra_files)
    assert replace(a, file=up).identifier() != a.identifier()  # another level, another entry
    assert replace(a, bucket=0).identifier() != a.identifier()


def test_creation_time_is_local_wall_clock() -> None:
    # Paimon stores the writer's local date-time as if it were UTC; 0 UTC is 05:30 in IST.
    assert creation_time_from_epoch_millis(0, IST) == 19_800_000
    f = replace(bare_file(), creation_time_millis=19_800_000)
    assert f.creation_epoch_millis(IST) == 0
    assert f.creation_epoch_millis(UTC) == 19_800_000
    assert bare_file().creation_epoch_millis() is None


# --- tolerance and corruption -------------------------------------------------------------------


def _old_schema() -> dict[str, Any]:
    """What Java Paimon 0.9 wrote: no external path / row ids / write cols, naive timestamps."""
    drop = {"_EXTERNAL_PATH", "_FIRST_ROW_ID", "_WRITE_COLS", "_WRITE_COLS_SEQUENCES",
            "_VALUE_STATS_COLS"}
    file_schema = dict(DATA_FILE_META_SCHEMA)
    file_schema["fields"] = [
        {**f, "type": ["null", {"type": "long", "logicalType": "local-timestamp-millis"}]}
        if f["name"] == "_CREATION_TIME" else f
        for f in DATA_FILE_META_SCHEMA["fields"] if f["name"] not in drop
    ]
    schema = json.loads(json.dumps(MANIFEST_ENTRY_SCHEMA))
    schema["name"] = "org.apache.paimon.avro.generated.record"
    schema["fields"][-1]["type"] = file_schema
    return schema


def test_decode_tolerates_older_writers() -> None:
    f = replace(bare_file(), creation_time_millis=1_700_000_000_123, file_source=FileSource.APPEND)
    record = encode_manifest([ManifestEntry(FileKind.ADD, str_row("a"), 0, 1, f)], "null")
    _, [raw] = raw_records(record)
    for k in ("_EXTERNAL_PATH", "_FIRST_ROW_ID", "_WRITE_COLS", "_WRITE_COLS_SEQUENCES",
              "_VALUE_STATS_COLS"):
        del raw["_FILE"][k]
    raw["_FILE"]["_CREATION_TIME"] = 1_700_000_000_123
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(_old_schema()), [raw], codec="deflate")
    [entry] = decode_manifest(buf.getvalue(), "old")
    assert entry.file == f


def _broken(data: bytes) -> list[bytes]:
    mid = len(data) // 2
    smashed = data[:mid] + b"\xff" * 9 + data[mid + 9 :]
    return [b"", b"not avro at all", data[:mid], data[:-5], smashed]


def test_corrupt_manifest_names_the_path() -> None:
    data = encode_manifest([ManifestEntry(FileKind.ADD, str_row("a"), 0, 2, full_file())] * 50)
    for bad in _broken(data):
        with pytest.raises(CorruptFileError) as err:
            decode_manifest(bad, "manifest/manifest-x-0")
        assert err.value.path == "manifest/manifest-x-0"


def test_corrupt_manifest_list_names_the_path() -> None:
    data = encode_manifest_list([ManifestFileMeta("m", 1, 1, 0, EMPTY_STATS, 0)] * 50)
    for bad in _broken(data):
        with pytest.raises(CorruptFileError, match="manifest-list-x"):
            decode_manifest_list(bad, "manifest/manifest-list-x")


def test_wrong_record_shape_and_unknown_kind_are_corrupt() -> None:
    meta_list = encode_manifest_list([ManifestFileMeta("m", 1, 1, 0, EMPTY_STATS, 0)])
    with pytest.raises(CorruptFileError, match="_KIND"):
        decode_manifest(meta_list, "p")  # a manifest list is not a manifest
    _, [raw] = raw_records(encode_manifest([ManifestEntry(FileKind.ADD, b"", 0, 1, bare_file())]))
    raw["_KIND"] = 7
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(MANIFEST_ENTRY_SCHEMA), [raw])
    with pytest.raises(CorruptFileError, match="_KIND value 7"):
        decode_manifest(buf.getvalue(), "p")


# --- pypaimon as the oracle ---------------------------------------------------------------------

CREATE_TABLE = """
import json, sys, pyarrow as pa
from pypaimon import CatalogFactory, Schema
arg = json.loads(sys.argv[1])
cat = CatalogFactory.create({"warehouse": arg["warehouse"]})
cat.create_database("db", True)
sch = pa.schema([pa.field("dt", pa.string(), nullable=False),
                 pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
cat.create_table("db.t", Schema.from_pyarrow_schema(
    sch, partition_keys=["dt"], primary_keys=["dt", "id"], options={"bucket": "2"}), False)
t = cat.get_table("db.t")
for rows in arg["commits"]:
    wb = t.new_batch_write_builder(); w = wb.new_write(); c = wb.new_commit()
    w.write_arrow(pa.Table.from_pylist(rows, schema=sch)); c.commit(w.prepare_commit())
    w.close(); c.close()
print(json.dumps("ok"))
"""

READ_OURS = """
import dataclasses, json, sys
from pypaimon.common.json_util import JSON
from pypaimon.manifest.manifest_file_manager import ManifestFileManager
from pypaimon.manifest.manifest_list_manager import ManifestListManager
from pypaimon.snapshot.snapshot import Snapshot
from pypaimon.table.file_store_table import FileStoreTable
arg = json.loads(sys.argv[1])
t = FileStoreTable.from_path(arg["table"])
def row(r): return None if r is None else [r.get_field(i) for i in range(len(r))]
def stats(s): return [row(s.min_values), row(s.max_values), s.null_counts]
def dfm(f):
    return [f.file_name, f.file_size, f.row_count, f.min_key.values, f.max_key.values,
            stats(f.key_stats), stats(f.value_stats), f.min_sequence_number,
            f.max_sequence_number, f.schema_id, f.level, f.extra_files,
            f.creation_time.get_millisecond() if f.creation_time else None, f.delete_row_count,
            f.embedded_index.hex() if f.embedded_index else None, f.file_source,
            f.value_stats_cols, f.external_path, f.first_row_id, f.write_cols,
            f.write_cols_sequences]
def mfm(m):
    return [m.file_name, m.file_size, m.num_added_files, m.num_deleted_files,
            stats(m.partition_stats), m.schema_id, m.min_bucket, m.max_bucket, m.min_level,
            m.max_level, m.min_row_id, m.max_row_id, m.total_buckets, m.extra_files]
mf, ml = ManifestFileManager(t), ManifestListManager(t)
snap = t.snapshot_manager().get_latest_snapshot()
rb = t.new_read_builder()
splits = rb.new_scan().plan().splits()
out = {
    "synthetic": [[e.kind, e.partition.values, e.bucket, e.total_buckets, dfm(e.file)]
                  for e in mf.read(arg["synthetic"], drop_stats=False)],
    "lists": {n: [mfm(m) for m in ml.read(n)] for n in arg["lists"]},
    "snapshot": JSON.to_json(snap),
    "parsed": dataclasses.asdict(JSON.from_json(arg["snapshot_json"], Snapshot)),
    "live": sorted([e.file.file_name, e.file.level]
                   for e in mf.read_entries_parallel(ml.read_all(snap), drop_stats=False)),
    "split_files": sorted([f.file_name, f.level] for s in splits for f in s.files),
    "rows": sorted(rb.new_read().to_arrow(splits).to_pylist(), key=lambda r: (r["dt"], r["id"])),
}
print(json.dumps(out))
"""

COMMITS = [
    [{"dt": "a", "id": 1, "v": "x"}, {"dt": "a", "id": 2, "v": "y"},
     {"dt": "b", "id": 3, "v": "z"}, {"dt": "b", "id": 4, "v": "w"}],
    [{"dt": "a", "id": 2, "v": "Y"}, {"dt": "b", "id": 9, "v": "n"}],  # 2 is an update
]


def run_paimon(script: str, arg: Any, tz: str = "UTC") -> Any:
    """Run a pypaimon script in .venv-paimon; it prints one JSON value last."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["TZ"] = tz
    proc = subprocess.run([str(PAIMON_PY), "-c", script, json.dumps(arg)], capture_output=True,
                          text=True, timeout=600, env=env)
    if proc.returncode != 0:
        pytest.fail(f"pypaimon script failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def paimon_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pypaimon-written PK table (dt partition, bucket 2, two commits), written in IST."""
    if not PAIMON_PY.is_file():
        pytest.skip(f"pypaimon venv missing ({PAIMON_PY})")
    wh = tmp_path_factory.mktemp("paimon_wh")
    run_paimon(CREATE_TABLE, {"warehouse": str(wh), "commits": COMMITS}, tz="IST-5:30")
    return wh / "db.db" / "t"


def _read(table: Path, name: str, decoder: Any) -> Any:
    path = table / "manifest" / name
    return decoder(path.read_bytes(), str(path))


def _live(table: Path, snap: Snapshot) -> tuple[list[ManifestFileMeta], list[ManifestEntry]]:
    metas = [m for name in (snap.base_manifest_list, snap.delta_manifest_list)
             for m in _read(table, name, decode_manifest_list)]
    return metas, [e for m in metas for e in _read(table, m.file_name, decode_manifest)]


@needs_paimon
@pytest.mark.compat
def test_decode_pypaimon_table(paimon_table: Path) -> None:
    t = paimon_table
    s1, s2 = (Snapshot.from_json((t / f"snapshot/snapshot-{i}").read_text(), "s") for i in (1, 2))
    assert (t / "manifest" / s2.base_manifest_list).stat().st_size == s2.base_manifest_list_size
    base = _read(t, s2.base_manifest_list, decode_manifest_list)
    delta = _read(t, s2.delta_manifest_list, decode_manifest_list)
    assert [sum(m.num_added_files for m in ms) for ms in (base, delta)] == [3, 2]
    for m in base + delta:
        assert (m.num_deleted_files, m.min_level, m.max_level, m.total_buckets) == (0, 0, 0, 2)
        assert (t / "manifest" / m.file_name).stat().st_size == m.file_size
        assert [inline_str(m.partition_stats.min_values),
                inline_str(m.partition_stats.max_values)] == ["a", "b"]
    _, entries = _live(t, s2)
    on_disk = {p.name for p in t.glob("dt=*/bucket-*/*.parquet")}
    assert {e.file.file_name for e in entries} == on_disk and len(on_disk) == 5
    for e in entries:
        f = e.file
        assert (e.kind, f.level, e.total_buckets, f.file_source) == (
            FileKind.ADD, 0, 2, FileSource.APPEND)
        assert (t / f"dt={inline_str(e.partition)}" / f"bucket-{e.bucket}" / f.file_name).exists()
    assert sum(e.file.row_count for e in entries) == s2.total_record_count == 6
    # The update of (a, 2) is a newer level-0 file with higher sequence numbers.
    a0 = sorted((e.file for e in entries if inline_str(e.partition) == "a"),
                key=lambda f: f.min_sequence_number)
    assert [(f.min_key, f.max_key) for f in a0] == [(long_row(1), long_row(2)),
                                                    (long_row(2), long_row(2))]
    assert a0[1].min_sequence_number > a0[0].max_sequence_number
    # _CREATION_TIME holds the writer's local (IST) wall clock as if UTC.
    for f in a0:
        assert abs(f.creation_epoch_millis(IST) - s2.time_millis) < 120_000
        assert abs(f.creation_time_millis - s1.time_millis - 19_800_000) < 120_000


@needs_paimon
@pytest.mark.compat
def test_reencoding_pypaimon_files_is_value_and_schema_identical(paimon_table: Path) -> None:
    snap = Snapshot.from_json((paimon_table / "snapshot/snapshot-2").read_text(), "s")
    metas, _ = _live(paimon_table, snap)
    names = [(n, decode_manifest_list, encode_manifest_list)
             for n in (snap.base_manifest_list, snap.delta_manifest_list)]
    names += [(m.file_name, decode_manifest, encode_manifest) for m in metas]
    for name, decode, encode in names:
        original = (paimon_table / "manifest" / name).read_bytes()
        ours = encode(decode(original, name))
        assert raw_records(ours) == raw_records(original), name
        assert fastavro.reader(io.BytesIO(ours)).codec == "zstandard"
    assert raw_records(encode_manifest([]))[0] == raw_records(
        (paimon_table / "manifest" / metas[0].file_name).read_bytes())[0]


@needs_paimon
@pytest.mark.compat
def test_pypaimon_reads_what_we_write(paimon_table: Path, tmp_path: Path) -> None:
    t = tmp_path / "t"
    shutil.copytree(paimon_table, t)
    s2 = Snapshot.from_json((t / "snapshot/snapshot-2").read_text(), "s")
    _, live = _live(t, s2)
    by_key = {(inline_str(e.partition), e.file.min_key): e for e in live}
    gone, moved = by_key["a", long_row(1)], by_key["b", long_row(4)]
    delta = [replace(gone, kind=FileKind.DELETE), replace(moved, kind=FileKind.DELETE),
             replace(moved, file=moved.file.upgrade(5))]
    part_stats = SimpleStats(str_row("a"), str_row("b"), (0,))
    lists = {}
    for suffix, entries in (("0", live), ("1", delta)):
        data = encode_manifest(entries)
        (t / f"manifest/manifest-lc-{suffix}").write_bytes(data)
        kinds = [e.kind for e in entries]
        meta = ManifestFileMeta(
            f"manifest-lc-{suffix}", len(data), kinds.count(FileKind.ADD),
            kinds.count(FileKind.DELETE), part_stats, 0, min_bucket=0, max_bucket=1, min_level=0,
            max_level=max(e.file.level for e in entries), total_buckets=2)
        lists[f"manifest-list-lc-{suffix}"] = meta
        (t / f"manifest/manifest-list-lc-{suffix}").write_bytes(encode_manifest_list([meta]))
    synthetic = [ManifestEntry(FileKind.ADD, str_row("a"), 1, 2, full_file()),
                 ManifestEntry(FileKind.DELETE, str_row("b"), 0, 2, bare_file())]
    (t / "manifest/manifest-lc-synthetic").write_bytes(encode_manifest(synthetic))
    s3 = Snapshot(
        id=3, schema_id=0, base_manifest_list="manifest-list-lc-0",
        base_manifest_list_size=(t / "manifest/manifest-list-lc-0").stat().st_size,
        delta_manifest_list="manifest-list-lc-1",
        delta_manifest_list_size=(t / "manifest/manifest-list-lc-1").stat().st_size,
        commit_user="lakecore-test", commit_identifier=7, commit_kind=CommitKind.OVERWRITE,
        time_millis=1_800_000_000_000, total_record_count=4, delta_record_count=-2)
    (t / "snapshot/snapshot-3").write_text(s3.to_json())
    (t / "snapshot/LATEST").write_text("3")

    out = run_paimon(READ_OURS, {"table": str(t), "synthetic": "manifest-lc-synthetic",
                                 "lists": sorted(lists), "snapshot_json": s3.to_json()})

    assert out["rows"] == [{"dt": "a", "id": 2, "v": "Y"}, {"dt": "b", "id": 3, "v": "z"},
                           {"dt": "b", "id": 4, "v": "w"}, {"dt": "b", "id": 9, "v": "n"}]
    expected_live = sorted([e.file.file_name, e.file.level] for e in live if e is not gone
                           and e is not moved) + [[moved.file.file_name, 5]]
    assert out["live"] == out["split_files"] == sorted(expected_live)
    assert json.loads(out["snapshot"]) == json.loads(s3.to_json())
    assert out["parsed"]["commit_kind"] == "OVERWRITE" and out["parsed"]["id"] == 3
    for name, meta in lists.items():
        [m] = out["lists"][name]
        assert m == [meta.file_name, meta.file_size, meta.num_added_files, meta.num_deleted_files,
                     [["a"], ["b"], [0]], 0, 0, 1, 0, meta.max_level, None, None, 2, None]
    full, bare = out["synthetic"]
    assert full == [0, ["a"], 1, 2, [
        "data-1.parquet", 4096, 10, [1], [9], [[1], [9], [0]], [["a"], ["z"], [None]], 5, 14, 0, 1,
        ["data-1.parquet.index"], 1_700_000_000_123, 2, "0102", 1, ["v"],
        "file:/ext/data-1.parquet", 100, ["dt", "id", "v"], [3, 4]]]
    assert bare == [1, ["b"], 0, 2, [
        "data-2.parquet", 10, 1, [3], [3], [[], [], []], [[], [], []], 0, 0, 0, 0, [], None,
        None, None, None, None, None, None, None, None]]
