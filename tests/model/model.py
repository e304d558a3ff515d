"""The in-memory reference model of a primary-key table, per merge engine.

A table has the primary key ``(id, dt)``, is partitioned by ``dt`` (dates, so that partition
expiry by ``values-time`` applies) and has two value columns ``v1`` and ``v2``; the
``rowkind.field`` column ``rk`` says whether a record is an upsert (``+I``) or a delete (``-D``).

Per engine (the options each one gets are in ``ENGINE_OPTIONS``):

* deduplicate: the last record of a key wins; ``-D`` removes the key.
* partial-update: each column takes its last non-null value; with
  ``partial-update.remove-record-on-delete`` (``TableConfig.deletes``) ``-D`` removes the row
  and a later upsert starts it afresh.
* aggregation (``v1`` sum, ``v2`` max): upserts fold into the row; with
  ``aggregation.remove-record-on-delete`` ``-D`` removes it.
* first-row (``ignore-delete``): the first record of a key wins; deletes are ignored.

``remove-record-on-delete`` is not associative (Paimon's merge functions are the same): a merge
of ``-D, +I`` without the key's older records yields just the ``+I``, which later folds into the
older row instead of replacing it, so the result of upserting a deleted key depends on which
files compactions happened to merge. The model therefore keeps ``tombstones`` (keys with a
``-D`` in a file that is not fully compacted) and the machine never upserts a tombstoned key of
these two engines; a full compaction (which drops the ``-D`` rows), an overwrite of the key's
partition or partition expiry frees them.

A ``Version`` is the model of one snapshot. Tables whose reads or changelog depend on level 0
being compacted away (first-row, whose batch scans skip level 0, and ``changelog-producer =
lookup``) keep the records not yet compacted out of level 0 apart: ``lifted`` is the state of
the levels >= 1 and ``pending`` the level-0 records on top of it. Their compaction strategy is
``ForceUpLevel0Compaction`` with a compaction trigger so high that the universal pick never
fires, so every compaction (inline after each commit, dedicated, full) lifts all of level 0:
the split is then exactly defined by the history of operations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import pyarrow as pa

Key = tuple[str, int]  # (dt, id): the order reads are compared in
Values = tuple[int | None, int | None]  # (v1, v2)
State = Mapping[Key, Values]

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), False),
    pa.field("dt", pa.string(), False),
    pa.field("v1", pa.int64()),
    pa.field("v2", pa.int64()),
    pa.field("rk", pa.string(), False),
])
# The single-process machine's tables start with ``v2`` as INT, so that an ALTER can widen it
# to BIGINT (``v1`` stays BIGINT: aggregation sums it). Rows are written as ``SCHEMA`` and cast.
EVOLVING_SCHEMA = SCHEMA.set(SCHEMA.get_field_index("v2"), pa.field("v2", pa.int32()))
PRIMARY_KEYS = ["id", "dt"]
PARTITION_KEYS = ["dt"]
PARTITIONS = ("2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04")
IDS = 8  # ids 0..7: small, so that updates and deletes hit existing keys often
# Partition expiry: far enough in the past that the writers' own after-commit expiry (with the
# real clock) never drops one of PARTITIONS; the model test passes its own ``now``.
EXPIRATION_DAYS = 36500  # 100 years


class Engine(StrEnum):
    DEDUPLICATE = "deduplicate"
    PARTIAL_UPDATE = "partial-update"
    AGGREGATION = "aggregation"
    FIRST_ROW = "first-row"


ENGINE_OPTIONS: dict[Engine, dict[str, str]] = {
    Engine.DEDUPLICATE: {},
    Engine.PARTIAL_UPDATE: {},
    Engine.AGGREGATION: {"fields.v1.aggregate-function": "sum",
                         "fields.v2.aggregate-function": "max"},
    Engine.FIRST_ROW: {"ignore-delete": "true"},
}
# what partial-update and aggregation tables need to take deletes (TableConfig.deletes)
DELETE_OPTIONS: dict[Engine, dict[str, str]] = {
    Engine.PARTIAL_UPDATE: {"partial-update.remove-record-on-delete": "true"},
    Engine.AGGREGATION: {"aggregation.remove-record-on-delete": "true"},
}


@dataclass(frozen=True)
class Rec:
    """One input record."""

    kind: str  # "+I" or "-D"
    id: int
    dt: str
    v1: int | None = None
    v2: int | None = None

    @property
    def key(self) -> Key:
        return (self.dt, self.id)

    def as_tuple(self) -> tuple[str, str, int, int | None, int | None]:
        return (self.kind, self.dt, self.id, self.v1, self.v2)

    @staticmethod
    def from_tuple(t: Sequence[Any]) -> Rec:
        """The inverse of ``as_tuple``."""
        kind, dt, id_, v1, v2 = t
        return Rec(kind, id_, dt, v1, v2)


def to_arrow(recs: Sequence[Rec]) -> pa.Table:
    return pa.table({
        "id": [r.id for r in recs], "dt": [r.dt for r in recs], "v1": [r.v1 for r in recs],
        "v2": [r.v2 for r in recs], "rk": [r.kind for r in recs],
    }, schema=SCHEMA)


def merge(engine: Engine, state: State, recs: Iterable[Rec]) -> dict[Key, Values]:
    """``state`` with ``recs`` applied in order (a new dict; ``state`` is left alone)."""
    out = dict(state)
    for r in recs:
        k = r.key
        if r.kind == "-D":
            if engine is not Engine.FIRST_ROW:
                out.pop(k, None)
            continue
        old = out.get(k)
        if engine is Engine.DEDUPLICATE or old is None:
            if engine is Engine.FIRST_ROW and old is not None:
                continue
            out[k] = (r.v1, r.v2)
        elif engine is Engine.PARTIAL_UPDATE:
            out[k] = (old[0] if r.v1 is None else r.v1, old[1] if r.v2 is None else r.v2)
        elif engine is Engine.AGGREGATION:
            out[k] = (_sum(old[0], r.v1), _max(old[1], r.v2))
        # FIRST_ROW with an existing key: the first record stays
    return out


def _sum(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else a + b


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def rows(state: State) -> list[tuple[str, int, int | None, int | None]]:
    """The state as sorted (dt, id, v1, v2) tuples, the shape reads are compared in."""
    return [(dt, i, v[0], v[1]) for (dt, i), v in sorted(state.items())]


@dataclass(frozen=True)
class TableConfig:
    """The table one model-test example runs against."""

    engine: Engine
    bucket: int
    write_only: bool  # False: inline compaction in the writers
    changelog_producer: str = "none"  # none | input | lookup
    auto_expire: bool = False  # snapshot.num-retained.* small: writers expire after commits
    manifest_merge: bool = False  # manifest.merge-min-count small
    deletes: bool = True  # partial-update / aggregation: remove-record-on-delete and -D rows
    deletion_vectors: bool = False  # deletion-vectors.enabled: reads skip level 0

    @property
    def paimon_readable(self) -> bool:
        """pypaimon 2.1 refuses to read tables with ``*.remove-record-on-delete``."""
        return not (self.deletes and self.engine in DELETE_OPTIONS)

    @property
    def needs_lookup(self) -> bool:
        return (self.engine is Engine.FIRST_ROW or self.changelog_producer == "lookup"
                or self.deletion_vectors)

    @property
    def skips_level0(self) -> bool:
        """Batch reads show no level-0 data: first-row scans, and deletion-vector tables."""
        return self.engine is Engine.FIRST_ROW or self.deletion_vectors

    def options(self) -> dict[str, str]:
        opts = {
            "bucket": str(self.bucket),
            "merge-engine": self.engine.value,
            "rowkind.field": "rk",
            "write-only": str(self.write_only).lower(),
            "changelog-producer": self.changelog_producer,
            "partition.expiration-time": f"{EXPIRATION_DAYS} d",
            **ENGINE_OPTIONS[self.engine],
        }
        if self.deletes:
            opts.update(DELETE_OPTIONS.get(self.engine, {}))
        if self.needs_lookup:
            # the universal pick never fires: every compaction lifts all of level 0 (see top)
            opts.update({"num-sorted-run.compaction-trigger": "1000", "num-levels": "6"})
        else:
            opts["num-sorted-run.compaction-trigger"] = "2"
        if self.auto_expire:
            opts.update({"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "4"})
        if self.manifest_merge:
            opts["manifest.merge-min-count"] = "3"
        if self.deletion_vectors:
            opts["deletion-vectors.enabled"] = "true"
        return opts

    def describe(self) -> str:
        return (f"{self.engine.value} bucket={self.bucket} write-only={self.write_only} "
                f"changelog={self.changelog_producer} auto-expire={self.auto_expire} "
                f"manifest-merge={self.manifest_merge} deletes={self.deletes} "
                f"deletion-vectors={self.deletion_vectors}")


@dataclass(frozen=True)
class Version:
    """The model of one snapshot: its state and how the commit that made it got there."""

    engine: Engine
    lifted: Mapping[Key, Values]
    pending: tuple[Rec, ...] = ()
    kind: str = "APPEND"  # the commit kind the snapshot must have
    records: tuple[Rec, ...] = ()  # the input records committed (APPEND / OVERWRITE)
    tombstones: frozenset[Key] = frozenset()
    # the snapshot was expired while a tag kept it, then restored by a rollback to the tag:
    # expiry deleted its changelog (a tag keeps none), so it comes back without one
    changelog_gone: bool = False

    @property
    def full(self) -> dict[Key, Values]:
        return merge(self.engine, self.lifted, self.pending)

    def visible(self, skips_level0: bool) -> dict[Key, Values]:
        """What a batch read shows: first-row scans skip level 0."""
        return dict(self.lifted) if skips_level0 else self.full

    @property
    def settled(self) -> bool:
        """No record in level 0: the lookup changelog up to here is complete."""
        return not self.pending


@dataclass
class TableModel:
    """The current state of the table, plus the model of every snapshot ever made."""

    config: TableConfig
    lifted: dict[Key, Values] = field(default_factory=dict)
    pending: list[Rec] = field(default_factory=list)
    history: dict[int, Version] = field(default_factory=dict)
    tags: dict[str, int] = field(default_factory=dict)
    closed: set[str] = field(default_factory=set)  # partitions partition expiry dropped
    tombstones: set[Key] = field(default_factory=set)

    @property
    def engine(self) -> Engine:
        return self.config.engine

    def version(self, kind: str, records: Sequence[Rec] = ()) -> Version:
        return Version(self.engine, dict(self.lifted), tuple(self.pending), kind, tuple(records),
                       frozenset(self.tombstones))

    @property
    def non_associative_deletes(self) -> bool:
        return self.engine in (Engine.PARTIAL_UPDATE, Engine.AGGREGATION)

    def allowed(self, recs: Sequence[Rec]) -> list[Rec]:
        """``recs`` without the upserts of tombstoned keys (see the module docstring)."""
        if not self.non_associative_deletes:
            return list(recs)
        dead, out = set(self.tombstones), []
        for r in recs:
            if r.kind == "-D":
                dead.add(r.key)
            elif r.key in dead:
                continue
            out.append(r)
        return out

    @property
    def full(self) -> dict[Key, Values]:
        return merge(self.engine, self.lifted, self.pending)

    def visible(self) -> dict[Key, Values]:
        return dict(self.lifted) if self.config.skips_level0 else self.full

    def open_partitions(self) -> list[str]:
        return [p for p in PARTITIONS if p not in self.closed]

    # -- transitions ----------------------------------------------------------------------
    def add(self, recs: Sequence[Rec]) -> None:
        """New level-0 records (a write commit's APPEND)."""
        if self.non_associative_deletes:
            self.tombstones |= {r.key for r in recs if r.kind == "-D"}
        if self.config.needs_lookup:
            self.pending.extend(recs)
        else:
            self.lifted = merge(self.engine, self.lifted, recs)

    def replace(self, partitions: Iterable[str], recs: Sequence[Rec]) -> None:
        """An overwrite of ``partitions`` with ``recs`` (new level-0 records)."""
        gone = set(partitions)
        self.lifted = {k: v for k, v in self.lifted.items() if k[0] not in gone}
        self.pending = [r for r in self.pending if r.dt not in gone]
        self.tombstones = {k for k in self.tombstones if k[0] not in gone}
        self.add(recs)

    def lift(self) -> None:
        """A compaction that takes every level-0 file up."""
        self.lifted = self.full
        self.pending = []

    def full_compacted(self) -> None:
        """A full compaction: everything lifted, every -D row dropped."""
        self.lift()
        self.tombstones = set()

    def drop(self, partitions: Iterable[str]) -> None:
        """Partition expiry."""
        gone = set(partitions)
        self.replace(gone, ())
        self.closed |= gone

    def drop_v2(self) -> None:
        """``ALTER TABLE DROP v2, ADD v2``: the re-added column is a new one (a new field id),
        empty in every existing row. Snapshots from before keep their ``v2`` (time travel reads
        them with their own schema), but what an incremental read shows of their records is
        read with the current schema: their ``v2`` is gone too."""
        self.lifted = {k: (v[0], None) for k, v in self.lifted.items()}
        self.pending = [replace(r, v2=None) for r in self.pending]
        self.history = {sid: replace(v, records=tuple(replace(r, v2=None) for r in v.records))
                        for sid, v in self.history.items()}

    def rollback(self, snapshot_id: int) -> None:
        v = self.history[snapshot_id]
        self.lifted, self.pending = dict(v.lifted), list(v.pending)
        self.tombstones = set(v.tombstones)
        self.history = {sid: x for sid, x in self.history.items() if sid <= snapshot_id}
        self.tags = {n: sid for n, sid in self.tags.items() if sid <= snapshot_id}


def changelog_replay(before: State, batches: Sequence[Sequence[tuple[str, Key, Values]]]
                     ) -> dict[Key, Values]:
    """Apply changelog records (row kind, key, values) to ``before``, one snapshot's batch at
    a time (a batch: its retractions first, then its additions). Every retraction must retract
    the current row exactly and every +I must be a new key: a consumer replaying the changelog
    reproduces each state exactly."""
    state = dict(before)
    for batch in batches:
        for kind, key, values in batch:
            if kind in ("-U", "-D"):
                assert state.get(key) == values, (
                    f"changelog {kind} {key} {values} does not retract the current row "
                    f"{state.get(key)}")
                del state[key]
        for kind, key, values in batch:
            if kind in ("+I", "+U"):
                if kind == "+I":
                    assert key not in state, f"changelog +I {key} for an existing row"
                state[key] = values
    return state
