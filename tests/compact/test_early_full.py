"""Early full compaction (``compaction.optimization-interval``, ``.total-size-threshold``,
``.incremental-size-threshold``) on Paimon's EarlyFullCompactionTest and the matching
UniversalCompactionTest cases, with an injected clock."""

from __future__ import annotations

from datetime import timedelta

from lakecore.compact import EarlyFullCompaction, UniversalCompaction
from lakecore.compact.triggers import estimate_last_full_compaction_millis
from lakecore.format.manifest import creation_time_from_epoch_millis
from tests.compact.helpers import FakeClock, file, level, level0, sizes_of

MS = timedelta(milliseconds=1)


def early(
    interval: int | None = None,
    total: int | None = None,
    incremental: int | None = None,
    *,
    clock: FakeClock | None = None,
    last: int | None = None,
) -> EarlyFullCompaction:
    return EarlyFullCompaction(
        None if interval is None else interval * MS, total, incremental,
        last_full_compaction=last, clock=clock or FakeClock(),
    )


def test_optimized_compaction_interval_through_pick() -> None:
    # Paimon: UniversalCompactionTest.testOptimizedCompactionInterval
    clock = FakeClock().at_millis(0)
    c = UniversalCompaction(100, 1, 3, early(1000, clock=clock), clock=clock)
    runs = [level(0, 1), level(1, 3), level(2, 5)]
    unit = c.pick(3, runs)  # never compacted: full compaction now
    assert unit is not None and sizes_of(unit.files) == [1, 3, 5]
    clock.at_millis(1001)
    unit = c.pick(3, runs)  # interval passed
    assert unit is not None and sizes_of(unit.files) == [1, 3, 5]
    assert c.pick(3, runs) is None  # just done
    clock.at_millis(1500)
    unit = c.pick(3, [level(0, 3), level(1, 3), level(2, 5)])  # size amplification
    assert unit is not None and sizes_of(unit.files) == [3, 3, 5]
    clock.at_millis(2001)
    assert c.pick(3, runs) is None  # the size-amp full compaction restarted the interval


def test_total_size_threshold_through_pick() -> None:
    # Paimon: UniversalCompactionTest.testTotalSizeThreshold
    c = UniversalCompaction(100, 1, 3, early(total=10))
    unit = c.pick(3, [level(0, 1), level(1, 3), level(2, 5)])
    assert unit is not None and sizes_of(unit.files) == [1, 3, 5]
    assert c.pick(3, [level(0, 2), level(1, 6), level(2, 10)]) is None
    assert c.pick(3, [level(3, 5)]) is None  # one run: never


def test_single_run_and_no_options() -> None:
    # Paimon: EarlyFullCompactionTest.testSingleRun / testNoOptions
    assert early(1000, 1000).try_full_compact(5, level0(100)) is None
    assert early().try_full_compact(5, level0(100, 200)) is None
    assert EarlyFullCompaction.create(None, None, None) is None


def test_interval() -> None:
    # Paimon: EarlyFullCompactionTest.testInterval
    clock = FakeClock().at_millis(10_000)
    trigger = early(1000, clock=clock)
    unit = trigger.try_full_compact(5, level0(100, 200))
    assert unit is not None and unit.output_level == 4 and len(unit.files) == 2
    clock.at_millis(10_500)
    assert trigger.try_full_compact(5, level0(100, 200)) is None
    clock.at_millis(11_001)
    unit = trigger.try_full_compact(5, level0(100, 200))
    assert unit is not None and unit.output_level == 4


def test_interval_seeded() -> None:
    # Paimon: EarlyFullCompactionTest.testIntervalDoesNotRetriggerWhenSeededRecent /
    # testIntervalTriggersWhenSeededOld
    clock = FakeClock().at_millis(10_000)
    recent = early(1000, clock=clock, last=9_500)
    assert recent.try_full_compact(5, level0(100, 200)) is None
    clock.at_millis(10_501)
    assert recent.try_full_compact(5, level0(100, 200)) is not None
    old = early(1000, clock=FakeClock().at_millis(10_000), last=5_000)
    unit = old.try_full_compact(5, level0(100, 200))
    assert unit is not None and unit.output_level == 4


def test_total_size_threshold() -> None:
    # Paimon: EarlyFullCompactionTest.testTotalSizeThreshold (strictly below fires)
    trigger = early(total=1000)
    unit = trigger.try_full_compact(5, level0(100, 200))
    assert unit is not None and unit.output_level == 4 and len(unit.files) == 2
    assert trigger.try_full_compact(5, level0(500, 500)) is None
    assert trigger.try_full_compact(5, level0(500, 1000)) is None


def test_incremental_size_threshold() -> None:
    # Paimon: EarlyFullCompactionTest.testIncrementalSizeThreshold (strictly above fires;
    # runs at the max level do not count)
    trigger = early(incremental=500)
    assert trigger.try_full_compact(5, level0(400, 200)) is not None
    assert trigger.try_full_compact(5, level0(100, 200)) is None
    assert trigger.try_full_compact(5, [level(0, 100), level(0, 300), level(4, 500)]) is None
    unit = trigger.try_full_compact(
        5, [level(0, 100), level(0, 300), level(0, 300), level(4, 500)]
    )
    assert unit is not None and unit.output_level == 4 and len(unit.files) == 4


def test_interval_is_checked_first() -> None:
    # Paimon: EarlyFullCompactionTest.testIntervalTriggersFirst /
    # testThresholdTriggersWhenIntervalFails
    clock = FakeClock().at_millis(10_000)
    trigger = early(1000, 500, clock=clock)
    assert trigger.try_full_compact(5, level0(300, 300)) is not None  # interval, size > 500
    clock.at_millis(10_500)
    assert trigger.try_full_compact(5, level0(30, 30)) is not None  # size < 500
    assert trigger.try_full_compact(5, level0(300, 300)) is None


def test_size_triggers_restart_the_interval() -> None:
    # Paimon: EarlyFullCompactionTest.testUpdateLastWhenFullCompactIsTriggeredByTotalSize /
    # ...ByIncSize
    for total, incremental, second in [(500, None, (300, 100)), (None, 500, (300, 300))]:
        clock = FakeClock().at_millis(10_000)
        trigger = early(1000, total, incremental, clock=clock)
        assert trigger.try_full_compact(5, level0(300, 100 if total is None else 300))
        clock.at_millis(10_100)
        assert trigger.try_full_compact(5, level0(*second)) is not None
        clock.at_millis(11_001)  # 901 ms after the size-triggered one: not yet
        assert trigger.try_full_compact(5, level0(300, 100 if incremental else 300)) is None


def test_estimate_last_full_compaction() -> None:
    files = [
        file(level=2, created=creation_time_from_epoch_millis(5_000)),
        file(level=2, created=creation_time_from_epoch_millis(7_000)),
        file(level=0, created=creation_time_from_epoch_millis(9_000)),
        file(level=2, created=None),
    ]
    assert estimate_last_full_compaction_millis(files, 3) == 7_000
    assert estimate_last_full_compaction_millis(files, 4) is None
