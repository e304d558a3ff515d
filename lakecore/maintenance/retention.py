"""Snapshot retention: which snapshots an expiry may remove. Pure functions, no I/O.

Paimon 2.x rules (``ExpireSnapshotsImpl.expire``):

* ``snapshot.num-retained.max``: snapshots older than the newest *max* always go;
* ``snapshot.num-retained.min``: the newest *min* always stay;
* ``snapshot.time-retained``: a snapshot may go only once the snapshot *after* it is older than
  the retention (so a reader that started on it has had the full retention to finish);
* ``snapshot.expire.limit``: at most this many per call, counted from the earliest;
* a Paimon consumer (``consumer/consumer-<id>``) keeps its ``nextSnapshot`` and later.

Changelog retention (``changelog.*``) falls back to the snapshot values. When it asks for more
than the snapshot retention, Paimon "decouples" changelogs into long-lived ``changelog/`` files;
lakecore does not write those, so it keeps the snapshots themselves as long as the longer of the
two retentions asks (safe: nothing the changelog retention wants is ever deleted).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from lakecore.errors import OptionError
from lakecore.options import CoreOptions


@dataclass(frozen=True)
class ExpireConfig:
    """Snapshot retention: counts, time retained and the per-run delete limit."""

    retain_min: int = 10
    retain_max: int = 2**31 - 1
    time_retained: timedelta = timedelta(hours=1)
    max_deletes: int = 50
    changelog_decoupled: bool = False

    @staticmethod
    def from_options(opts: CoreOptions) -> ExpireConfig:
        s_min, s_max = opts.snapshot_num_retained_min, opts.snapshot_num_retained_max
        s_time = opts.snapshot_time_retained
        c_min, c_max = opts.changelog_num_retained_min, opts.changelog_num_retained_max
        c_time = opts.changelog_time_retained
        return ExpireConfig(
            retain_min=max(s_min, c_min),
            retain_max=max(s_max, c_max),
            time_retained=max(s_time, c_time),
            max_deletes=opts.snapshot_expire_limit,
            changelog_decoupled=c_min > s_min or c_max > s_max or c_time > s_time,
        )

    def validate(self) -> None:
        if self.retain_min < 1:
            raise OptionError("snapshot.num-retained.min",
                              f"is {self.retain_min}; at least 1 snapshot must be kept")
        if self.retain_max < self.retain_min:
            raise OptionError("snapshot.num-retained.max",
                              f"({self.retain_max}) must not be less than "
                              f"snapshot.num-retained.min ({self.retain_min})")
        if self.max_deletes < 1:
            raise OptionError("snapshot.expire.limit", f"is {self.max_deletes}; must be >= 1")


def expire_end(
    earliest: int,
    latest: int,
    time_of: Callable[[int], int | None],
    config: ExpireConfig,
    now_millis: int,
    consumer_next: int | None = None,
) -> int:
    """The first snapshot id to keep: expiry removes ``[earliest, result)``.

    ``time_of(id)`` is a snapshot's ``timeMillis``, or None when its file is gone (a gap, or a
    concurrent expirer); a missing successor does not hold a snapshot back, as in Paimon.
    """
    config.validate()
    lowest_kept_by_max = max(latest - config.retain_max + 1, earliest)
    end = latest - config.retain_min + 1
    if consumer_next is not None:
        end = min(end, consumer_next)
    end = min(end, earliest + config.max_deletes)
    older_than = now_millis - int(config.time_retained.total_seconds() * 1000)
    for sid in range(lowest_kept_by_max, end):
        successor_time = time_of(sid + 1)
        if successor_time is not None and older_than <= successor_time:
            return max(sid, earliest)
    return max(end, earliest)
