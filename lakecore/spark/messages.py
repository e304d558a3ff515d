"""CommitMessages between executors and the driver, and how failures reach the driver.

Tasks return their serialized messages as rows. A task whose work fails (bad input, an I/O
error) deletes its own files and returns the error as a row, so the Spark job still finishes
and the driver learns every file the other tasks wrote and deletes them. When Spark itself
fails the job (a lost executor, a killed worker), the accumulator of messages still holds
those of the tasks that finished (Spark merges a successful task's update even if the job
fails later); files of attempts that die mid-write are unreferenced by any snapshot and left
to orphan-file removal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark import Accumulator, AccumulatorParam, SparkContext

from lakecore import errors
from lakecore.commit.message import CommitMessage, deserialize_messages
from lakecore.errors import LakecoreError, LakecoreValidationError


class SparkTaskError(LakecoreError):
    """A task failed on an executor; the message carries the task's own error."""


class SparkTaskValidationError(SparkTaskError, LakecoreValidationError):
    """A task rejected its input (a bad value, a row outside the overwritten partition)."""


_ERROR_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Exit)): (.+)$")


def python_error(text: str) -> tuple[str, str] | None:
    """The (class name, message) of the error a Python worker raised, from the text of the
    exception Spark rethrows on the driver (a Java trace around a Python traceback). A
    lakecore error wins over the Java exceptions that wrap it."""
    found = [m for m in map(_ERROR_LINE.match, text.splitlines()) if m]
    if not found:
        return None
    ours = [m for m in found if m.group(1).startswith("lakecore.")]
    m = (ours or found)[-1]
    return m.group(1).rsplit(".", 1)[-1], m.group(2).strip()


def spark_failure(stage: str, error: Exception) -> Exception:
    """A failed Spark job as lakecore's error when a task raised one, else ``error``."""
    found = python_error(str(error))
    if found is None:
        return error
    name, message = found
    cls = getattr(errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, LakecoreError)):
        return error
    validation = issubclass(cls, LakecoreValidationError)
    return task_failure(stage, [(f"{name}: {message}", validation)])


def task_failure(stage: str, errors: Sequence[tuple[str, bool]]) -> SparkTaskError:
    """One exception for the failed tasks of a stage: validation if any task saw bad input."""
    first = next((e for e in errors if e[1]), errors[0])
    more = f" (and {len(errors) - 1} more failed task(s))" if len(errors) > 1 else ""
    cls = SparkTaskValidationError if first[1] else SparkTaskError
    return cls(f"{stage} task failed: {first[0]}{more}")


class _BlobListParam(AccumulatorParam):
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
