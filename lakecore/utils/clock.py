"""The two clocks maintenance and partition-expiry checks compare against, from a ``now``."""

from __future__ import annotations

from datetime import UTC, datetime


def to_epoch_millis(now: datetime | None) -> int:
    """An instant in epoch millis; a naive ``now`` is local wall-clock time (as Paimon)."""
    if now is None:
        now = datetime.now(UTC)
    return int(now.timestamp() * 1000)


def to_local_naive(now: datetime | None) -> datetime:
    """Local wall-clock time without zone, the clock Paimon's partition expiry compares to."""
    if now is None:
        return datetime.now()
    return now.astimezone().replace(tzinfo=None) if now.tzinfo is not None else now
