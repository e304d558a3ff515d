"""Child processes of the multi-process model test (forked from the test, so they start with
everything imported; each builds its own catalog and lock after the fork).

* ``writer``: ``rounds`` commits to each of two tables through a long-lived stream writer with
  its own commit user (identifiers 1..rounds), logging every committed batch as a JSON line.
  ``dedup`` keys are the writer's own (id % writers == index), so each key's history is one
  writer's commit order; ``agg`` keys are shared by every writer (sum and max do not depend on
  the order of commits).
* ``compactor``: dedicated compactions (some full) of both tables until the stop file
  appears, then a last full compaction of each. With writers that compact inline, a
  dedicated compaction can lose to one of them (a conflict): counted as lost.
"""

from __future__ import annotations

import json
import os
import random
import time
from typing import Any

from tests.model.model import PARTITIONS, Rec, to_arrow

TABLES = ("db.dedup", "db.agg")
DTS = PARTITIONS[:2]
SHARED_IDS = 6  # agg keys: 0..5 in both partitions, written by every writer
OWN_IDS = 5  # dedup keys per writer


def batch(rng: random.Random, table: str, index: int, writers: int, rnd: int) -> list[Rec]:
    """One commit's records for ``table`` (deterministic in ``rng``)."""
    out = []
    for _ in range(rng.randint(1, 6)):
        dt = rng.choice(DTS)
        if table == "db.dedup":
            key = rng.randrange(OWN_IDS) * writers + index
            if rng.random() < 0.25:
                out.append(Rec("-D", key, dt))
            else:
                v2 = None if rng.random() < 0.2 else rng.randrange(100)
                out.append(Rec("+I", key, dt, rnd * 1000 + rng.randrange(1000), v2))
        else:
            v1 = None if rng.random() < 0.1 else rng.randrange(10)
            out.append(Rec("+I", rng.randrange(SHARED_IDS), dt, v1, rng.randrange(100)))
    return out


def writer(args: dict[str, Any]) -> None:
    from lakecore import CatalogFactory
    from lakecore.errors import CommitTimeoutError

    catalog = CatalogFactory.create(args["catalog"])
    rng = random.Random(f"{args['seed']}-{args['index']}")
    streams = {}
    for name in TABLES:
        builder = catalog.get_table(name).new_stream_write_builder().with_commit_user(
            f"writer-{args['index']}")
        streams[name] = (builder.new_write(), builder.new_commit())
    retries = 0
    with open(args["log"], "w", encoding="utf-8") as log:
        for ident in range(1, args["rounds"] + 1):
            for name in TABLES:
                write, commit = streams[name]
                recs = batch(rng, name, args["index"], args["writers"], ident)
                write.write_arrow(to_arrow(recs))
                messages = write.prepare_commit(ident)
                while True:
                    try:
                        commit.commit(messages, ident)
                        break
                    except CommitTimeoutError:  # lost the race too often: same identifier
                        retries += 1
                log.write(json.dumps({"table": name, "ident": ident,
                                      "records": [r.as_tuple() for r in recs]}) + "\n")
                log.flush()
            time.sleep(0.05)  # two cores: leave the compactor some room between rounds
    for write, _ in streams.values():
        write.close()
    print(json.dumps({"retries": retries}))
    catalog.close()


def compactor(args: dict[str, Any]) -> None:
    from lakecore import CatalogFactory
    from lakecore.errors import CommitConflictError, CommitTimeoutError

    catalog = CatalogFactory.create(args["catalog"])
    rng = random.Random(f"{args['seed']}-compactor")
    done = {"full": 0, "universal": 0, "lost": 0, "nothing to do": 0}
    while not os.path.exists(args["stop"]):
        name = rng.choice(TABLES)
        full = rng.random() < 0.5
        try:
            report = catalog.get_table(name).compact(full=full)
            done["full" if full else "universal"] += 1 if report.snapshot_ids else 0
            done["nothing to do"] += 0 if report.snapshot_ids else 1
        except (CommitTimeoutError, CommitConflictError):
            # every attempt lost the race, or a writer's inline compaction replaced the files
            # it compacted (writers that are not write-only); the job deleted its files
            done["lost"] += 1
        time.sleep(0.02)
    for name in TABLES:
        catalog.get_table(name).compact(full=True)
    with open(args["out"], "w", encoding="utf-8") as f:
        json.dump(done, f)
    catalog.close()
