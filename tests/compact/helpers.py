"""Tiny builders for planner tests: files with int keys, runs by (level, size), a fake clock.

Keys are single INT columns encoded as real BinaryRow bytes, so the planners decode them the
way they will in production.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from lakecore.compact import CompactResult, Levels, LevelSortedRun, RewritePlan, SortedRun
from lakecore.compact.rewrite_plan import Rewrite, Upgrade
from lakecore.format.binary_row import decode_row, encode_row
from lakecore.format.manifest import DataFileMeta
from lakecore.format.stats import EMPTY_STATS
from lakecore.schema.types import parse_type

KEY_TYPES = [parse_type("INT NOT NULL")]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_names = itertools.count()


def key(value: int) -> bytes:
    return encode_row([value], KEY_TYPES)


def file(
    lo: int = 0,
    hi: int = 0,
    *,
    level: int = 0,
    size: int | None = None,
    name: str | None = None,
    min_seq: int = 0,
    max_seq: int = 0,
    deletes: int | None = 0,
    created: int | None = None,
) -> DataFileMeta:
    """A file with keys ``lo..hi``; its size defaults to the number of keys (as Paimon's
    ``DataFileTestUtils.newFile``)."""
    return DataFileMeta(
        file_name=name if name is not None else f"f-{next(_names)}",
        file_size=hi - lo + 1 if size is None else size,
        row_count=hi - lo + 1,
        min_key=key(lo),
        max_key=key(hi),
        key_stats=EMPTY_STATS,
        value_stats=EMPTY_STATS,
        min_sequence_number=min_seq,
        max_sequence_number=max_seq,
        schema_id=0,
        level=level,
        creation_time_millis=created,
        delete_row_count=deletes,
    )


def level(lvl: int, size: int) -> LevelSortedRun:
    """A run of one file of ``size`` bytes at level ``lvl`` (Paimon's ``level(0, size)``)."""
    return LevelSortedRun(lvl, SortedRun.from_single(file(level=lvl, size=size)))


def level0(*sizes: int) -> list[LevelSortedRun]:
    return [level(0, s) for s in sizes]


def sizes_of(files: Sequence[DataFileMeta]) -> list[int]:
    return [f.file_size for f in files]


def bounds(f: DataFileMeta) -> tuple[int, int]:
    return decode_row(f.min_key, KEY_TYPES)[0], decode_row(f.max_key, KEY_TYPES)[0]


def layout(levels: Levels) -> list[tuple[int, int, int]]:
    """(level, min, max) of every file, in ``all_files`` order."""
    return [(f.level, *bounds(f)) for f in levels.all_files()]


class FakeClock:
    """Set ``now`` (or ``at_millis`` / ``at_hour``) to move time."""

    def __init__(self, now: datetime = EPOCH) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def at_millis(self, millis: int) -> FakeClock:
        self.now = EPOCH + timedelta(milliseconds=millis)
        return self

    def at_hour(self, hour: int) -> FakeClock:
        self.now = datetime(2024, 1, 1, hour, 30, tzinfo=UTC)
        return self


def execute(plan: RewritePlan) -> CompactResult:
    """A stand-in executor: each rewrite outputs one file spanning all its inputs' keys (as
    Paimon's ``TestRewriter``), each upgrade moves the file."""
    result = CompactResult()
    for step in plan.steps:
        if isinstance(step, Upgrade):
            result = result.merge(CompactResult((step.file,), (step.upgraded,)))
        else:
            assert isinstance(step, Rewrite)
            inputs = step.files
            lo = min(bounds(f)[0] for f in inputs)
            hi = max(bounds(f)[1] for f in inputs)
            seq = max(f.max_sequence_number for f in inputs)
            out = file(lo, hi, level=step.output_level, max_seq=seq)
            result = result.merge(CompactResult(inputs, (out,)))
    return result
