"""Child processes for the lock tests: ``python -m tests.lock.workers <command> <json args>``.

* ``counter``: N times, under the lock, read an integer from a file, pause, write it + 1.
* ``hold``: take the lock, write a marker file, then sleep until killed.
* ``commit``: N small APPEND commits to a table through a catalog with the lock options.
* ``upsert``: N commits of a primary-key table with default options (inline compaction);
  with ``go``, it writes ``<go>.<user>`` once the table is open and waits for ``go``
  to exist before the first commit; with ``pause_after`` (an identifier), that commit waits
  until the file ``until`` exists.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any


def counter(args: dict[str, Any]) -> None:
    from lakecore.lock import SqlCatalogLock

    lock = SqlCatalogLock(args["url"], catalog_key=args["key"],
                          check_max_sleep=timedelta(milliseconds=50))
    path = Path(args["file"])

    def bump() -> None:
        value = int(path.read_text() or "0")
        time.sleep(0.002)  # widen the race a missing lock would lose
        path.write_text(str(value + 1))

    for _ in range(args["n"]):
        lock.run_with_lock("db", "t", bump)
    lock.close()


def hold(args: dict[str, Any]) -> None:
    from lakecore.lock import SqlCatalogLock

    lock = SqlCatalogLock(args["url"], catalog_key=args["key"],
                          expire=timedelta(seconds=args["expire"]))

    def forever() -> None:
        Path(args["marker"]).write_text("held")
        while True:
            time.sleep(60)

    lock.run_with_lock("db", "t", forever)


def commit(args: dict[str, Any]) -> None:
    import pyarrow as pa

    from lakecore import CatalogFactory
    from lakecore.errors import CommitTimeoutError

    catalog = CatalogFactory.create(args["catalog"])
    table = catalog.get_table(args["table"])
    builder = table.new_stream_write_builder().with_commit_user(args["user"])
    commit = builder.new_commit()
    base, retries = args["base"], 0
    for ident in range(1, args["n"] + 1):
        write = builder.new_write()
        ids = [base + ident * 10 + k for k in range(args["rows"])]
        write.write_arrow(pa.table({"id": pa.array(ids, pa.int64()),
                                    "writer": pa.array([args["user"]] * len(ids))}))
        messages = write.prepare_commit(ident)
        while True:
            try:
                commit.commit(messages, ident)
                break
            except CommitTimeoutError:  # lost the race too often: retry, same identifier
                retries += 1
        write.close()
    print(json.dumps({"user": args["user"], "retries": retries}))
    catalog.close()


def upsert(args: dict[str, Any]) -> None:
    """N commits of a primary-key table with its default options (not write-only: each
    writer compacts inline) as one commit user; each commit returns, or the process fails.
    A compaction that lost the race is dropped by the commit (``compaction_dropped``)."""
    import pyarrow as pa

    from lakecore import CatalogFactory
    from lakecore.errors import CommitTimeoutError

    catalog = CatalogFactory.create(args["catalog"])
    table = catalog.get_table(args["table"])
    builder = table.new_stream_write_builder().with_commit_user(args["user"])
    commit = builder.new_commit()
    base, retries, dropped = args["base"], 0, 0
    go = args.get("go")  # start together: say "ready" (table open), wait for this file
    if go is not None:
        Path(f"{go}.{args['user']}").write_text("ready")
        while not Path(go).exists():
            time.sleep(0.01)
    for ident in range(1, args["n"] + 1):
        write = builder.new_write()
        ids = [base + ident * 10 + k for k in range(args["rows"])]
        write.write_arrow(pa.table({"id": pa.array(ids, pa.int64()),
                                    "writer": pa.array([args["user"]] * len(ids))}))
        messages = write.prepare_commit(ident)
        if ident == args.get("pause_after"):  # let another writer in: wait for this file
            while not Path(args["until"]).exists():
                time.sleep(0.01)
        while True:
            try:
                result = commit.commit(messages, ident)
                dropped += result.compaction_dropped
                break
            except CommitTimeoutError:  # lost the race too often: retry, same identifier
                retries += 1
        write.close()
    Path(args["report"]).write_text(json.dumps({"retries": retries, "dropped": dropped}))
    catalog.close()


if __name__ == "__main__":
    COMMANDS = {"counter": counter, "hold": hold, "commit": commit, "upsert": upsert}
    COMMANDS[sys.argv[1]](json.loads(sys.argv[2]))
