"""Option parsing and validation: Paimon's text forms, keys, defaults and every rejection."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from lakecore.errors import OptionError
from lakecore.options import (
    OPTIONS,
    AggregateFunction,
    ChangelogProducer,
    CoreOptions,
    MergeEngine,
    PartitionExpirationStrategy,
    StatsMode,
)
from lakecore.options.parse import (
    enum_parser,
    parse_bool,
    parse_duration,
    parse_float,
    parse_incremental_between,
    parse_int,
    parse_long,
    parse_memory_size,
    parse_stats_mode,
)
from lakecore.options.registry import (
    KEYED_OPTIONS,
    IncrementalBetweenScanMode,
    PartitionMarkDoneAction,
    SortOrder,
    resolve_key,
)

PAIMON_PYTHON = Path(
    os.environ.get("LAKECORE_PAIMON_PYTHON")
    or Path(__file__).resolve().parents[1] / ".venv-paimon" / "bin" / "python"
)
MB = 1 << 20
COLUMNS = ("id", "dt", "v", "n", "s", "flag")


def opts(options: dict[str, str], pk: tuple[str, ...] = ("id",)) -> CoreOptions:
    return CoreOptions.from_map(options, primary_keys=pk, column_names=COLUMNS)


# --- parsers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 h", timedelta(hours=1)),
        ("1h", timedelta(hours=1)),
        ("2 hours", timedelta(hours=2)),
        ("10 s", timedelta(seconds=10)),
        ("10s", timedelta(seconds=10)),
        ("3 sec", timedelta(seconds=3)),
        ("3 secs", timedelta(seconds=3)),
        ("1 second", timedelta(seconds=1)),
        ("500 ms", timedelta(milliseconds=500)),
        ("500 millis", timedelta(milliseconds=500)),
        ("2 milliseconds", timedelta(milliseconds=2)),
        ("500", timedelta(milliseconds=500)),
        ("0", timedelta(0)),
        ("30min", timedelta(minutes=30)),
        ("30 m", timedelta(minutes=30)),
        ("5 minutes", timedelta(minutes=5)),
        ("7 d", timedelta(days=7)),
        ("1 day", timedelta(days=1)),
        ("7 days", timedelta(days=7)),
        ("250 µs", timedelta(microseconds=250)),
        ("3 micros", timedelta(microseconds=3)),
        ("2000 ns", timedelta(microseconds=2)),
        ("  10 S  ", timedelta(seconds=10)),
        ("1 H", timedelta(hours=1)),
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("h", "start with a number"),
        ("-1 s", "start with a number"),
        ("1.5 h", "unknown time unit"),
        ("10 fortnights", "unknown time unit"),
        ("10 hrs", "unknown time unit"),
        ("1 ns", "whole number of microseconds"),
        ("99999999999999999999 d", "64-bit"),
        ("9999999999999 d", "too long"),
    ],
)
def test_parse_duration_rejects(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("256 mb", 256 * MB),
        ("128 MB", 128 * MB),
        ("64kb", 64 << 10),
        ("64 k", 64 << 10),
        ("1 gb", 1 << 30),
        ("2g", 2 << 30),
        ("1 tb", 1 << 40),
        ("3 m", 3 * MB),
        ("4096", 4096),
        ("10 b", 10),
        ("10 bytes", 10),
        ("1 mebibytes", MB),
        ("1 kibibytes", 1024),
        ("0", 0),
    ],
)
def test_parse_memory_size(text: str, expected: int) -> None:
    assert parse_memory_size(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("", "empty"), ("mb", "start with a number"), ("1.5 mb", "unknown memory unit"),
     ("1 pb", "unknown memory unit"), ("-1", "start with a number"),
     ("9000000 tb", "64 bits")],
)
def test_parse_memory_size_rejects(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_memory_size(text)


@pytest.mark.parametrize(
    ("text", "expected"), [("true", True), ("TRUE", True), ("True", True), ("false", False),
                           ("FaLsE", False)]
)
def test_parse_bool(text: str, expected: bool) -> None:
    assert parse_bool(text) is expected


@pytest.mark.parametrize("text", ["yes", "1", "0", "on", "", " true", "t"])
def test_parse_bool_rejects_everything_but_true_false(text: str) -> None:
    with pytest.raises(ValueError, match="'true' or 'false'"):
        parse_bool(text)


def test_parse_int_and_long() -> None:
    assert parse_int("42") == 42
    assert parse_int("-3") == -3
    assert parse_int("+7") == 7
    assert parse_int("2147483647") == 2**31 - 1
    assert parse_long("9223372036854775807") == 2**63 - 1
    for bad in ("2147483648", "1.0", " 1", "1_000", "", "0x10", "one"):
        with pytest.raises(ValueError):
            parse_int(bad)
    with pytest.raises(ValueError, match="out of range"):
        parse_long("9223372036854775808")


def test_parse_float() -> None:
    assert parse_float("0.7") == 0.7
    assert parse_float("1") == 1.0
    assert parse_float("1e-3") == 0.001
    assert parse_float(".5") == 0.5
    for bad in ("nan", "inf", "0.7x", "", "1,5"):
        with pytest.raises(ValueError, match="decimal number"):
            parse_float(bad)


def test_enum_parser_is_case_insensitive_and_lists_choices() -> None:
    parse = enum_parser(MergeEngine)
    assert parse("Partial-Update") is MergeEngine.PARTIAL_UPDATE
    with pytest.raises(ValueError, match="deduplicate, partial-update, aggregation, first-row"):
        parse("dedup")


def test_parse_stats_mode_and_incremental_between() -> None:
    assert parse_stats_mode("truncate(16)") == StatsMode("truncate", 16)
    assert parse_stats_mode("FULL") == StatsMode("full")
    assert str(parse_stats_mode("truncate(8)")) == "truncate(8)"
    for bad in ("truncate", "truncate(0)", "some"):
        with pytest.raises(ValueError):
            parse_stats_mode(bad)
    assert parse_incremental_between("3, 7") == (3, 7)
    assert parse_incremental_between("tag-1,tag-2") == ("tag-1", "tag-2")
    with pytest.raises(ValueError):
        parse_incremental_between("3")


# --- registry and defaults ------------------------------------------------------------------

# Paimon's documented defaults (Paimon's CoreOptions.java).
PAIMON_DEFAULTS: dict[str, Any] = {
    "bucket": -1,
    "merge-engine": MergeEngine.DEDUPLICATE,
    "changelog-producer": ChangelogProducer.NONE,
    "changelog-producer.row-deduplicate": False,
    "ignore-delete": False,
    "partial-update.remove-record-on-delete": False,
    "aggregation.remove-record-on-delete": False,
    "write-only": False,
    "write.merge-schema": False,  # Paimon's SparkConnectorOptions
    "write.merge-schema.explicit-cast": False,
    "dynamic-partition-overwrite": True,
    "write-buffer-size": 256 * MB,
    "write-buffer-spillable": True,
    "file.format": "parquet",
    "file.compression": "zstd",
    "manifest.format": "avro",
    "manifest.compression": "zstd",
    "manifest.target-file-size": 8 * MB,
    "manifest.merge-min-count": 30,
    "num-sorted-run.compaction-trigger": 5,
    "compaction.max-size-amplification-percent": 200,
    "compaction.size-ratio": 1,
    "compaction.small-file-ratio": 0.7,
    "compaction.offpeak.start.hour": -1,
    "compaction.offpeak.end.hour": -1,
    "compaction.offpeak-ratio": 0,
    "lookup-wait": True,
    "commit.max-retries": 10,
    "commit.min-retry-wait": timedelta(milliseconds=10),
    "commit.max-retry-wait": timedelta(seconds=10),
    "snapshot.num-retained.min": 10,
    "snapshot.num-retained.max": 2**31 - 1,
    "snapshot.time-retained": timedelta(hours=1),
    "snapshot.expire.limit": 50,
    "snapshot.clean-empty-directories": False,
    "partition.expiration-check-interval": timedelta(hours=1),
    "partition.expiration-strategy": PartitionExpirationStrategy.VALUES_TIME,
    "partition.expiration-max-num": 100,
    "partition.default-name": "__DEFAULT_PARTITION__",
    "partition.legacy-name": True,
    "partition.mark-done-action": (PartitionMarkDoneAction.SUCCESS_FILE,),
    "partition.end-input-to-done": False,
    "metadata.stats-mode": StatsMode("truncate", 16),
    "primary-key.nullable": False,
    "postpone.default-bucket-num": 1,
    "alter-column-null-to-not-null.disabled": True,
    "disable-explicit-type-casting": False,
    "add-column-before-partition": False,
    # Paimon CoreOptions / pypaimon 2.1 core_options.py
    "dynamic-bucket.target-row-num": 2_000_000,
    "dynamic-bucket.max-buckets": -1,
    "deletion-vectors.enabled": False,
    "deletion-vectors.bitmap64": False,
    "deletion-vectors.index-file.target-size": 2 * 1024 * 1024,
    "deletion-vectors.merge-on-read": False,
    "compaction.delete-ratio-threshold": 0.2,
    "index-file-in-data-file-dir": False,
    "sequence.field.sort-order": SortOrder.ASCENDING,
    "incremental-between-scan-mode": IncrementalBetweenScanMode.AUTO,
    "incremental-between-tag-to-snapshot": False,
}
NO_DEFAULT = [
    "bucket-key", "sequence.field", "rowkind.field", "fields.default-aggregate-function",
    "target-file-size", "num-levels", "num-sorted-run.stop-trigger",
    "compaction.optimization-interval", "compaction.total-size-threshold",
    "compaction.incremental-size-threshold", "full-compaction.delta-commits", "commit.timeout",
    "changelog.num-retained.min", "changelog.num-retained.max", "changelog.time-retained",
    "partition.expiration-time", "partition.timestamp-formatter", "partition.timestamp-pattern",
    "scan.snapshot-id", "scan.timestamp-millis", "scan.tag-name", "incremental-between", "path",
    "postpone.target-row-num-per-bucket", "dynamic-bucket.initial-buckets",
    "dynamic-bucket.assigner-parallelism", "consumer.expiration-time",
    "partial-update.remove-record-on-sequence-group",
]


def test_registry_covers_exactly_the_supported_keys() -> None:
    keys = [o.key for o in OPTIONS]
    assert len(keys) == len(set(keys))
    expected = set(PAIMON_DEFAULTS) | set(NO_DEFAULT) | {
        "fields.<name>.aggregate-function",
        "fields.<name>.distinct",
        "fields.<name>.ignore-retract",
        "fields.<name>.list-agg-delimiter",
        "fields.<name>.sequence-group",
    }
    assert set(keys) == expected
    assert all(o.description for o in OPTIONS)


@pytest.mark.parametrize("key", sorted(PAIMON_DEFAULTS))
def test_defaults_equal_paimons(key: str) -> None:
    assert KEYED_OPTIONS[key].default == PAIMON_DEFAULTS[key]


@pytest.mark.parametrize("key", NO_DEFAULT)
def test_options_without_default(key: str) -> None:
    assert KEYED_OPTIONS[key].default is None


def test_derived_defaults() -> None:
    o = CoreOptions.from_map({})
    assert o.num_sorted_run_stop_trigger == 8
    assert o.num_levels == 6
    assert o.target_file_size(has_primary_key=True) == 128 * MB
    assert o.target_file_size(has_primary_key=False) == 256 * MB
    assert o.changelog_num_retained_min == 10
    assert o.changelog_num_retained_max == 2**31 - 1
    assert o.changelog_time_retained == timedelta(hours=1)
    assert o.commit_timeout is None
    assert o.bucket_key == () and o.sequence_field == ()
    o = CoreOptions.from_map(
        {"num-sorted-run.compaction-trigger": "3", "snapshot.num-retained.min": "4",
         "snapshot.time-retained": "2 h", "changelog.num-retained.max": "20"}
    )
    assert (o.num_sorted_run_stop_trigger, o.num_levels) == (6, 4)
    assert o.changelog_num_retained_min == 4
    assert o.changelog_num_retained_max == 20
    assert o.changelog_time_retained == timedelta(hours=2)


def _paimon_defaults() -> dict[str, Any]:
    if not PAIMON_PYTHON.is_file():
        pytest.skip(f"pypaimon venv missing ({PAIMON_PYTHON})")
    code = """
