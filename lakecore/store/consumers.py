"""Reading Paimon's streaming consumers (``consumer/consumer-<id>``), which hold snapshots."""

from __future__ import annotations

import json

from lakecore.errors import CorruptFileError
from lakecore.store.file_store import FileStore
from lakecore.store.paths import CONSUMER_PREFIX


def consumer_min_next_snapshot(table: FileStore) -> int | None:
    """The smallest ``nextSnapshot`` of Paimon consumers (``consumer/consumer-<id>``): a
    streaming reader still needs that snapshot and everything after it."""
    found: list[int] = []
    for st in table.file_io.list_status(table.paths.consumer_dir):
        if st.is_dir or not st.path.rsplit("/", 1)[-1].startswith(CONSUMER_PREFIX):
            continue
        try:
            value = json.loads(table.file_io.read_text(st.path)).get("nextSnapshot")
        except (CorruptFileError, ValueError, AttributeError):
            continue
        if isinstance(value, int):
            found.append(value)
    return min(found) if found else None
