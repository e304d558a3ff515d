"""Tables lakecore writes read back through pypaimon exactly as lakecore reads them.

Each test writes with lakecore in this process, then runs all of its pypaimon reads, plans and
snapshot listings in one ``paimon_script`` call (one ~1.5 s process start) and compares three
ways: pypaimon's read, lakecore's read and a plain-Python model of the expected rows.

Deletes (``rowkind.field``) always target keys whose bucket already has files: pypaimon 2.1.0
reads a lone level-0 file without merging it (see test_driver_selfcheck's canary).
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
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
    keys_by_bucket_dir,
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
from tests.core.helpers import make_table
from tests.core.helpers import write as lc_write

pytestmark = [pytest.mark.compat, requires_paimon]


def test_partitioned_pk_table_with_updates_deletes_and_overwrite(tmp_path: Path) -> None:
    """bucket=3, every column type, upserts, rowkind deletes, then a static overwrite: pypaimon
    reads every snapshot as lakecore does and as the model says; plans and snapshots agree."""
    wh = str(tmp_path / "wh")
    t = make_table(wh, WIDE_SCHEMA, primary_keys=["id", "dt"], partition_keys=["dt"],
                   options={"bucket": "3", "rowkind.field": "rk"})
    # 20 keys per partition over 3 buckets: every bucket of every partition has files before
    # any delete reaches it.
    commits: list[list[Row]] = [
        [wide_row(i, DAYS[i % 3], 0) for i in range(60)],
        [
            *(wide_row(i, DAYS[i % 3], 1, "+U") for i in range(0, 60, 4)),
            wide_row(7, DAYS[1], 1, "+U"),
            wide_row(7, DAYS[1], 2, "+U"),  # the same key twice in one commit: the last wins
            wide_row(100, DAYS[0], 1),  # new keys
            wide_row(101, DAYS[2], 1),
            wide_row(3, DAYS[1], 1),  # id 3 lives in DAYS[0]: the partition is part of the key
        ],
        [
            wide_row(1, DAYS[1], 3, "-D"),
            wide_row(4, DAYS[1], 3, "-U"),  # deduplicate drops a key whose last record is -U
            wide_row(9, DAYS[0], 3, "-D"),
            wide_row(9, DAYS[0], 4, "+I"),  # deleted and re-inserted in one commit
            wide_row(12, DAYS[0], 3, "-U"),
            wide_row(12, DAYS[0], 4, "+U"),  # an update pair
            wide_row(100, DAYS[0], 3, "-D"),  # a key written one commit ago
            wide_row(5, DAYS[2], 3, "+U"),
        ],
        [wide_row(i, DAYS[i % 3], 5, "+U") for i in range(1, 60, 5)],
    ]
    models: list[Model] = []
    for rows in commits:
        assert lc_write(t, table_of(rows)) == (len(models) + 1,)
        models.append(apply(models[-1] if models else {}, rows))
    # Static overwrite of one partition (commit 5): the others stay.
    replacement = [wide_row(i, DAYS[1], 6) for i in range(200, 230)]
    assert lc_write(t, table_of(replacement), overwrite={"dt": DAYS[1]}) == (5,)
    models.append(apply({k: r for k, r in models[-1].items() if k[0] != DAYS[1]}, replacement))

    tn = "db.t"
    snaps = (2, 3, 4)
    filters = filters_for(list(models[-1].values()))
    results = paimon_script(
        [
            step("read", wh, tn),
            *(step("read", wh, tn, snapshot_id=s) for s in snaps),
            step("plan", wh, tn),
            step("snapshots", wh, tn),
            *(step("read", wh, tn, filter=f) for f in filters),
        ]
    )
    latest, *older, plan, snapshots = results[: 3 + len(snaps)]
    assert latest.schema.names == WIDE_SCHEMA.names
    for snapshot_id, theirs in [(None, latest), *zip(snaps, older, strict=True)]:
        model = expected(models[(snapshot_id or 5) - 1])
        ours = canonical(lc_read(t, snapshot_id), KEY)
        assert ours == model, f"lakecore at snapshot {snapshot_id}"
        assert canonical(theirs, KEY) == ours, f"pypaimon at snapshot {snapshot_id}"

    # pypaimon plans exactly the files lakecore committed, per partition and bucket.
    assert paimon_files(plan) == lc_files(t)
    assert {(tuple(s["partition"]), s["bucket"]) for s in plan} == {
        ((day,), b) for day in DAYS for b in range(3)
    }
    assert comparable_snapshots(snapshots) == comparable_snapshots(lc_snapshots(t))
    assert [s["commit_kind"] for s in snapshots] == ["APPEND"] * 4 + ["OVERWRITE"]
    assert snapshots[-1]["total_record_count"] == sum(f[4] for f in lc_files(t))
    # -U/-D rows are counted as deletes (Paimon's _DELETE_ROW_COUNT), which keeps pypaimon on
    # its merge read for those buckets.
    assert any(f[7] for f in lc_files(t))

    # Filtered reads: pypaimon prunes by lakecore's key stats, then filters the merged rows.
    for terms, theirs in zip(filters, results[3 + len(snaps) :], strict=True):
        model = expected([r for r in models[-1].values() if matches(r, terms)])
        assert canonical(theirs, KEY) == model, terms
        assert canonical(lc_filtered_read(t, terms), KEY) == model, terms


def test_append_tables_unaware_and_fixed_bucket(tmp_path: Path) -> None:
    """Append-only tables, bucket -1 and bucket 2 with a bucket-key, with a dynamic overwrite:
    duplicates are kept and pypaimon reads (filtered too) what lakecore reads."""
    wh = str(tmp_path / "wh")
    unaware = make_table(wh, APPEND_SCHEMA, partition_keys=["dt"], options={"bucket": "-1"},
                         name="db.unaware")
    fixed = make_table(wh, APPEND_SCHEMA, partition_keys=["dt"],
                       options={"bucket": "2", "bucket-key": "s"}, name="db.fixed")
    tables = {"db.unaware": unaware, "db.fixed": fixed}
    batch1 = [wide_row(i, DAYS[i % 2], 0) for i in range(30)]
    batch2 = batch1[:10] + [wide_row(i, DAYS[2], 1) for i in range(10)]  # duplicates kept
    batch3 = [wide_row(i, DAYS[0], 2) for i in range(5)]
    want = [r for r in batch1 + batch2 if r["dt"] != DAYS[0]] + batch3
    filters = filters_for(want)
    for t in tables.values():
        lc_write(t, table_of(batch1, APPEND_SCHEMA))
        lc_write(t, table_of(batch2, APPEND_SCHEMA))
        # lakecore's overwrite({}) is dynamic by default: only DAYS[0] is replaced.
        lc_write(t, table_of(batch3, APPEND_SCHEMA), overwrite={})

    per_table = 4 + 2 * len(filters)
    results = paimon_script(
        [
            op
            for name in tables
            for op in (
                step("read", wh, name),
                step("read", wh, name, snapshot_id=2),
                step("plan", wh, name),
                step("snapshots", wh, name),
                *(step(kind, wh, name, filter=f) for f in filters for kind in ("read", "plan")),
            )
        ]
    )
    sort = ["dt", "id", "s"]
    for n, (name, t) in enumerate(tables.items()):
        latest, at2, plan, snapshots, *filtered = results[per_table * n : per_table * (n + 1)]
        ours = canonical(lc_read(t), sort)
        assert ours == expected(want, APPEND_SCHEMA, sort), name
        assert canonical(latest, sort) == ours, name
        assert canonical(at2, sort) == canonical(lc_read(t, 2), sort) == expected(
            batch1 + batch2, APPEND_SCHEMA, sort
        ), name
        assert paimon_files(plan) == lc_files(t), name
        assert [s["commit_kind"] for s in snapshots] == ["APPEND", "APPEND", "OVERWRITE"]
        assert comparable_snapshots(snapshots) == comparable_snapshots(lc_snapshots(t))
        for terms, theirs, pruned in zip(filters, filtered[::2], filtered[1::2], strict=True):
            model = expected([r for r in want if matches(r, terms)], APPEND_SCHEMA, sort)
            assert canonical(theirs, sort) == model, (name, terms)
            assert canonical(lc_filtered_read(t, terms), sort) == model, (name, terms)
            assert paimon_files(pruned) <= paimon_files(plan)
        assert filtered[-1] == []  # pypaimon pruned every file by lakecore's stats
    assert {s["bucket"] for s in results[2]} == {0}  # unaware-bucket files live in bucket-0
    assert {s["bucket"] for s in results[per_table + 2]} == {0, 1}


KEYS_SCHEMA = pa.schema(
    [
        pa.field("k_s", pa.string(), nullable=False),
        pa.field("k_i32", pa.int32(), nullable=False),
        pa.field("k_d", pa.date32(), nullable=False),
        pa.field("k_m", pa.decimal128(10, 2), nullable=False),
        pa.field("k_ts", pa.timestamp("us"), nullable=False),
        pa.field("dt", pa.string(), nullable=False),
        pa.field("v", pa.int64()),
    ]
)
KEY_COLUMNS = ["k_s", "k_i32", "k_d", "k_m", "k_ts"]


PARTS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("p_i", pa.int32()),
        pa.field("p_s", pa.string()),
        pa.field("p_b", pa.bool_()),
        pa.field("p_m", pa.decimal128(10, 2)),
        pa.field("v", pa.string()),
    ]
)
# Escaped characters, spaces, unicode; "", " " and null all become __DEFAULT_PARTITION__.
PART_TEXTS = ["a b", "é", "x:y", "a=b", "50%", "#h", "", " ", None]


def test_bucket_and_partition_directory_of_each_row_match_pypaimon(tmp_path: Path) -> None:
    """The same rows written by lakecore and by pypaimon into twin tables land in the same
    ``partition/bucket-N`` directory: a 64-bit key, a composite key of strings (short, long and
    unicode), int, date, decimal and timestamp, an append table's bucket-key, and multi-level
    partitions of int, string (escaped, blank, null), boolean and decimal values. Each reader
    also reads the other's table."""
    wh = str(tmp_path / "wh")
    ids = pa.table({"id": list(range(200)), "dt": [DAYS[i % 2] for i in range(200)]})
    keyed_rows = [
        {
            "k_s": ("ü" * (i % 4)) + "k" * (i % 11) + str(i),
            "k_i32": i * 7919 - 500_000,
            "k_d": dt.date(1970, 1, 1) + dt.timedelta(days=i * 97 - 9000),
            "k_m": decimal.Decimal(i * 12345 - 99999).scaleb(-2),
            "k_ts": dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i * 3601, microseconds=i),
            "dt": DAYS[i % 2],
            "v": i,
        }
        for i in range(200)
    ]
    parts_rows = [
        {
            "id": i,
            "p_i": None if i % 7 == 0 else i % 3 - 1,
            "p_s": PART_TEXTS[i % len(PART_TEXTS)],
            "p_b": i % 2 == 0,
            "p_m": decimal.Decimal(i % 4 * 125 - 250).scaleb(-2),
            "v": f"v{i}",
        }
        for i in range(120)
    ]
    id_schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False)])
    tables: dict[str, tuple[pa.Table, list[str], list[str], dict[str, str]]] = {
        "ids": (ids.cast(id_schema), ["id", "dt"], ["dt"], {"bucket": "7"}),
        "keyed": (table_of(keyed_rows, KEYS_SCHEMA), [*KEY_COLUMNS, "dt"], ["dt"],
                  {"bucket": "5"}),
        "append": (table_of([wide_row(i, DAYS[0], 0) for i in range(100)], APPEND_SCHEMA), [],
                   ["dt"], {"bucket": "4", "bucket-key": "s,i32"}),
        "parts": (table_of(parts_rows, PARTS_SCHEMA), [], ["p_i", "p_s", "p_b", "p_m"],
                  {"bucket": "2", "bucket-key": "id"}),
    }
    steps = []
    written = {}
    for name, (data, pk, partition_keys, options) in tables.items():
        t = written[name] = make_table(wh, data.schema, primary_keys=pk or None,
                                       partition_keys=partition_keys, options=options,
                                       name=f"db.{name}")
        lc_write(t, data)
        steps += [
            step("create", wh, f"db.{name}_twin", schema=data.schema,
                 partition_keys=partition_keys, primary_keys=pk, options=options),
            step("write", wh, f"db.{name}_twin", data=[data]),
            # The driver cannot JSON-encode a plan's Decimal partition values.
            step("snapshots" if name == "parts" else "plan", wh, f"db.{name}"),
            step("read", wh, f"db.{name}"),
        ]
    results = paimon_script(steps)

    base = Path(wh) / "db.db"
    catalog = CatalogFactory.create({"warehouse": wh})
    for n, (name, (data, pk, _, _)) in enumerate(tables.items()):
        key = [k for k in pk if k != "dt"] or ["id"]
        ours = keys_by_bucket_dir(base / name, key)
        theirs = keys_by_bucket_dir(base / f"{name}_twin", key)
        assert len(ours) == data.num_rows, name
        assert ours == theirs, name
        assert len(set(ours.values())) > 2, name  # the rows really spread over directories
        plan, read = results[4 * n + 2 : 4 * n + 4]
        t = written[name]
        if name != "parts":
            assert paimon_files(plan) == lc_files(t), name
            per_bucket: dict[tuple[Any, ...], int] = {}
            for partition, bucket, *_ in lc_files(t):
                per_bucket[(partition, bucket)] = per_bucket.get((partition, bucket), 0) + 1
            assert {(tuple(s["partition"]), s["bucket"]): len(s["files"]) for s in plan} == (
                per_bucket
            )
        assert canonical(read, key) == canonical(data, key), name
        twin = lc_read(catalog.get_table(f"db.{name}_twin"))
        assert canonical(twin, key) == canonical(data, key), name


