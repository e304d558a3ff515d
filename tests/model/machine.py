"""The randomized model test as a hypothesis ``RuleBasedStateMachine``.

Each example creates one primary-key table (engine, buckets, inline or dedicated compaction,
changelog producer, automatic snapshot expiry and manifest merging all drawn) and runs up to
``STEPS`` random operations on it and on a ``TableModel``: upserts and deletes, static and
dynamic overwrites, dedicated and full compactions (inline ones happen in the writers), snapshot
expiry, partition expiry (and writes into expired partitions, which must be refused), tags,
rollbacks, reads of past snapshots and tags, incremental reads, and ALTER TABLE (rename ``v1``
or ``v2``, widen ``v2`` from INT to BIGINT, drop ``v2`` and add it again: a new, empty column).
Reads find ``v1`` and ``v2`` by field id in the schema they read with (time travel reads a
snapshot with the schema it was committed with). After every step the
latest snapshot reads exactly what the model holds, and after every maintenance step no file a
retained snapshot or tag needs is missing. At the end of an example the table is fully
compacted, read again, checked for leaked (unreferenced) files, and queued for pypaimon
(``PAIMON_QUEUE``, read in one process at the end of the session by
``test_pypaimon_reads_every_model_table``).

``OPS`` counts the operations executed (``conftest.py`` prints it at the end of the session);
names starting with spaces are details (no-ops, which checks an incremental read made).
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from lakecore import CatalogFactory, SchemaChange
from lakecore.commit.message import CommitMessage
from lakecore.errors import FileAlreadyAddedConflict, PartitionExpiredError
from lakecore.maintenance import (
    ExpireConfig,
    create_tag,
    delete_tag,
    expire_partitions,
    expire_snapshots,
    list_tags,
    rollback_to,
)
from lakecore.maintenance.refs import live_entries
from lakecore.table import FileStoreTable
from tests.core.helpers import make_table, write
from tests.faults.harness import unreferenced_files
from tests.maintenance.helpers import data_files, missing_referenced_files
from tests.model.model import (
    EVOLVING_SCHEMA,
    EXPIRATION_DAYS,
    IDS,
    PARTITION_KEYS,
    PARTITIONS,
    PRIMARY_KEYS,
    Engine,
    Key,
    Rec,
    TableConfig,
    TableModel,
    Values,
    Version,
    changelog_replay,
    merge,
    rows,
    to_arrow,
)

OPS: Counter[str] = Counter()  # operations executed, by kind; reported at the session's end
FUTURE = datetime.now() + timedelta(days=3)  # "now" for snapshot expiry: every snapshot is old
TAG_NAMES = ("t0", "t1", "t2")
MAX_ALTERS = 3  # per example, so that the other operations keep their share
STREAM_USER = "model-stream"  # the commit user of stream writes (explicit identifiers)
Row = tuple[str, int, int | None, int | None]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class PaimonCheck:
    """A finished model table for pypaimon to read: its latest snapshot must be ``expected``."""

    warehouse: str
    table: str
    expected: tuple[Row, ...]
    describe: str
    names: tuple[str, str] = ("v1", "v2")  # what v1 and v2 are called after the ALTERs


PAIMON_QUEUE: list[PaimonCheck] = []
_BASE: list[str] = []


def base_dir() -> str:
    """One temporary directory for the session's model tables (removed by conftest)."""
    if not _BASE:
        _BASE.append(tempfile.mkdtemp(prefix="lakecore-model-"))
    return _BASE[0]


# -- strategies -------------------------------------------------------------------------------
@st.composite
def configs(draw: st.DrawFn) -> TableConfig:
    engine = draw(st.sampled_from(list(Engine)))
    producers = {Engine.DEDUPLICATE: ["none", "input", "lookup", "lookup"],
                 Engine.PARTIAL_UPDATE: ["none", "input"],
                 Engine.AGGREGATION: ["none", "input"],
                 Engine.FIRST_ROW: ["none"]}[engine]
    write_only = draw(st.booleans())
    # bucket -1: Paimon's dynamic bucket mode (HASH index); deletion vectors with every
    # engine Paimon allows them with (not first-row) and the producers drawn (none, input,
    # lookup: all allowed with vectors)
    vectors = engine is not Engine.FIRST_ROW and draw(st.booleans())
    return TableConfig(
        engine=engine,
        bucket=draw(st.sampled_from([1, 3, -1])),
        deletion_vectors=vectors,
        write_only=write_only,
        changelog_producer=draw(st.sampled_from(producers)),
        auto_expire=not write_only and draw(st.booleans()),
        manifest_merge=draw(st.booleans()),
        deletes=engine in (Engine.DEDUPLICATE, Engine.FIRST_ROW) or draw(st.booleans()),
    )


