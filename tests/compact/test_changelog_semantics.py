"""Changelog semantics where lakecore used to differ from Paimon (issue 15, item 6).

Each test states Paimon's outcome and names the Paimon class or test it mirrors:

* first-row + lookup: a key some level >= 1 already holds emits nothing
  (``FirstRowMergeFunctionWrapper``; ``LookupChangelogMergeFunctionWrapperTest.testFirstRow``);
* ignore-delete + input: retractions never reach the writer, so neither the data nor the
  changelog holds them (``RowKindFilter``, applied by ``TableWriteImpl``);
* equal sequence numbers in two levels: the level >= 1 record wins, the lowest such level first
  (``LookupChangelogMergeFunctionWrapper.calculateResult``, ``LookupMergeFunction.pickHighLevel``;
  ``LookupChangelogMergeFunctionWrapperTest.testKeepLowestHighLevel``), and reads, compaction
  and the changelog all say so;
* input changelog files are written per buffer flush from the sorted buffer
  (``MergeTreeWriter.flushWriteBuffer``): records in key order, min/max keys right.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore.format.binary_row import decode_row
from lakecore.schema.types import parse_type
from tests.core.helpers import make_table, read, write

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string()), ("op", pa.string())])


def table(tmp_path, **opts):
    return make_table(str(tmp_path), SCHEMA, primary_keys=["id"],
                      options={"bucket": "1", "rowkind.field": "op", **opts})


def rows(ids, vs, ops=None):
    ops = ops or ["+I"] * len(ids)
    return pa.table({"id": list(ids), "v": list(vs), "op": list(ops)}, schema=SCHEMA)


def changelog(t, start, end):
    """(id, row kind, v) of the changelog between two snapshots, sorted."""
    inc = t.copy({"incremental-between": f"{start},{end}"})
    rb = inc.new_read_builder()
    got = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return sorted(zip(got["id"].to_pylist(), got["_ROW_KIND"].to_pylist(), got["v"].to_pylist()))


def state(t):
    return [(r["id"], r["v"]) for r in read(t, "id")]


def latest(t):
    return t.snapshot_manager.latest_id()


# -- (a) first-row with the lookup producer ------------------------------------------------------


@pytest.mark.parametrize("write_only", ["false", "true"])
def test_first_row_lookup_changelog_is_silent_for_keys_a_higher_level_holds(tmp_path, write_only):
    """Paimon (FirstRowMergeFunctionWrapper, LookupChangelogMergeFunctionWrapperTest.testFirstRow):
    a level-0 record whose key a level >= 1 already holds gives no changelog (the first row
    stays); a key new to the table gives +I of its first row."""
    t = table(tmp_path, **{"merge-engine": "first-row", "changelog-producer": "lookup",
                           "write-only": write_only})
    write(t, rows([1, 2], ["a1", "a2"]))
    if write_only == "true":
        t.compact()
    s1 = latest(t)
    assert changelog(t, 0, s1) == [(1, "+I", "a1"), (2, "+I", "a2")]
    write(t, rows([1, 3, 3], ["b1", "b3", "c3"]))
    if write_only == "true":
        t.compact()
    s2 = latest(t)
    assert changelog(t, s1, s2) == [(3, "+I", "b3")]
    assert state(t) == [(1, "a1"), (2, "a2"), (3, "b3")]


# -- (b) ignore-delete with the input producer ---------------------------------------------------


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update"])
def test_ignore_delete_input_changelog_holds_no_retractions(tmp_path, engine):
    """Paimon (RowKindFilter in TableWriteImpl): with ignore-delete, -U/-D rows are dropped
    before the writer, so the input changelog only holds the +I/+U rows, and the table keeps
    the rows the deletes named."""
    t = table(tmp_path, **{"merge-engine": engine, "ignore-delete": "true",
                           "changelog-producer": "input"})
    (s1,) = write(t, rows([1, 2], ["a", "a"]))
    (s2,) = write(t, rows([1, 2, 2, 3], [None, "a", "b", "c"], ["-D", "-U", "+U", "+I"]))
    assert changelog(t, s1, s2) == [(2, "+U", "b"), (3, "+I", "c")]
    assert state(t) == [(1, "a"), (2, "b"), (3, "c")]
    assert t.snapshot_manager.snapshot(s2).changelog_record_count == 2


# -- (c) equal sequence numbers in two levels ----------------------------------------------------


def make_tie(t):
    """Key 1 at the max level and in level 0 with the same sequence number: two writers start
    from one snapshot, the first one's commit is fully compacted, the second commits after.
    Returns the snapshot before the compaction of the second writer's level-0 file."""
    write(t, rows([0, 9], ["base", "base"]))
    t.compact(full=True)
    wa, wb = t.new_batch_write_builder(), t.new_batch_write_builder()
    a, b = wa.new_write(), wb.new_write()
    a.write_arrow(rows([1], ["a"]))
    b.write_arrow(rows([1, 5], ["b", "b"]))
    wa.new_commit().commit(a.prepare_commit())
    t.compact(full=True)
    wb.new_commit().commit(b.prepare_commit())
    a.close()
    b.close()
    return latest(t)


