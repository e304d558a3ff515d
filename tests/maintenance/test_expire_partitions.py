"""Partition expiry: strict cut-off, check interval, unparsable values, max-num, update-time,
the OVERWRITE commit, expired-partition records and pypaimon agreement."""

from __future__ import annotations

import types
from datetime import datetime, timedelta

import pyarrow as pa
import pytest

from lakecore.errors import OptionError, PartitionExpiredError
from lakecore.format.snapshot import CommitKind
from lakecore.io import data_file_writer
from lakecore.maintenance import expire_partitions, maybe_expire_partitions
from lakecore.store.partition_records import check_not_expired, expired_partition_records
from lakecore.utils.clock import to_epoch_millis
from tests.compat.pypaimon_runner import requires_paimon
from tests.core.helpers import make_table, read, write
from tests.maintenance.helpers import assert_paimon_agrees, pk_table, read_views, rows

EXPIRY = {"partition.expiration-time": "2 d", "partition.expiration-check-interval": "1 d",
          "partition.timestamp-formatter": "yyyyMMdd"}


def date(day: int) -> datetime:
    return datetime(2023, 1, day)


def dts(table) -> list[str]:
    return sorted({r["dt"] for r in read(table)})


def paimon_like_table(tmp_path):
    t = pk_table(tmp_path, **EXPIRY)
    for i, d in enumerate(("20230101", "20230101", "20230103", "20230103", "20230105")):
        write(t, rows([i], d, i))
    return t


def set_last_check(table, when: datetime) -> None:
    table.file_io.write_bytes(table.paths.partition_expire_last_check,
                              str(to_epoch_millis(when)).encode())


def test_paimon_reference_sequence_with_check_interval(tmp_path):
    # Paimon PartitionExpireTest#test: 2 d expiration, 1 d check interval, last check Jan 1
    t = paimon_like_table(tmp_path)
    set_last_check(t, date(1))
    r = maybe_expire_partitions(t, now=date(3))           # cut-off Jan 1: strictly before
    assert r is not None and r.plan.expired == ()
    assert dts(t) == ["20230101", "20230103", "20230105"]
    maybe_expire_partitions(t, now=date(5))               # cut-off Jan 3
    assert dts(t) == ["20230103", "20230105"]
    assert maybe_expire_partitions(t, now=date(6)) is None  # within the interval: no check
    assert dts(t) == ["20230103", "20230105"]
    maybe_expire_partitions(t, now=date(8))
    assert dts(t) == []
    assert expired_partition_records(t) == [{"dt": "20230101"}, {"dt": "20230103"},
                                            {"dt": "20230105"}]


def test_first_check_runs_when_nothing_recorded(tmp_path):
    t = paimon_like_table(tmp_path)
    assert maybe_expire_partitions(t, now=date(5)) is not None
    assert maybe_expire_partitions(t, now=date(5) + timedelta(hours=23)) is None


def test_strict_cut_off(tmp_path):
    t = paimon_like_table(tmp_path)
    at_cut = expire_partitions(t, now=date(3), dry_run=False)
    assert at_cut.plan.expired == () and dts(t)[0] == "20230101"
    just_after = expire_partitions(t, now=date(3) + timedelta(milliseconds=1), dry_run=False)
    assert just_after.plan.expired == ({"dt": "20230101"},)
    assert dts(t) == ["20230103", "20230105"]


def test_expiry_is_an_overwrite_commit_and_old_snapshots_still_read(tmp_path):
    t = paimon_like_table(tmp_path)
    before = read_views(t)
    report = expire_partitions(t, now=date(6), dry_run=False)
    (sid,) = report.snapshot_ids
    snap = t.snapshot_manager.snapshot(sid)
    assert snap.commit_kind is CommitKind.OVERWRITE
    assert snap.commit_user.startswith("lakecore-partition-expire-")
    assert report.plan.files == 4 and report.plan.bytes > 0  # 2 + 2 files
    assert report.partitions_removed == 2  # 20230101 and 20230103 (cut-off Jan 4)
    after = read_views(t)
    assert all(after[k] == before[k] for k in before)  # older snapshots still see them


def test_dry_run_changes_nothing(tmp_path):
    t = paimon_like_table(tmp_path)
    latest = t.snapshot_manager.latest_id()
    report = expire_partitions(t, now=date(8))
    assert report.dry_run and len(report.plan.expired) == 3
    assert t.snapshot_manager.latest_id() == latest and expired_partition_records(t) == []


