"""A writer process and a compaction process on one table at the same time: no lost rows,
no conflict from unrelated writes, a linear snapshot history."""

from __future__ import annotations

import multiprocessing as mp
import time

import pyarrow as pa
import pytest

from lakecore import CatalogFactory
from lakecore.format.snapshot import CommitKind
from tests.core.helpers import make_table, read

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.int64())])
COMMITS = 25


def _writer(warehouse: str) -> None:
    t = CatalogFactory.create({"warehouse": warehouse}).get_table("db.t")
    sb = t.new_stream_write_builder().with_commit_user("writer")
    for i in range(COMMITS):
        w = sb.new_write()
        ids = [(i * 7 + k) % 200 for k in range(40)]
        w.write_arrow(pa.table({"id": ids, "v": [i] * len(ids)}, schema=SCHEMA))
        sb.new_commit().commit(w.prepare_commit(i), i)


def _compactor(warehouse: str, stop_after: float) -> None:
    t = CatalogFactory.create({"warehouse": warehouse}).get_table("db.t")
    end = time.monotonic() + stop_after
    while time.monotonic() < end:
        t.compact()  # a conflict would raise and fail the process
        time.sleep(0.05)


@pytest.mark.slow
def test_writer_and_compactor_processes(tmp_path):
    wh = str(tmp_path)
    make_table(wh, SCHEMA, primary_keys=["id"], options={
        "bucket": "2", "write-only": "true", "num-sorted-run.compaction-trigger": "2",
        "commit.min-retry-wait": "5 ms"})
    ctx = mp.get_context("spawn")
    writer = ctx.Process(target=_writer, args=(wh,))
    compactor = ctx.Process(target=_compactor, args=(wh, 12.0))
    compactor.start()
    writer.start()
    writer.join(120)
    compactor.join(120)
    assert writer.exitcode == 0 and compactor.exitcode == 0
    t = CatalogFactory.create({"warehouse": wh}).get_table("db.t")
    t.compact()  # whatever the writer's last commits left
    model: dict[int, int] = {}
    for i in range(COMMITS):
        for k in range(40):
            model[(i * 7 + k) % 200] = i
    assert {r["id"]: r["v"] for r in read(t)} == model
    sm = t.snapshot_manager
    ids = sm.list_ids()
    assert ids == list(range(1, len(ids) + 1))
    snaps = [sm.snapshot(i) for i in ids]
    appends = [s for s in snaps if s.commit_kind is CommitKind.APPEND]
    assert sorted(s.commit_identifier for s in appends) == list(range(COMMITS))
    assert any(s.commit_kind is CommitKind.COMPACT for s in snaps[:-1])
