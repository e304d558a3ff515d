"""Snapshot JSON: round trips, what is omitted, corruption, and pypaimon as the oracle."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lakecore.errors import CorruptFileError
from lakecore.format.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind, Snapshot

PAIMON_PY = Path(__file__).resolve().parents[2] / ".venv-paimon" / "bin" / "python"
needs_paimon = pytest.mark.skipif(
    not PAIMON_PY.is_file(), reason=f"pypaimon venv missing ({PAIMON_PY}): run make .venv-paimon"
)

REQUIRED = ["version", "id", "schemaId", "baseManifestList", "deltaManifestList", "commitUser",
            "commitIdentifier", "commitKind", "timeMillis", "totalRecordCount",
            "deltaRecordCount"]


def minimal(**changes: Any) -> Snapshot:
    values: dict[str, Any] = dict(
        id=1, schema_id=0, base_manifest_list="manifest-list-u-0",
        delta_manifest_list="manifest-list-u-1", commit_user="user",
        commit_identifier=BATCH_COMMIT_IDENTIFIER, commit_kind=CommitKind.APPEND,
        time_millis=1_700_000_000_000, total_record_count=6, delta_record_count=6)
    return Snapshot(**{**values, **changes})


def full() -> Snapshot:
    return minimal(
        base_manifest_list_size=10, delta_manifest_list_size=11,
        changelog_manifest_list="manifest-list-u-2", changelog_manifest_list_size=12,
        index_manifest="index-manifest-u-0", log_offsets={0: 5, 1: 7}, changelog_record_count=3,
        watermark=-9_223_372_036_854_775_808, statistics="stats-u-0",
        properties={"k": "v", "ü": "ß"}, next_row_id=100, total_file_size=4096,
        total_data_files=5, uuid="d6f0…", writer_version="lakecore-0.1.0")


def test_minimal_writes_only_required_keys() -> None:
    text = minimal().to_json()
    assert list(json.loads(text)) == REQUIRED
    assert "null" not in text and '"commitIdentifier": 9223372036854775807' in text
    assert Snapshot.from_json(text, "s") == minimal()


def test_full_round_trip_in_java_key_order() -> None:
    snap = full()
    assert Snapshot.from_json(snap.to_json(), "s") == snap
    keys = list(json.loads(snap.to_json()))
    assert keys[:7] == ["version", "id", "schemaId", "baseManifestList", "baseManifestListSize",
                        "deltaManifestList", "deltaManifestListSize"]
    assert keys.index("timeMillis") < keys.index("logOffsets") < keys.index("totalRecordCount")
    assert json.loads(snap.to_json())["logOffsets"] == {"0": 5, "1": 7}
    assert snap.to_json() == Snapshot.from_json(snap.to_json(), "s").to_json()


def test_unknown_keys_and_explicit_nulls_are_tolerated() -> None:
    data = json.loads(minimal().to_json())
    data.update({"someFutureKey": {"x": 1}, "watermark": None, "changelogManifestList": None})
    expected = minimal(extra={"someFutureKey": {"x": 1}})
    assert Snapshot.from_json(json.dumps(data), "s") == expected
    assert Snapshot.from_json(json.dumps(data).encode(), "s") == expected


def test_unknown_keys_are_written_back_unchanged() -> None:
    """A foreign snapshot (a newer Paimon's ``operation``, another writer's own keys) copied
    into a tag or restored by a rollback keeps every key it had, values as they were."""
    data = json.loads(full().to_json())
    foreign = {"operation": "TRUNCATE", "someFutureKey": {"x": [1, None, "y"]},
               "nullKey": None, "big": 2**63 - 1}
    data.update(foreign)
    again = json.loads(Snapshot.from_json(json.dumps(data), "s").to_json())
    assert again == data
    assert list(again)[:len(data) - len(foreign)] == list(json.loads(full().to_json()))


@pytest.mark.parametrize("key", REQUIRED)
def test_missing_required_key_is_corrupt(key: str) -> None:
    data = json.loads(minimal().to_json())
    del data[key]
    with pytest.raises(CorruptFileError, match=key) as err:
        Snapshot.from_json(json.dumps(data), "snapshot/snapshot-1")
    assert err.value.path == "snapshot/snapshot-1"


@pytest.mark.parametrize("text", [
    "", "{", "[1, 2]", "\"snapshot\"", b"\xff\xfe{",
    minimal().to_json().replace('"id": 1', '"id": "1"'),
    minimal().to_json().replace('"id": 1', '"id": true'),
    minimal().to_json().replace('"id": 1', '"id": 1.5'),
    minimal().to_json().replace('"APPEND"', '"MERGE"'),
    full().to_json().replace('"k": "v"', '"k": 1'),
    full().to_json().replace('"0": 5', '"zero": 5'),
])
def test_bad_json_is_corrupt(text: str | bytes) -> None:
    with pytest.raises(CorruptFileError, match="snapshot-9"):
        Snapshot.from_json(text, "snapshot/snapshot-9")


# --- pypaimon as the oracle ---------------------------------------------------------------------

WRITE_TABLE = """
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
for rows, overwrite in arg["commits"]:
    wb = t.new_batch_write_builder()
    if overwrite is not None:
        wb = wb.overwrite(overwrite)
    w = wb.new_write(); c = wb.new_commit()
    w.write_arrow(pa.Table.from_pylist(rows, schema=sch)); c.commit(w.prepare_commit())
    w.close(); c.close()