def records(partitions: Sequence[str], min_size: int = 1, max_size: int = 6,
            deletes: bool = True) -> st.SearchStrategy[list[Rec]]:
    value = st.one_of(st.integers(0, 99), st.integers(0, 99), st.integers(0, 99), st.none())
    ids = st.integers(0, IDS - 1)
    dts = st.sampled_from(list(partitions))
    upsert = st.builds(Rec, st.just("+I"), ids, dts, value, value)
    kinds = [upsert, upsert, upsert]
    if deletes:
        kinds.append(st.builds(Rec, st.just("-D"), ids, dts))
    return st.lists(st.one_of(*kinds), min_size=min_size, max_size=max_size)


# -- reading ----------------------------------------------------------------------------------
FieldIds = dict[str, set[int]]  # "v1" / "v2" -> every field id the column has had


def _to_arrow(table: FileStoreTable) -> pa.Table:
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


def value_names(table: FileStoreTable, ids: FieldIds | None) -> tuple[str, str]:
    """What ``v1`` and ``v2`` are called in the schema ``table`` reads with (by field id)."""
    if ids is None:
        return ("v1", "v2")
    by_id = {f.id: f.name for f in table.schema.fields}
    v1, v2 = ([by_id[i] for i in ids[c] if i in by_id] for c in ("v1", "v2"))
    assert len(v1) == 1 and len(v2) == 1, (table.schema.field_names, ids)
    return v1[0], v2[0]


def read_rows(table: FileStoreTable, ids: FieldIds | None = None) -> list[Row]:
    """The table's rows as sorted (dt, id, v1, v2); every row's ``rk`` must be +I."""
    data = _to_arrow(table)
    v1, v2 = value_names(table, ids)
    kinds = set(data["rk"].to_pylist())
    assert kinds <= {"+I"}, f"rows with rowkind.field values {kinds}"
    got = list(zip(data["dt"].to_pylist(), data["id"].to_pylist(), data[v1].to_pylist(),
                   data[v2].to_pylist(), strict=True))
    return sorted(got, key=lambda r: (r[0], r[1]))


def changelog_rows(table: FileStoreTable, start: int, end: int, ids: FieldIds | None = None
                   ) -> list[tuple[str, str, int, int | None, int | None]]:
    """The incremental read (start, end] (scan mode auto: the changelog with a producer, else
    the APPEND snapshots' delta), in read order: (row kind, dt, id, v1, v2)."""
    incremental = table.copy({"incremental-between": f"{start},{end}"})
    data = _to_arrow(incremental)
    if data.num_rows == 0:
        return []
    v1, v2 = value_names(incremental, ids)
    return list(zip(data["_ROW_KIND"].to_pylist(), data["dt"].to_pylist(),
                    data["id"].to_pylist(), data[v1].to_pylist(), data[v2].to_pylist(),
                    strict=True))


DeltaRecord = tuple[bool, str, int, int | None, int | None]


def _delta_record(r: tuple[str, str, int, int | None, int | None]) -> DeltaRecord:
    """A record of a delta read: (insert or update?, dt, id, v1, v2), a retraction's values
    left out."""
    kind, dt, i, v1, v2 = r
    add = kind in ("+I", "+U")
    return (add, dt, i, v1, v2) if add else (False, dt, i, None, None)


def _commit_records(engine: Engine, recs: Sequence[Rec]) -> list[DeltaRecord]:
    """What one commit's writer flushes: per key, its records merged (the key's merged row, or
    a retraction when the commit removed it)."""
    out = []
    for key in dict.fromkeys(r.key for r in recs):
        state = merge(engine, {}, [r for r in recs if r.key == key])
        values = state.get(key)
        out.append((True, *key, *values) if values is not None else (False, *key, None, None))
    return out


def assert_rows(got: list[Row], expected: list[Row], what: str) -> None:
    if got == expected:
        return
    g, e = set(got), set(expected)
    raise AssertionError(f"{what}: lakecore reads {len(got)} rows, the model {len(expected)}; "
                         f"only in lakecore: {sorted(g - e, key=repr)}; "
                         f"only in the model: {sorted(e - g, key=repr)}")


