"""``lakecore inspect``: snapshots, files per level, and what compaction still has to do."""

from __future__ import annotations

import json

import pyarrow as pa

from lakecore.cli.main import main
from tests.core.helpers import make_table, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False),
                    ("v", pa.int64())])


def test_inspect_json_and_text(tmp_path, capsys):
    t = make_table(str(tmp_path), SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                   options={"bucket": "1", "write-only": "true"})
    for i in range(3):
        write(t, pa.table({"id": [1, 2], "dt": ["a", "a"], "v": [i, i]}, schema=SCHEMA))
    assert main(["inspect", "--warehouse", str(tmp_path), "--table", "db.t", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["latest_snapshot"] == 3 and [s["id"] for s in r["snapshots"]] == [3, 2, 1]
    assert r["files"] == [{"partition": "dt=a", "bucket": 0, "level": 0, "files": 3,
                           "rows": 6, "bytes": r["total_bytes"]}]
    assert r["level0_files_pending"] == 3
    assert r["buckets"][0]["sorted_runs"] == 3
    t.compact(full=True)
    assert main(["inspect", "--warehouse", str(tmp_path), "--table", "db.t"]) == 0
    text = capsys.readouterr().out
    assert "COMPACT" in text and "level-0 files awaiting compaction: 0" in text
    assert "sorted runs 1, level-0 0, size amp 0.0%" in text


def test_inspect_unknown_table_is_an_error(tmp_path, capsys):
    make_table(str(tmp_path), SCHEMA, primary_keys=["id", "dt"], options={"bucket": "1"})
    assert main(["inspect", "--warehouse", str(tmp_path), "--table", "db.nope"]) == 1
    assert "db.nope" in capsys.readouterr().err
