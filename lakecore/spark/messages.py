"""CommitMessages between executors and the driver.

Tasks return their serialized messages as rows (the normal path) and also add them to an
accumulator. Spark merges a task's accumulator update when the task succeeds, even if the job
fails later, so on failure the driver still learns which files the finished tasks wrote and
can delete them (``abort``). Files of a task attempt that dies mid-write (killed worker, lost
executor) are unreferenced by any snapshot and left to orphan-file removal.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark import Accumulator, AccumulatorParam, SparkContext

from lakecore.write.commit_message import CommitMessage, deserialize_messages


class _BlobListParam(AccumulatorParam):  # type: ignore[type-arg]
    def zero(self, value: list[bytes]) -> list[bytes]:
        return []

    def addInPlace(self, value1: list[bytes], value2: list[bytes]) -> list[bytes]:  # noqa: N802
        value1.extend(value2)
        return value1


def message_accumulator(sc: SparkContext) -> Accumulator[Any]:
    return sc.accumulator([], _BlobListParam())


def decode_all(blobs: Iterable[bytes]) -> list[CommitMessage]:
    return [m for b in blobs for m in deserialize_messages(bytes(b))]


@dataclass(frozen=True)
class FileStats:
    """What a set of messages adds: data files, their bytes and rows (after in-task merge)."""

    files: int = 0
    bytes: int = 0
    rows: int = 0
    buckets: int = 0
    partitions: int = 0

    @staticmethod
    def of(messages: Sequence[CommitMessage]) -> FileStats:
        added = [f for m in messages for f in (*m.new_files, *m.compact_after)]
        return FileStats(
            files=len(added),
            bytes=sum(f.file_size for f in added),
            rows=sum(f.row_count for f in added),
            buckets=len({(m.partition, m.bucket) for m in messages}),
            partitions=len({m.partition for m in messages}),
        )
