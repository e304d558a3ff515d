"""A deferrable sensor for one partition of a lake table, and its trigger.

``LakePartitionSensor(table="shop.orders", partition="dt=2026-11-01")`` waits until the
partition is **marked done** (Paimon's ``partition.mark-done-action``: its ``_SUCCESS`` file
or its done-partition record, written by the ingest or a backfill of that date). With
``newer_than_snapshot=N`` it instead waits until a snapshot **newer than N touches the
partition** (its delta adds or deletes files there). The sensor checks once; while the
condition does not hold it defers to ``LakePartitionTrigger``, which polls in Airflow's
triggerer (an asyncio task, not a worker slot) and resumes the task with what it found: the
mark (``marked_at`` as an ISO time, ``marked_at_millis``, the actions' files) or the snapshot ids.

The trigger runs in the triggerer process: it reads the tables file there (so the triggerer
needs ``LAKECORE_TABLES_CONFIG`` or the DAGs folder, and the warehouse's catalog options) and
imports lakecore only when it checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowFailException
from airflow.triggers.base import BaseTrigger, TriggerEvent

from lake_airflow.changes import check_partition
from lake_airflow.config import load_config
from lake_airflow.submit import parse_partition

TRIGGER_PATH = "lake_airflow.sensors.LakePartitionTrigger"


class LakePartitionTrigger(BaseTrigger):
    """Polls ``check_partition`` every ``poll_interval`` seconds in the triggerer."""

    def __init__(self, table: str, partition: str, newer_than_snapshot: int | None = None,
                 poll_interval: float = 5.0) -> None:
        super().__init__()
        self.table = table
        self.partition = partition
        self.newer_than_snapshot = newer_than_snapshot
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return TRIGGER_PATH, {"table": self.table, "partition": self.partition,
                              "newer_than_snapshot": self.newer_than_snapshot,
                              "poll_interval": self.poll_interval}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            found = await asyncio.to_thread(check_partition, self.table, self.partition,
                                            self.newer_than_snapshot)
            if found is not None:
                self.log.info("lake partition ready: %s", found)
                yield TriggerEvent(found)
                return
            await asyncio.sleep(self.poll_interval)


def _optional_int(value: Any) -> int | None:
    if value is None or value == "" or value == "None":
        return None
    return int(value)


class LakePartitionSensor(BaseSensorOperator):
    """Wait (deferred, in the triggerer) until ``partition`` of ``table`` is marked done, or,
    with ``newer_than_snapshot``, until a newer snapshot touches it. Returns what it found."""

    template_fields = ("table", "partition", "newer_than_snapshot")
    ui_color = "#e3f2d9"

    def __init__(self, *, table: str, partition: str, newer_than_snapshot: Any = None,
                 poll_interval: float = 5.0, **kwargs: Any) -> None:
        kwargs.setdefault("timeout", timedelta(hours=12).total_seconds())
        super().__init__(poke_interval=poll_interval, **kwargs)
        self.table = table
        self.partition = partition
        self.newer_than_snapshot = newer_than_snapshot
        self.poll_interval = poll_interval

    def _args(self) -> tuple[str, str, int | None]:
        try:
            return self.table, self.partition, _optional_int(self.newer_than_snapshot)
        except ValueError:
            raise AirflowFailException(f"newer_than_snapshot {self.newer_than_snapshot!r} "
                                       "is not a snapshot id") from None

    def poke(self, context: Mapping[str, Any]) -> bool:
        return check_partition(*self._args()) is not None

    def execute(self, context: Any) -> dict[str, Any] | None:
        table, partition, newer = self._args()
        try:
            parse_partition(partition, load_config().table(table).partition_keys)
        except ValueError as e:
            raise AirflowFailException(str(e)) from None
        found = check_partition(table, partition, newer)
        if found is not None:
            self.log.info("already there: %s", found)
            return found
        what = (f"a snapshot newer than {newer} touching {partition}" if newer is not None
                else f"{partition} to be marked done")
        self.log.info("%s: deferring to the triggerer, waiting for %s", table, what)
        self.defer(trigger=LakePartitionTrigger(table, partition, newer, self.poll_interval),
                   method_name="execute_complete",
                   timeout=timedelta(seconds=float(self.timeout)))
        return None

    def execute_complete(self, context: Any, event: dict[str, Any] | None = None
                         ) -> dict[str, Any] | None:
        self.log.info("%s: %s", self.table, event)
        return event
