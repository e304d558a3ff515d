"""Structured Streaming source: Paimon's streaming read on Spark, offsets are snapshot ids.

An offset ``{"snapshot": N, "scan": S}`` is a position in the table's history: everything
before it has been read. ``S`` true means the next thing to read is the full scan of snapshot
``N`` (its merged rows, each ``+I``), then the changes of ``N+1``, ``N+2``, ...; ``S`` false
means the next thing is the changes of snapshot ``N``. A micro-batch reads ``[start, end)``
with ``end = {"snapshot": latest + 1, "scan": false}``.

**Where a new query starts** (Paimon's ``scan.mode``; ``default`` resolves as Paimon does:
``scan.timestamp-millis`` -> ``from-timestamp``, ``scan.snapshot-id`` / ``scan.tag-name`` ->
``from-snapshot``, otherwise ``latest-full``):

* ``latest-full`` (``full``): the latest snapshot's full scan, then its successors' changes;
* ``latest``: only the changes committed after the query started;
* ``from-snapshot``: the changes from ``scan.snapshot-id`` (or the tag's snapshot) on;
* ``from-snapshot-full``: that snapshot's full scan, then its successors' changes;
* ``from-timestamp``: the changes of the snapshots after the last one at or before
  ``scan.timestamp-millis``.

A start snapshot that has expired becomes the earliest one (changes only, as Paimon's Spark
source). A query restarted from its checkpoint resumes from the checkpointed offset; a new
query with the ``consumer-id`` of an existing consumer resumes from the consumer's
``nextSnapshot`` (unless ``consumer.ignore-progress``).

**Which changes** (Paimon's follow-up scanners): with a ``changelog-producer`` the changelog
files of every snapshot that has them (``lookup`` and ``full-compaction`` produce them in
COMPACT snapshots); without one the delta files of APPEND snapshots (COMPACT and OVERWRITE
snapshots are skipped, as Paimon does by default). Delta records are read as written, no
merge, each with its row kind. All changes of one bucket in a micro-batch are one Spark
partition, read in snapshot order, so a key's changes stay in order.

**Row kind**: with ``read.changelog = true`` (Paimon Spark's option) every row carries its
kind in a first column ``rowkind`` (``+I``, ``-U``, ``+U``, ``-D``), the column an
incremental batch read has; without it the rows come without their kind, as in Paimon.

**Consumer**: with ``consumer-id`` the stream registers a Paimon consumer at its start (a
pending full scan recorded when it starts with one, ``lakecore.store.consumers``) and
moves it to the next unread snapshot on every ``commit(end)``, so snapshot expiry keeps
whatever the stream still has to read. ``consumer.expiration-time`` (a table option) lets
an abandoned consumer go.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from lakecore.errors import OptionError, SnapshotNotExistError
from lakecore.format.snapshot import CommitKind, Snapshot
from lakecore.options import ChangelogProducer
from lakecore.options.parse import parse_bool
from lakecore.read.scan import Split
from lakecore.read.split_read import ROW_KIND_COLUMN
from lakecore.spark.datasource.batch_read import INSERT, ROWKIND
from lakecore.spark.datasource.options import SourceOptions, open_table
from lakecore.spark.table_ref import TableRef
from lakecore.spark.types import cast_batch, result_arrow_schema
from lakecore.store.consumers import read_consumer_state, write_consumer
from lakecore.store.tags import tag_snapshot
from lakecore.table import FileStoreTable

SCAN_MODE = "scan.mode"
CONSUMER_ID = "consumer-id"
CONSUMER_IGNORE_PROGRESS = "consumer.ignore-progress"
SNAPSHOT, SCAN = "snapshot", "scan"
# time travel and incremental keys a stream plans with itself (never from the table copy)
_PLAN_KEYS = ("scan.snapshot-id", "scan.tag-name", "scan.timestamp-millis",
              "log.scan.timestamp-millis", "incremental-between")


class StartupMode(StrEnum):
    """Paimon's ``scan.mode`` values a stream supports."""

    DEFAULT = "default"
    LATEST_FULL = "latest-full"
    FULL = "full"  # deprecated spelling of latest-full
    LATEST = "latest"
    FROM_SNAPSHOT = "from-snapshot"
    FROM_SNAPSHOT_FULL = "from-snapshot-full"
    FROM_TIMESTAMP = "from-timestamp"


