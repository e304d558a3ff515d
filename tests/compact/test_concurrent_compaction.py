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


def _writer(warehouse: str, compactor_ready) -> None:
    t = CatalogFactory.create({"warehouse": warehouse}).get_table("db.t")
    sb = t.new_stream_write_builder().with_commit_user("writer")
    # Start writing only once the compactor runs, so the two overlap however slowly either
    # process started on a loaded machine.
    if not compactor_ready.wait(300):
        raise RuntimeError("the compactor process never started")
    for i in range(COMMITS):
        w = sb.new_write()
        ids = [(i * 7 + k) % 200 for k in range(40)]
        w.write_arrow(pa.table({"id": ids, "v": [i] * len(ids)}, schema=SCHEMA))
        sb.new_commit().commit(w.prepare_commit(i), i)
        if i == COMMITS // 2:
            _wait_for_a_compaction(t)
        time.sleep(0.05)


def _wait_for_a_compaction(table, timeout: float = 300.0) -> None:
    """Halfway through, wait until the compactor has landed a compaction, so the rest of the
    writer's commits certainly race with a compacted table."""
    sm = table.snapshot_manager
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if any(sm.snapshot(i).commit_kind is CommitKind.COMPACT for i in sm.list_ids()):
            return
        time.sleep(0.05)
    raise RuntimeError("the compactor landed no compaction while the writer waited")


def _compactor(warehouse: str, ready, writer_done) -> None:
    t = CatalogFactory.create({"warehouse": warehouse}).get_table("db.t")
    ready.set()
    while not writer_done.is_set():
        t.compact()  # a conflict would raise and fail the process
        time.sleep(0.05)


@pytest.mark.slow
def test_writer_and_compactor_processes(tmp_path):
    wh = str(tmp_path)
    make_table(wh, SCHEMA, primary_keys=["id"], options={
        "bucket": "2", "write-only": "true", "num-sorted-run.compaction-trigger": "2",
        "commit.min-retry-wait": "5 ms"})
    ctx = mp.get_context("spawn")
    ready, writer_done = ctx.Event(), ctx.Event()
    writer = ctx.Process(target=_writer, args=(wh, ready))
    compactor = ctx.Process(target=_compactor, args=(wh, ready, writer_done))
    compactor.start()
    writer.start()
    writer.join(300)
    writer_done.set()
    compactor.join(300)
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
    # The compactor's work landed between the writer's commits, not only after them.
    last_append = max(s.id for s in appends)
    assert any(s.commit_kind is CommitKind.COMPACT and s.id < last_append for s in snaps)
