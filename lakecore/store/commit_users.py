"""The commit-user index: makes the idempotence lookup independent of the table's history.

"Is (commit user U, identifier I) already committed?" means finding a snapshot by U. Paimon
answers it by walking snapshots backwards until it meets one by U; for a user that never
committed (one commit user per Airflow run) that is every snapshot back to the earliest.

Before U publishes a snapshot it makes sure a marker
``<table>/_lakecore/commit-users/commit-user-<sha256(U)>`` exists whose ``afterSnapshotId`` is
at most the id the snapshot is built on. Every snapshot by U therefore has an id greater than
its marker's ``afterSnapshotId``, and:

* no marker: U has never tried to publish; nothing to walk;
* a marker: only snapshots after ``afterSnapshotId`` can be U's (the walk is bounded by the
  commits since U's first attempt, not by the table's age).

After each snapshot it publishes, U records the commit identifier and the snapshot's id in
the marker too (``latestIdentifier``, ``latestSnapshotId``). Paimon's ``filterCommitted``
counts every identifier at or below a user's latest committed one as committed, and finds
that one by walking the snapshots; once U's snapshots have expired the walk finds nothing.
The marker still knows it, so a restarted writer replaying old committables commits
nothing. A crash between the snapshot and the marker update leaves the older value (the
snapshot itself answers until it expires). A record whose snapshot was rolled back (its id
is above the latest, or snapshot-N is now another commit) is ignored: the rerun commits
again, as in Paimon. When the marker is gone too (orphan removal, below), the commit falls
back to Paimon's own checks: a committable whose files no longer exist, or are already
live, is refused and changes nothing.

A rollback below ``afterSnapshotId`` is handled by U itself: its next publish lowers the
marker first. Markers of users with no snapshot left are removed by ``remove_orphan_files``
once older than its age cut-off. Tables without the directory (written before it existed, or
only by other engines) fall back to the full walk. Paimon's readers ignore ``_lakecore/``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from lakecore.errors import CorruptFileError
from lakecore.store.file_io import FileIO
from lakecore.store.paths import COMMIT_USER_PREFIX, PathFactory

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Marker:
    """One commit user's marker: the snapshot id every snapshot of the user comes after."""

    commit_user: str
    after_snapshot_id: int  # every snapshot by the user has a greater id
    latest_identifier: int | None = None  # the user's latest committed identifier, if known
    latest_snapshot_id: int | None = None  # the snapshot that committed it


class CommitUserIndex:
    """The commit-user markers of one table: read, create or lower, and list them."""

    def __init__(self, file_io: FileIO, paths: PathFactory | str) -> None:
        """``paths``: the table's path factory (or its path, for callers without one)."""
        self.file_io = file_io
        self.paths = paths if isinstance(paths, PathFactory) else PathFactory(paths)
        self.dir = self.paths.commit_user_dir

    def path(self, commit_user: str) -> str:
        return self.paths.commit_user_path(commit_user)

    def enabled(self) -> bool:
        """False for tables whose users were never indexed: lookups must walk everything."""
        return self.file_io.exists(self.dir)

    def read(self, commit_user: str) -> Marker | None:
        path = self.path(commit_user)
        try:
            raw = self.file_io.read_bytes(path)
        except CorruptFileError:  # read_bytes raises it only for a missing file
            return None
        try:
            return parse(raw, path)
        except CorruptFileError as e:
            # cannot say since when: every snapshot may be the user's (a full walk), which is
            # slow but never wrong; the marker stays as it is
            log.warning("%s; the idempotence lookup walks the whole history", e)
            return Marker(commit_user, 0)

    def ensure(self, commit_user: str, base_snapshot_id: int) -> None:
        """Called before publishing a snapshot built on ``base_snapshot_id`` (0: empty)."""
        marker = self.read(commit_user)
        if marker is not None and marker.after_snapshot_id <= base_snapshot_id:
            return
        if marker is None:
            self._write(Marker(commit_user, base_snapshot_id))
        else:
            self._write(Marker(commit_user, base_snapshot_id, marker.latest_identifier,
                               marker.latest_snapshot_id))

    def record(self, commit_user: str, identifier: int, snapshot_id: int) -> None:
        """Called after snapshot ``snapshot_id`` by ``commit_user`` with ``identifier`` was
        published: the marker remembers it beyond the snapshots' expiry."""
        marker = self.read(commit_user)
        if marker is None:
            return  # ensure() runs before every publish; nothing to extend
        if (marker.latest_identifier, marker.latest_snapshot_id) == (identifier, snapshot_id):
            return
        self._write(Marker(commit_user, marker.after_snapshot_id, identifier, snapshot_id))

    def _write(self, marker: Marker) -> None:
        body: dict[str, object] = {"commitUser": marker.commit_user,
                                   "afterSnapshotId": marker.after_snapshot_id}
        if marker.latest_identifier is not None:
            body["latestIdentifier"] = marker.latest_identifier
            body["latestSnapshotId"] = marker.latest_snapshot_id
        self.file_io.overwrite_atomic(self.path(marker.commit_user),
                                      json.dumps(body).encode("utf-8"))

    def markers(self) -> list[tuple[str, int | None, Marker]]:
        """(path, mtime millis, marker) of every marker, for garbage collection."""
        out = []
        for st in self.file_io.list_status(self.dir):
            name = st.path.rsplit("/", 1)[-1]
            if st.is_dir or not name.startswith(COMMIT_USER_PREFIX):
                continue
            try:
                marker = parse(self.file_io.read_bytes(st.path), st.path)
            except CorruptFileError:
                continue  # gone meanwhile, or torn: keep it, it costs nothing
            out.append((st.path, st.mtime_millis, marker))
        return out


def parse(raw: bytes, path: str) -> Marker:
    try:
        body = json.loads(raw)
        latest, sid = body.get("latestIdentifier"), body.get("latestSnapshotId")
        if latest is None or sid is None:
            latest = sid = None
        return Marker(str(body["commitUser"]), int(body["afterSnapshotId"]),
                      None if latest is None else int(latest), None if sid is None else int(sid))
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptFileError(path, f"commit-user marker is corrupt: {e}") from e
