"""lookup and full-compaction changelog producers: the changelog a consumer replays turns the
previous state into the new one, record by record."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.core.helpers import make_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string()), ("op", pa.string())])


def t_(tmp_path, producer, **opts):
    return make_table(str(tmp_path), SCHEMA, primary_keys=["id"], options={
        "bucket": "1", "rowkind.field": "op", "changelog-producer": producer, **opts})


def rows(ids, v, op="+I"):
    return pa.table({"id": list(ids), "v": [v] * len(ids), "op": [op] * len(ids)}, schema=SCHEMA)


def changelog(t, start, end):
    inc = t.copy({"incremental-between": f"{start},{end}"})
    rb = inc.new_read_builder()
    got = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return sorted(zip(got["id"].to_pylist(), got["_ROW_KIND"].to_pylist(), got["v"].to_pylist()))


def test_lookup_changelog_from_inline_compaction(tmp_path):
    t = t_(tmp_path, "lookup")
    write(t, rows([1, 2, 3], "a"))
    s1 = t.snapshot_manager.latest_id()
    write(t, rows([2], "b"), rows([3], None, "-D"), rows([4], "c"))
    s2 = t.snapshot_manager.latest_id()
    assert changelog(t, 0, s1) == [(1, "+I", "a"), (2, "+I", "a"), (3, "+I", "a")]
    assert changelog(t, s1, s2) == [(2, "+U", "b"), (2, "-U", "a"), (3, "-D", "a"),
                                   (4, "+I", "c")]
    assert [(r["id"], r["v"]) for r in read(t, "id")] == [(1, "a"), (2, "b"), (4, "c")]


def test_lookup_changelog_from_dedicated_compaction_of_write_only_writes(tmp_path):
    t = t_(tmp_path, "lookup", **{"write-only": "true"})
    write(t, rows([1, 2], "a"))
    t.compact()
    s1 = t.snapshot_manager.latest_id()
    write(t, rows([1], "z"))
    write(t, rows([1], "a"), rows([2], None, "-D"))  # 1 goes back to "a"
    t.compact()
    s2 = t.snapshot_manager.latest_id()
    assert changelog(t, s1, s2) == [(1, "+U", "a"), (1, "-U", "a"), (2, "-D", "a")]


def test_row_deduplicate_skips_unchanged_updates(tmp_path):
    t = t_(tmp_path, "lookup", **{"changelog-producer.row-deduplicate": "true"})
    write(t, rows([1, 2], "a"))
    s1 = t.snapshot_manager.latest_id()
    write(t, rows([1], "a"), rows([2], "b"))
    s2 = t.snapshot_manager.latest_id()
    assert changelog(t, s1, s2) == [(2, "+U", "b"), (2, "-U", "a")]


@pytest.mark.parametrize("write_only", ["true", "false"])
def test_full_compaction_changelog(tmp_path, write_only):
    opts = {"write-only": write_only}
    if write_only == "false":
        opts["full-compaction.delta-commits"] = "1"
    t = t_(tmp_path, "full-compaction", **opts)
    write(t, rows([1, 2, 3], "a"))
    if write_only == "true":
        t.compact(full=True)
    s1 = t.snapshot_manager.latest_id()
    write(t, rows([1], "b"), rows([3], None, "-D"), rows([5], "n"))
    if write_only == "true":
        t.compact(full=True)
    s2 = t.snapshot_manager.latest_id()
    assert changelog(t, 0, s1) == [(1, "+I", "a"), (2, "+I", "a"), (3, "+I", "a")]
    assert changelog(t, s1, s2) == [(1, "+U", "b"), (1, "-U", "a"), (3, "-D", "a"),
                                   (5, "+I", "n")]
