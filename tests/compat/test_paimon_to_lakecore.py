"""Tables pypaimon writes read back through lakecore exactly as pypaimon reads them, and stay
Paimon tables after lakecore appends, upserts, deletes and overwrites on top of them.

Round 1: pypaimon creates and fills a partitioned primary-key table (every column type,
upserts, rowkind deletes, a static overwrite) and an append table, then reads them, all in one
``paimon_script`` process. Round 2: lakecore reads the same snapshots, then writes more.
Round 3: one more pypaimon process reads lakecore's additions, writes once more on top of them
and reads again; lakecore must agree at every snapshot and on the snapshot history.

Deletes always target keys whose bucket already has files: pypaimon 2.1.0 reads a lone
level-0 file without merging it (see test_driver_selfcheck's canary).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lakecore import CatalogFactory
from tests.compat.compat_rows import (
    APPEND_SCHEMA,
    DAYS,
    KEY,
    WIDE_SCHEMA,
    Model,
    Row,
    apply,
    comparable_snapshots,
    expected,
    filters_for,
    lc_files,
    lc_filtered_read,
    lc_read,
    lc_snapshots,
    matches,
    paimon_files,
    step,
    table_of,
    wide_row,
)
from tests.compat.pypaimon_runner import canonical, paimon_script, requires_paimon
from tests.core.helpers import write as lc_write

pytestmark = [pytest.mark.compat, requires_paimon]

PK, AP, LONE = "db.pk", "db.ap", "db.lone"
APPEND_SORT = ["dt", "id", "s"]


def without_partition(model: Model, day: str) -> Model:
    return {k: r for k, r in model.items() if k[0] != day}


def test_pypaimon_tables_read_and_extended_by_lakecore(tmp_path: Path) -> None:
    """A partitioned primary-key table (bucket 2, every column type, upserts, deletes, a static
    overwrite) and an append table made by pypaimon read the same through lakecore at every
    snapshot, filtered too; after lakecore's upserts, deletes, overwrite and append, and
    pypaimon's next commit on top of those, both readers still agree on rows, files and the
    snapshot history."""
    wh = tmp_path / "wh"

    # -- round 1: pypaimon writes ---------------------------------------------------------
    # 15 keys per partition over 2 buckets: every bucket has files before a delete hits it.
    pk_commits: list[list[Row]] = [
        [wide_row(i, DAYS[i % 3], 0) for i in range(45)],
        [
            *(wide_row(i, DAYS[i % 3], 1, "+U") for i in range(0, 45, 4)),
            wide_row(7, DAYS[1], 1, "+U"),
            wide_row(7, DAYS[1], 2, "+U"),  # the same key twice in one commit: the last wins
            wide_row(100, DAYS[0], 1),
            wide_row(3, DAYS[2], 1),  # id 3 lives in DAYS[0]: the partition is part of the key
        ],
        [
            wide_row(1, DAYS[1], 3, "-D"),
            wide_row(4, DAYS[1], 3, "-U"),
            wide_row(9, DAYS[0], 3, "-D"),
            wide_row(9, DAYS[0], 4, "+I"),  # deleted and re-inserted in one commit
            wide_row(12, DAYS[0], 3, "-U"),
            wide_row(12, DAYS[0], 4, "+U"),
            wide_row(100, DAYS[0], 3, "-D"),
            wide_row(5, DAYS[2], 3, "+U"),
        ],
    ]
    models: list[Model] = []
    for rows in pk_commits:
        models.append(apply(models[-1] if models else {}, rows))
    paimon_overwrite = [wide_row(i, DAYS[2], 5) for i in range(300, 320)]  # snapshot 4
    models.append(apply(without_partition(models[-1], DAYS[2]), paimon_overwrite))

    ap_batches = [
        [wide_row(i, DAYS[i % 2], 0) for i in range(20)],
        [wide_row(i, DAYS[2], 1) for i in range(8)] + [wide_row(0, DAYS[0], 0)],  # a duplicate
    ]
    ap_rows = ap_batches[0] + ap_batches[1]
    pk_filters, ap_filters = filters_for(list(models[-1].values())), filters_for(ap_rows)
    lone = [wide_row(1, DAYS[0], 0), wide_row(1, DAYS[0], 1, "-D"), wide_row(2, DAYS[1], 0)]
    results = paimon_script(
        [
            step("create", wh, PK, schema=WIDE_SCHEMA, partition_keys=["dt"],
                 primary_keys=["id", "dt"], options={"bucket": "2", "rowkind.field": "rk"}),
            step("create", wh, AP, schema=APPEND_SCHEMA, partition_keys=["dt"],
                 options={"bucket": "-1"}),
            step("write", wh, PK, data=[table_of(rows) for rows in pk_commits]),
            step("write", wh, PK, data=[table_of(paimon_overwrite)], overwrite={"dt": DAYS[2]}),
            step("write", wh, AP, data=[table_of(b, APPEND_SCHEMA) for b in ap_batches]),
            *(step("read", wh, PK, snapshot_id=s) for s in (1, 2, 3, 4)),
            step("read", wh, AP),
            step("read", wh, AP, snapshot_id=1),
            step("snapshots", wh, PK),
            step("snapshots", wh, AP),
            step("plan", wh, PK),
            *(step("read", wh, PK, filter=f) for f in pk_filters),
            *(step("read", wh, AP, filter=f) for f in ap_filters),
            # A -D alone in a bucket's only (level-0) file, which pypaimon 2.1.0 itself
            # shows as live (see test_driver_selfcheck); not read back through pypaimon.
            step("create", wh, LONE, schema=WIDE_SCHEMA, primary_keys=["id", "dt"],
                 partition_keys=["dt"], options={"bucket": "1", "rowkind.field": "rk"}),
            step("write", wh, LONE, data=[table_of(lone)]),
        ]
    )[:-2]
    assert results[2:5] == [[1, 2, 3], [4], [1, 2]]
    pk_reads, (ap_latest, ap_at1, pk_snaps, ap_snaps, pk_plan) = results[5:9], results[9:14]
    pk_filtered = results[14 : 14 + len(pk_filters)]
    ap_filtered = results[14 + len(pk_filters) :]

    # -- round 2: lakecore reads what pypaimon wrote, exactly as pypaimon reads it -----------
    catalog = CatalogFactory.create({"warehouse": str(wh)})
    pk, ap = catalog.get_table(PK), catalog.get_table(AP)
    for snapshot_id, theirs in enumerate(pk_reads, start=1):
        assert canonical(theirs, KEY) == expected(models[snapshot_id - 1]), snapshot_id
        assert canonical(lc_read(pk, snapshot_id), KEY) == canonical(theirs, KEY), snapshot_id
    assert canonical(lc_read(pk), KEY) == expected(models[-1])
    assert canonical(ap_latest, APPEND_SORT) == expected(ap_rows, APPEND_SCHEMA, APPEND_SORT)
    assert canonical(lc_read(ap), APPEND_SORT) == canonical(ap_latest, APPEND_SORT)
    assert canonical(lc_read(ap, 1), APPEND_SORT) == canonical(ap_at1, APPEND_SORT)
    assert lc_files(pk) == paimon_files(pk_plan)
    assert [s["commit_kind"] for s in pk_snaps] == ["APPEND"] * 3 + ["OVERWRITE"]
    assert comparable_snapshots(lc_snapshots(pk)) == comparable_snapshots(pk_snaps)
    assert comparable_snapshots(lc_snapshots(ap)) == comparable_snapshots(ap_snaps)
    # Filtered reads: lakecore prunes files by the stats pypaimon wrote.
    for terms, theirs in zip(pk_filters, pk_filtered, strict=True):
        model = expected([r for r in models[-1].values() if matches(r, terms)])
        assert canonical(theirs, KEY) == model, terms
        assert canonical(lc_filtered_read(pk, terms), KEY) == model, terms
    for terms, theirs in zip(ap_filters, ap_filtered, strict=True):
        model = expected([r for r in ap_rows if matches(r, terms)], APPEND_SCHEMA, APPEND_SORT)
        assert canonical(theirs, APPEND_SORT) == model, terms
        assert canonical(lc_filtered_read(ap, terms), APPEND_SORT) == model, terms

    # Paimon merges every level-0 file (Java: only files above level 0 without deletes are
    # raw-convertible), so the lone -D hides its key.
    assert canonical(lc_read(catalog.get_table(LONE)), KEY) == expected(apply({}, lone))

    # ... then writes on top: upserts and deletes of pypaimon's keys, new keys (snapshot 5),
    # a static overwrite of one partition (snapshot 6), and an append.
    lc_upserts = [
        *(wide_row(i, DAYS[i % 3], 6, "+U") for i in range(2, 45, 3)),
        wide_row(10, DAYS[1], 6, "-D"),
        wide_row(16, DAYS[1], 6, "-U"),
        wide_row(303, DAYS[2], 6, "-D"),  # written by pypaimon's overwrite
        wide_row(500, DAYS[1], 6),
        wide_row(501, DAYS[2], 6),
    ]
    assert lc_write(pk, table_of(lc_upserts)) == (5,)
    models.append(apply(models[-1], lc_upserts))
    lc_overwrite = [wide_row(i, DAYS[0], 7) for i in range(400, 420)]
    assert lc_write(pk, table_of(lc_overwrite), overwrite={"dt": DAYS[0]}) == (6,)
    models.append(apply(without_partition(models[-1], DAYS[0]), lc_overwrite))
    ap_lc = [wide_row(i, DAYS[0], 2) for i in range(5)] + [wide_row(40, DAYS[2], 2)]
    assert lc_write(ap, table_of(ap_lc, APPEND_SCHEMA)) == (3,)
    ap_rows += ap_lc

    # -- round 3: pypaimon reads lakecore's snapshots and writes on top of them --------------
    paimon_upserts = [  # snapshot 7: onto lakecore's overwrite, upserts and deletes
        *(wide_row(i, DAYS[0], 8, "+U") for i in range(400, 420, 3)),
        wide_row(401, DAYS[0], 8, "-D"),
        *(wide_row(i, DAYS[1], 8, "+U") for i in range(1, 45, 6)),
        wide_row(500, DAYS[1], 8, "-D"),  # written by lakecore in snapshot 5
        wide_row(10, DAYS[1], 8, "+I"),  # deleted by lakecore, back again
    ]
    models.append(apply(models[-1], paimon_upserts))
    ap_paimon = [wide_row(i, DAYS[1], 3) for i in range(3)]
    ap_rows_before = list(ap_rows)
    ap_rows += ap_paimon
    final_filters = [filters_for(list(models[-1].values()))[i] for i in (0, 3, 6, -1)]
    (pk5, pk6, ap3, pk_plan6, _, _, pk7, ap4, pk_snaps, ap_snaps, pk_plan7, *final) = paimon_script(
        [
            step("read", wh, PK, snapshot_id=5),
            step("read", wh, PK),
            step("read", wh, AP),
            step("plan", wh, PK),
            step("write", wh, PK, data=[table_of(paimon_upserts)]),
            step("write", wh, AP, data=[table_of(ap_paimon, APPEND_SCHEMA)]),
            step("read", wh, PK),
            step("read", wh, AP),
            step("snapshots", wh, PK),
            step("snapshots", wh, AP),
            step("plan", wh, PK),
            *(step("read", wh, PK, filter=f) for f in final_filters),
        ]
    )
    for snapshot_id, theirs in ((5, pk5), (6, pk6), (7, pk7)):
        want = expected(models[snapshot_id - 1])
        assert canonical(theirs, KEY) == want, f"pypaimon at snapshot {snapshot_id}"
        assert canonical(lc_read(pk, snapshot_id), KEY) == want, f"lakecore at {snapshot_id}"
    assert canonical(lc_read(pk), KEY) == canonical(pk7, KEY)
    assert lc_files(pk, 6) == paimon_files(pk_plan6)
    assert lc_files(pk) == paimon_files(pk_plan7)

    assert canonical(ap3, APPEND_SORT) == canonical(lc_read(ap, 3), APPEND_SORT) == expected(
        ap_rows_before, APPEND_SCHEMA, APPEND_SORT
    )
    assert canonical(ap4, APPEND_SORT) == canonical(lc_read(ap), APPEND_SORT) == expected(
        ap_rows, APPEND_SCHEMA, APPEND_SORT
    )

    # One history, decoded alike by both: ids, kinds, users, record counts, manifest lists.
    assert [(s["id"], s["commit_kind"]) for s in pk_snaps] == list(
        enumerate(["APPEND"] * 3 + ["OVERWRITE", "APPEND", "OVERWRITE", "APPEND"], start=1)
    )
    assert [(s["id"], s["commit_kind"]) for s in ap_snaps] == list(
        enumerate(["APPEND"] * 4, start=1)
    )
    assert comparable_snapshots(lc_snapshots(pk)) == comparable_snapshots(pk_snaps)
    assert comparable_snapshots(lc_snapshots(ap)) == comparable_snapshots(ap_snaps)
    assert pk_snaps[-1]["total_record_count"] == sum(f[4] for f in lc_files(pk))
    # Filtered reads over files from both writers.
    for terms, theirs in zip(final_filters, final, strict=True):
        model = expected([r for r in models[-1].values() if matches(r, terms)])
        assert canonical(theirs, KEY) == model, terms
        assert canonical(lc_filtered_read(pk, terms), KEY) == model, terms


def test_orc_tables_written_by_pypaimon_read_the_same(tmp_path: Path) -> None:
    """Paimon defaulted to ORC before 1.0; lakecore reads ORC data files too."""
    import pyarrow as pa

    wh = str(tmp_path)
    s = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])
    steps = [
        {"op": "create", "table": "db.o", "schema": s, "primary_keys": ["id"],
         "options": {"bucket": "2", "file.format": "orc"}},
        {"op": "write", "table": "db.o",
         "data": [pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=s)]},
        {"op": "write", "table": "db.o", "data": [pa.table({"id": [2], "v": ["z"]}, schema=s)]},
        {"op": "read", "table": "db.o"},
    ]
    for st in steps:
        st["warehouse"] = wh
    theirs = paimon_script(steps)[-1]
    t = CatalogFactory.create({"warehouse": wh}).get_table("db.o")
    rb = t.new_read_builder()
    ours = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    assert canonical(ours, "id") == canonical(theirs, "id")
    assert sorted(ours.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": "a"}, {"id": 2, "v": "z"}, {"id": 3, "v": "c"}]
