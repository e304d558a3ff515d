"""The table of every table option lakecore supports: Paimon's keys, word for word, with
Paimon's defaults (``org.apache.paimon.CoreOptions``, checked against pypaimon 2.1).

One declarative table, so that the set of supported keys, their types, defaults and range
checks are in one place and ``CoreOptions`` can validate any map against it without an
if-chain. A ``ConfigOption`` carries two kinds of validation:

* ``parser`` turns the stored string into a typed value with Paimon's rules. It runs whenever
  options are read, including for tables written by Paimon itself.
* ``check`` is the extra constraint lakecore enforces when a table is *created* (ranges, the
  file formats and codecs lakecore can write). It does not run when reading an existing table,
  so a table Paimon accepted stays readable.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any, Generic, TypeVar

from lakecore.options.parse import (
    INT_MAX,
    StatsMode,
    enum_parser,
    parse_bool,
    parse_duration,
    parse_float,
    parse_incremental_between,
    parse_int,
    parse_long,
    parse_memory_size,
    parse_name_list,
    parse_non_blank,
    parse_stats_mode,
    parse_string,
)

T = TypeVar("T")

FIELD_PLACEHOLDER = "<name>"
FIELDS_PREFIX = "fields."


class MergeEngine(StrEnum):
    """How rows with the same primary key are merged (``merge-engine``)."""

    DEDUPLICATE = "deduplicate"
    PARTIAL_UPDATE = "partial-update"
    AGGREGATION = "aggregation"
    FIRST_ROW = "first-row"


class SortOrder(StrEnum):
    """The order of ``sequence.field`` values (``sequence.field.sort-order``): records of a key
    are merged in this order, so the last one wins (descending: the smallest value)."""

    ASCENDING = "ascending"
    DESCENDING = "descending"


class ChangelogProducer(StrEnum):
    """Where changelog files come from (``changelog-producer``)."""

    NONE = "none"
    INPUT = "input"
    LOOKUP = "lookup"
    FULL_COMPACTION = "full-compaction"


class IncrementalBetweenScanMode(StrEnum):
    """What an ``incremental-between`` read of snapshot ids reads
    (``incremental-between-scan-mode``): ``auto`` is ``changelog`` for a table with a
    changelog producer, else ``delta``."""

    AUTO = "auto"
    DELTA = "delta"
    CHANGELOG = "changelog"
    DIFF = "diff"


class PartitionExpirationStrategy(StrEnum):
    """What decides a partition's age (``partition.expiration-strategy``)."""

    VALUES_TIME = "values-time"
    UPDATE_TIME = "update-time"


class PartitionMarkDoneAction(StrEnum):
    """What marking a partition done writes (``partition.mark-done-action``, a list)."""

    SUCCESS_FILE = "success-file"  # <partition dir>/_SUCCESS, JSON creation/modification time
    DONE_PARTITION = "done-partition"  # a "<last value>.done" partition in the metastore
    MARK_EVENT = "mark-event"  # a LOAD_DONE event in the metastore (not supported)
    HTTP_REPORT = "http-report"  # not supported
    CUSTOM = "custom"  # a Java class (not supported)


def parse_mark_done_actions(text: str) -> tuple[PartitionMarkDoneAction, ...]:
    """``success-file,done-partition`` -> the actions, in order, each once."""
    parse = enum_parser(PartitionMarkDoneAction)
    out: list[PartitionMarkDoneAction] = []
    for item in text.split(","):
        action = parse(item.strip())
        if action not in out:
            out.append(action)
    return tuple(out)


def _supported_mark_done(actions: tuple[PartitionMarkDoneAction, ...]) -> str | None:
    unsupported = [a.value for a in actions if a not in (
        PartitionMarkDoneAction.SUCCESS_FILE, PartitionMarkDoneAction.DONE_PARTITION)]
    return (f"lakecore marks partitions done with success-file and done-partition only, not "
            f"{', '.join(unsupported)}") if unsupported else None


