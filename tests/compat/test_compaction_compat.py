"""Compacted tables stay Paimon tables: pypaimon reads what lakecore compacted (levels >= 1,
upgrades, dropped deletes), including tables pypaimon itself wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakecore import CatalogFactory, Schema
from tests.compat.compat_rows import (
    DAYS,
    KEY,
    WIDE_SCHEMA,
    apply,
    expected,
    lc_read,
    step,
    table_of,
    wide_row,
)
from tests.compat.pypaimon_runner import (
    canonical,
    paimon_plan,
    paimon_read,
    paimon_script,
    requires_paimon,
)
from tests.core.helpers import write as lc_write

pytestmark = [pytest.mark.compat, requires_paimon]
OPTIONS = {"bucket": "2", "rowkind.field": "rk", "write-only": "true"}


def _batches():
    """Three commits: inserts, updates of half the keys, deletes of a few."""
    b1 = [wide_row(i, d, 1) for d in DAYS[:2] for i in range(60)]
    b2 = [wide_row(i, d, 2, "+U") for d in DAYS[:2] for i in range(0, 60, 2)]
    b3 = [wide_row(i, DAYS[0], 2, "-D") for i in range(1, 20, 3)]
    return [b1, b2, b3]


def test_tables_compacted_by_lakecore_read_identically_in_pypaimon(tmp_path: Path) -> None:
    wh = str(tmp_path)
    cat = CatalogFactory.create({"warehouse": wh})
    cat.create_database("db", ignore_if_exists=True)
    cat.create_table("db.t", Schema.from_pyarrow_schema(
        WIDE_SCHEMA, partition_keys=["dt"], primary_keys=list(KEY), options=OPTIONS))
    t = cat.get_table("db.t")
    model: dict = {}
    for rows in _batches():
        lc_write(t, table_of(rows))
        model = apply(model, rows)
    t.compact(full=True)
    # a later level-0 commit on top of the compacted levels, then a universal compaction
    more = [wide_row(i, DAYS[1], 3, "+U") for i in range(50, 70)]
    lc_write(t, table_of(more))
    model = apply(model, more)
    t.compact()
    want = expected(model)
    assert canonical(lc_read(t), KEY) == want
    assert canonical(paimon_read(wh, "db.t"), KEY) == want
    plan = paimon_plan(wh, "db.t")
    splits = plan["splits"] if isinstance(plan, dict) else plan
    levels = {f["level"] for s in splits for f in s["files"]}
    assert max(levels) == t.options.num_levels - 1


def test_pypaimon_tables_compacted_by_lakecore(tmp_path: Path) -> None:
    wh = str(tmp_path)
    steps = [step("create", wh, "db.p", schema=WIDE_SCHEMA, partition_keys=["dt"],
                  primary_keys=list(KEY), options={"bucket": "2", "rowkind.field": "rk"})]
    model: dict = {}
    for rows in _batches()[:2]:
        steps.append(step("write", wh, "db.p", data=[table_of(rows)]))
        model = apply(model, rows)
    paimon_script(steps)
    t = CatalogFactory.create({"warehouse": wh}).get_table("db.p")
    report = t.compact(full=True)
    assert report.buckets == 4 and report.files_after <= report.files_before
    want = expected(model)
    assert canonical(lc_read(t), KEY) == want
    assert canonical(paimon_read(wh, "db.p"), KEY) == want


@pytest.mark.parametrize("producer", ["lookup", "full-compaction"])
def test_changelog_producer_tables_read_identically_in_pypaimon(tmp_path: Path,
                                                                producer: str) -> None:
    wh = str(tmp_path)
    cat = CatalogFactory.create({"warehouse": wh})
    cat.create_database("db", ignore_if_exists=True)
    opts = {**OPTIONS, "write-only": "false", "changelog-producer": producer}
    if producer == "full-compaction":
        opts["full-compaction.delta-commits"] = "2"
    cat.create_table("db.t", Schema.from_pyarrow_schema(
        WIDE_SCHEMA, partition_keys=["dt"], primary_keys=list(KEY), options=opts))
    t = cat.get_table("db.t")
    model: dict = {}
    for rows in _batches():
        lc_write(t, table_of(rows))
        model = apply(model, rows)
    snap = t.snapshot_manager.latest()
    assert snap.changelog_manifest_list or producer == "full-compaction"
    want = expected(model)
    assert canonical(lc_read(t), KEY) == want
    assert canonical(paimon_read(wh, "db.t"), KEY) == want
