"""Partitions marked done, as Paimon's ``partition.mark-done-action`` marks them.

A batch write with ``partition.end-input-to-done`` marks every partition it wrote done once
its commit landed (Paimon's "batch mark done"); each action of ``partition.mark-done-action``
writes one mark:

* ``success-file`` (Paimon's ``SuccessFileMarkDoneAction``): ``<table>/<partition path>/_SUCCESS``,
  the JSON ``{"creationTime": ms, "modificationTime": ms}``; marking again keeps the creation
  time and moves the modification time (Paimon's ``SuccessFile``).
* ``done-partition`` (Paimon's ``AddDonePartitionAction``): Paimon adds the partition whose last
  value is suffixed ``.done`` (``dt=2026-11-01.done``) to the catalog's metastore. A filesystem
  catalog has no metastore (Paimon refuses the action there), so lakecore keeps that partition
  record in the table's own state: ``_lakecore/done-partitions/<partition path>.done``, JSON
  with the done partition's spec, the marked partition's spec, the snapshot the mark follows and
  the two times. It is the filesystem catalog's partition list of ``.done`` partitions: it
  exists exactly while the partition is marked, and Paimon's readers ignore ``_lakecore/``.

Orphan-file removal only looks inside bucket directories and never under ``_lakecore/``, so
neither mark is ever taken for an orphan.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lakecore.errors import CorruptFileError, PartitionValueError
from lakecore.options.registry import PartitionMarkDoneAction
from lakecore.store.file_store import FileStore
from lakecore.store.paths import STATE_DIR, check_partition_value, escape_path_name

SUCCESS_FILE_NAME = "_SUCCESS"
DONE_PARTITIONS_DIR = "done-partitions"
DONE_SUFFIX = ".done"


@dataclass(frozen=True)
class SuccessFile:
    """Paimon's ``_SUCCESS`` content: when the partition was first and last marked done."""

    creation_time: int
    modification_time: int

    def to_json(self) -> str:
        return json.dumps({"creationTime": self.creation_time,
                           "modificationTime": self.modification_time})

    @staticmethod
    def from_json(text: str, path: str = "_SUCCESS") -> SuccessFile:
        try:
            obj = json.loads(text)
            return SuccessFile(int(obj["creationTime"]), int(obj["modificationTime"]))
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptFileError(path, f"not a Paimon success file: {e}") from None


@dataclass(frozen=True)
class DoneMark:
    """One partition's done marks: the success file and/or the done-partition record."""

    partition: dict[str, str]
    success_file: SuccessFile | None = None
    done_partition: dict[str, Any] | None = None

    @property
    def marked_at(self) -> int:
        """Epoch millis of the latest mark."""
        times = [self.success_file.modification_time] if self.success_file else []
        if self.done_partition:
            times.append(int(self.done_partition.get("modificationTime", 0)))
        return max(times, default=0)

    @property
    def snapshot_id(self) -> int | None:
        return (self.done_partition or {}).get("snapshotId")

    def to_dict(self) -> dict[str, Any]:
        return {"partition": partition_label(self.partition), "marked_at": self.marked_at,
                "success_file": None if self.success_file is None else {
                    "creationTime": self.success_file.creation_time,
                    "modificationTime": self.success_file.modification_time},
                "done_partition": None if self.done_partition is None else
                partition_label(self.done_partition["donePartition"]),
                "snapshot_id": self.snapshot_id}


def partition_label(spec: Mapping[str, str]) -> str:
    """``{"dt": "2026-11-01"}`` -> ``dt=2026-11-01`` (keys in the given order)."""
    return "/".join(f"{k}={v}" for k, v in spec.items())


def _ordered(table: FileStore, spec: Mapping[str, str]) -> dict[str, str]:
    keys = list(table.partition_keys)
    if not keys:
        raise PartitionValueError(f"{table.identifier} is not partitioned: no partition can "
                                  "be marked done")
    if set(spec) != set(keys):
        raise PartitionValueError(f"partition {dict(spec)} of {table.identifier}: expected a "
                                  f"value for each partition key {keys}")
    out = {}
    for k in keys:
        text = str(spec[k])
        check_partition_value(k, text)
        out[k] = text
    return out


def _relative(spec: Mapping[str, str]) -> str:
    return "/".join(f"{escape_path_name(k)}={escape_path_name(v)}" for k, v in spec.items())