class AggregateFunction(StrEnum):
    """Paimon's aggregate functions lakecore implements (``fields.<name>.aggregate-function``).

    Paimon has no ``count`` function (its docs say to sum a 0/1 column); lakecore refuses it
    rather than write a table Paimon cannot merge.
    """

    PRIMARY_KEY = "primary_key"  # implicit for primary-key columns; never configured
    SUM = "sum"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    FIRST_VALUE = "first_value"
    FIRST_NON_NULL_VALUE = "first_non_null_value"
    LAST_VALUE = "last_value"
    LAST_NON_NULL_VALUE = "last_non_null_value"
    BOOL_AND = "bool_and"
    BOOL_OR = "bool_or"
    LISTAGG = "listagg"


# Paimon still accepts the old spelling of first_non_null_value.
_AGG_ALIASES = {"first_not_null_value": AggregateFunction.FIRST_NON_NULL_VALUE}


def parse_aggregate_function(text: str) -> AggregateFunction:
    """Exact, lower-case names as Paimon's factory identifiers are matched."""
    if text in _AGG_ALIASES:
        return _AGG_ALIASES[text]
    if text == AggregateFunction.PRIMARY_KEY:
        raise ValueError("'primary_key' is implicit for primary-key columns")
    try:
        return AggregateFunction(text)
    except ValueError:
        pass
    hint = " (Paimon has no 'count': sum a 0/1 column instead)" if text.lower() == "count" else ""
    names = ", ".join(f.value for f in AggregateFunction if f is not AggregateFunction.PRIMARY_KEY)
    raise ValueError(f"expected one of: {names}{hint}")


def parse_java_name_list(text: str) -> tuple[str, ...]:
    """Column names as Paimon splits them for sequence groups (``String.split(",")``): no
    blanks trimmed, trailing empty names dropped; an empty name is an error."""
    names = text.split(",")
    while names and not names[-1]:
        names.pop()
    if not names or any(not n for n in names):
        raise ValueError("expected a comma-separated list of column names such as 'a,b'")
    return tuple(names)


@dataclass(frozen=True)
class ConfigOption(Generic[T]):
    """One option: its Paimon key, how its text parses, its default and why it exists.

    ``default`` is the typed default (None: unset, the accessor decides). ``fallback_keys`` are
    Paimon's older spellings, read when the key itself is absent. ``check`` returns an error
    message for a value lakecore refuses at table creation, or None. Keys containing
    ``<name>`` are per-column patterns (``fields.<name>.aggregate-function``).
    """

    key: str
    parser: Callable[[str], T]
    default: T | None
    description: str
    fallback_keys: tuple[str, ...] = ()
    check: Callable[[Any], str | None] | None = None

    @property
    def is_field_pattern(self) -> bool:
        return FIELD_PLACEHOLDER in self.key

    @property
    def field_suffix(self) -> str:
        """``aggregate-function`` for ``fields.<name>.aggregate-function``."""
        return self.key.split(FIELD_PLACEHOLDER + ".", 1)[1]

    def for_field(self, name: str) -> str:
        """The concrete key for one column."""
        return self.key.replace(FIELD_PLACEHOLDER, name)


