"""One history: Java Paimon and lakecore take turns on ONE table, chosen at random.

Each run is a seeded random sequence of steps on one table, each step done by Java Paimon 1.4.2
(the oracle JVM) or by lakecore:

* writes: upserts and deletes (``rowkind.field``: the ``rk`` column gives each row its kind),
  a key possibly several times in one commit;
* compactions: lakecore's universal pick and full compaction, Java's full and non-full;
* schema changes: add a column, rename a column, widen INT to BIGINT;
* tags at the latest snapshot; snapshot expiry (retain the last 1..3, tags kept).

After every step lakecore's read == Java's read == the rows of a Python dict model kept by
this test (last record of a key wins, -D removes it). On the changelog-producer=lookup table,
every write's changelog (Java's and lakecore's incremental read of the new snapshots) is the
model's: +I for a new key, -U/+U for a changed one, -D for a removed one. After an expiry and
at the end every tag reads as the model read when it was made (in the tag's schema), and no
file a snapshot or tag references is missing. At the end Java writes once more and compacts,
and both still agree.

Profiles (``LAKECORE_MODEL_PROFILE``): ``fast`` (CI) runs each table kind once with a fixed
seed and STEPS steps; ``soak`` (``make soak``) runs SEEDS random seeds per kind, many more
steps. A failure names its seed; ``LAKECORE_ONE_HISTORY_SEED=<seed>`` (with ``-k <kind>``)
replays it, ``LAKECORE_ONE_HISTORY_STEPS=<n>`` sets the number of steps.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest

from lakecore import SchemaChange
from lakecore.maintenance import ExpireConfig
from tests.javapaimon.client import JavaPaimon
from tests.javapaimon.test_lakecore_to_java import (
    Lake,
    canon,
    java_changes,
    java_write,
    lc_changes,
    same,
)

PROFILE = os.environ.get("LAKECORE_MODEL_PROFILE", "fast")
SOAK = PROFILE == "soak"
STEPS = int(os.environ.get("LAKECORE_ONE_HISTORY_STEPS", "120" if SOAK else "15"))
SEEDS = 10 if SOAK else 1  # per table kind
ENV_SEED = os.environ.get("LAKECORE_ONE_HISTORY_SEED")
KEYS = 16  # ids 0..KEYS-1: small, so that upserts and deletes hit existing keys

Row = tuple[Any, ...]


@dataclass(frozen=True)
class Kind:
    options: dict[str, str]
    partitioned: bool = False
    changelog: bool = False  # changelog-producer=lookup: check every write's changelog


KINDS = {
    "fixed-buckets": Kind({"bucket": "2"}),
    "deletion-vectors": Kind({"bucket": "2", "deletion-vectors.enabled": "true"}),
    "partitioned": Kind({"bucket": "2"}, partitioned=True),
    "lookup-changelog": Kind({"bucket": "2", "changelog-producer": "lookup"}, changelog=True),
    "dynamic-bucket": Kind({"bucket": "-1", "dynamic-bucket.target-row-num": "6"}),
}


def _cases() -> list[Any]:
    if ENV_SEED is not None:
        return [pytest.param(k, int(ENV_SEED), id=f"{k}-{ENV_SEED}") for k in KINDS]
    if SOAK:
        rng = random.Random()
        return [pytest.param(k, rng.randrange(2**32), id=f"{k}-soak{i}")
                for k in KINDS for i in range(SEEDS)]
    return [pytest.param(k, 35_000 + i, id=f"{k}-{35_000 + i}") for i, k in enumerate(KINDS)]


@dataclass
class Model:
    """The expected table: columns in order (name -> Paimon type), rows by key."""

    partitioned: bool
    columns: dict[str, str] = field(default_factory=dict)
    rows: dict[Row, dict[str, Any]] = field(default_factory=dict)
    tags: dict[str, tuple[list[str], list[Row]]] = field(default_factory=dict)

    def key(self, row: dict[str, Any]) -> Row:
        return (row["id"], row["p"]) if self.partitioned else (row["id"],)

    def expected(self) -> list[Row]:
        return canon(tuple(r[c] for c in self.columns) for r in self.rows.values())

    def apply(self, batch: list[dict[str, Any]]) -> None:
        for r in batch:
            if r["rk"] == "-D":
                self.rows.pop(self.key(r), None)
            else:
                self.rows[self.key(r)] = dict(r)


class History:
    """One seeded run on one table (``db.t`` in the ``lake`` warehouse)."""

    def __init__(self, jp: JavaPaimon, lake: Lake, kind: Kind, seed: int) -> None:
        self.jp, self.lake, self.kind = jp, lake, kind
        self.rng = random.Random(seed)
        self.model = Model(kind.partitioned)
        self.log: list[str] = []
        self.serial = 0  # names of columns and tags, values written
        # columns and rows of the model when a snapshot was the latest after a step
        self.snapshots: dict[int, tuple[list[str], list[Row]]] = {}

    # -- the table -------------------------------------------------------------------------
    def create(self) -> None:
        cols = [pa.field("id", pa.int64(), nullable=False)]
        if self.kind.partitioned:
            cols.append(pa.field("p", pa.string(), nullable=False))
        cols += [pa.field("v", pa.string()), pa.field("n", pa.int32()), pa.field("rk", pa.string())]
        pk = ("id", "p") if self.kind.partitioned else ("id",)
        part = ("p",) if self.kind.partitioned else None
        self.lake.create("t", pa.schema(cols), pk=pk, part=part,
                         **{"rowkind.field": "rk", **self.kind.options})
        self.model.columns = {f.name: "BIGINT" if f.name == "id" else
                              "INT" if f.name == "n" else "STRING" for f in cols}

    def side(self) -> str:
        return self.rng.choice(["java", "lakecore"])

    def next(self) -> int:
        self.serial += 1
        return self.serial

    def value(self, type_: str) -> Any:
        if self.rng.random() < 0.15:
            return None
        if type_ == "STRING":
            return f"s{self.next()}"
        return self.rng.randrange(-1000, 1000)

    def latest(self) -> int | None:
        return self.jp.call("snapshots", **self.lake.at("t"))["latest"]

    # -- the steps -------------------------------------------------------------------------
    def write(self, side: str | None = None) -> None:
        side = side or self.side()
        batch = []
        for _ in range(self.rng.randint(1, 6)):
            row: dict[str, Any] = {"id": self.rng.randrange(KEYS)}
            if self.kind.partitioned:
                row["p"] = self.rng.choice(["a", "b"])
            present = self.model.key(row) in self.model.rows
            delete = self.rng.random() < (0.3 if present else 0.05)
            for name, type_ in self.model.columns.items():
                if name not in ("id", "p", "rk"):
                    row[name] = self.value(type_)
            row["rk"] = "-D" if delete else "+U" if present else "+I"
            batch.append(row)
        self.log.append(f"{side} write {[tuple(r.values()) for r in batch]}")
        before = dict(self.model.rows)
        start = self.latest()
        positional = [tuple(r[c] for c in self.model.columns) for r in batch]
        if side == "java":
            java_write(self.jp, self.lake, "t", positional)
        else:
            self.lake.write("t", positional)
        self.model.apply(batch)
        if self.kind.changelog and start is not None:
            self.check_changelog({self.model.key(r) for r in batch}, before, start)

    def compact(self) -> None:
        side, full = self.side(), self.rng.random() < 0.5
        self.log.append(f"{side} compact full={full}")
        if side == "java":
            self.jp.call("compact", **self.lake.at("t"), full=full)
        else:
            self.lake.compact("t", full=full)

    def alter(self) -> None:
        side = self.side()
        values = [c for c in self.model.columns if c not in ("id", "p", "rk")]
        ints = [c for c, t in self.model.columns.items() if t == "INT"]
        what = self.rng.choice(["add", "rename"] + (["widen"] if ints else []))
        cols = self.model.columns
        if what == "add":
            name, type_ = f"c{self.next()}", self.rng.choice(["INT", "STRING"])
            java = {"add_column": {"name": name, "type": type_}}
            ours = SchemaChange.add_column(name, type_)
            cols[name] = type_
            for r in self.model.rows.values():
                r[name] = None
        elif what == "rename":
            old, new = self.rng.choice(values), f"r{self.next()}"
            java = {"rename_column": {"from": old, "to": new}}
            ours = SchemaChange.rename_column(old, new)
            self.model.columns = {new if c == old else c: t for c, t in cols.items()}
            for r in self.model.rows.values():
                r[new] = r.pop(old)
        else:
            name = self.rng.choice(ints)
            java = {"update_column_type": {"name": name, "type": "BIGINT"}}
            ours = SchemaChange.update_column_type(name, "BIGINT")
            cols[name] = "BIGINT"
        self.log.append(f"{side} alter {java}")
        if side == "java":
            self.jp.call("alter", **self.lake.at("t"), changes=[java])
        else:
            self.lake.catalog.alter_table("db.t", [ours])

    def tag(self) -> None:
        side, name = self.side(), f"tag{self.next()}"
        self.log.append(f"{side} tag {name}")
        if side == "java":
            self.jp.call("create_tag", **self.lake.at("t"), name=name)
        else:
            self.lake.table("t").create_tag(name)
        self.model.tags[name] = self.snapshots[self.latest()]  # the latest, as it was made

    def expire(self) -> None:
        side, keep = self.side(), self.rng.randint(1, 3)
        self.log.append(f"{side} expire retain_max={keep}")
        if side == "java":
            self.jp.call("expire_snapshots", **self.lake.at("t"), retain_max=keep, retain_min=1,
                         older_than_ms=3_600_000)
        else:
            self.lake.table("t").expire_snapshots(dry_run=False, config=ExpireConfig(
                retain_min=1, retain_max=keep, time_retained=timedelta(hours=1)))
        self.check_tags()

    # -- the checks ------------------------------------------------------------------------
    def check(self) -> None:
        """lakecore's read == Java's read == the model."""
        same(self.jp, self.lake, "t", self.model.expected())
        latest = self.latest()
        if latest is not None and latest not in self.snapshots:
            # a snapshot is read in its own schema: the columns when it was made
            self.snapshots[latest] = (list(self.model.columns), self.model.expected())

    def check_tags(self) -> None:
        """Every tag reads as the model did when it was made, in its schema; every snapshot
        left reads the same in both (as the model did if it was the latest after a step): no
        expiry deleted a file either side still needs."""
        for name, (columns, rows) in self.model.tags.items():
            answer = same(self.jp, self.lake, "t", rows, tag=name)
            assert answer["fields"] == columns, f"tag {name}: {answer['fields']} != {columns}"
        for s in self.jp.call("snapshots", **self.lake.at("t"))["snapshots"]:
            columns, rows = self.snapshots.get(s["id"], (None, None))
            answer = same(self.jp, self.lake, "t", rows, snapshot_id=s["id"])
            assert columns is None or answer["fields"] == columns

    def check_changelog(self, keys: set[Row], before: dict[Row, dict[str, Any]],
                        start: int) -> None:
        """The changelog of the snapshots the write made, as the model says."""
        cols, after = list(self.model.columns), self.model.rows
        expected = []
        for key in keys:
            old, new = before.get(key), after.get(key)
            if old is not None and new is not None:
                expected += [("-U", tuple(old[c] for c in cols)),
                             ("+U", tuple(new[c] for c in cols))]
            elif new is not None:
                expected.append(("+I", tuple(new[c] for c in cols)))
            elif old is not None:
                expected.append(("-D", tuple(old[c] for c in cols)))
        end = self.latest()
        ours = lc_changes(self.lake, "t", start, end)
        assert ours == sorted(expected, key=repr), f"lakecore's changelog of ({start}, {end}]"
        assert java_changes(self.jp, self.lake, "t", start, end) == ours, (
            f"Java's changelog of ({start}, {end}]")

    def run(self, steps: int) -> None:
        self.create()
        self.write()
        self.check()
        moves: list[tuple[Callable[[], None], float]] = [
            (self.write, 5), (self.compact, 2), (self.alter, 1), (self.tag, 1),
            (self.expire, 1)]
        for _ in range(steps):
            step = self.rng.choices([m for m, _ in moves], [w for _, w in moves])[0]
            step()
            self.check()
        self.check_tags()
        # Java can still write to it (and compact it), and both still agree
        self.write("java")
        self.check()
        self.log.append("java compact full=True")
        self.jp.call("compact", **self.lake.at("t"), full=True)
        self.check()


@pytest.mark.slow  # 5-20 s each (the first warms the JVM up)
@pytest.mark.parametrize(("kind", "seed"), _cases())
def test_one_history(java_paimon: JavaPaimon, lake: Lake, kind: str, seed: int) -> None:
    history = History(java_paimon, lake, KINDS[kind], seed)
    try:
        history.run(STEPS)
    except Exception as e:
        steps = "\n".join(f"  {i}. {s}" for i, s in enumerate(history.log, 1))
        raise AssertionError(
            f"one history of a {kind} table failed after step {len(history.log)}; replay: "
            f"LAKECORE_ONE_HISTORY_SEED={seed} pytest {__file__} -k {kind}\n{steps}") from e


@pytest.fixture
def lake(tmp_path: Any) -> Lake:
    return Lake(tmp_path / "wh")
