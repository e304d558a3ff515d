"""Structured Streaming sink: each micro-batch is one Paimon two-phase commit, exactly once.

Paimon's Flink sink ties its commit to checkpoints: writers flush and hand committables to one
committer, the checkpoint id is the commit identifier, and a restarted job replays committables
that ``filterCommitted`` drops (every identifier at or below the commit user's latest committed
one counts as committed). Spark's micro-batches give the same shape:

* ``write`` (executors, one call per Spark partition): a lakecore writer in ``write-only``
  mode writes the partition's rows as level-0 files and returns their serialized
  ``CommitMessage``s; a failing task deletes its own files and raises.
* ``commit(messages, batchId)`` (driver side, once per micro-batch): one commit with the
  **batch id as the commit identifier**, as a **commit user that is stable across restarts
  of the query**. Spark writes its offset log before running a batch and its commit log after
  this method returns; a query killed in between replays the batch with the same id from its
  checkpoint, and the replay's commit finds the id already committed, commits nothing and
  deletes the replay's own files. Every row therefore lands exactly once.
* ``abort(messages, batchId)``: a failed micro-batch deletes every finished task's files.

The commit user (``commit.user``, else derived): Spark persists the query id in the
checkpoint's ``metadata`` file; it is unchanged when a query resumes from its checkpoint and
new when the checkpoint is recreated, which is exactly the identity ``filterCommitted`` needs
(reusing a user for a new query would drop its first batches as "already committed"; a new
user for a resumed query would commit a replayed batch twice). The default user is
``spark-query-<uuid3(query id)>`` (the name Paimon's Spark sink derives). Without a readable
checkpoint (``checkpointLocation`` set only through the Spark conf) the user must be given.

Tables with ``changelog-producer = lookup`` that are not ``write-only`` get their changelog
before the next micro-batch, as Paimon's writers do with ``lookup-wait``: after the batch's
commit the driver compacts the buckets that need it (a COMPACT snapshot whose changelog files
turn the previous state into the new one). Other tables are left to the dedicated compaction.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from urllib.parse import urlparse

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from lakecore.commit.file_store_commit import CommitResult
from lakecore.commit.message import serialize_messages
from lakecore.errors import (
    CommitConflictError,
    CorruptFileError,
    OptionError,
    UnsupportedFeatureError,
)
from lakecore.options import ChangelogProducer
from lakecore.spark.datasource.batch_write import LakecoreCommitMessage, decode, write_task
from lakecore.spark.datasource.options import (
    COMMIT_IDENTIFIER,
    COMMIT_USER,
    SourceOptions,
    open_table,
)
from lakecore.spark.faults import pause_point
from lakecore.spark.table_ref import TableRef
from lakecore.spark.types import validate_source
from lakecore.store.file_io import FileIO
from lakecore.table import FileStoreTable
from lakecore.write.dynamic_bucket import is_dynamic_bucket_table
from lakecore.write.table_write import TableWrite

log = logging.getLogger(__name__)

CHECKPOINT_LOCATION = "checkpointlocation"  # Spark passes the sink option, key lowercased
QUERY_USER_PREFIX = "spark-query-"


def query_commit_user(query_id: str) -> str:
    """The commit user of a query: stable across restarts from its checkpoint."""
    return QUERY_USER_PREFIX + str(uuid.uuid3(uuid.NAMESPACE_OID, query_id))


def checkpoint_query_id(location: str, catalog_options: dict[str, str]) -> str:
    """The query id Spark keeps in ``<checkpointLocation>/metadata`` (``{"id": ...}``)."""
    uri = urlparse(location).path if location.startswith("file:") else location
    file_io, path = FileIO.for_uri(uri, catalog_options)
    meta = path.rstrip("/") + "/metadata"
    try:
        body = json.loads(file_io.read_text(meta).splitlines()[0])
        query_id = body["id"]
    except (CorruptFileError, OSError, ValueError, KeyError, IndexError, TypeError) as e:
        raise OptionError(COMMIT_USER, f"cannot derive a stable commit user: the checkpoint "
                          f"metadata {meta!r} has no query id ({e}); set 'commit.user' (the "
                          "same value on every restart of this query)") from e
    if not isinstance(query_id, str) or not query_id:
        raise OptionError(COMMIT_USER, f"checkpoint metadata {meta!r} has no query id; set "
                                       "'commit.user'")
    return query_id


def resolve_commit_user(opts: SourceOptions) -> str:
    """``commit.user`` if given, else the one derived from the query id in the checkpoint."""
    if opts.commit_user is not None:
        return opts.commit_user
    location = opts.raw.get(CHECKPOINT_LOCATION)
    if not location:
        raise OptionError(COMMIT_USER, "a streaming write needs a commit user that is stable "
                          "across restarts: give .option('checkpointLocation', ...) on the "
                          "writeStream (the user is derived from the query id kept there) or "
                          "set 'commit.user'")
    return query_commit_user(checkpoint_query_id(location, opts.catalog_options))


class LakecoreStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("lakecore")``: write-only files per task, one idempotent commit
    per micro-batch (the batch id is the commit identifier)."""

    def __init__(self, opts: SourceOptions, ref: TableRef, overwrite: bool) -> None:
        self.opts = opts
        self.ref = ref
        self.overwrite = overwrite

    # -- executors -------------------------------------------------------------------------
    def _open(self) -> TableWrite:
        table = self.ref.load().copy({"write-only": "true"})
        # the task's writer never commits: its builder's user only names its files' writer
        return table.new_stream_write_builder().new_write()

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        messages, rows = write_task(iterator, self._open)  # a failure deletes its own files
        pause_point(f"stream-write:{_batch_id()}")
        return LakecoreCommitMessage(serialize_messages(messages) if messages else None, rows)

    # -- driver ----------------------------------------------------------------------------
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int  # noqa: N803
               ) -> None:
        msgs = decode(messages)
        catalog, table = open_table(self.opts)
        try:
            user = resolve_commit_user(self.opts)
            commit = table.new_stream_write_builder().with_commit_user(user).new_commit()
            result: CommitResult | None
            if self.overwrite:  # outputMode("complete"): the batch replaces the table
                result = commit.overwrite(msgs, batchId)
            elif msgs:
                result = commit.commit(msgs, batchId)
            else:
                result = None
            if result is not None and result.skipped:
                # a replay of a batch that landed before the query died: its files are new
                log.info("batch %s of %s already committed by %s; dropping the replay",
                         batchId, table.identifier, user)
                commit.abort(msgs)
            pause_point(f"stream-after-commit:{batchId}")
            _produce_lookup_changelog(table)
        finally:
            catalog.close()

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int  # noqa: N803
              ) -> None:
        msgs = decode(messages)
        if not msgs:
            return
        catalog, table = open_table(self.opts)
        try:
            table.new_stream_write_builder().new_commit().abort(msgs)
            log.warning("batch %s of %s aborted: deleted the files of %d message(s)",
                        batchId, table.identifier, len(msgs))
        finally:
            catalog.close()