def at_least(low: int | float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= low else f"must be at least {low}, got {v}"


def between(low: int, high: int) -> Callable[[Any], str | None]:
    return lambda v: None if low <= v <= high else f"must be between {low} and {high}, got {v}"


def only(*allowed: str, why: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in allowed else f"{v!r} is not supported: {why}"


def _positive_size(v: int) -> str | None:
    return None if v > 0 else "must be greater than zero"


def _lower(text: str) -> str:
    return parse_non_blank(text).strip().lower()


def _bucket(v: int) -> str | None:
    if v == 0 or v < -2:
        return "must be -1 (dynamic), -2 (postpone) or a number of buckets >= 1"
    return None


def _false_only(v: bool) -> str | None:
    return None if v is False else "lakecore requires NOT NULL primary-key columns"


# Parquet codecs pyarrow writes and Paimon's Parquet reader knows ("none" = uncompressed).
PARQUET_CODECS = ("none", "uncompressed", "snappy", "gzip", "brotli", "lz4", "lz4_raw", "zstd")
# Avro codecs Paimon and pypaimon name; snappy is left out (fastavro needs an extra package).
AVRO_CODECS = ("null", "deflate", "zstd", "bzip2", "xz")

_REGISTRY: list[ConfigOption[Any]] = []


def _opt(
    key: str,
    parser: Callable[[str], T],
    default: T | None,
    description: str,
    *,
    fallback_keys: tuple[str, ...] = (),
    check: Callable[[Any], str | None] | None = None,
) -> ConfigOption[T]:
    option = ConfigOption(key, parser, default, description, fallback_keys, check)
    _REGISTRY.append(option)
    return option


_MB = 1 << 20

# --- layout and merge -----------------------------------------------------------------------
BUCKET = _opt(
    "bucket", parse_int, -1,
    "Number of buckets; -1 is Paimon's dynamic mode, -2 postpone mode.", check=_bucket,
)
BUCKET_KEY = _opt(
    "bucket-key", parse_name_list, None,
    "Columns hashed to pick a bucket; defaults to the primary key minus partition keys.",
)
POSTPONE_DEFAULT_BUCKET_NUM = _opt(
    "postpone.default-bucket-num", parse_int, 1,
    "Postpone-bucket tables (bucket = -2): the number of buckets the dedicated compaction "
    "gives a partition compacted for the first time.", check=at_least(1),
)
POSTPONE_TARGET_ROW_NUM_PER_BUCKET = _opt(
    "postpone.target-row-num-per-bucket", parse_long, None,
    "Postpone-bucket tables: size a new partition's bucket count by its pending rows "
    "(ceil(rows / this)) instead of postpone.default-bucket-num.", check=at_least(1),
)
PRIMARY_KEY_NULLABLE = _opt(
    "primary-key.nullable", parse_bool, False,
    "Paimon's switch for nullable key columns; lakecore only allows false.", check=_false_only,
)
MERGE_ENGINE = _opt(
    "merge-engine", enum_parser(MergeEngine), MergeEngine.DEDUPLICATE,
    "How rows sharing a primary key are merged.",
)
CHANGELOG_PRODUCER = _opt(
    "changelog-producer", enum_parser(ChangelogProducer), ChangelogProducer.NONE,
    "Whether and how changelog files are written beside data files.",
)
CHANGELOG_PRODUCER_ROW_DEDUPLICATE = _opt(
    "changelog-producer.row-deduplicate", parse_bool, False,
    "Lookup / full-compaction changelog: skip -U/+U pairs whose before and after rows are equal.",
)
SEQUENCE_FIELD = _opt(
    "sequence.field", parse_name_list, None,
    "Columns that order updates of one key instead of arrival order.",
)
SEQUENCE_FIELD_SORT_ORDER = _opt(
    "sequence.field.sort-order", enum_parser(SortOrder), SortOrder.ASCENDING,
    "Order of sequence.field values; descending: the smallest value wins (nulls always first).",
)
ROWKIND_FIELD = _opt(
    "rowkind.field", parse_non_blank, None,
    "Column holding each row's kind (+I, -U, +U, -D), e.g. to write deletes.",
)
IGNORE_DELETE = _opt(
    "ignore-delete", parse_bool, False, "Drop -U/-D rows instead of applying them.",
    fallback_keys=(
        "first-row.ignore-delete", "deduplicate.ignore-delete", "partial-update.ignore-delete",
    ),
)
PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE = _opt(
    "partial-update.remove-record-on-delete", parse_bool, False,
    "For partial-update, let a -D row remove the whole record.",
)
PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP = _opt(
    "partial-update.remove-record-on-sequence-group", parse_java_name_list, None,
    "Partial-update: a -D row that updates one of these sequence groups (named by a sequence "
    "field) removes the whole record.",
)
AGGREGATION_REMOVE_RECORD_ON_DELETE = _opt(
    "aggregation.remove-record-on-delete", parse_bool, False,
    "For aggregation, let a -D row remove the whole record.",
)
FIELDS_DEFAULT_AGGREGATE_FUNCTION = _opt(
    "fields.default-aggregate-function", parse_aggregate_function, None,
    "Aggregate function for value columns without their own.",
)
FIELD_AGGREGATE_FUNCTION = _opt(
    "fields.<name>.aggregate-function", parse_aggregate_function, None,
    "Aggregate function of one column (merge-engine aggregation or partial-update).",
)
FIELD_IGNORE_RETRACT = _opt(
    "fields.<name>.ignore-retract", parse_bool, False,
    "Ignore -U/-D rows for one aggregated column.",
)
FIELD_SEQUENCE_GROUP = _opt(
    "fields.<name>.sequence-group", parse_java_name_list, None,
    "Partial-update: the columns (the value) that only change with a not-null, not smaller "
    "value of the sequence column(s) <name> (comma-separated, compared in order).",
)
FIELD_LIST_AGG_DELIMITER = _opt(
    "fields.<name>.list-agg-delimiter", parse_string, ",",
    "Separator the listagg function puts between values.",
)
FIELD_DISTINCT = _opt(
    "fields.<name>.distinct", parse_bool, False,
    "listagg: after the first value, add only the parts (split at the delimiter) not yet held.",
)

# --- writing --------------------------------------------------------------------------------
WRITE_ONLY = _opt(
    "write-only", parse_bool, False,
    "Skip compaction and snapshot expiry on write (a separate job does them).",
    fallback_keys=("write.compaction-skip",),
)
# Paimon's Spark writer options (SparkConnectorOptions), as table or dynamic options
WRITE_MERGE_SCHEMA = _opt(
    "write.merge-schema", parse_bool, False,
    "A Spark ingest adds the source's new columns (and widens types) with one ALTER first.",
)
WRITE_MERGE_SCHEMA_EXPLICIT_CAST = _opt(
    "write.merge-schema.explicit-cast", parse_bool, False,
    "With write.merge-schema: also change a column's type by a cast that is not a widening.",
)
DYNAMIC_PARTITION_OVERWRITE = _opt(
    "dynamic-partition-overwrite", parse_bool, True,
    "An overwrite without a static partition replaces only the partitions it writes.",
)
WRITE_BUFFER_SIZE = _opt(
    "write-buffer-size", parse_memory_size, 256 * _MB,
    "Memory for a writer's sort buffer before it flushes or spills.", check=_positive_size,
)
WRITE_BUFFER_SPILLABLE = _opt(
    "write-buffer-spillable", parse_bool, True,
    "Spill sorted runs to local disk when the write buffer is full.",
)
TARGET_FILE_SIZE = _opt(
    "target-file-size", parse_memory_size, None,
    "Size at which data files roll; unset: 128 MB with primary key, 256 MB without.",
    check=_positive_size,
)
FILE_FORMAT = _opt(
    "file.format", _lower, "parquet", "Data file format.",
    check=only("parquet", why="lakecore writes Parquet data files only"),
)
FILE_COMPRESSION = _opt(
    "file.compression", _lower, "zstd", "Data file compression codec.",
    check=only(*PARQUET_CODECS, why=f"Parquet codecs are {', '.join(PARQUET_CODECS)}"),
)
METADATA_STATS_MODE = _opt(
    "metadata.stats-mode", parse_stats_mode, StatsMode("truncate", 16),
    "Column statistics kept in manifests: none, counts, truncate(N) or full.",
)

# --- manifests ------------------------------------------------------------------------------
MANIFEST_FORMAT = _opt(
    "manifest.format", _lower, "avro", "Manifest file format (Paimon 1.x key; always Avro).",
    check=only("avro", why="Paimon manifests are Avro"),
)
MANIFEST_COMPRESSION = _opt(
    "manifest.compression", _lower, "zstd", "Manifest (Avro) compression codec.",
    check=only(*AVRO_CODECS, why=f"Avro codecs are {', '.join(AVRO_CODECS)}"),
)
MANIFEST_TARGET_FILE_SIZE = _opt(
    "manifest.target-file-size", parse_memory_size, 8 * _MB,
    "Size at which manifest files roll and small ones are merged.", check=_positive_size,
)
MANIFEST_MERGE_MIN_COUNT = _opt(
    "manifest.merge-min-count", parse_int, 30,
    "Merge manifests once this many small ones pile up.", check=at_least(1),
)

# --- compaction -----------------------------------------------------------------------------
NUM_LEVELS = _opt(
    "num-levels", parse_int, None,
    "LSM levels; unset: num-sorted-run.compaction-trigger + 1.", check=at_least(2),
)
NUM_SORTED_RUN_COMPACTION_TRIGGER = _opt(
    "num-sorted-run.compaction-trigger", parse_int, 5,
    "Sorted runs that trigger a compaction.", check=at_least(1),
)
NUM_SORTED_RUN_STOP_TRIGGER = _opt(
    "num-sorted-run.stop-trigger", parse_int, None,
    "Sorted runs at which writes wait for compaction; unset: compaction-trigger + 3.",
    check=at_least(1),
)
COMPACTION_MAX_SIZE_AMPLIFICATION_PERCENT = _opt(
    "compaction.max-size-amplification-percent", parse_int, 200,
    "Extra storage (percent) that triggers a full compaction.", check=at_least(0),
)
COMPACTION_SIZE_RATIO = _opt(
    "compaction.size-ratio", parse_int, 1,
    "Percent slack when comparing sorted-run sizes.", check=at_least(0),
)
COMPACTION_SMALL_FILE_RATIO = _opt(
    "compaction.small-file-ratio", parse_float, 0.7,
    "Files under this fraction of target-file-size count as small.",
    check=lambda v: None if 0 < v <= 1 else f"must be in (0, 1], got {v}",
)
COMPACTION_OPTIMIZATION_INTERVAL = _opt(
    "compaction.optimization-interval", parse_duration, None,
    "Run a full compaction at least this often.",
)
COMPACTION_TOTAL_SIZE_THRESHOLD = _opt(
    "compaction.total-size-threshold", parse_memory_size, None,
    "Below this total size, compaction is always full.",
)
COMPACTION_INCREMENTAL_SIZE_THRESHOLD = _opt(
    "compaction.incremental-size-threshold", parse_memory_size, None,
    "Above this much new data, compaction is full.",
)
COMPACTION_OFFPEAK_START_HOUR = _opt(
    "compaction.offpeak.start.hour", parse_int, -1,
    "First off-peak hour (0-23); -1 turns off-peak off.", check=between(-1, 23),
)
COMPACTION_OFFPEAK_END_HOUR = _opt(
    "compaction.offpeak.end.hour", parse_int, -1,
    "Off-peak end hour, exclusive (0-23); -1 turns off-peak off.", check=between(-1, 23),
)
COMPACTION_OFFPEAK_RATIO = _opt(
    "compaction.offpeak-ratio", parse_int, 0,
    "Size-ratio percent used during off-peak hours.", check=at_least(0),
)
FULL_COMPACTION_DELTA_COMMITS = _opt(
    "full-compaction.delta-commits", parse_int, None,
    "Full compaction after this many commits.", check=at_least(1),
)
# --- index layer: dynamic buckets and deletion vectors ---------------------------------------
DYNAMIC_BUCKET_TARGET_ROW_NUM = _opt(
    "dynamic-bucket.target-row-num", parse_long, 2_000_000,
    "Dynamic bucket mode (bucket = -1): rows per bucket before new keys go to a new bucket.",
    check=at_least(1),
)
DYNAMIC_BUCKET_INITIAL_BUCKETS = _opt(
    "dynamic-bucket.initial-buckets", parse_int, None,
    "Dynamic bucket mode: initial number of buckets (of assigners) per partition.",
    check=at_least(1),
)
DYNAMIC_BUCKET_MAX_BUCKETS = _opt(
    "dynamic-bucket.max-buckets", parse_int, -1,
    "Dynamic bucket mode: most buckets per partition; -1 for no limit below 32768.",
)
DYNAMIC_BUCKET_ASSIGNER_PARALLELISM = _opt(
    "dynamic-bucket.assigner-parallelism", parse_int, None,
    "Dynamic bucket mode: number of bucket assigners (defaults to the write parallelism).",
    check=at_least(1),
)
DELETION_VECTORS_ENABLED = _opt(
    "deletion-vectors.enabled", parse_bool, False,
    "Primary-key tables: mark superseded rows in deletion vectors at compaction so that "
    "reads merge nothing (level-0 data shows after compaction).",
)
DELETION_VECTORS_BITMAP64 = _opt(
    "deletion-vectors.bitmap64", parse_bool, False,
    "Write deletion vectors as 64-bit roaring bitmaps.",
)
DELETION_VECTORS_INDEX_FILE_TARGET_SIZE = _opt(
    "deletion-vectors.index-file.target-size", parse_memory_size, 2 * _MB,
    "Target size of one deletion-vector index file.", check=at_least(1),
)
DELETION_VECTORS_MERGE_ON_READ = _opt(
    "deletion-vectors.merge-on-read", parse_bool, False,
    "Batch reads of a deletion-vector table also merge level-0 files.",
)
COMPACTION_DELETE_RATIO_THRESHOLD = _opt(
    "compaction.delete-ratio-threshold", parse_float, 0.2,
    "Deletion-vector tables: rewrite a file once this fraction of its rows is deleted.",
    check=at_least(0.0),
)
INDEX_FILE_IN_DATA_FILE_DIR = _opt(
    "index-file-in-data-file-dir", parse_bool, False,
    "Write index files into the bucket's data directory instead of <table>/index.",
)

LOOKUP_WAIT = _opt(
    "lookup-wait", parse_bool, True,
    "With lookup, the commit waits for its compaction.",
    fallback_keys=("changelog-producer.lookup-wait",),
)

# --- commit ---------------------------------------------------------------------------------
COMMIT_MAX_RETRIES = _opt(
    "commit.max-retries", parse_int, 10,
    "Retries of a commit that lost the race for a snapshot id.", check=at_least(0),
)
COMMIT_MIN_RETRY_WAIT = _opt(
    "commit.min-retry-wait", parse_duration, timedelta(milliseconds=10),
    "First backoff between commit retries.",
)
COMMIT_MAX_RETRY_WAIT = _opt(
    "commit.max-retry-wait", parse_duration, timedelta(seconds=10),
    "Cap of the backoff between commit retries.",
)
COMMIT_TIMEOUT = _opt(
    "commit.timeout", parse_duration, None, "Give up committing after this long; unset: never.",
)

# --- expiry ---------------------------------------------------------------------------------
SNAPSHOT_NUM_RETAINED_MIN = _opt(
    "snapshot.num-retained.min", parse_int, 10,
    "Snapshots always kept, whatever their age.", check=at_least(1),
)
SNAPSHOT_NUM_RETAINED_MAX = _opt(
    "snapshot.num-retained.max", parse_int, INT_MAX,
    "Snapshots kept at most, whatever their age.", check=at_least(1),
)
SNAPSHOT_TIME_RETAINED = _opt(
    "snapshot.time-retained", parse_duration, timedelta(hours=1),
    "Snapshots younger than this are kept.",
)
SNAPSHOT_EXPIRE_LIMIT = _opt(
    "snapshot.expire.limit", parse_int, 50,
    "Snapshots expired at most per run.", check=at_least(1),
)
SNAPSHOT_CLEAN_EMPTY_DIRECTORIES = _opt(
    "snapshot.clean-empty-directories", parse_bool, False,
    "Remove partition and bucket directories left empty by expiry.",
    fallback_keys=("snapshot.expire.clean-empty-directories",),
)
CHANGELOG_NUM_RETAINED_MIN = _opt(
    "changelog.num-retained.min", parse_int, None,
    "Changelogs always kept; unset: snapshot.num-retained.min.", check=at_least(1),
)
CHANGELOG_NUM_RETAINED_MAX = _opt(
    "changelog.num-retained.max", parse_int, None,
    "Changelogs kept at most; unset: snapshot.num-retained.max.", check=at_least(1),
)
CHANGELOG_TIME_RETAINED = _opt(
    "changelog.time-retained", parse_duration, None,
    "Changelogs younger than this are kept; unset: snapshot.time-retained.",
)
PARTITION_EXPIRATION_TIME = _opt(
    "partition.expiration-time", parse_duration, None,
    "Partitions older than this are dropped; unset: never.",
)
PARTITION_EXPIRATION_CHECK_INTERVAL = _opt(
    "partition.expiration-check-interval", parse_duration, timedelta(hours=1),
    "How often writers look for expired partitions.",
)
PARTITION_EXPIRATION_STRATEGY = _opt(
    "partition.expiration-strategy", enum_parser(PartitionExpirationStrategy),
    PartitionExpirationStrategy.VALUES_TIME,
    "Age from the partition values or from the last update.",
)
PARTITION_EXPIRATION_MAX_NUM = _opt(
    "partition.expiration-max-num", parse_int, 100,
    "Partitions dropped at most per run.", check=at_least(1),
)
PARTITION_TIMESTAMP_FORMATTER = _opt(
    "partition.timestamp-formatter", parse_non_blank, None,
    "Java DateTimeFormatter pattern of partition timestamps, e.g. yyyyMMdd.",
)
PARTITION_TIMESTAMP_PATTERN = _opt(
    "partition.timestamp-pattern", parse_non_blank, None,
    "How partition values form a timestamp, e.g. '$dt $hour:00:00'.",
)
PARTITION_DEFAULT_NAME = _opt(
    "partition.default-name", parse_non_blank, "__DEFAULT_PARTITION__",
    "Directory value written for a null partition value.",
)
PARTITION_LEGACY_NAME = _opt(
    "partition.legacy-name", parse_bool, True,
    "Partition directory names use Java's toString of the value (dates as epoch days, "
    "timestamps as LocalDateTime.toString); false uses the SQL string cast.",
)
_DEFAULT_MARK_DONE: tuple[PartitionMarkDoneAction, ...] = (PartitionMarkDoneAction.SUCCESS_FILE,)
PARTITION_MARK_DONE_ACTION = _opt(
    "partition.mark-done-action", parse_mark_done_actions, _DEFAULT_MARK_DONE,
    "How a partition is marked done: success-file (a _SUCCESS file in the partition "
    "directory) and/or done-partition (a '<value>.done' partition record).",
    check=_supported_mark_done,
)
PARTITION_END_INPUT_TO_DONE = _opt(
    "partition.end-input-to-done", parse_bool, False,
    "Batch writes: mark every partition a finished write wrote done "
    "(partition.mark-done-action).",
)

# --- schema evolution (ALTER TABLE) ---------------------------------------------------------
ALTER_COLUMN_NULL_TO_NOT_NULL_DISABLED = _opt(
    "alter-column-null-to-not-null.disabled", parse_bool, True,
    "Refuse ALTERs that make a nullable column NOT NULL (old files may hold nulls).",
)
DISABLE_EXPLICIT_TYPE_CASTING = _opt(
    "disable-explicit-type-casting", parse_bool, False,
    "Allow only implicit (widening) column type changes, not explicit (lossy) casts.",
)
ADD_COLUMN_BEFORE_PARTITION = _opt(
    "add-column-before-partition", parse_bool, False,
    "ALTER ADD COLUMN places a new column before the first partition column.",
)

# --- reading --------------------------------------------------------------------------------
SCAN_SNAPSHOT_ID = _opt(
    "scan.snapshot-id", parse_long, None, "Read as of this snapshot.", check=at_least(1),
)
SCAN_TIMESTAMP_MILLIS = _opt(
    "scan.timestamp-millis", parse_long, None,
    "Read the latest snapshot at or before this epoch millisecond.", check=at_least(0),
    fallback_keys=("log.scan.timestamp-millis",),
)
SCAN_TAG_NAME = _opt("scan.tag-name", parse_non_blank, None, "Read as of this tag.")
CONSUMER_EXPIRATION_TIME = _opt(
    "consumer.expiration-time", parse_duration, None,
    "A streaming consumer not updated for this long no longer holds snapshots (and expiry "
    "deletes it).",
)
INCREMENTAL_BETWEEN = _opt(
    "incremental-between", parse_incremental_between, None,
    "Read the changes between two snapshot ids or two tags: 'start,end'.",
)
INCREMENTAL_BETWEEN_SCAN_MODE = _opt(
    "incremental-between-scan-mode", enum_parser(IncrementalBetweenScanMode),
    IncrementalBetweenScanMode.AUTO,
    "What incremental-between reads: delta (the APPEND snapshots' new files), changelog (the "
    "changelog files), diff (the end snapshot's data against the start's), or auto (changelog "
    "with a changelog producer, else delta).",
)
INCREMENTAL_BETWEEN_TAG_TO_SNAPSHOT = _opt(
    "incremental-between-tag-to-snapshot", parse_bool, False,
    "incremental-between of two tags reads the range of their snapshots (by the scan mode) "
    "instead of the diff of the two tagged snapshots.",
)
PATH = _opt("path", parse_non_blank, None, "Table location; set by the catalog, not the user.")

OPTIONS: tuple[ConfigOption[Any], ...] = tuple(_REGISTRY)
"""Every supported option, in documentation order."""

KEYED_OPTIONS: dict[str, ConfigOption[Any]] = {
    o.key: o for o in OPTIONS if not o.is_field_pattern
}
FALLBACK_KEYS: dict[str, ConfigOption[Any]] = {
    fb: o for o in OPTIONS for fb in o.fallback_keys
}
FIELD_OPTIONS: dict[str, ConfigOption[Any]] = {
    o.field_suffix: o for o in OPTIONS if o.is_field_pattern
}
SCAN_MODE_OPTIONS = (SCAN_SNAPSHOT_ID, SCAN_TIMESTAMP_MILLIS, SCAN_TAG_NAME, INCREMENTAL_BETWEEN)


def field_key_columns(option: ConfigOption[Any], column: str) -> tuple[str, ...]:
    """The columns a ``fields.<name>.*`` key names: ``<name>`` itself, or for a sequence group
    (``fields.g1,g2.sequence-group``) each of its sequence fields."""
    if option is FIELD_SEQUENCE_GROUP:
        return parse_java_name_list(column)
    return (column,)


def resolve_key(key: str) -> tuple[ConfigOption[Any] | None, str | None]:
    """The option a key belongs to (its own key or an old spelling), and the column for
    ``fields.<name>.*`` keys. Column names may contain dots: the suffix decides."""
    option = KEYED_OPTIONS.get(key) or FALLBACK_KEYS.get(key)
    if option is not None:
        return option, None
    if key.startswith(FIELDS_PREFIX):
        rest = key[len(FIELDS_PREFIX) :]
        for suffix, pattern in FIELD_OPTIONS.items():
            column = rest[: -len(suffix) - 1]
            if rest.endswith("." + suffix) and column:
                return pattern, column
    return None, None


def unknown_key_message(key: str, columns: Sequence[str] = ()) -> str:
    """'unknown option' plus the closest known key, so that a typo is a one-step fix."""
    candidates = list(KEYED_OPTIONS) + list(FALLBACK_KEYS)
    if key.startswith(FIELDS_PREFIX):
        names = set(columns) | {key[len(FIELDS_PREFIX) :].rsplit(".", 1)[0]}
        candidates += [o.for_field(n) for o in FIELD_OPTIONS.values() for n in names]
    close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown option{hint} (supported keys: lakecore.options.OPTIONS)"
