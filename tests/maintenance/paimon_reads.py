"""Runs in .venv-paimon: read several (table, snapshot id | tag) with pypaimon in one process.

argv[1] is a JSON file: a list of {"warehouse", "table", "snapshot_id"?, "tag"?, "out"}. Each
read goes to its Arrow IPC file ``out``; stdout gets the row counts as JSON.
"""

import json
import sys

import pyarrow as pa
from pypaimon import CatalogFactory


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as f:
        requests = json.load(f)
    counts = []
    for r in requests:
        table = CatalogFactory.create({"warehouse": r["warehouse"]}).get_table(r["table"])
        if r.get("tag") is not None:
            table = table.copy({"scan.tag-name": r["tag"]})
        elif r.get("snapshot_id") is not None:
            table = table.copy({"scan.snapshot-id": str(r["snapshot_id"])})
        builder = table.new_read_builder()
        result = builder.new_read().to_arrow(builder.new_scan().plan().splits())
        with pa.OSFile(r["out"], "wb") as sink, pa.ipc.new_file(sink, result.schema) as w:
            w.write_table(result)
        counts.append(result.num_rows)
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
