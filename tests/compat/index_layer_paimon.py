"""pypaimon operations the index-layer tests need beyond ``paimon_driver.py``; runs under
``.venv-paimon`` (pypaimon, pyarrow < 20 and the standard library only).

``python index_layer_paimon.py delete-where-id-in '{"warehouse": W, "table": "db.t",
"ids": [2, 7]}'`` deletes rows of a data-evolution table with ``deletion-vectors.enabled``
through pypaimon's ``delete_by_predicate``: pypaimon writes a deletion-vector index file and a
new index manifest. Prints ``{"snapshot_id": N, "index_manifest": name}``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pypaimon import CatalogFactory


def delete_where_id_in(args: dict[str, Any]) -> dict[str, Any]:
    table = CatalogFactory.create({"warehouse": args["warehouse"]}).get_table(args["table"])
    builder = table.new_batch_write_builder()
    update = builder.new_update()
    predicates = update.new_predicate_builder()
    messages = update.delete_by_predicate(predicates.is_in("id", list(args["ids"])))
    commit = builder.new_commit()
    try:
        commit.commit(messages)
    finally:
        commit.close()
    snapshot = table.snapshot_manager().get_latest_snapshot()
    return {"snapshot_id": snapshot.id, "index_manifest": snapshot.index_manifest}


COMMANDS = {"delete-where-id-in": delete_where_id_in}

if __name__ == "__main__":
    result = COMMANDS[sys.argv[1]](json.loads(sys.argv[2]))
    sys.stdout.write(json.dumps(result) + "\n")