def level0_files(table: FileStoreTable) -> list[str]:
    latest = table.snapshot_manager.latest()
    if latest is None:
        return []
    return [e.file.file_name for e in live_entries(table.manifest_io(), latest).values()
            if e.file.level == 0]


def counted(name: str) -> Callable[[F], F]:
    """Count an operation once it finished (one that returns False found nothing to do and
    is not counted); ``ok`` tells ``teardown`` the example passed."""

    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(self: ModelMachine, *args: Any, **kwargs: Any) -> None:
            self.ok = False
            result = fn(self, *args, **kwargs)
            OPS[name if result is not False else f"  no-op: {name}"] += 1
            self.ok = True

        return wrapper  # type: ignore[return-value]

    return deco


# -- the machine ------------------------------------------------------------------------------
class ModelMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ok = True
        self.dir: str | None = None
        self.table: FileStoreTable = None  # type: ignore[assignment]  # set by create
        self.model: TableModel = None  # type: ignore[assignment]
        self.ids: FieldIds = {}  # the field ids v1 and v2 have had (set by create, ALTER)
        # stream writes: the last identifier and the committables that landed (until a
        # rollback, which may remove their snapshots: then a replay commits again, as Paimon)
        self.stream_ident = 0
        self.committables: dict[int, list[CommitMessage]] = {}

    @property
    def cfg(self) -> TableConfig:
        return self.model.config

    @initialize(config=configs(), data=st.data())
    @counted("create table and write")
    def create(self, config: TableConfig, data: st.DataObject) -> None:
        self.dir = tempfile.mkdtemp(prefix="t-", dir=base_dir())
        note(f"table: {config.describe()} at {self.dir}")
        self.table = make_table(self.dir, EVOLVING_SCHEMA, primary_keys=PRIMARY_KEYS,
                                partition_keys=PARTITION_KEYS, options=config.options())
        self.ids = {c: {self.table.schema.row_type.field(c).id} for c in ("v1", "v2")}
        self.model = TableModel(config)
        if config.bucket == -1:
            OPS["  table with dynamic buckets (HASH index)"] += 1
        if config.deletion_vectors:
            OPS["  table with deletion vectors"] += 1
        self._write(data)

    # -- helpers ------------------------------------------------------------------------------
    def _arrow(self, recs: Sequence[Rec]) -> pa.Table:
        """The records as rows of the current schema (v1 and v2 under their current names)."""
        data = to_arrow(recs)
        v1, v2 = value_names(self.table, self.ids)
        return data.rename_columns([{"v1": v1, "v2": v2}.get(n, n) for n in data.column_names])

    def _rows(self, table: FileStoreTable) -> list[Row]:
        return read_rows(table, self.ids)

    def retained(self) -> list[int]:
        return self.table.snapshot_manager.list_ids()

    def _landed(self, ids: Sequence[int], first_kind: str, recs: Sequence[Rec]) -> None:
        """Record the snapshots a write or overwrite made: ``first_kind`` with the new records
        in level 0, then (inline compaction) a COMPACT. The model's transition has been applied
        already, except the lift an inline compaction does."""
        sm = self.table.snapshot_manager
        kinds = [sm.snapshot(s).commit_kind.value for s in ids]
        allowed = [[], [first_kind]]
        if not self.cfg.write_only:
            allowed.append([first_kind, "COMPACT"])
            if first_kind == "APPEND":
                # nothing new written (deletes that ignore-delete drops), but the writer's
                # inline compaction still ran on the bucket's files
                allowed.append(["COMPACT"])
        assert kinds in allowed, f"{first_kind} commit made snapshots {list(zip(ids, kinds))}"
        for sid, kind in zip(ids, kinds, strict=True):
            if kind == "COMPACT" and self.cfg.needs_lookup:
                self.model.lift()
            self.model.history[sid] = self.model.version(kind, recs if kind == first_kind else ())
        if self.cfg.needs_lookup and not self.cfg.write_only:
            # lookup compaction is radical: nothing stays in level 0 after a commit
            assert level0_files(self.table) == [], "level-0 files left after inline compaction"
            self.model.lift()
        if ids:
            self._check_latest_changes()

    def _effective(self, recs: Sequence[Rec]) -> list[Rec]:
        """The records a writer keeps: ``ignore-delete`` drops deletes when writing (Paimon's
        RowKindFilter), so they reach neither data files nor the input changelog."""
        if self.cfg.engine is Engine.FIRST_ROW:
            return [r for r in recs if r.kind != "-D"]
        return list(recs)

    def _compacted(self, ids: Sequence[int]) -> None:
        sm = self.table.snapshot_manager
        for sid in ids:
            assert sm.snapshot(sid).commit_kind.value == "COMPACT"
            if self.cfg.needs_lookup:
                self.model.lift()
            self.model.history[sid] = self.model.version("COMPACT")
        if self.cfg.needs_lookup:
            self.model.lift()  # ForceUpLevel0 picks every bucket with level-0 files
            assert level0_files(self.table) == [], "level-0 files left after a compaction"
        if ids:
            self._check_latest_changes()

    def _check_files(self) -> None:
        assert missing_referenced_files(self.table) == []

    def _records(self, data: st.DataObject, partitions: Sequence[str], min_size: int = 1,
                 max_size: int = 6) -> list[Rec]:
        return data.draw(records(partitions, min_size, max_size, self.cfg.deletes),
                         label="records")

    # -- writes (three rules: writes are the most frequent operation) -------------------------
    def _write(self, data: st.DataObject) -> None:
        recs = self.model.allowed(self._records(data, self.model.open_partitions()))
        ids = write(self.table, self._arrow(recs))
        kept = self._effective(recs)
        self.model.add(kept)
        self._landed(ids, "APPEND", kept)

    @rule(data=st.data())
    @counted("write (upserts/deletes)")
    def write(self, data: st.DataObject) -> None:
        self._write(data)

    @rule(data=st.data())
    @counted("write (upserts/deletes)")
    def write_more(self, data: st.DataObject) -> None:
        self._write(data)

    @rule(data=st.data())
    @counted("write (upserts/deletes)")
    def write_again(self, data: st.DataObject) -> None:
        self._write(data)

    @rule(data=st.data())
    @counted("stream write (explicit commit identifier)")
    def stream_write(self, data: st.DataObject) -> None:
        recs = self.model.allowed(self._records(data, self.model.open_partitions()))
        self.stream_ident += 1
        builder = self.table.new_stream_write_builder().with_commit_user(STREAM_USER)
        w = builder.new_write()
        w.write_arrow(self._arrow(recs))
        msgs = w.prepare_commit(self.stream_ident)
        ids = builder.new_commit().commit(msgs, self.stream_ident).snapshot_ids
        w.close()
        kept = self._effective(recs)
        self.model.add(kept)
        self._landed(ids, "APPEND", kept)
        if ids:
            self.committables[self.stream_ident] = msgs

    @precondition(lambda self: bool(self.committables))
    @rule(data=st.data())
    @counted("replay of old committables (restarted stream writer)")
    def replay_committables(self, data: st.DataObject) -> None:
        """Paimon's StoreCommitter / filterAndCommit after a restart: every committable at or
        below the user's latest committed identifier counts as committed, also once its
        snapshots expired and its files were compacted away. Expected: nothing commits, no
        file is deleted."""
        picked = sorted(data.draw(st.lists(st.sampled_from(sorted(self.committables)),
                                           min_size=1, max_size=3, unique=True),
                                  label="replayed identifiers"))
        latest, files = self.table.snapshot_manager.latest_id(), data_files(self.table)
        commit = self.table.new_stream_write_builder().with_commit_user(STREAM_USER).new_commit()
        assert commit.filter_committed(picked) == []
        assert commit.filter_and_commit({i: self.committables[i] for i in picked}) == 0
        for i in picked:
            assert commit.commit(self.committables[i], i).skipped
        assert self.table.snapshot_manager.latest_id() == latest
        assert data_files(self.table) == files

    @rule(data=st.data())
    @counted("duplicate submission (refused)")
    def write_then_submit_again(self, data: st.DataObject) -> bool | None:
        """A batch write, then the same messages committed again by a fresh commit user (a
        retried job submitting its output twice). Paimon's mergeEntries: "Trying to add file
        ... which is already added". Expected: refused, nothing committed or deleted."""
        recs = self.model.allowed(self._records(data, self.model.open_partitions()))
        wb = self.table.new_batch_write_builder()
        w = wb.new_write()
        w.write_arrow(self._arrow(recs))
        msgs = w.prepare_commit()
        ids = wb.new_commit().commit(msgs).snapshot_ids
        w.close()
        kept = self._effective(recs)
        self.model.add(kept)
        self._landed(ids, "APPEND", kept)
        latest = self.table.snapshot_manager.latest()
        live = ({e.file.file_name for e in live_entries(self.table.manifest_io(),
                                                        latest).values()} if latest else set())
        added = {f.file_name for m in msgs for f in (*m.new_files, *m.compact_after)}
        if not added & live:
            return False  # nothing of it is live (its compaction removed every row)
        files = data_files(self.table)
        try:
            self.table.new_batch_write_builder().new_commit().commit(msgs)
        except FileAlreadyAddedConflict:
            pass
        else:
            raise AssertionError("the duplicate submission was committed")
        assert self.table.snapshot_manager.latest_id() == (latest.id if latest else None)
        assert data_files(self.table) == files
        return None

    @rule(data=st.data())
    @counted("static overwrite")
    def overwrite_partition(self, data: st.DataObject) -> None:
        dt = data.draw(st.sampled_from(self.model.open_partitions()), label="partition")
        recs = self._records(data, [dt], min_size=0, max_size=4)
        self.model.tombstones -= {k for k in self.model.tombstones if k[0] == dt}
        recs = self.model.allowed(recs)
        ids = write(self.table, self._arrow(recs), overwrite={"dt": dt})
        kept = self._effective(recs)
        self.model.replace([dt], kept)
        self._landed(ids, "OVERWRITE", kept)

    @rule(data=st.data())
    @counted("dynamic overwrite")
    def overwrite_dynamic(self, data: st.DataObject) -> None:
        recs = self._records(data, self.model.open_partitions(), max_size=5)
        dts = {r.dt for r in recs}
        self.model.tombstones -= {k for k in self.model.tombstones if k[0] in dts}
        recs = self.model.allowed(recs)
        ids = write(self.table, self._arrow(recs), overwrite={})
        kept = self._effective(recs)
        self.model.replace({r.dt for r in kept}, kept)
        self._landed(ids, "OVERWRITE", kept)

    @precondition(lambda self: bool(self.model.closed))
    @rule(data=st.data())
    @counted("write into an expired partition (refused)")
    def write_expired_partition(self, data: st.DataObject) -> None:
        closed = sorted(self.model.closed)
        recs = data.draw(records(closed, deletes=False), label="records")
        overwrite = data.draw(st.sampled_from([None, {}, {"dt": recs[0].dt}]), label="overwrite")
        if overwrite:
            recs = [r for r in recs if r.dt == recs[0].dt]
        latest, files = self.table.snapshot_manager.latest_id(), data_files(self.table)
        try:
            write(self.table, self._arrow(recs), overwrite=overwrite)
        except PartitionExpiredError:
            pass
        else:
            raise AssertionError(f"a write into expired partition(s) {closed} was accepted")
        assert self.table.snapshot_manager.latest_id() == latest
        assert data_files(self.table) == files, "the refused write left data files behind"

    # -- compaction ---------------------------------------------------------------------------
    @rule(full=st.booleans())
    @counted("dedicated compaction")
    def compact(self, full: bool) -> None:
        report = self.table.compact(full=full)
        self._compacted(report.snapshot_ids)
        if full:
            self.model.full_compacted()
            OPS["  of them full"] += 1
            live = live_entries(self.table.manifest_io(), self.table.snapshot_manager.latest()) \
                if self.table.snapshot_manager.latest() else {}
            max_level = self.table.options.num_levels - 1
            assert all(e.file.level == max_level for e in live.values()), \
                "a full compaction left files below the max level"

    # -- maintenance --------------------------------------------------------------------------
    @rule(retain_min=st.integers(1, 3), extra=st.integers(0, 3), limit=st.integers(1, 8))
    @counted("expire snapshots")
    def expire_snapshots(self, retain_min: int, extra: int, limit: int) -> None:
        before = self.retained()
        expire_snapshots(self.table, dry_run=False, now=FUTURE,
                         config=ExpireConfig(retain_min, retain_min + extra, timedelta(0), limit))
        after = self.retained()
        assert after == before[len(before) - len(after):], (before, after)
        assert len(after) >= min(len(before), retain_min)
        assert len(before) - len(after) <= limit
        self._check_files()

    @rule(data=st.data())
    @counted("expire partitions")
    def expire_partitions(self, data: st.DataObject) -> None:
        open_ = self.model.open_partitions()
        # the cut-off: every partition before it expires; at least one open one stays
        choices = [i for i in range(1, len(PARTITIONS)) if any(p >= PARTITIONS[i] for p in open_)]
        i = data.draw(st.sampled_from(choices), label="cutoff partition")
        cutoff = PARTITIONS[i]
        now = datetime.fromisoformat(cutoff) + timedelta(days=EXPIRATION_DAYS)
        report = expire_partitions(self.table, now=now, dry_run=False)
        dropped = {p["dt"] for p in report.plan.expired}
        live = {k[0] for k in self.model.full}
        must = {p for p in PARTITIONS if p < cutoff and p in live}
        may = {p for p in PARTITIONS if p < cutoff}
        assert must <= dropped <= may, (must, dropped, may)
        self.model.drop(dropped)
        ids = report.snapshot_ids
        assert len(ids) == (1 if dropped else 0), ids
        for sid in ids:
            assert self.table.snapshot_manager.snapshot(sid).commit_kind.value == "OVERWRITE"
            self.model.history[sid] = self.model.version("OVERWRITE")
        self._check_files()

    @precondition(lambda self: len(self.model.tags) < len(TAG_NAMES))
    @rule(data=st.data())
    @counted("create tag")
    def create_tag(self, data: st.DataObject) -> bool | None:
        retained = self.retained()
        if not retained:
            return False
        name = data.draw(st.sampled_from([n for n in TAG_NAMES if n not in self.model.tags]),
                         label="tag")
        sid = data.draw(st.sampled_from(retained), label="snapshot")
        create_tag(self.table, name, sid)
        self.model.tags[name] = sid

    @precondition(lambda self: bool(self.model.tags))
    @rule(data=st.data())
    @counted("delete tag")
    def delete_tag(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.model.tags)), label="tag")
        delete_tag(self.table, name, dry_run=False)
        del self.model.tags[name]
        self._check_files()

    @rule(data=st.data())
    @counted("rollback")
    def rollback(self, data: st.DataObject) -> bool | None:
        retained = self.retained()
        targets: list[tuple[str, Any]] = [("snapshot", s) for s in retained[:-1]]
        targets += [("tag", n) for n, s in sorted(self.model.tags.items())
                    if not retained or s < retained[-1]]
        if self.cfg.needs_lookup and not self.cfg.write_only:
            # Not back to an APPEND / OVERWRITE snapshot whose level 0 its COMPACT lifted: an
            # inline compaction only lifts the buckets its commit writes, so the model would
            # have to know every key's bucket to say what a first-row read shows afterwards.
            targets = [(how, t) for how, t in targets
                       if self.model.history[t if how == "snapshot" else self.model.tags[t]]
                       .settled]
        if not targets:
            return False
        how, target = data.draw(st.sampled_from(targets), label="rollback target")
        sid = target if how == "snapshot" else self.model.tags[target]
        if how == "snapshot":
            rollback_to(self.table, snapshot_id=target, dry_run=False)
        else:
            rollback_to(self.table, tag=target, dry_run=False)
        self.model.rollback(sid)
        self.committables.clear()  # their snapshots may be gone: a replay would commit again
        if self._v2_id(sid) != self._v2_id(None):
            # back to files from before a drop and re-add of v2: read with the current
            # schema, their v2 is the dropped column's, which does not come back
            self.model.drop_v2()
        if sid not in retained:  # a tag's snapshot, expired: restored without its changelog
            self.model.history[sid] = replace(self.model.history[sid], changelog_gone=True)
        assert self.table.snapshot_manager.latest_id() == sid
        assert {t.name: t.snapshot_id for t in list_tags(self.table)} == self.model.tags
        self._check_files()

    # -- schema evolution ---------------------------------------------------------------------
    def _v2_id(self, sid: int | None) -> int:
        """The field id of v2 in the schema of snapshot ``sid`` (None: the current schema)."""
        t = self.table
        schema = t.schema if sid is None else t.schema_of(t.snapshot_manager.snapshot(sid)
                                                          .schema_id)
        (found,) = [f.id for f in schema.fields if f.id in self.ids["v2"]]
        return found

    @precondition(lambda self: self.table.schema.id < MAX_ALTERS)
    @rule(data=st.data())
    @counted("alter table")
    def alter(self, data: st.DataObject) -> None:
        """One ALTER between the other steps: the table is reopened at the new schema (the
        writers use the latest schema), the model's state changes only for a dropped column."""
        v1, v2 = value_names(self.table, self.ids)
        n = self.table.schema.id + 1
        kinds = ["rename v1", "rename v2"]
        if str(self.table.schema.row_type.field(v2).type) == "INT":
            kinds.append("widen v2")
        if self.cfg.changelog_producer != "lookup":
            # a lookup changelog replays from before.full, which a drop would rewrite
            kinds.append("drop and re-add v2")
        kind = data.draw(st.sampled_from(kinds), label="alter")
        changes = {
            "rename v1": [SchemaChange.rename_column(v1, f"v1_{n}")],
            "rename v2": [SchemaChange.rename_column(v2, f"v2_{n}")],
            "widen v2": [SchemaChange.update_column_type(v2, "BIGINT")],
            # the same name again: a new field id, so none of the old values may come back
            "drop and re-add v2": [SchemaChange.drop_column(v2),
                                   SchemaChange.add_column(v2, "INT")],
        }[kind]
        catalog = CatalogFactory.create({"warehouse": self.dir})
        new = catalog.alter_table(self.table.identifier, changes)
        assert new is not None and new.id == n
        self.table = catalog.get_table(self.table.identifier)
        if kind == "drop and re-add v2":
            self.ids["v2"].add(self.table.schema.row_type.field(v2).id)
            self.model.drop_v2()
        OPS[f"  alter: {kind}"] += 1

    # -- reads --------------------------------------------------------------------------------
    def _expected(self, sid: int) -> list[Row]:
        return rows(self.model.history[sid].visible(self.cfg.skips_level0))

    @rule(data=st.data())
    @counted("read a past snapshot")
    def read_snapshot(self, data: st.DataObject) -> bool | None:
        retained = self.retained()
        if not retained:
            return False
        sid = data.draw(st.sampled_from(retained), label="snapshot")
        got = self._rows(self.table.copy({"scan.snapshot-id": sid}))
        assert_rows(got, self._expected(sid), f"snapshot {sid}")

    @precondition(lambda self: bool(self.model.tags))
    @rule(data=st.data())
    @counted("read a tag")
    def read_tag(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.model.tags)), label="tag")
        got = self._rows(self.table.copy({"scan.tag-name": name}))
        assert_rows(got, self._expected(self.model.tags[name]), f"tag {name}")

    def _incremental_ranges(self, retained: list[int]) -> list[tuple[int, int]]:
        """The (start, end] ranges whose incremental read the model defines: every snapshot
        after ``start`` retained; with changelog made by compaction (``lookup``) no OVERWRITE
        inside (the lookup changelog does not describe what an overwrite replaced), no
        snapshot a rollback restored without its changelog (``Version.changelog_gone``), both
        ends settled (no record in level 0, else the changelog of those records is still to
        come). ``none`` (the APPEND snapshots' records as written) and ``input`` (the
        committed records) define every range."""
        history, producer = self.model.history, self.cfg.changelog_producer
        out = []
        for start in range(retained[0] - 1, retained[-1]):
            for end in range(start + 1, retained[-1] + 1):
                kind = history[end].kind
                if producer == "lookup" and (kind == "OVERWRITE" or history[end].changelog_gone):
                    break
                if producer == "lookup" and not (
                        history[end].settled and (start == 0 or history[start].settled)):
                    continue
                out.append((start, end))
        return out

    @rule(data=st.data())
    @counted("incremental read")
    def read_incremental(self, data: st.DataObject) -> bool | None:
        retained = self.retained()
        if not retained:
            return False
        pairs = self._incremental_ranges(retained)
        if not pairs:
            return False
        start, end = data.draw(st.sampled_from(pairs), label="(start, end]")
        self._check_incremental(start, end)
        return None

    def _check_latest_changes(self) -> None:
        """After every commit: the incremental read of the longest defined range ending at
        the latest snapshot (for ``lookup``, whose check reads each snapshot's changelog, the
        shortest), so that changelog and delta reads are checked on every table."""
        retained = self.retained()
        if not retained:
            return
        pairs = [p for p in self._incremental_ranges(retained) if p[1] == retained[-1]]
        if pairs:
            lookup = self.cfg.changelog_producer == "lookup"
            self._check_incremental(*(max(pairs) if lookup else min(pairs)))

    def _check_incremental(self, start: int, end: int) -> None:
        producer = self.cfg.changelog_producer
        between = [self.model.history[s] for s in range(start + 1, end + 1)]
        if producer in ("input", "none") and self.cfg.skips_level0:
            # Paimon's batch scan filters level 0 out of incremental reads too: the input
            # changelog and the APPEND snapshots' files are all level 0
            assert changelog_rows(self.table, start, end, self.ids) == [], (start, end)
            OPS["  incremental read: level 0 skipped (first-row, deletion vectors)"] += 1
            return
        if producer == "input":
            # the raw input of every commit that wrote data, deletes included (a batch read
            # leaves OVERWRITE snapshots' changelog out, as Paimon's changelog scan mode does)
            got = Counter(changelog_rows(self.table, start, end, self.ids))
            expected = Counter(r.as_tuple() for v in between
                               if v.kind != "OVERWRITE" and not v.changelog_gone
                               for r in v.records)
            assert got == expected, (start, end, got - expected, expected - got)
            OPS["  incremental read: input changelog == the committed records"] += 1
            return
        if producer == "none":
            # Paimon's delta read: each APPEND snapshot's records as its writer merged them
            # per key, with their kinds (a key the commit removed: a retraction, its values
            # not compared), nothing merged across snapshots
            got = Counter(_delta_record(r) for r in changelog_rows(self.table, start, end,
                                                                   self.ids))
            expected = Counter(rec for v in between if v.kind == "APPEND"
                               for rec in _commit_records(self.cfg.engine, v.records))
            assert got == expected, (start, end, got - expected, expected - got)
            OPS["  incremental read: delta == each APPEND's records merged per key"] += 1
            return
        # lookup: replaying the changelog turns one settled state into the other
        before = self.model.history[start] if start else Version(self.cfg.engine, {})
        after = self.model.history[end]
        batches: list[list[tuple[str, Key, Values]]] = []
        for sid in range(start + 1, end + 1):
            batches.append([(k, (dt, i), (v1, v2))
                            for k, dt, i, v1, v2 in changelog_rows(self.table, sid - 1, sid,
                                                                   self.ids)])
        whole = changelog_rows(self.table, start, end, self.ids)
        flat = [(k, key[0], key[1], v[0], v[1]) for b in batches for k, key, v in b]
        assert Counter(whole) == Counter(flat), "(start, end] differs from its snapshots' parts"
        replayed = changelog_replay(before.full, batches)
        assert_rows(rows(replayed), rows(after.full),
                    f"snapshot {start} + the lookup changelog of ({start}, {end}]")
        OPS["  incremental read: lookup changelog replays to the model"] += 1
        OPS["  lookup changelog rows replayed"] += len(flat)

    # -- after every step ---------------------------------------------------------------------
    @invariant()
    def reads_the_model(self) -> None:
        if self.model is None:
            return
        self.ok = False
        assert_rows(self._rows(self.table), rows(self.model.visible()), "latest snapshot")
        retained = self.retained()
        latest = max(self.model.history, default=None)
        assert (retained[-1] if retained else None) == latest, (retained, latest)
        self.ok = True

    def teardown(self) -> None:
        if self.dir is None:
            return
        if not self.ok:
            shutil.rmtree(self.dir, ignore_errors=True)
            return
        # fully compacted (no -D rows, no level 0: see test_pypaimon_reads_every_model_table)
        report = self.table.compact(full=True)
        self._compacted(report.snapshot_ids)
        self.model.full_compacted()
        expected = rows(self.model.visible())
        assert_rows(self._rows(self.table), expected, "after the final full compaction")
        OPS["final full compaction"] += 1
        # nothing leaked: every file is table metadata or reached from a snapshot or tag
        assert unreferenced_files(self.table) == set()
        if not self.cfg.paimon_readable:
            OPS["  pypaimon read skipped (remove-record-on-delete unsupported)"] += 1
            return
        PAIMON_QUEUE.append(PaimonCheck(self.dir, self.table.identifier, tuple(expected),
                                        self.cfg.describe(), value_names(self.table, self.ids)))


def release(checks: Sequence[PaimonCheck]) -> None:
    for c in checks:
        shutil.rmtree(c.warehouse, ignore_errors=True)


def cleanup_base() -> None:
    for b in _BASE:
        shutil.rmtree(Path(b), ignore_errors=True)
    _BASE.clear()


def machine_for(config: TableConfig,
                histories: list[list[tuple]] | None = None) -> type[ModelMachine]:
    """The machine on one table kind: ``create`` uses ``config`` instead of drawing one. With
    ``histories``, each finished example appends its table's history (``history.py``)."""
    from tests.model.history import table_history

    class OneKind(ModelMachine):
        @initialize(data=st.data())
        @counted("create table and write")
        def create(self, data: st.DataObject) -> None:  # type: ignore[override]
            ModelMachine.create.__wrapped__(self, config, data)  # type: ignore[attr-defined]

        def teardown(self) -> None:
            if self.model is None:
                return
            super().teardown()  # the final full compaction is part of the history
            if histories is not None:
                histories.append(table_history(self.table))

    return OneKind