def test_date_timestamp_and_float_partition_directories_match_pypaimon(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    values: dict[str, tuple[pa.DataType, list[Any]]] = {
        "p_date": (pa.date32(), [dt.date(2024, 1, 1), dt.date(1969, 12, 31)]),
        "p_ts": (
            pa.timestamp("us"),
            [dt.datetime(2024, 1, 1, 12), dt.datetime(2024, 1, 1, 12, 0, 5),
             dt.datetime(2024, 1, 1, 12, 0, 5, 123000), dt.datetime(2024, 1, 1, 12, 0, 5, 123456)],
        ),
        "p_ts3": (pa.timestamp("ms"), [dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1, 0, 0, 1)]),
        "p_f64": (pa.float64(), [1.5, 0.1, 1e20, -0.0]),
        "p_f32": (pa.float32(), [1.5, 0.1, 3.0]),
    }
    steps, data = [], {}
    for name, (kind, vals) in values.items():
        data[name] = pa.table({"id": pa.array(range(len(vals)), pa.int64()),
                               "p": pa.array(vals, kind)})
        lc_write(make_table(wh, data[name].schema, partition_keys=["p"],
                            options={"bucket": "-1"}, name=f"db.{name}"), data[name])
        steps += [
            step("create", wh, f"db.{name}_twin", schema=data[name].schema, partition_keys=["p"],
                 options={"bucket": "-1"}),
            step("write", wh, f"db.{name}_twin", data=[data[name]]),
        ]
    paimon_script(steps)
    base = Path(wh) / "db.db"
    mismatched = {
        name: (sorted(keys_by_bucket_dir(base / name, ["id"]).values()),
               sorted(keys_by_bucket_dir(base / f"{name}_twin", ["id"]).values()))
        for name in values
    }
    assert {n: pair for n, pair in mismatched.items() if pair[0] != pair[1]} == {}