def test_unparsable_values_are_reported_not_dropped(tmp_path):
    t = pk_table(tmp_path, **EXPIRY)
    write(t, rows([1], "20230101", 1), rows([2], "abcd", 1), rows([3], "20230105", 1))
    report = expire_partitions(t, now=date(8), dry_run=False)
    assert report.plan.expired == ({"dt": "20230101"}, {"dt": "20230105"})
    ((spec, reason),) = report.plan.unparsable
    assert spec == {"dt": "abcd"} and "does not match" in reason
    assert dts(t) == ["abcd"]
    assert report.to_dict()["plan"]["unparsable"][0]["partition"] == {"dt": "abcd"}


def test_null_partition_is_reported(tmp_path):
    schema = pa.schema([("v", pa.int64()), ("dt", pa.string())])
    t = make_table(str(tmp_path), schema, partition_keys=["dt"],
                   options={"partition.expiration-time": "1 d", "write-only": "true"})
    write(t, {"v": [1, 2], "dt": ["2023-01-01", None]})
    report = expire_partitions(t, now=date(5), dry_run=False)
    assert report.plan.expired == ({"dt": "2023-01-01"},)
    assert report.plan.unparsable[0][0] == {"dt": "__DEFAULT_PARTITION__"}
    assert "null" in report.plan.unparsable[0][1]


def test_max_num_limits_each_run_in_value_order(tmp_path):
    t = pk_table(tmp_path, **EXPIRY, **{"partition.expiration-max-num": "2"})
    write(t, *(rows([i], f"2023010{i}", i) for i in (3, 1, 2)))
    report = expire_partitions(t, now=date(9), dry_run=False)
    assert report.plan.expired == ({"dt": "20230101"}, {"dt": "20230102"})
    assert report.plan.deferred == 1
    assert dts(t) == ["20230103"]


def test_pattern_over_several_partition_keys(tmp_path):
    schema = pa.schema([("v", pa.int64()), ("y", pa.string()), ("m", pa.string()),
                        ("d", pa.string())])
    t = make_table(str(tmp_path), schema, partition_keys=["y", "m", "d"], options={
        "partition.expiration-time": "1 d", "partition.timestamp-pattern": "$y-$m-$d",
        "write-only": "true"})
    write(t, {"v": [1, 2], "y": ["2023", "2023"], "m": ["1", "01"], "d": ["2", "05"]})
    report = expire_partitions(t, now=date(4), dry_run=False)
    assert report.plan.expired == ({"y": "2023", "m": "1", "d": "2"},)
    assert [r["d"] for r in read(t)] == ["05"]


def test_update_time_strategy(tmp_path, monkeypatch):
    t = pk_table(tmp_path, **{"partition.expiration-time": "1 d",
                              "partition.expiration-strategy": "update-time"})

    def created_at(when: datetime) -> None:
        monkeypatch.setattr(data_file_writer, "time",
                            types.SimpleNamespace(time=lambda: when.timestamp()))

    created_at(date(1))
    write(t, rows([1], "old", 1), rows([2], "touched", 1), rows([3], "not-a-date", 1))
    created_at(date(4))
    write(t, rows([4], "touched", 2))  # the newest file decides
    report = expire_partitions(t, now=date(4) + timedelta(hours=1), dry_run=False)
    assert report.plan.expired == ({"dt": "not-a-date"}, {"dt": "old"})
    assert dts(t) == ["touched"]


def test_writes_into_expired_partitions_are_refused(tmp_path):
    t = paimon_like_table(tmp_path)
    expire_partitions(t, now=date(4), dry_run=False)  # drops 20230101 (recorded)
    later = date(2) + timedelta(days=365)
    with pytest.raises(PartitionExpiredError, match="dropped by partition expiry") as err:
        check_not_expired(t, [("20230101",)], now=date(2))  # even before its cut-off
    assert err.value.partitions == [{"dt": "20230101"}]
    with pytest.raises(PartitionExpiredError, match="before the expiration cut-off"):
        check_not_expired(t, [("20230105",)], now=later)  # values-time: past the cut-off
    check_not_expired(t, [("20230105",), ("not-a-date",)], now=date(4))  # fine
    # the real write path: the commit refuses, the table is left as it was
    before = t.snapshot_manager.latest_id()
    with pytest.raises(PartitionExpiredError, match="20230101"):
        write(t, rows([7], "20230101", 1))
    assert t.snapshot_manager.latest_id() == before


