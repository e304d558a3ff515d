"""A committer process for fault tests: ``python -m tests.faults.committer <json args>``.

Writes ``rows`` ({"id": [...], "v": [...]}) as commit user ``user`` with commit identifier
``identifier`` through a catalog made from ``catalog`` options, as a job rerun would: if the
(user, identifier) pair is already committed, its freshly written files are aborted. Prints
``{"snapshot_ids": [...], "skipped": bool}``. Crash points come from LAKECORE_FAULT_CRASH_AT.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def main(args: dict[str, Any]) -> dict[str, Any]:
    import pyarrow as pa

    from lakecore import CatalogFactory

    catalog = CatalogFactory.create(args["catalog"])
    table = catalog.get_table(args["table"])
    builder = table.new_stream_write_builder().with_commit_user(args["user"])
    write = builder.new_write()
    write.write_arrow(pa.table(args["rows"]))
    messages = write.prepare_commit(args["identifier"])
    commit = builder.new_commit()
    result = commit.commit(messages, args["identifier"])
    if result.skipped:
        commit.abort(messages)
    write.close()
    catalog.close()
    return {"snapshot_ids": list(result.snapshot_ids), "skipped": result.skipped}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