import json
from datetime import timedelta
from enum import Enum
from pypaimon.common.memory_size import MemorySize
from pypaimon.common.options.config_option import ConfigOption
from pypaimon.common.options.core_options import CoreOptions
out = {}
for name in dir(CoreOptions):
    opt = getattr(CoreOptions, name)
    if isinstance(opt, ConfigOption):
        v = opt.default_value()
        if isinstance(v, MemorySize): v = {"bytes": v.get_bytes()}
        elif isinstance(v, timedelta): v = {"ms": v.total_seconds() * 1000}
        elif isinstance(v, Enum): v = v.value
        elif not isinstance(v, (str, int, float, bool, type(None))): continue
        out[opt.key()] = v
empty = CoreOptions.from_dict({})
out["<target-file-size pk>"] = empty.target_file_size(True)
out["<target-file-size append>"] = empty.target_file_size(False)
print(json.dumps(out))
"""
    done = subprocess.run(
        [str(PAIMON_PYTHON), "-c", code], capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0 and "ModuleNotFoundError" in done.stderr:
        pytest.skip("pypaimon is not importable in the pypaimon venv")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.compat
def test_defaults_match_pypaimon_source() -> None:
    theirs = _paimon_defaults()
    shared = sorted(set(theirs) & set(KEYED_OPTIONS))
    # pypaimon declares metadata.stats-mode "none"; Java Paimon (and lakecore) use truncate(16).
    shared.remove("metadata.stats-mode")
    # pypaimon leaves postpone.default-bucket-num unset (it sizes its own fixed-bucket writes);
    # Java's dedicated compaction, which lakecore's follows, defaults it to 1.
    shared.remove("postpone.default-bucket-num")
    assert len(shared) >= 15, shared
    for key in shared:
        ours = KEYED_OPTIONS[key].default
        if isinstance(ours, timedelta):
            ours = {"ms": ours.total_seconds() * 1000}
        elif key in ("manifest.target-file-size",):
            ours = {"bytes": ours}
        elif isinstance(ours, MergeEngine | ChangelogProducer):
            ours = ours.value
        assert ours == theirs[key], key
    assert theirs["<target-file-size pk>"] == CoreOptions.from_map({}).target_file_size(True)
    assert theirs["<target-file-size append>"] == CoreOptions.from_map({}).target_file_size(False)


# --- CoreOptions ----------------------------------------------------------------------------


def test_typed_accessors_and_to_map() -> None:
    raw = {
        "bucket": "4",
        "bucket-key": "id",
        "merge-engine": "Aggregation",
        "sequence.field": "n",
        "write-buffer-size": "64 mb",
        "target-file-size": "32mb",
        "num-sorted-run.compaction-trigger": "3",
        "num-sorted-run.stop-trigger": "10",
        "num-levels": "5",
        "commit.min-retry-wait": "100 ms",
        "commit.timeout": "30 s",
        "compaction.offpeak.start.hour": "22",
        "compaction.offpeak.end.hour": "6",
        "fields.v.aggregate-function": "sum",
        "fields.s.aggregate-function": "listagg",
        "fields.s.list-agg-delimiter": ";",
        "fields.v.ignore-retract": "true",
        "fields.default-aggregate-function": "last_non_null_value",
        "metadata.stats-mode": "full",
        "partition.expiration-strategy": "update-time",
        "incremental-between": "1,3",
    }
    o = opts(raw)
    assert o.to_map() == raw
    assert o.bucket == 4 and o.bucket_key == ("id",)
    assert o.merge_engine is MergeEngine.AGGREGATION
    assert o.sequence_field == ("n",)
    assert o.write_buffer_size == 64 * MB
    assert o.target_file_size(True) == o.target_file_size(False) == 32 * MB
    assert (o.num_sorted_run_compaction_trigger, o.num_sorted_run_stop_trigger) == (3, 10)
    assert o.num_levels == 5
    assert o.commit_min_retry_wait == timedelta(milliseconds=100)
    assert o.commit_timeout == timedelta(seconds=30)
    assert (o.compaction_offpeak_start_hour, o.compaction_offpeak_end_hour) == (22, 6)
    assert o.field_aggregate_function("v") is AggregateFunction.SUM
    assert o.field_aggregate_function("flag") is AggregateFunction.LAST_NON_NULL_VALUE
    assert o.field_aggregate_function("id") is None  # keys are never aggregated
    assert o.field_aggregate_function("n") is None  # nor is the sequence field
    assert o.field_list_agg_delimiter("s") == ";"
    assert o.field_list_agg_delimiter("v") == ","
    assert o.field_ignore_retract("v") is True and o.field_ignore_retract("s") is False
    assert o.metadata_stats_mode == StatsMode("full")
    assert o.partition_expiration_strategy is PartitionExpirationStrategy.UPDATE_TIME
    assert o.incremental_between == (1, 3)
    assert o == opts(dict(raw)) and hash(o) == hash(opts(dict(raw)))


def test_column_names_with_dots_in_field_options() -> None:
    o = CoreOptions.from_map(
        {"merge-engine": "aggregation", "fields.a.b.aggregate-function": "max"},
        primary_keys=("id",),
        column_names=("id", "a.b"),
    )
    assert o.field_aggregate_function("a.b") is AggregateFunction.MAX
    assert resolve_key("fields.a.b.aggregate-function")[1] == "a.b"


def test_fallback_keys() -> None:
    assert opts({"first-row.ignore-delete": "true"}).ignore_delete is True
    assert opts({"write.compaction-skip": "true"}).write_only is True
    old_clean = opts({"snapshot.expire.clean-empty-directories": "true"})
    assert old_clean.snapshot_clean_empty_directories is True
    assert opts({"changelog-producer.lookup-wait": "false"}).lookup_wait is False
    # The key itself wins over an old spelling (lenient), and disagreement is refused (strict).
    lenient = CoreOptions.from_map(
        {"ignore-delete": "false", "partial-update.ignore-delete": "true"}, strict=False
    )
    assert lenient.ignore_delete is False
    # Among old spellings, the first in Paimon's fallback order wins, whatever the map's order.
    for old in ({"partial-update.ignore-delete": "false", "first-row.ignore-delete": "true"},
                {"first-row.ignore-delete": "true", "partial-update.ignore-delete": "false"}):
        assert CoreOptions.from_map(old, strict=False).ignore_delete is True
    with pytest.raises(OptionError) as info:
        opts({"ignore-delete": "false", "partial-update.ignore-delete": "true"})
    assert info.value.key == "partial-update.ignore-delete"


# (options, key named in the error, fragment of the message)
REJECTIONS: list[tuple[dict[str, str], str, str]] = [
    ({"buckets": "4"}, "buckets", "did you mean 'bucket'"),
    ({"merge.engine": "deduplicate"}, "merge.engine", "did you mean 'merge-engine'"),
    ({"fields.v.agregate-function": "sum"}, "fields.v.agregate-function",
     "did you mean 'fields.v.aggregate-function'"),
    ({"fields.v.sequence-group": "n"}, "fields.v.sequence-group",
     "only applies with merge-engine 'partial-update'"),
    ({"fields.v.sequence-group": "nope", "merge-engine": "partial-update"},
     "fields.v.sequence-group", "['nope'] not in the table"),
    ({"fields.v,nope.sequence-group": "n", "merge-engine": "partial-update"},
     "fields.v,nope.sequence-group", "'nope' is not in the table"),
    ({"fields.v.sequence-group": "n", "fields.s.sequence-group": "n",
      "merge-engine": "partial-update"}, "fields.v.sequence-group",
     "defined repeatedly by multiple groups"),
    ({"partial-update.remove-record-on-sequence-group": "n", "merge-engine": "partial-update",
      "fields.v.sequence-group": "s"}, "partial-update.remove-record-on-sequence-group",
     "must be sequence fields"),
    ({"sequence.field.sort-order": "descending"}, "sequence.field.sort-order",
     "needs a 'sequence.field'"),
    ({"zzz": "1"}, "zzz", "unknown option"),
    ({"bucket": "0"}, "bucket", "number of buckets >= 1"),
    ({"bucket": "-3"}, "bucket", "number of buckets >= 1"),
    ({"bucket": "four"}, "bucket", "'four': expected a 32-bit integer"),
    ({"write-buffer-size": "lots"}, "write-buffer-size", "memory size"),
    ({"write-buffer-size": "0 mb"}, "write-buffer-size", "greater than zero"),
    ({"target-file-size": "12 zb"}, "target-file-size", "unknown memory unit"),
    ({"commit.min-retry-wait": "soon"}, "commit.min-retry-wait", "duration"),
    ({"snapshot.time-retained": "1 fortnight"}, "snapshot.time-retained", "time unit"),
    ({"write-only": "yes"}, "write-only", "'true' or 'false'"),
    ({"merge-engine": "dedup"}, "merge-engine", "one of: deduplicate"),
    ({"changelog-producer": "always"}, "changelog-producer", "one of: none, input"),
    ({"partition.expiration-strategy": "age"}, "partition.expiration-strategy", "values-time"),
    ({"file.format": "orc"}, "file.format", "Parquet"),
    ({"manifest.format": "orc"}, "manifest.format", "Avro"),
    ({"file.compression": "lzo"}, "file.compression", "Parquet codecs"),
    ({"manifest.compression": "snappy"}, "manifest.compression", "Avro codecs"),
    ({"compaction.small-file-ratio": "1.5"}, "compaction.small-file-ratio", "(0, 1]"),
    ({"compaction.offpeak.start.hour": "24", "compaction.offpeak.end.hour": "2"},
     "compaction.offpeak.start.hour", "between -1 and 23"),
    ({"compaction.offpeak.start.hour": "22"}, "compaction.offpeak.end.hour", "both"),
    ({"partition.mark-done-action": "success-file,http-report"},
     "partition.mark-done-action", "not http-report"),
    ({"partition.mark-done-action": "touch"}, "partition.mark-done-action", "success-file"),
    ({"num-levels": "1"}, "num-levels", "at least 2"),
    ({"num-sorted-run.compaction-trigger": "0"}, "num-sorted-run.compaction-trigger",
     "at least 1"),
    ({"num-sorted-run.stop-trigger": "4"}, "num-sorted-run.stop-trigger",
     "below num-sorted-run.compaction-trigger"),
    ({"snapshot.num-retained.min": "0"}, "snapshot.num-retained.min", "at least 1"),
    ({"snapshot.num-retained.min": "20", "snapshot.num-retained.max": "5"},
     "snapshot.num-retained.min", "larger than the maximum"),
    ({"changelog.num-retained.min": "30", "changelog.num-retained.max": "20"},
     "changelog.num-retained.min", "larger than the maximum"),
    ({"snapshot.num-retained.max": "5"}, "snapshot.num-retained.min", "larger than the maximum"),
    ({"commit.min-retry-wait": "1 min"}, "commit.min-retry-wait", "commit.max-retry-wait"),
    ({"commit.max-retries": "-1"}, "commit.max-retries", "at least 0"),
    ({"bucket-key": "nope", "bucket": "2"}, "bucket-key", "not in the table"),
    ({"bucket-key": "id", "bucket": "-1"}, "bucket-key", "bucket = -1"),
    ({"bucket-key": "v", "bucket": "2"}, "bucket-key", "not in the primary key"),
    ({"bucket-key": "id,id", "bucket": "2"}, "bucket-key", "more than once"),
    ({"bucket-key": "id,", "bucket": "2"}, "bucket-key", "comma-separated"),
    ({"sequence.field": "nope"}, "sequence.field", "not in the table"),
    ({"sequence.field": "n", "merge-engine": "first-row"}, "sequence.field", "first-row"),
    ({"rowkind.field": "nope"}, "rowkind.field", "not in the table"),
    ({"rowkind.field": " "}, "rowkind.field", "non-blank"),
    ({"fields.nope.aggregate-function": "sum", "merge-engine": "aggregation"},
     "fields.nope.aggregate-function", "column 'nope' is not in the table"),
    ({"fields.v.aggregate-function": "count", "merge-engine": "aggregation"},
     "fields.v.aggregate-function", "no 'count'"),
    ({"fields.v.aggregate-function": "SUM", "merge-engine": "aggregation"},
     "fields.v.aggregate-function", "expected one of"),
    ({"fields.id.aggregate-function": "sum", "merge-engine": "aggregation"},
     "fields.id.aggregate-function", "primary-key column"),
    ({"fields.n.aggregate-function": "max", "merge-engine": "aggregation",
      "sequence.field": "n"}, "fields.n.aggregate-function", "sequence.field"),
    ({"fields.v.aggregate-function": "sum"}, "fields.v.aggregate-function",
     "merge-engine 'aggregation' or 'partial-update'"),
    ({"fields.default-aggregate-function": "sum"}, "fields.default-aggregate-function",
     "merge-engine 'aggregation'"),
    ({"fields.v.aggregate-function": "sum", "merge-engine": "partial-update"},
     "fields.v.aggregate-function", "only inside a sequence group"),
    ({"fields.v.aggregate-function": "sum", "merge-engine": "partial-update",
      "fields.n.sequence-group": "s"}, "fields.v.aggregate-function",
     "only inside a sequence group"),
    ({"fields.v.ignore-retract": "true", "merge-engine": "aggregation",
      "aggregation.remove-record-on-delete": "true"}, "fields.v.ignore-retract", "conflicts"),
    ({"merge-engine": "first-row", "changelog-producer": "input"}, "changelog-producer",
     "first-row"),
    ({"full-compaction.delta-commits": "2", "changelog-producer": "lookup"},
     "full-compaction.delta-commits", "lookup"),
    ({"full-compaction.delta-commits": "0"}, "full-compaction.delta-commits", "at least 1"),
    ({"scan.snapshot-id": "0"}, "scan.snapshot-id", "at least 1"),
    ({"scan.snapshot-id": "3", "scan.tag-name": "t1"}, "scan.tag-name", "scan.snapshot-id"),
    ({"incremental-between": "5"}, "incremental-between", "start,end"),
    ({"metadata.stats-mode": "truncate"}, "metadata.stats-mode", "truncate(N)"),
    ({"primary-key.nullable": "true"}, "primary-key.nullable", "NOT NULL"),
    ({"partition.default-name": ""}, "partition.default-name", "non-blank"),
]


@pytest.mark.parametrize(("options", "key", "fragment"), REJECTIONS)
def test_rejections_name_the_key(options: dict[str, str], key: str, fragment: str) -> None:
    with pytest.raises(OptionError) as info:
        opts(options)
    assert info.value.key == key
    assert repr(key) in str(info.value)
    assert fragment in str(info.value)


def test_malformed_value_message_names_key_value_and_expectation() -> None:
    with pytest.raises(OptionError) as info:
        opts({"commit.max-retry-wait": "10 secondz"})
    message = str(info.value)
    assert "'commit.max-retry-wait'" in message and "'10 secondz'" in message
    assert "expected one of d, h, min, s" in message


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"merge-engine": "partial-update"}, "merge-engine"),
        ({"changelog-producer": "input"}, "changelog-producer"),
        ({"sequence.field": "n"}, "sequence.field"),
        ({"rowkind.field": "s"}, "rowkind.field"),
        ({"full-compaction.delta-commits": "3"}, "full-compaction.delta-commits"),
    ],
)
def test_append_table_rejects_key_only_options(options: dict[str, str], key: str) -> None:
    with pytest.raises(OptionError) as info:
        opts(options, pk=())
    assert info.value.key == key


def test_values_must_be_strings() -> None:
    with pytest.raises(OptionError) as info:
        CoreOptions.from_map({"bucket": 4})  # type: ignore[dict-item]
    assert info.value.key == "bucket"


def test_column_checks_skipped_without_columns() -> None:
    o = CoreOptions.from_map(
        {"merge-engine": "aggregation", "fields.x.aggregate-function": "sum"}, primary_keys=("id",)
    )
    assert o.field_aggregate_function("x") is AggregateFunction.SUM


def test_lenient_mode_keeps_unknown_keys_and_skips_creation_checks() -> None:
    raw = {"bucket": "-1", "file.format": "orc", "row-tracking.enabled": "true",
           "num-sorted-run.stop-trigger": "2"}
    o = CoreOptions.from_map(raw, primary_keys=("id",), column_names=COLUMNS, strict=False)
    assert o.unknown_keys == ("row-tracking.enabled",)
    assert o.to_map() == raw
    assert o.file_format == "orc"
    assert o.num_sorted_run_stop_trigger == 5  # clamped to the trigger, as Paimon does
    with pytest.raises(OptionError) as info:  # known keys must still parse
        CoreOptions.from_map({"bucket": "x"}, strict=False)
    assert info.value.key == "bucket"


def test_with_options_overrides_strictly() -> None:
    base = CoreOptions.from_map(
        {"bucket": "2", "x.unknown": "1"}, primary_keys=("id",), column_names=COLUMNS, strict=False
    )
    travelled = base.with_options({"scan.snapshot-id": "3"})
    assert travelled.scan_snapshot_id == 3 and travelled.bucket == 2
    assert travelled.to_map()["x.unknown"] == "1"
    for bad, key in (({"scan.snapshot-idd": "3"}, "scan.snapshot-idd"),
                     ({"scan.snapshot-id": "x"}, "scan.snapshot-id"),
                     ({"fields.nope.ignore-retract": "true"}, "fields.nope.ignore-retract")):
        with pytest.raises(OptionError) as info:
            base.with_options(bad)
        assert info.value.key == key
    for base_options in (opts({"scan.tag-name": "t"}), base.with_options({"scan.tag-name": "t"})):
        with pytest.raises(OptionError) as info:
            base_options.with_options({"scan.snapshot-id": "3"})
        assert info.value.key == "scan.tag-name"


def test_core_options_is_frozen() -> None:
    o = CoreOptions.from_map({"bucket": "2"})
    with pytest.raises(AttributeError):
        o.bucket = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        o._raw["bucket"] = "3"  # type: ignore[index]


def test_mark_done_actions_are_a_list_in_paimons_spelling() -> None:
    o = CoreOptions.from_map({"partition.mark-done-action": "Done-Partition, success-file",
                              "partition.end-input-to-done": "true"})
    assert o.partition_mark_done_actions == (PartitionMarkDoneAction.DONE_PARTITION,
                                             PartitionMarkDoneAction.SUCCESS_FILE)
    assert o.partition_end_input_to_done is True
    assert CoreOptions.from_map({}).partition_mark_done_actions == (
        PartitionMarkDoneAction.SUCCESS_FILE,)