@pytest.mark.parametrize("dedupe", ["false", "true"])
def test_equal_sequence_numbers_the_higher_level_record_wins_everywhere(tmp_path, dedupe):
    """Paimon (LookupChangelogMergeFunctionWrapper.calculateResult: the high-level record goes
    before a level-0 record only when its sequence is strictly smaller): on a tie the level >= 1
    record is merged last and wins. The read before the compaction, the lookup changelog
    (before = after = "a": -U/+U of "a", nothing under row-deduplicate) and the read after it
    all say "a"; key 5, new, gives +I."""
    t = table(tmp_path, **{"write-only": "true", "changelog-producer": "lookup",
                           "changelog-producer.row-deduplicate": dedupe})
    s = make_tie(t)
    expected = [(0, "base"), (1, "a"), (5, "b"), (9, "base")]
    assert state(t) == expected
    t.compact()
    s2 = latest(t)
    tie = [] if dedupe == "true" else [(1, "+U", "a"), (1, "-U", "a")]
    assert changelog(t, s, s2) == tie + [(5, "+I", "b")]
    assert state(t) == expected
    t.compact(full=True)
    assert state(t) == expected


def test_equal_sequence_numbers_first_row_keeps_the_higher_level_record(tmp_path):
    """Paimon (FirstRowMergeFunctionWrapper): the key is held by a level >= 1, so the tied
    level-0 row changes nothing: no changelog for it, and the reads keep "a" (before the
    compaction a first-row read skips level 0, Paimon's batchScanSkipLevel0)."""
    t = table(tmp_path, **{"write-only": "true", "changelog-producer": "lookup",
                           "merge-engine": "first-row"})
    s = make_tie(t)
    assert state(t) == [(0, "base"), (1, "a"), (9, "base")]
    expected = [(0, "base"), (1, "a"), (5, "b"), (9, "base")]
    t.compact()
    assert changelog(t, s, latest(t)) == [(5, "+I", "b")]
    assert state(t) == expected


def test_equal_sequence_numbers_with_deletion_vectors(tmp_path):
    """Deletion vectors use the lookup too (Paimon's LookupChangelogMergeFunctionWrapper with a
    DV maintainer): the higher-level record wins the tie, so the compaction keeps "a" (its old
    copy marked deleted, the winner rewritten) and the changelog says -U/+U of "a"."""
    t = table(tmp_path, **{"write-only": "true", "changelog-producer": "lookup",
                           "deletion-vectors.enabled": "true"})
    s = make_tie(t)
    t.compact()
    assert changelog(t, s, latest(t)) == [(1, "+U", "a"), (1, "-U", "a"), (5, "+I", "b")]
    assert state(t) == [(0, "base"), (1, "a"), (5, "b"), (9, "base")]
    merged = t.copy({"deletion-vectors.merge-on-read": "true"})
    assert state(merged) == [(0, "base"), (1, "a"), (5, "b"), (9, "base")]


# -- (d) input changelog files at a buffer flush -------------------------------------------------


def _changelog_files(t, snapshot_id):
    snap = t.snapshot_manager.snapshot(snapshot_id)
    mio = t.manifest_io()
    return [e.file for e in mio.read_entries(mio.read_manifest_list(snap.changelog_manifest_list))]


@pytest.mark.parametrize("spillable", ["false", "true"])
def test_input_changelog_file_per_flush_is_in_key_order(tmp_path, spillable):
    """Paimon (MergeTreeWriter.flushWriteBuffer): each flush writes its changelog from the
    sorted buffer - every input record, in (key, sequence) order - so the file's min/max keys
    are its first and last keys, and a key filter on the changelog finds every record."""
    t = table(tmp_path, **{"changelog-producer": "input", "write-only": "true",
                           "write-buffer-size": "1 b", "write-buffer-spillable": spillable})
    wb = t.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(rows([5, 3, 9, 5], ["p", "q", "r", "s"]))  # the buffer is over budget: flush
    w.write_arrow(rows([4, 1], ["t", "u"]))
    (s,) = wb.new_commit().commit(w.prepare_commit()).snapshot_ids
    w.close()
    files = _changelog_files(t, s)
    got = []
    for f in files:
        path = t.paths.data_file_path((), 0, f.file_name)
        data = pq.read_table(t.file_io.open_input_file(path))
        got.append((data["_KEY_id"].to_pylist(), data["v"].to_pylist(),
                    decode_row(f.min_key, [parse_type("BIGINT")])[0],
                    decode_row(f.max_key, [parse_type("BIGINT")])[0]))
    assert sorted(got, key=lambda g: g[2]) == [
        ([1, 4], ["u", "t"], 1, 4),
        ([3, 5, 5, 9], ["q", "p", "s", "r"], 3, 9),
    ]
    inc = t.copy({"incremental-between": f"{s - 1},{s}"})
    rb = inc.new_read_builder()
    rb = rb.with_filter(rb.new_predicate_builder().equal("id", 3))
    got3 = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    assert got3["v"].to_pylist() == ["q"]