def test_no_expiry_configured(tmp_path):
    t = pk_table(tmp_path)
    write(t, rows([1], "20230101", 1))
    assert expire_partitions(t, now=date(9), dry_run=False).plan.note
    assert maybe_expire_partitions(t, now=date(9)) is None
    check_not_expired(t, [("20230101",)])


def test_bad_formatter_is_an_option_error_at_create_time(tmp_path):
    with pytest.raises(OptionError, match="partition.timestamp-formatter"):
        pk_table(tmp_path, **{"partition.expiration-time": "1 d",
                              "partition.timestamp-formatter": "yyyy-MMM-dd"})


@requires_paimon
def test_pypaimon_reads_after_partition_expiry(tmp_path):
    t = paimon_like_table(tmp_path)
    expire_partitions(t, now=date(5), dry_run=False)
    assert_paimon_agrees(t, tmp_path)


def test_record_files_are_folded_without_losing_partitions(tmp_path):
    from lakecore.store.partition_records import compact_records

    t = pk_table(tmp_path, **{"partition.expiration-time": "1 d",
                              "partition.timestamp-formatter": "yyyyMMdd",
                              "partition.expiration-max-num": "1"})
    write(t, *(rows([i], f"202301{i:02d}", i) for i in range(1, 7)))
    for _ in range(6):  # one partition per run: six record files
        expire_partitions(t, now=date(20), dry_run=False)
    records = expired_partition_records(t)
    assert len(records) == 6 and dts(t) == []
    compact_records(t, max_files=3)
    files = t.file_io.list_status(t.paths.expired_partitions_dir)
    assert len(files) == 1
    assert sorted(r["dt"] for r in expired_partition_records(t)) == sorted(
        r["dt"] for r in records)
    with pytest.raises(PartitionExpiredError):
        check_not_expired(t, [("20230103",)], now=date(1))


@pytest.mark.parametrize("pattern", [None, "$dt"])
def test_null_in_a_field_the_time_is_not_read_from_still_expires(tmp_path, pattern):
    """Paimon PartitionExpireTest#testExpireWithNullOrEmptyPartition: partitions (f0, f1),
    the time read from f0; writes 20230101/{11, 12, null}, 20230103/{"", 32}, 20230105/51,
    expire at Jan 6 with 2 d -> only 20230105:51 is left. PartitionTimeExtractor only reads the
    values it substitutes, so a null sub-partition (__DEFAULT_PARTITION__) is no reason to keep
    the partition; the same holds with partition.timestamp-pattern '$dt'."""
    schema = pa.schema([("v", pa.int64()), ("dt", pa.string()), ("region", pa.string())])
    options = {**EXPIRY, "write-only": "true"}
    if pattern is not None:
        options["partition.timestamp-pattern"] = pattern
    t = make_table(str(tmp_path), schema, partition_keys=["dt", "region"], options=options)
    write(t, {"v": [1, 2, 3, 4, 5, 6],
              "dt": ["20230101", "20230101", "20230101", "20230103", "20230103", "20230105"],
              "region": ["11", "12", None, "", "32", "51"]})
    report = expire_partitions(t, now=date(6), dry_run=False)
    assert report.plan.unparsable == ()
    assert {"dt": "20230101", "region": "__DEFAULT_PARTITION__"} in report.plan.expired
    assert [(r["dt"], r["region"]) for r in read(t)] == [("20230105", "51")]


def test_null_in_the_field_the_time_is_read_from_is_reported(tmp_path):
    """Paimon PartitionValuesTimeExpireStrategy: a null value the pattern substitutes cannot
    give a time (NullPointerException -> not expired, warned); lakecore reports it."""
    schema = pa.schema([("v", pa.int64()), ("dt", pa.string()), ("region", pa.string())])
    t = make_table(str(tmp_path), schema, partition_keys=["region", "dt"], options={
        **EXPIRY, "write-only": "true", "partition.timestamp-pattern": "$dt"})
    write(t, {"v": [1, 2], "dt": [None, "20230101"], "region": ["eu", None]})
    report = expire_partitions(t, now=date(6), dry_run=False)
    assert report.plan.expired == ({"region": "__DEFAULT_PARTITION__", "dt": "20230101"},)
    ((spec, reason),) = report.plan.unparsable
    assert spec == {"region": "eu", "dt": "__DEFAULT_PARTITION__"} and "dt" in reason
    assert [(r["region"], r["dt"]) for r in read(t)] == [("eu", None)]