print(json.dumps("ok"))
"""

PARSE = """
import dataclasses, json, sys
from pypaimon.common.json_util import JSON
from pypaimon.snapshot.snapshot import Snapshot
texts = json.loads(sys.argv[1])
print(json.dumps([[dataclasses.asdict(s), JSON.to_json(s)]
                  for s in (JSON.from_json(t, Snapshot) for t in texts)]))
"""

COMMITS = [
    ([{"dt": "a", "id": 1, "v": "x"}, {"dt": "b", "id": 2, "v": "y"}], None),
    ([{"dt": "a", "id": 1, "v": "X"}], None),
    ([{"dt": "a", "id": 5, "v": "o"}], {"dt": "a"}),
]


def run_paimon(script: str, arg: Any) -> Any:
    """Run a pypaimon script in .venv-paimon; it prints one JSON value last."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    proc = subprocess.run([str(PAIMON_PY), "-c", script, json.dumps(arg)], capture_output=True,
                          text=True, timeout=600, env=env)
    if proc.returncode != 0:
        pytest.fail(f"pypaimon script failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


@needs_paimon
@pytest.mark.compat
def test_pypaimon_snapshots_decode_and_round_trip(tmp_path: Path) -> None:
    run_paimon(WRITE_TABLE, {"warehouse": str(tmp_path), "commits": COMMITS})
    table = tmp_path / "db.db" / "t"
    texts = [(table / f"snapshot/snapshot-{i}").read_text() for i in (1, 2, 3)]
    snaps = [Snapshot.from_json(text, f"snapshot-{i}") for i, text in enumerate(texts, 1)]
    assert [s.id for s in snaps] == [1, 2, 3]
    assert [s.commit_kind for s in snaps] == [CommitKind.APPEND, CommitKind.APPEND,
                                              CommitKind.OVERWRITE]
    assert {s.commit_identifier for s in snaps} == {BATCH_COMMIT_IDENTIFIER}
    assert [(s.total_record_count, s.delta_record_count) for s in snaps] == [(2, 2), (3, 1),
                                                                              (2, -1)]
    assert len({s.commit_user for s in snaps}) == 3  # each pypaimon commit has its own user
    for s in snaps:
        assert (s.version, s.schema_id, s.changelog_manifest_list) == (3, 0, None)
        for name, size in ((s.base_manifest_list, s.base_manifest_list_size),
                           (s.delta_manifest_list, s.delta_manifest_list_size)):
            assert (table / "manifest" / name).stat().st_size == size
        assert s.uuid and s.writer_version and s.writer_version.startswith("python-")
    # Same keys and values as pypaimon wrote (order aside); pypaimon parses ours back the same.
    ours = [s.to_json() for s in snaps]
    assert [json.loads(o) for o in ours] == [json.loads(t) for t in texts]
    parsed = run_paimon(PARSE, ours + [full().to_json()])
    for (fields, their_json), s in zip(parsed[:3], snaps):
        assert json.loads(their_json) == json.loads(s.to_json())
        assert fields["commit_kind"] == s.commit_kind.value and fields["uuid"] == s.uuid
    fields, their_json = parsed[3]
    f = full()
    assert (fields["changelog_manifest_list"], fields["index_manifest"], fields["watermark"],
            fields["properties"], fields["next_row_id"], fields["statistics"]) == (
        f.changelog_manifest_list, f.index_manifest, f.watermark, f.properties, f.next_row_id,
        f.statistics)
    assert Snapshot.from_json(their_json, "pypaimon") == minimal(
        **{k: getattr(f, k) for k in (
            "base_manifest_list_size", "delta_manifest_list_size", "changelog_manifest_list",
            "changelog_manifest_list_size", "index_manifest", "changelog_record_count",
            "watermark", "statistics", "properties", "next_row_id", "uuid", "writer_version")})