def test_first_row_table(tmp_path: Path) -> None:
    """first-row keeps each key's first record; Paimon's batch scan of a first-row table skips
    level-0 files (CoreOptions.batchScanSkipLevel0), so the writer must lift them (Java's
    lookup compaction, forced for first-row)."""
    wh = str(tmp_path / "wh")
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.string())])
    t = make_table(wh, schema, primary_keys=["id"], options={"bucket": "2",
                   "merge-engine": "first-row"}, name="db.first")
    lc_write(t, pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=schema))
    lc_write(t, pa.table({"id": [2, 3, 4], "v": ["x", "y", "z"]}, schema=schema))
    model = [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 3, "v": "c"}, {"id": 4, "v": "z"}]
    (theirs,) = paimon_script([step("read", wh, "db.first")])
    assert canonical(lc_read(t), "id") == model
    assert canonical(theirs, "id") == model


def test_partial_update_and_aggregation_tables(tmp_path: Path) -> None:
    """partial-update (last non-null value per column) and aggregation (sum, max, default
    last_non_null_value) merge the same in pypaimon as in lakecore and the model.

    Only +I/+U rows: pypaimon 2.1.0 refuses -U/-D rows in both engines."""
    wh = str(tmp_path / "wh")
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("dt", pa.string(), nullable=False),
            pa.field("n", pa.int64()),
            pa.field("x", pa.float64()),
            pa.field("m", pa.decimal128(12, 2)),
            pa.field("hi", pa.int32()),
            pa.field("s", pa.string()),
        ]
    )
    engines = {
        "partial": {"merge-engine": "partial-update"},
        "agg": {
            "merge-engine": "aggregation",
            "fields.n.aggregate-function": "sum",
            "fields.x.aggregate-function": "sum",
            "fields.m.aggregate-function": "sum",
            "fields.hi.aggregate-function": "max",
        },
    }

    def value(i: int, c: int, col: str) -> Any:
        if (i + c) % 3 == 0 and col != "n":
            return None  # a null input: partial-update keeps the old value, sums skip it
        return {
            "n": i * 10 + c,
            "x": i / 4 + c,
            "m": decimal.Decimal(i * 101 + c).scaleb(-2),
            "hi": (i * 37 + c * 53) % 100,
            "s": f"row-{i}-commit-{c}-ü",
        }[col]

    cols = ["n", "x", "m", "hi", "s"]
    commits = [
        [{"id": i, "dt": DAYS[i % 2], **{col: value(i, c, col) for col in cols}}
         for i in range(c * 3, 24 + c * 2)]
        for c in range(4)
    ]
    # Plain-Python engines.
    partial: dict[tuple[Any, ...], Row] = {}
    agg: dict[tuple[Any, ...], Row] = {}
    for rows in commits:
        for r in rows:
            k = (r["dt"], r["id"])
            p = partial.setdefault(k, {"id": r["id"], "dt": r["dt"]})
            a = agg.setdefault(k, {"id": r["id"], "dt": r["dt"]})
            for col in cols:
                new = r[col]
                if new is None:
                    p.setdefault(col, None)
                    a.setdefault(col, None)
                    continue
                p[col] = new
                old = a.get(col)
                if col == "s" or old is None:
                    a[col] = new
                elif col == "hi":
                    a[col] = max(old, new)
                else:
                    a[col] = old + new
    models = {"partial": partial, "agg": agg}

    tables = {}
    for name, options in engines.items():
        t = make_table(wh, schema, primary_keys=["id", "dt"], partition_keys=["dt"],
                       options={"bucket": "2", **options}, name=f"db.{name}")
        for rows in commits:
            lc_write(t, table_of(rows, schema))
        tables[name] = t
    results = paimon_script(
        [step("read", wh, f"db.{name}", snapshot_id=s) for name in engines for s in (None, 2)]
    )
    for n, name in enumerate(engines):
        ours = canonical(lc_read(tables[name]), KEY)
        assert ours == expected(models[name], schema), name
        assert canonical(results[2 * n], KEY) == ours, name
        assert canonical(results[2 * n + 1], KEY) == canonical(lc_read(tables[name], 2), KEY)