@dataclass(frozen=True)
class StreamScan:
    """The stream's options, parsed once: where it starts and its consumer."""

    mode: StartupMode
    snapshot_id: int | None = None
    tag_name: str | None = None
    timestamp_millis: int | None = None
    consumer_id: str | None = None
    ignore_progress: bool = False

    @staticmethod
    def from_options(opts: SourceOptions, table: FileStoreTable) -> StreamScan:
        raw = opts.raw
        text = raw.get(SCAN_MODE, StartupMode.DEFAULT.value).strip().lower()
        try:
            mode = StartupMode(text)
        except ValueError:
            known = ", ".join(m.value for m in StartupMode)
            raise OptionError(SCAN_MODE, f"{text!r} is not supported by a stream ({known})"
                              ) from None
        o = table.options
        snapshot_id, tag, ts = o.scan_snapshot_id, o.scan_tag_name, o.scan_timestamp_millis
        if mode is StartupMode.DEFAULT:
            if ts is not None:
                mode = StartupMode.FROM_TIMESTAMP
            elif snapshot_id is not None or tag is not None:
                mode = StartupMode.FROM_SNAPSHOT
            else:
                mode = StartupMode.LATEST_FULL
        if mode is StartupMode.FULL:
            mode = StartupMode.LATEST_FULL
        if mode in (StartupMode.FROM_SNAPSHOT, StartupMode.FROM_SNAPSHOT_FULL) and (
                snapshot_id is None and tag is None):
            raise OptionError(SCAN_MODE, f"{mode.value!r} needs 'scan.snapshot-id' or "
                                         "'scan.tag-name'")
        if mode is StartupMode.FROM_TIMESTAMP and ts is None:
            raise OptionError(SCAN_MODE, "'from-timestamp' needs 'scan.timestamp-millis'")
        if "incremental-between" in opts.table_options:
            raise OptionError("incremental-between", "a batch read option; a stream reads "
                                                     "each new snapshot's changes itself")
        limits = sorted(k for k in raw if k.startswith("read.stream."))
        if limits:
            raise OptionError(limits[0], "rate limits are not supported: a micro-batch reads "
                                         "every snapshot committed since the previous one")
        consumer = raw.get(CONSUMER_ID)
        if consumer is not None and not consumer.strip():
            raise OptionError(CONSUMER_ID, "must not be blank")
        try:
            ignore = parse_bool(raw.get(CONSUMER_IGNORE_PROGRESS, "false"))
        except ValueError as e:
            raise OptionError(CONSUMER_IGNORE_PROGRESS, str(e)) from None
        return StreamScan(mode, snapshot_id, tag, ts, consumer, ignore)


def offset(snapshot: int, scan: bool) -> dict[str, Any]:
    return {SNAPSHOT: int(snapshot), SCAN: bool(scan)}


def starting_offset(table: FileStoreTable, cfg: StreamScan) -> dict[str, Any]:
    """Where a new query starts (Paimon's starting scanners, clamped to the earliest)."""
    sm = table.snapshot_manager
    if cfg.consumer_id is not None and not cfg.ignore_progress:
        state = read_consumer_state(table, cfg.consumer_id)
        if state is not None:  # its next snapshot; a start's full scan still pending
            return offset(*state)
    latest, earliest = sm.latest_id(), sm.earliest_id()
    if latest is None or earliest is None:
        return offset(1, False)  # an empty table: every change from the first snapshot
    mode = cfg.mode
    if mode is StartupMode.LATEST_FULL:
        return offset(latest, True)
    if mode is StartupMode.LATEST:
        return offset(latest + 1, False)
    if mode is StartupMode.FROM_TIMESTAMP:
        assert cfg.timestamp_millis is not None
        before = sm.earlier_or_equal_time(cfg.timestamp_millis)
        return offset(earliest if before is None else before.id + 1, False)
    sid = (cfg.snapshot_id if cfg.snapshot_id is not None
           else tag_snapshot(table, str(cfg.tag_name)).id)
    if sid > latest + 1:
        raise SnapshotNotExistError(f"stream start snapshot {sid} is after the latest "
                                    f"snapshot {latest}")
    if sid < earliest:  # expired: changes from the earliest on
        return offset(earliest, False)
    return offset(sid, mode is StartupMode.FROM_SNAPSHOT_FULL and sid <= latest)


def _parse_offset(o: dict[str, Any]) -> tuple[int, bool]:
    return int(o[SNAPSHOT]), bool(o.get(SCAN, False))


