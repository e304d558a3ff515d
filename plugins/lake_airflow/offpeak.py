"""Per bucket: compact now, or skip and say why (pure values; no Airflow, no lakecore).

The compaction DAG runs nightly and on the tables' asset events. For each bucket it decides
with Paimon's options:

* a bucket the compaction strategy does not pick (sorted runs not past
  ``num-sorted-run.compaction-trigger``, size amplification under its limit) is skipped;
* a bucket whose sorted runs reached ``num-sorted-run.stop-trigger`` (where Paimon's writers
  stall) is compacted at once, off-peak or not;
* any other picked bucket is compacted only inside the off-peak window,
  ``compaction.offpeak.start.hour`` (inclusive) to ``compaction.offpeak.end.hour``
  (exclusive), wrapping past midnight when start > end, in the workers' local time as Paimon's
  ``OffPeakHours`` reads it. A table that sets no window (-1, Paimon's default) compacts its
  picked buckets whenever the DAG runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Window:
    """A table's off-peak hours and triggers (Paimon's option values)."""

    start_hour: int  # -1: no window
    end_hour: int
    compaction_trigger: int
    stop_trigger: int

    @property
    def defined(self) -> bool:
        return self.start_hour != -1 and self.end_hour != -1 and self.start_hour != self.end_hour

    def contains(self, hour: int) -> bool:
        if not self.defined:
            return True
        if self.start_hour <= self.end_hour:
            return self.start_hour <= hour < self.end_hour
        return hour < self.end_hour or self.start_hour <= hour

    def describe(self) -> str:
        if not self.defined:
            return "no off-peak window (compaction.offpeak.start.hour/end.hour unset)"
        return f"off-peak {self.start_hour:02d}:00-{self.end_hour:02d}:00"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "defined": self.defined, "text": self.describe()}


@dataclass(frozen=True)
class BucketState:
    partition: str  # k=v/k=v, "" when unpartitioned
    bucket: int
    sorted_runs: int
    level0_files: int
    picked: bool  # the compaction strategy (universal/full) has work for it


@dataclass(frozen=True)
class Decision:
    partition: str
    bucket: int
    compact: bool
    reason: str

    @property
    def label(self) -> str:
        return f"{self.partition or '(unpartitioned)'} bucket {self.bucket}"

    @property
    def arg(self) -> str:
        """The compact job's ``--bucket`` value."""
        return f"{self.partition.replace('/', ',')}:{self.bucket}" if self.partition \
            else str(self.bucket)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "label": self.label, "arg": self.arg}


def decide(b: BucketState, window: Window, hour: int, ignore_window: bool = False) -> Decision:
    """Compact ``b`` now (at local ``hour``)? The reason names the numbers and options."""
    runs = f"{b.sorted_runs} sorted run(s), {b.level0_files} level-0 file(s)"
    if not b.picked:
        return Decision(b.partition, b.bucket, False,
                        f"skip: {runs}; not past num-sorted-run.compaction-trigger "
                        f"({window.compaction_trigger}) nor the size-amplification limit")
    if b.sorted_runs >= window.stop_trigger:
        return Decision(b.partition, b.bucket, True,
                        f"compact: {runs} reached num-sorted-run.stop-trigger "
                        f"({window.stop_trigger}): compacted at once, off-peak or not")
    if ignore_window or not window.defined:
        why = "the run ignores the off-peak window" if ignore_window else window.describe()
        return Decision(b.partition, b.bucket, True,
                        f"compact: {runs}; past the triggers ({why})")
    if window.contains(hour):
        return Decision(b.partition, b.bucket, True,
                        f"compact: {runs}; past the triggers, inside the {window.describe()} "
                        f"window (hour {hour:02d})")
    return Decision(b.partition, b.bucket, False,
                    f"skip: {runs}; past the triggers but outside the {window.describe()} "
                    f"window (hour {hour:02d}); waits for the window or for "
                    f"num-sorted-run.stop-trigger ({window.stop_trigger})")


def window_of(options: Mapping[str, Any]) -> Window:
    """From a lakecore ``CoreOptions``-like mapping of typed values."""
    return Window(int(options["start_hour"]), int(options["end_hour"]),
                  int(options["compaction_trigger"]), int(options["stop_trigger"]))