def success_file_path(table: FileStore, spec: Mapping[str, str]) -> str:
    return f"{table.paths.table_path}/{_relative(_ordered(table, spec))}/{SUCCESS_FILE_NAME}"


def done_partition_spec(spec: Mapping[str, str]) -> dict[str, str]:
    """The partition Paimon's done-partition action adds: the last value suffixed ``.done``."""
    out = dict(spec)
    last = list(out)[-1]
    out[last] = out[last] + DONE_SUFFIX
    return out


def done_partition_dir(table: FileStore) -> str:
    return f"{table.paths.table_path}/{STATE_DIR}/{DONE_PARTITIONS_DIR}"


def done_partition_path(table: FileStore, spec: Mapping[str, str]) -> str:
    done = done_partition_spec(_ordered(table, spec))
    return f"{done_partition_dir(table)}/{_relative(done).replace('/', '~')}"


def mark_partition_done(table: FileStore, spec: Mapping[str, str],
                        actions: Sequence[PartitionMarkDoneAction] | None = None,
                        snapshot_id: int | None = None,
                        now_millis: int | None = None) -> list[str]:
    """Mark one partition done with ``actions`` (default: the table's
    ``partition.mark-done-action``); returns the paths written. Marking again moves the
    modification time and keeps the creation time."""
    spec = _ordered(table, spec)
    actions = tuple(actions if actions is not None else table.options.partition_mark_done_actions)
    unsupported = [a.value for a in actions if a not in (
        PartitionMarkDoneAction.SUCCESS_FILE, PartitionMarkDoneAction.DONE_PARTITION)]
    if unsupported:
        raise PartitionValueError(f"{table.identifier}: cannot mark partitions done with "
                                  f"{', '.join(unsupported)} (success-file, done-partition)")
    now = int(time.time() * 1000) if now_millis is None else now_millis
    fio = table.file_io
    written = []
    if PartitionMarkDoneAction.SUCCESS_FILE in actions:
        path = success_file_path(table, spec)
        old = read_success_file(table, spec)
        mark = SuccessFile(old.creation_time if old else now, now)
        fio.overwrite_atomic(path, mark.to_json().encode("utf-8"))
        written.append(path)
    if PartitionMarkDoneAction.DONE_PARTITION in actions:
        path = done_partition_path(table, spec)
        old_record = _read_json(table, path)
        record = {"donePartition": done_partition_spec(spec), "partition": spec,
                  "snapshotId": snapshot_id,
                  "creationTime": int(old_record["creationTime"]) if old_record else now,
                  "modificationTime": now}
        fio.overwrite_atomic(path, json.dumps(record).encode("utf-8"))
        written.append(path)
    return written


def read_success_file(table: FileStore, spec: Mapping[str, str]) -> SuccessFile | None:
    path = success_file_path(table, spec)
    if not table.file_io.exists(path):
        return None
    return SuccessFile.from_json(table.file_io.read_text(path), path)


def _read_json(table: FileStore, path: str) -> dict[str, Any] | None:
    if not table.file_io.exists(path):
        return None
    try:
        obj = json.loads(table.file_io.read_text(path))
    except ValueError as e:
        raise CorruptFileError(path, f"not a done-partition record: {e}") from None
    if not isinstance(obj, dict):
        raise CorruptFileError(path, "not a done-partition record")
    return obj


def done_mark(table: FileStore, spec: Mapping[str, str]) -> DoneMark | None:
    """The partition's done marks (either action's), or None when it is not marked."""
    spec = _ordered(table, spec)
    success = read_success_file(table, spec)
    record = _read_json(table, done_partition_path(table, spec))
    if success is None and record is None:
        return None
    return DoneMark(spec, success, record)


def done_partitions(table: FileStore, partitions: Sequence[Mapping[str, str]]
                    ) -> list[DoneMark]:
    """The marks of those of ``partitions`` that are marked done, plus every partition with a
    done-partition record (listed from ``_lakecore/done-partitions/``)."""
    seen: dict[str, DoneMark] = {}
    for spec in partitions:
        mark = done_mark(table, spec)
        if mark is not None:
            seen[partition_label(mark.partition)] = mark
    for st in table.file_io.list_status(done_partition_dir(table)):
        if st.is_dir:
            continue
        record = _read_json(table, st.path)
        if record and isinstance(record.get("partition"), dict):
            label = partition_label(record["partition"])
            if label not in seen:
                mark = done_mark(table, record["partition"])
                if mark is not None:
                    seen[label] = mark
    return [seen[k] for k in sorted(seen)]