class LakecoreStreamReader(DataSourceStreamReader):
    """``readStream.format("lakecore").load("db.t")``: offsets are snapshot ids."""

    def __init__(self, opts: SourceOptions, schema: StructType, ref: TableRef,
                 cfg: StreamScan) -> None:
        self.opts = opts
        self.ref = ref
        self.cfg = cfg
        self.target = result_arrow_schema(schema)
        self._driver_table: FileStoreTable | None = None
        self._start: dict[str, Any] | None = None  # initialOffset's answer, once decided
        self.with_kind = bool(self.target.names) and self.target.names[0] == ROWKIND and (
            ROWKIND not in (opts.columns or ()))

    def _table(self) -> FileStoreTable:
        """Opened once per driver-side process (Spark asks for the latest offset every few
        milliseconds when idle); each call still reads the latest snapshot afresh."""
        if self._driver_table is None:
            self._driver_table = plain_table(self.opts)
        return self._driver_table

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_driver_table"] = None  # executors load their own (TableRef)
        return state

    # -- driver ----------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:  # noqa: N802
        """Where this query starts, decided once: Spark asks more than once (an
        ``availableNow`` query when it prepares the trigger and again for its first batch),
        and the consumer the first answer registers must not move the second. A consumer
        that existed before the query resumes it (``starting_offset``); one made here holds
        the start snapshot against expiry and records a pending full scan, so that the
        query restarted before its first batch committed (Spark asks again then) starts
        the same way (``lakecore.store.consumers``)."""
        if self._start is None:
            table = self._table()
            start = starting_offset(table, self.cfg)
            if self.cfg.consumer_id is not None:  # hold the start from now on
                sid, scan = _parse_offset(start)
                if read_consumer_state(table, self.cfg.consumer_id) != (sid, scan):
                    write_consumer(table, self.cfg.consumer_id, sid, full_scan_pending=scan)
            self._start = start
        return dict(self._start)

    def latestOffset(self, start: dict[str, Any], limit: Any = None) -> dict[str, Any]:  # noqa: N802
        latest = self._table().snapshot_manager.latest_id()
        sid, scan = _parse_offset(start)
        if latest is None or (sid > latest):
            return start
        return offset(latest + 1, False)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        table = self._table()
        first, scan = _parse_offset(start)
        stop, _ = _parse_offset(end)
        groups: dict[tuple[tuple, int], list[Split]] = {}
        if scan and first < stop:
            for s in _full_splits(table, first):
                groups.setdefault((tuple(s.partition), s.bucket), []).append(s)
            first += 1
        for sid in range(first, stop):
            for s in _change_splits(table, _snapshot(table, sid, self.cfg)):
                groups.setdefault((tuple(s.partition), s.bucket), []).append(s)
        return [InputPartition(pickle.dumps(splits, protocol=pickle.HIGHEST_PROTOCOL))
                for _, splits in sorted(groups.items(), key=lambda kv: repr(kv[0]))]

    def commit(self, end: dict[str, Any]) -> None:
        if self.cfg.consumer_id is None:
            return
        sid, _ = _parse_offset(end)
        write_consumer(self._table(), self.cfg.consumer_id, sid)

    # -- executors -------------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        splits: list[Split] = pickle.loads(partition.value)
        table = self.ref.load()
        rb = table.new_read_builder()
        if self.opts.columns is not None:
            rb = rb.with_projection([c for c in self.opts.columns if c != ROWKIND])
        read = rb.new_read()
        for split in splits:  # one bucket, in snapshot order
            for batch in read.to_arrow_batch_reader([split]):
                if batch.num_rows:
                    yield cast_batch(self._shape(batch), self.target)

    def _shape(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        names = batch.schema.names
        kinds = None
        if ROW_KIND_COLUMN in names:
            kinds = batch.column(names.index(ROW_KIND_COLUMN))
            batch = batch.drop_columns([ROW_KIND_COLUMN])
        if not self.with_kind:
            return batch
        if kinds is None:
            kinds = pa.array([INSERT] * batch.num_rows, pa.string())
        return batch.add_column(0, ROWKIND, kinds)


def _snapshot(table: FileStoreTable, sid: int, cfg: StreamScan) -> Snapshot:
    try:
        return table.snapshot_manager.snapshot(sid)
    except SnapshotNotExistError as e:
        hint = ("" if cfg.consumer_id is not None else
                "; give the stream a 'consumer-id' so that snapshot expiry keeps what it "
                "still has to read")
        raise SnapshotNotExistError(f"snapshot {sid} of {table.identifier} expired before "
                                    f"the stream read it ({e}){hint}") from e


def _full_splits(table: FileStoreTable, sid: int) -> list[Split]:
    """The merged rows of snapshot ``sid`` (read as ``+I``)."""
    plan = table.copy({"scan.snapshot-id": str(sid)}).new_read_builder().new_scan().plan()
    return plan.splits()


def _change_splits(table: FileStoreTable, snap: Snapshot) -> list[Split]:
    """Snapshot ``snap``'s changes: its changelog files when the table has a producer (only
    snapshots that carry changelog), else the delta files of an APPEND snapshot, read raw."""
    use_changelog = table.options.changelog_producer is not ChangelogProducer.NONE
    if use_changelog and not snap.changelog_manifest_list:
        return []
    if not use_changelog and snap.commit_kind is not CommitKind.APPEND:
        return []
    # records as written, each with its row kind (Paimon's follow-up scanners: level 0 and
    # OVERWRITE snapshots' changelog included, unlike a batch incremental read)
    return table.new_read_builder().new_scan().plan_changes(snap, use_changelog).splits()


def plain_table(opts: SourceOptions) -> FileStoreTable:
    """The table with the dynamic options, except the time travel and incremental keys (a
    stream plans every snapshot it reads itself)."""
    pairs = tuple((k, v) for k, v in opts.table_pairs if k not in _PLAN_KEYS)
    catalog, table = open_table(replace(opts, table_pairs=pairs))
    catalog.close()
    return table


def make_stream_reader(opts: SourceOptions, schema: StructType) -> LakecoreStreamReader:
    """The stream reader for ``readStream.format("lakecore").load("db.t")``."""
    catalog, table = open_table(opts)
    try:
        cfg = StreamScan.from_options(opts, table)
    finally:
        catalog.close()
    ref = TableRef.of(plain_table(opts), opts.warehouse, opts.catalog_options)
    return LakecoreStreamReader(opts, schema, ref, cfg)
