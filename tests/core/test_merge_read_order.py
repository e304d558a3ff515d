"""A merged read orders a key's records by run when the runs' sequence ranges follow each other
(level-0 files of successive commits), without decoding ``_SEQUENCE_NUMBER``; when they do not
(two writers that started from the same snapshot), it reads the sequence column. Both ways give
the rows Paimon's merge gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lakecore.read.split_read import SplitRead
from lakecore.table import FileStoreTable
from tests.core.helpers import make_table

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.int64()), ("s", pa.string())])


def _write(table: FileStoreTable, ids: np.ndarray, version: int, kinds: list[str] | None = None,
           user: str | None = None) -> list:
    data = {"id": ids, "v": np.full(len(ids), version), "s": [f"{version}-{i}" for i in ids]}
    fields = list(SCHEMA)
    if kinds is not None:
        data["op"] = kinds
        fields.append(pa.field("op", pa.string()))
    builder = table.new_batch_write_builder()
    write = builder.new_write()
    write.write_arrow(pa.table(data, schema=pa.schema(fields)))
    messages = write.prepare_commit()
    write.close()
    return messages


def _commit(table: FileStoreTable, messages: list) -> None:
    table.new_batch_write_builder().new_commit().commit(messages)


def _read(table: FileStoreTable) -> list[dict]:
    builder = table.new_read_builder()
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
    return sorted(rows, key=lambda r: r["id"])


def _spy(monkeypatch: pytest.MonkeyPatch, force: bool | None = None) -> list[bool]:
    """Record what ``_sequence_is_run_order`` decides (``force``: decide that instead)."""
    seen: list[bool] = []
    real = SplitRead._sequence_is_run_order

    def decide(self: SplitRead, ordered: list) -> bool:
        out = real(self, ordered) if force is None else force
        seen.append(out)
        return out

    monkeypatch.setattr(SplitRead, "_sequence_is_run_order", decide)
    return seen


@pytest.mark.parametrize("buckets", ["1", "3"])
def test_successive_commits_merge_by_run_order_to_the_newest_rows(tmp_path: Path, monkeypatch,
                                                                   buckets):
    t = make_table(str(tmp_path), pa.schema([*SCHEMA, pa.field("op", pa.string())]),
                   primary_keys=["id"],
                   options={"bucket": buckets, "write-only": "true", "rowkind.field": "op"})
    rng = np.random.default_rng(5)
    want: dict[int, dict] = {}
    for version in range(1, 7):
        ids = np.sort(rng.choice(400, size=150, replace=False))
        deleted = rng.random(len(ids)) < 0.15
        kinds = ["-D" if d else "+I" for d in deleted]
        _commit(t, _write(t, ids, version, kinds))
        for i, d in zip(ids.tolist(), deleted.tolist()):
            if d:
                want.pop(i, None)
            else:
                want[i] = {"id": i, "v": version, "s": f"{version}-{i}", "op": None}
    seen = _spy(monkeypatch)
    got = _read(t)
    assert seen and all(seen)  # every merged section took the run order
    expected = sorted(want.values(), key=lambda r: r["id"])
    assert [{k: r[k] for k in ("id", "v", "s")} for r in got] == [
        {k: r[k] for k in ("id", "v", "s")} for r in expected]
    monkeypatch.undo()
    _spy(monkeypatch, force=False)  # the same table through the sequence column
    assert _read(t) == got


def test_writers_from_one_snapshot_read_the_sequence_column(tmp_path: Path, monkeypatch):
    t = make_table(str(tmp_path), SCHEMA, primary_keys=["id"],
                   options={"bucket": "1", "write-only": "true"})
    _commit(t, _write(t, np.arange(0, 50), 1))
    # two writers start from snapshot 1: their files share sequence numbers
    first = _write(t, np.arange(0, 30), 2)
    second = _write(t, np.arange(20, 50), 3)
    _commit(t, first)
    _commit(t, second)
    seen = _spy(monkeypatch)
    got = _read(t)
    assert seen == [False]
    # both files number their rows from the same sequence on, in key order: keys 20-29 are
    # newer in the first file (sequence 70-79) than in the second (50-59), whose commit came
    # later. The sequence column decides, as in Paimon, not the order of the two files.
    assert [r["v"] for r in got] == [2] * 30 + [3] * 20
