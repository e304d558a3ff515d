"""Tables lakecore did not create, in both directions with pypaimon 2.1: its habits (nullable
key columns in its data files, pyarrow's nullable schema default), Avro and ORC data files, and
postpone-bucket tables (``bucket = -2``) that only the dedicated compaction makes visible."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import CatalogFactory, Schema
from lakecore.errors import NullKeyError
from lakecore.format.bucket import POSTPONE_BUCKET
from tests.compat.compat_rows import (
    APPEND_SCHEMA,
    DAYS,
    KEY,
    WIDE_SCHEMA,
    apply,
    expected,
    keys_by_bucket_dir,
    lc_filtered_read,
    lc_read,
    matches,
    step,
    table_of,
    wide_row,
)
from tests.compat.pypaimon_runner import canonical, paimon_script, requires_paimon
from tests.core.helpers import table_files
from tests.core.helpers import write as lc_write

pytestmark = [pytest.mark.compat, requires_paimon]

# pyarrow's default: every field nullable, the key columns included (pypaimon's users write this)
NULLABLE_SCHEMA = pa.schema([f.with_nullable(True) for f in WIDE_SCHEMA])


def _batches(n_ids: int = 40) -> list[list[dict]]:
    """Inserts over two days, updates of every third key, deletes of a few."""
    b1 = [wide_row(i, d, 1) for d in DAYS[:2] for i in range(n_ids)]
    b2 = [wide_row(i, d, 2, "+U") for d in DAYS[:2] for i in range(0, n_ids, 3)]
    b3 = [wide_row(i, DAYS[0], 3, "-D") for i in range(1, n_ids // 2, 4)]
    return [b1, b2, b3]


def _paimon_reads(wh: str, table: str) -> list[dict]:
    return canonical(paimon_script([step("read", wh, table)])[0], KEY)


def test_compacting_a_table_pypaimon_wrote_with_its_habits(tmp_path: Path) -> None:
    """The issue's case: pyarrow's nullable schema, bucket = 2, two pypaimon commits, then a
    full compaction (pypaimon's files declare the key's value copy nullable)."""
    wh = str(tmp_path)
    opts = {"bucket": "2", "rowkind.field": "rk"}
    steps = [step("create", wh, "db.p", schema=NULLABLE_SCHEMA, partition_keys=["dt"],
                  primary_keys=list(KEY), options=opts)]
    model: dict = {}
    for rows in _batches()[:2]:
        steps.append(step("write", wh, "db.p", data=[table_of(rows, NULLABLE_SCHEMA)]))
        model = apply(model, rows)
    paimon_script(steps)
    t = CatalogFactory.create({"warehouse": wh}).get_table("db.p")
    assert not t.schema.row_type.field("id").type.nullable  # pypaimon made the key NOT NULL
    report = t.compact(full=True)
    assert report.buckets == 4 and report.snapshot_ids
    assert canonical(lc_read(t), KEY) == expected(model)
    assert _paimon_reads(wh, "db.p") == expected(model)

    # both keep writing; lakecore compacts again; pypaimon reads the same rows
    more = [wide_row(i, DAYS[1], 4, "+U") for i in range(30, 50)]
    lc_write(t, table_of(more, NULLABLE_SCHEMA))
    model = apply(model, more)
    last = _batches()[2]
    paimon_script([step("write", wh, "db.p", data=[table_of(last, NULLABLE_SCHEMA)])])
    model = apply(model, last)
    t.compact()
    assert canonical(lc_read(t), KEY) == expected(model)
    assert _paimon_reads(wh, "db.p") == expected(model)

    # a null key value is a typed error naming the column; the table is unchanged
    before, latest = table_files(t), t.snapshot_manager.latest_id()
    bad = table_of([wide_row(1, DAYS[0], 9), {**wide_row(2, DAYS[0], 9), "id": None}],
                   NULLABLE_SCHEMA)
    with pytest.raises(NullKeyError, match="'id'"):
        lc_write(t, bad)
    assert table_files(t) == before and t.snapshot_manager.latest_id() == latest


@pytest.mark.parametrize("fmt", ["avro", "orc"])
def test_pypaimon_avro_and_orc_tables_read_write_and_compact(tmp_path: Path, fmt: str) -> None:
    wh = str(tmp_path)
    opts = {"bucket": "2", "rowkind.field": "rk", "file.format": fmt}
    steps = [step("create", wh, "db.p", schema=WIDE_SCHEMA, partition_keys=["dt"],
                  primary_keys=list(KEY), options=opts)]
    model: dict = {}
    for rows in _batches():
        steps.append(step("write", wh, "db.p", data=[table_of(rows)]))
        model = apply(model, rows)
    paimon_script(steps)
    t = CatalogFactory.create({"warehouse": wh}).get_table("db.p")
    names = {f.rsplit("/", 1)[-1].rsplit(".", 1)[-1] for f in table_files(t) if "/bucket-" in f}
    assert names == {fmt}
    assert canonical(lc_read(t), KEY) == expected(model)
    for terms in ([["id", "between", 3, 12]], [["s", "is_null"]], [["dt", "equal", DAYS[1]]]):
        want = [r for r in model.values() if matches(r, terms)]
        assert canonical(lc_filtered_read(t, terms), KEY) == expected(want)

    t.compact(full=True)  # merges foreign files into lakecore's Parquet
    more = [wide_row(i, DAYS[0], 5, "+U") for i in range(10, 30)]
    lc_write(t, table_of(more))
    model = apply(model, more)
    t.compact()
    assert canonical(lc_read(t), KEY) == expected(model)
    assert _paimon_reads(wh, "db.p") == expected(model)


def test_pypaimon_avro_append_table(tmp_path: Path) -> None:
    wh = str(tmp_path)
    # five commits over two days: each partition gets the 5 small files that make Paimon's
    # append compaction (compaction.min.file-num) rewrite them
    batches = [[wide_row(i, DAYS[i % 2], v) for i in range(v * 10, v * 10 + 25)]
               for v in range(5)]
    steps = [step("create", wh, "db.log", schema=APPEND_SCHEMA, partition_keys=["dt"],
                  options={"file.format": "avro"})]
    steps += [step("write", wh, "db.log", data=[table_of(b, APPEND_SCHEMA)]) for b in batches]
    paimon_script(steps)
    t = CatalogFactory.create({"warehouse": wh}).get_table("db.log")
    rows = [r for b in batches for r in b]
    want = canonical(table_of(rows, APPEND_SCHEMA), ["id", "dt", "i32"])
    assert canonical(lc_read(t), ["id", "dt", "i32"]) == want
    report = t.compact(full=True)
    assert report.files_before > report.files_after
    assert canonical(lc_read(t), ["id", "dt", "i32"]) == want
    assert canonical(paimon_script([step("read", wh, "db.log")])[0], ["id", "dt", "i32"]) == want


def _live_postpone(table) -> int:
    """Live files in postpone buckets (what readers skip)."""
    snap = table.snapshot_manager.latest()
    mio = table.manifest_io()
    from lakecore.store.manifest_io import merge_entries

    metas = mio.read_manifest_list(snap.base_manifest_list) + mio.read_manifest_list(
        snap.delta_manifest_list)
    return sum(e.bucket == POSTPONE_BUCKET for e in merge_entries(mio.read_entries(metas)).values())


def test_pypaimon_postpone_table_made_visible_by_lakecore(tmp_path: Path) -> None:
    wh = str(tmp_path)
    opts = {"bucket": "-2", "rowkind.field": "rk", "postpone.default-bucket-num": "3"}
    steps = [step("create", wh, "db.p", schema=NULLABLE_SCHEMA, partition_keys=["dt"],
                  primary_keys=list(KEY), options=opts)]
    model: dict = {}
    batches = _batches()
    for rows in batches[:2]:
        steps.append(step("write", wh, "db.p", data=[table_of(rows, NULLABLE_SCHEMA)]))
        model = apply(model, rows)
    steps.append(step("read", wh, "db.p"))
    assert paimon_script(steps)[-1].num_rows == 0  # pypaimon does not show them either
    t = CatalogFactory.create({"warehouse": wh}).get_table("db.p")
    pending = [f for f in table_files(t) if "bucket-postpone/" in f]
    assert pending and all(f.endswith(".avro") for f in pending)
    assert lc_read(t).num_rows == 0

    t.compact()  # the dedicated compaction: real buckets, visible to both readers
    assert _live_postpone(t) == 0
    assert canonical(lc_read(t), KEY) == expected(model)
    got = paimon_script([step("read", wh, "db.p"), step("plan", wh, "db.p")])
    assert canonical(got[0], KEY) == expected(model)
    assert {s["bucket"] for s in got[1]} == {0, 1, 2}

    # pypaimon keeps writing into the postpone bucket; the next run uses the known 3 buckets
    paimon_script([step("write", wh, "db.p", data=[table_of(batches[2], NULLABLE_SCHEMA)])])
    model = apply(model, batches[2])
    assert canonical(lc_read(t), KEY) != expected(model)  # the deletes are pending
    t.copy({"postpone.default-bucket-num": "7"}).compact(full=True)
    assert canonical(lc_read(t), KEY) == expected(model)
    assert _paimon_reads(wh, "db.p") == expected(model)

    # every row sits where Paimon's bucket function puts it in a 3-bucket table
    twin_cat = CatalogFactory.create({"warehouse": str(tmp_path / "twin")})
    twin_cat.create_database("db")
    twin_cat.create_table("db.p", Schema.from_pyarrow_schema(
        NULLABLE_SCHEMA, partition_keys=["dt"], primary_keys=list(KEY),
        options={"bucket": "3", "rowkind.field": "rk"}))
    twin = twin_cat.get_table("db.p")
    lc_write(twin, table_of(model.values(), NULLABLE_SCHEMA))
    placed = keys_by_bucket_dir(Path(t.table_path), KEY)
    want = keys_by_bucket_dir(Path(twin.table_path), KEY)
    assert {k: placed[k] for k in want} == want


def test_pypaimon_fixed_bucket_writes_into_a_postpone_table(tmp_path: Path) -> None:
    """pypaimon's other postpone writer puts rows straight into real buckets (visible at
    once); its plain writes wait in the postpone bucket. lakecore reads the first, keeps their
    bucket count when it compacts the second."""
    wh = str(tmp_path)
    opts = {"bucket": "-2", "rowkind.field": "rk", "postpone.default-bucket-num": "2"}
    batches = _batches()
    steps = [step("create", wh, "db.p", schema=NULLABLE_SCHEMA, partition_keys=["dt"],
                  primary_keys=list(KEY), options=opts),
             step("write", wh, "db.p", data=[table_of(batches[0], NULLABLE_SCHEMA)],
                  postpone_fixed_bucket=True),
             step("write", wh, "db.p", data=[table_of(batches[1], NULLABLE_SCHEMA)]),
             step("read", wh, "db.p")]
    got = paimon_script(steps)[-1]
    first = apply({}, batches[0])
    t = CatalogFactory.create({"warehouse": wh}).get_table("db.p")
    assert canonical(lc_read(t), KEY) == canonical(got, KEY) == expected(first)
    t.compact()
    model = apply(first, batches[1])
    assert canonical(lc_read(t), KEY) == expected(model)
    got = paimon_script([step("read", wh, "db.p"), step("plan", wh, "db.p")])
    assert canonical(got[0], KEY) == expected(model)
    assert {s["bucket"] for s in got[1]} == {0, 1}


def test_lakecore_postpone_table_read_by_pypaimon(tmp_path: Path) -> None:
    wh = str(tmp_path)
    cat = CatalogFactory.create({"warehouse": wh})
    cat.create_database("db")
    cat.create_table("db.t", Schema.from_pyarrow_schema(
        NULLABLE_SCHEMA, partition_keys=["dt"], primary_keys=list(KEY),
        options={"bucket": "-2", "rowkind.field": "rk", "postpone.default-bucket-num": "2"}))
    t = cat.get_table("db.t")
    batches = _batches()
    model: dict = {}
    for rows in batches[:2]:
        lc_write(t, table_of(rows, NULLABLE_SCHEMA))
        model = apply(model, rows)
    assert lc_read(t).num_rows == 0
    assert paimon_script([step("read", wh, "db.t")])[0].num_rows == 0
    t.compact()
    assert canonical(lc_read(t), KEY) == expected(model)
    assert _paimon_reads(wh, "db.t") == expected(model)
    # pypaimon adds to the postpone bucket (Avro, beside lakecore's Parquet ones); compact again
    paimon_script([step("write", wh, "db.t", data=[table_of(batches[2], NULLABLE_SCHEMA)])])
    lc_write(t, table_of([wide_row(5, DAYS[2], 7)], NULLABLE_SCHEMA))
    model = apply(apply(model, batches[2]), [wide_row(5, DAYS[2], 7)])
    t.compact()
    assert canonical(lc_read(t), KEY) == expected(model)
    assert _paimon_reads(wh, "db.t") == expected(model)


def test_pypaimon_postpone_files_in_arrival_order_replay_in_that_order(tmp_path: Path) -> None:
    """pypaimon's postpone writer keeps one commit's rows unsorted and unmerged (several rows
    of a key, in arrival order); the replay keeps that order."""
    wh = str(tmp_path)
    schema = pa.schema([("id", pa.int64()), ("v", pa.string()), ("rk", pa.string())])
    data = pa.table({"id": [1, 2, 1, 3, 2, 1], "v": ["a", "b", "c", "d", "e", "f"],
                     "rk": ["+I", "+I", "+U", "+I", "-D", "+U"]}, schema=schema)
    paimon_script([step("create", wh, "db.t", schema=schema, primary_keys=["id"],
                        options={"bucket": "-2", "rowkind.field": "rk"}),
                   step("write", wh, "db.t", data=[data])])
    t = CatalogFactory.create({"warehouse": wh}).get_table("db.t")
    t.compact()
    want = [{"id": 1, "v": "f", "rk": "+U"}, {"id": 3, "v": "d", "rk": "+I"}]
    assert lc_read(t).sort_by("id").to_pylist() == want
    got = paimon_script([step("read", wh, "db.t")])[0]
    assert got.sort_by("id").to_pylist() == want
