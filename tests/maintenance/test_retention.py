"""Retention rules as pure functions, on Paimon's reference cases (ExpireSnapshotsTest)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from lakecore.errors import OptionError
from lakecore.maintenance.retention import ExpireConfig, expire_end
from lakecore.options import CoreOptions

BIG = 2**31 - 1


def cfg(retain_min: int = 1, retain_max: int = BIG, millis: int = 0,
        max_deletes: int = BIG) -> ExpireConfig:
    return ExpireConfig(retain_min, retain_max, timedelta(milliseconds=millis), max_deletes)


def end_for(times: dict[int, int], config: ExpireConfig, now: int,
            consumer: int | None = None) -> int:
    ids = sorted(times)
    return expire_end(ids[0], ids[-1], times.get, config, now, consumer)


def test_time_keeps_a_snapshot_while_its_successor_is_young():
    # Paimon testExpireWithTime: 1-5 at t=0, 6-10 at t=2000, now 2500, retain 1000:
    # 1-4 go; 5 stays because 6 is inside the window.
    times = {i: 0 for i in range(1, 6)} | {i: 2000 for i in range(6, 11)}
    assert end_for(times, cfg(millis=1000), now=2500) == 5


def test_time_protects_each_snapshot():
    # Paimon testExpireWithTimeProtectsEachSnapshot
    times = {i: 0 for i in range(1, 6)}
    assert end_for(times, cfg(millis=5000), now=100) == 1  # nothing expires
    times[6] = 6000
    assert end_for(times, cfg(millis=5000), now=6500) == 5  # 1-4 go, 5 and 6 stay


def test_time_boundary_is_inclusive_for_the_successor():
    times = {1: 0, 2: 1000, 3: 5000}
    # successor exactly retention-old: still "young" (olderThan <= time) -> kept
    assert end_for(times, cfg(millis=1000), now=2000) == 1
    # one millisecond later it is older than the retention
    assert end_for(times, cfg(millis=1000), now=2001) == 2


def test_num_retained_min_wins_over_time():
    times = {i: 0 for i in range(1, 11)}
    assert end_for(times, cfg(retain_min=3), now=10**9) == 8  # keep 8, 9, 10


def test_num_retained_max_wins_over_time():
    times = {i: 1000 * i for i in range(1, 11)}
    # everything is young, but at most 3 may be kept
    assert end_for(times, cfg(retain_min=1, retain_max=3, millis=10**9), now=10_000) == 8


def test_min_max_and_time_together():
    times = {i: 1000 * i for i in range(1, 21)}
    config = cfg(retain_min=5, retain_max=15, millis=8000)
    # max forces 1-5 out; time: snapshot i goes while i+1 is older than now-8000 = 12000,
    # so 11 stays (12 is exactly at the cut-off) and 1-10 go
    assert end_for(times, config, now=20_000) == 11
    # min caps at 16 even when time would allow more
    assert end_for(times, config, now=10**9) == 16


def test_expire_limit_counts_from_the_earliest():
    times = {i: 0 for i in range(1, 101)}
    assert end_for(times, cfg(max_deletes=50), now=10**9) == 51
    times_later = {i: 0 for i in range(51, 101)}
    assert end_for(times_later, cfg(max_deletes=50), now=10**9) == 100


def test_gaps_do_not_hold_snapshots_back():
    times = {1: 0, 2: 0, 4: 0, 5: 0, 6: 10**9}  # 3 deleted by hand

    def time_of(i: int) -> int | None:
        return times.get(i)

    assert expire_end(1, 6, time_of, cfg(millis=1000), 5000) == 5


def test_consumer_keeps_its_next_snapshot():
    times = {i: 0 for i in range(1, 11)}
    assert end_for(times, cfg(), now=10**9, consumer=4) == 4


def test_nothing_when_min_exceeds_count():
    times = {i: 0 for i in range(1, 6)}
    assert end_for(times, cfg(retain_min=10), now=10**9) == 1


def test_invalid_configs_are_rejected():
    with pytest.raises(OptionError, match="num-retained.max"):
        cfg(retain_min=5, retain_max=3).validate()
    with pytest.raises(OptionError, match="num-retained.min"):
        cfg(retain_min=0).validate()


def test_config_from_options_defaults_and_changelog_fallback():
    c = ExpireConfig.from_options(CoreOptions.from_map({}))
    assert (c.retain_min, c.retain_max, c.time_retained, c.max_deletes) == (
        10, BIG, timedelta(hours=1), 50)
    assert not c.changelog_decoupled
    c = ExpireConfig.from_options(CoreOptions.from_map({
        "snapshot.num-retained.min": "2", "snapshot.time-retained": "10 min",
        "changelog.time-retained": "2 h", "snapshot.expire.limit": "7"}))
    # changelog wants 2 h: snapshots are kept that long (no long-lived changelog files)
    assert c.changelog_decoupled and c.time_retained == timedelta(hours=2)
    assert (c.retain_min, c.max_deletes) == (2, 7)
    c = ExpireConfig.from_options(CoreOptions.from_map({"changelog.time-retained": "1 min"}))
    assert not c.changelog_decoupled and c.time_retained == timedelta(hours=1)
