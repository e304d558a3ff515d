"""Time- and size-based inputs of universal compaction: Paimon's ``OffPeakHours`` and
``EarlyFullCompaction``.

Both depend on "now", so the clock is injected (a function returning a ``datetime``): tests
pin it, and production passes ``system_clock``. ``OffPeakHours`` reads the clock's *hour*
(Paimon uses the JVM's local time; a naive local ``datetime`` gives the same), and
``EarlyFullCompaction`` its instant (``timestamp()``).

``EarlyFullCompaction`` is the one stateful piece of planning: the interval trigger must
remember when the last full compaction was picked. As in Paimon it is seeded from the files
(``estimate_last_full_compaction_millis``: the newest file at the max level), so a dedicated
compaction job that rebuilds its strategy from the table each run behaves like a long-lived
writer would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta

from lakecore.compact.levels import LevelSortedRun
from lakecore.compact.unit import CompactUnit
from lakecore.format.manifest import DataFileMeta

Clock = Callable[[], datetime]
"""Returns "now". Off-peak hours are read from its ``hour``; intervals from ``timestamp()``."""


def system_clock() -> datetime:
    """The local wall clock, what Paimon's ``LocalDateTime.now()`` reads."""
    return datetime.now()


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def epoch_millis(clock: Clock) -> int:
    """The clock's instant in epoch millis (exact integer arithmetic; a naive time is local)."""
    now = clock()
    if now.tzinfo is None:
        now = now.astimezone()
    return (now - _EPOCH) // _MS


class OffPeakHours:
    """``compaction.offpeak.start.hour`` .. ``.end.hour`` (end exclusive, wrapping past
    midnight when start > end), during which ``compaction.offpeak-ratio`` is added to the size
    ratio so that more runs are merged while the cluster is quiet."""

    __slots__ = ("end_hour", "ratio", "start_hour")

    def __init__(self, start_hour: int, end_hour: int, ratio: int) -> None:
        self.start_hour, self.end_hour, self.ratio = start_hour, end_hour, ratio

    @staticmethod
    def create(start_hour: int, end_hour: int, ratio: int) -> OffPeakHours | None:
        """None when unset (-1) or empty (start == end), as in Paimon."""
        if start_hour == -1 or end_hour == -1 or start_hour == end_hour:
            return None
        return OffPeakHours(start_hour, end_hour, ratio)

    def is_off_peak(self, hour: int) -> bool:
        if self.start_hour <= self.end_hour:
            return self.start_hour <= hour < self.end_hour
        return hour < self.end_hour or self.start_hour <= hour

    def current_ratio(self, hour: int) -> int:
        return self.ratio if self.is_off_peak(hour) else 0


class EarlyFullCompaction:
    """Full compaction ahead of the usual triggers: every ``compaction.optimization-interval``,
    while the bucket is smaller than ``compaction.total-size-threshold``, or once more than
    ``compaction.incremental-size-threshold`` bytes sit outside the max level. Checked in that
    order; any of them firing restarts the interval."""

    __slots__ = ("_clock", "incremental_size_threshold", "interval_millis",
                 "last_full_compaction", "total_size_threshold")

    def __init__(
        self,
        interval: timedelta | None = None,
        total_size_threshold: int | None = None,
        incremental_size_threshold: int | None = None,
        *,
        last_full_compaction: int | None = None,
        clock: Clock = system_clock,
    ) -> None:
        self.interval_millis = None if interval is None else interval // _MS
        self.total_size_threshold = total_size_threshold
        self.incremental_size_threshold = incremental_size_threshold
        self.last_full_compaction = last_full_compaction
        """Epoch millis of the last full compaction picked (None: never)."""
        self._clock = clock

    @staticmethod
    def create(
        interval: timedelta | None,
        total_size_threshold: int | None,
        incremental_size_threshold: int | None,
        *,
        last_full_compaction: int | None = None,
        clock: Clock = system_clock,
    ) -> EarlyFullCompaction | None:
        """None when no option is set, so the strategy skips the check entirely."""
        if interval is None and total_size_threshold is None and incremental_size_threshold is None:
            return None
        return EarlyFullCompaction(
            interval, total_size_threshold, incremental_size_threshold,
            last_full_compaction=last_full_compaction, clock=clock,
        )

    def try_full_compact(
        self, num_levels: int, runs: Sequence[LevelSortedRun]
    ) -> CompactUnit | None:
        if len(runs) == 1:
            return None  # already one run: nothing a full compaction would merge
        max_level = num_levels - 1
        if self.interval_millis is not None and (
            self.last_full_compaction is None
            or epoch_millis(self._clock) - self.last_full_compaction > self.interval_millis
        ):
            return self._full(max_level, runs)
        if self.total_size_threshold is not None:
            if sum(r.run.total_size for r in runs) < self.total_size_threshold:
                return self._full(max_level, runs)
        if self.incremental_size_threshold is not None:
            incremental = sum(r.run.total_size for r in runs if r.level != max_level)
            if incremental > self.incremental_size_threshold:
                return self._full(max_level, runs)
        return None

    def update_last_full_compaction(self) -> None:
        """Called whenever any trigger picks every run, so the interval restarts from now."""
        self.last_full_compaction = epoch_millis(self._clock)

    def _full(self, max_level: int, runs: Sequence[LevelSortedRun]) -> CompactUnit:
        self.update_last_full_compaction()
        return CompactUnit.from_level_runs(max_level, runs)


def estimate_last_full_compaction_millis(
    files: Iterable[DataFileMeta], num_levels: int
) -> int | None:
    """The newest creation time among max-level files (Paimon's seed for the interval
    trigger when a writer restores a bucket); None when none is known."""
    max_level = num_levels - 1
    times = [
        t for f in files if f.level == max_level
        if (t := f.creation_epoch_millis()) is not None
    ]
    newest = max(times, default=-1)
    return None if newest < 0 else newest
