"""Reading tags: ``tag/tag-<name>`` holds the tagged snapshot's JSON (as Paimon writes it).

Scans (``scan.tag-name``, ``incremental-between``) and maintenance both read tags from here;
creating and deleting tags is maintenance's (``lakecore.maintenance.tags``).
"""

from __future__ import annotations

from collections.abc import Iterable

from lakecore.errors import CorruptFileError, MaintenanceError, TagNotExistError
from lakecore.format.snapshot import Snapshot
from lakecore.store.file_store import FileStore
from lakecore.store.paths import TAG_PREFIX


def check_tag_name(name: str) -> None:
    """Refuse a name that is blank, ``.``/``..``, or holds a path separator or control
    characters (a tag name becomes a file name)."""
    bad = (not name or not name.strip() or name in (".", "..") or "/" in name or "\\" in name
           or any(ord(c) < 32 for c in name))
    if bad:
        raise MaintenanceError(f"invalid tag name {name!r}: blank, a path separator, '.'/'..' "
                               "or control characters")


def read_tags(table: FileStore) -> list[tuple[str, Snapshot]]:
    """Every tag as (name, snapshot), ordered by snapshot id then name."""
    out: list[tuple[str, Snapshot]] = []
    for st in table.file_io.list_status(table.paths.tag_dir):
        name = st.path.rsplit("/", 1)[-1]
        if st.is_dir or not name.startswith(TAG_PREFIX):
            continue
        try:
            snap = Snapshot.from_json(table.file_io.read_text(st.path), st.path)
        except CorruptFileError:
            if table.file_io.exists(st.path):
                raise
            continue  # deleted while we listed
        out.append((name[len(TAG_PREFIX):], snap))
    out.sort(key=lambda t: (t[1].id, t[0]))
    return out


def tagged_snapshots(tags: Iterable[tuple[str, Snapshot]]) -> list[Snapshot]:
    """One snapshot per tagged id, ascending."""
    by_id: dict[int, Snapshot] = {}
    for _, snap in tags:
        by_id.setdefault(snap.id, snap)
    return [by_id[i] for i in sorted(by_id)]


def tag_snapshot(table: FileStore, name: str) -> Snapshot:
    """The snapshot a tag pins (its files are kept even after the snapshot expired)."""
    check_tag_name(name)
    path = table.paths.tag_path(name)
    try:
        return Snapshot.from_json(table.file_io.read_text(path), path)
    except CorruptFileError:
        if not table.file_io.exists(path):
            raise TagNotExistError(f"tag {name!r} does not exist in {table.identifier}") from None
        raise


def scan_tag_snapshot(table: FileStore) -> Snapshot | None:
    """For ``TableScan``: the snapshot named by ``scan.tag-name``, or None when unset."""
    name = table.options.scan_tag_name
    return None if name is None else tag_snapshot(table, name)
