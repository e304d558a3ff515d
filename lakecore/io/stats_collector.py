"""Column statistics for a data file (min, max, null count per column), collected per chunk.

Paimon's default ``metadata.stats-mode`` is ``truncate(16)``: string minimums are cut to 16
characters, string maximums are cut and their last character incremented, so the stored
range still covers the real values. ``full`` keeps them whole, ``counts`` keeps only null
counts, ``none`` keeps nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.format.binary_row import encode_row
from lakecore.format.stats import EMPTY_STATS, SimpleStats
from lakecore.options.parse import StatsMode
from lakecore.schema.types import DataType


def _truncate_min(v: Any, n: int) -> Any:
    if isinstance(v, (str, bytes)) and len(v) > n:
        return v[:n]
    return v


def _truncate_max(v: Any, n: int) -> Any:
    if isinstance(v, str) and len(v) > n:
        head = v[:n]
        for i in range(len(head) - 1, -1, -1):
            cp = ord(head[i])
            if cp < 0x10FFFF and not (0xD7FF <= cp < 0xE000):
                return head[:i] + chr(cp + 1)
        return None
    if isinstance(v, bytes) and len(v) > n:
        raw = bytearray(v[:n])
        for i in range(len(raw) - 1, -1, -1):
            if raw[i] < 0xFF:
                raw[i] += 1
                return bytes(raw[: i + 1])
        return None
    return v


@dataclass(frozen=True)
class ChunkStats:
    """Null counts, minimums and maximums (None: not kept or all null) of one chunk."""

    nulls: list[int]
    mins: list[Any]
    maxs: list[Any]


@dataclass
class StatsCollector:
    """Accumulates min/max/null counts for ``names`` over successive chunks."""

    names: list[str]
    types: list[DataType]
    mode: StatsMode = field(default_factory=lambda: StatsMode("truncate", 16))
    mins: list[Any] = field(init=False)
    maxs: list[Any] = field(init=False)
    nulls: list[int] = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.names)
        self.mins, self.maxs, self.nulls = [None] * n, [None] * n, [0] * n

    def update(self, table: pa.Table) -> None:
        self.add(self.measure(table))

    def measure(self, table: pa.Table) -> ChunkStats:
        """The statistics of one chunk, without touching the accumulated ones (thread-safe:
        a writer measures a chunk while an earlier one is encoded)."""
        nulls: list[int] = []
        mins: list[Any] = []
        maxs: list[Any] = []
        for i, name in enumerate(self.names):
            col = table.column(name)
            nulls.append(col.null_count)
            if (self.mode.kind in ("counts", "none") or self.types[i].is_nested
                    or col.null_count == len(col)):
                mins.append(None)
                maxs.append(None)
                continue
            mm = pc.min_max(col)
            mins.append(mm["min"].as_py())
            maxs.append(mm["max"].as_py())
        return ChunkStats(nulls, mins, maxs)

    def add(self, chunk: ChunkStats) -> None:
        """Fold one chunk's statistics (``measure``) into the accumulated ones."""
        for i in range(len(self.names)):
            self.nulls[i] += chunk.nulls[i]
            lo, hi = chunk.mins[i], chunk.maxs[i]
            if lo is not None and (self.mins[i] is None or lo < self.mins[i]):
                self.mins[i] = lo
            if hi is not None and (self.maxs[i] is None or hi > self.maxs[i]):
                self.maxs[i] = hi

    def result(self) -> SimpleStats:
        if self.mode.kind == "none" or not self.names:
            return EMPTY_STATS
        mins, maxs = list(self.mins), list(self.maxs)
        if self.mode.kind == "counts":
            mins, maxs = [None] * len(mins), [None] * len(maxs)
        elif self.mode.kind == "truncate":
            mins = [_truncate_min(v, (self.mode.truncate_length or 0)) for v in mins]
            maxs = [_truncate_max(v, (self.mode.truncate_length or 0)) for v in maxs]
        for i, t in enumerate(self.types):
            if t.is_nested:
                mins[i] = maxs[i] = None
        return SimpleStats(
            encode_row(mins, self.types), encode_row(maxs, self.types), tuple(self.nulls)
        )