def _batch_id() -> str | None:
    """The micro-batch a task belongs to (Spark's ``streaming.sql.batchId`` job property)."""
    ctx = TaskContext.get()
    return None if ctx is None else ctx.getLocalProperty("streaming.sql.batchId")


def _produce_lookup_changelog(table: FileStoreTable) -> None:
    """Paimon's ``lookup-wait``: with a lookup changelog producer (and a table that is not
    write-only) the level-0 files are compacted now, so each micro-batch's changes get their
    changelog in order. A fresh commit user per compaction (its identifier is Paimon's batch
    one); a lost race with another compactor only delays the changelog to the next batch."""
    o = table.options
    if o.changelog_producer is not ChangelogProducer.LOOKUP or o.write_only:
        return
    try:
        table.compact()
    except CommitConflictError as e:  # the batch is committed; the next one compacts again
        log.warning("lookup compaction of %s after a micro-batch lost a race: %s",
                    table.identifier, e)


def make_stream_writer(opts: SourceOptions, schema: StructType, overwrite: bool
                       ) -> LakecoreStreamWriter:
    """The stream writer for ``writeStream.format("lakecore").start("db.t")``; checks the
    options and the DataFrame's schema against the table before any batch runs."""
    if opts.commit_identifier is not None:
        raise OptionError(COMMIT_IDENTIFIER, "a streaming write commits each micro-batch with "
                                             "its batch id; do not set 'commit.identifier'")
    if opts.overwrite_partition is not None:
        raise OptionError("overwrite.partition", "not supported by a streaming write")
    catalog, table = open_table(opts)
    try:
        if is_dynamic_bucket_table(table):
            raise UnsupportedFeatureError(f"table {table.identifier!r} has dynamic buckets "
                              "(bucket = -1): a micro-batch is written by several tasks, each "
                              "would assign keys on its own; write it in batches (df.write, "
                              "foreachBatch) or give the table fixed buckets")
        validate_source(schema, table)
        ref = TableRef.of(table, opts.warehouse, opts.catalog_options)
    finally:
        catalog.close()
    return LakecoreStreamWriter(opts, ref, overwrite)
