"""Finding, reading and creating snapshots; LATEST/EARLIEST are hints, listing is the truth."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pyarrow.fs as pafs

from lakecore.errors import CorruptFileError, SnapshotNotExistError
from lakecore.format.snapshot import Snapshot
from lakecore.store.file_io import FileIO
from lakecore.store.paths import SNAPSHOT_PREFIX, PathFactory
from lakecore.utils.faults import CrashStep, IOFaultStep, maybe_crash, maybe_io_error

_SNAPSHOT_FILE = re.compile(rf"^{SNAPSHOT_PREFIX}(\d+)$")
_CACHE_SIZE = 4096


class SnapshotManager:
    """Finds, reads and creates a table's snapshot files and their hints."""

    def __init__(self, file_io: FileIO, paths: PathFactory) -> None:
        self.file_io = file_io
        self.paths = paths
        self._cache: dict[tuple[int, int | None, int | None], Snapshot] = {}

    # -- ids -----------------------------------------------------------------------------
    def list_ids(self) -> list[int]:
        ids = []
        for st in self.file_io.list_status(self.paths.snapshot_dir):
            m = _SNAPSHOT_FILE.match(st.path.rsplit("/", 1)[-1])
            if m and not st.is_dir:
                ids.append(int(m.group(1)))
        return sorted(ids)

    def _read_hint(self, path: str) -> int | None:
        try:
            text = self.file_io.read_text(path).strip()
            return int(text)
        except (CorruptFileError, ValueError):
            return None

    def _exists(self, snapshot_id: int) -> bool:
        return self.file_io.exists(self.paths.snapshot_path(snapshot_id))

    def latest_id(self) -> int | None:
        """The newest snapshot id. Trusts LATEST only if that file exists and no newer one does."""
        hint = self._read_hint(self.paths.latest_hint)
        if hint is not None and hint > 0 and self._exists(hint):
            nxt = hint + 1
            while self._exists(nxt):
                nxt += 1
            return nxt - 1
        ids = self.list_ids()
        return ids[-1] if ids else None

    def earliest_id(self) -> int | None:
        hint = self._read_hint(self.paths.earliest_hint)
        if hint is not None and hint > 0 and self._exists(hint):
            prev = hint - 1
            while prev > 0 and self._exists(prev):
                prev -= 1
            return prev + 1
        ids = self.list_ids()
        return ids[0] if ids else None

    # -- snapshots -----------------------------------------------------------------------
    def snapshot(self, snapshot_id: int) -> Snapshot:
        """Snapshot files never change once created, so parsed ones are kept (by id) while
        the file exists; a file deleted by expiry or rollback is noticed by the stat."""
        path = self.paths.snapshot_path(snapshot_id)
        info = self.file_io.fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise SnapshotNotExistError(f"snapshot {snapshot_id} does not exist ({path})")
        # a rollback can delete snapshot-N and a later commit create it anew: the key includes
        # the file's identity (mtime, size), not just the id
        key = (snapshot_id, info.mtime_ns, info.size)
        snap = self._cache.get(key)
        if snap is None:
            snap = Snapshot.from_json(self.file_io.read_text(path), path)
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.pop(next(iter(self._cache)), None)
            self._cache[key] = snap
        return snap

    def latest(self) -> Snapshot | None:
        sid = self.latest_id()
        return None if sid is None else self.snapshot(sid)

    def snapshots(self) -> Iterator[Snapshot]:
        """Every existing snapshot, oldest first (tolerates gaps)."""
        for sid in self.list_ids():
            yield self.snapshot(sid)

    def snapshots_backward(self) -> Iterator[Snapshot]:
        """Newest first, stopping at the first gap below the earliest snapshot."""
        latest, earliest = self.latest_id(), self.earliest_id()
        if latest is None or earliest is None:
            return
        for sid in range(latest, earliest - 1, -1):
            if self._exists(sid):
                yield self.snapshot(sid)

    def earlier_or_equal_time(self, time_millis: int) -> Snapshot | None:
        """The latest snapshot committed at or before ``time_millis`` (for time travel)."""
        for snap in self.snapshots_backward():
            if snap.time_millis <= time_millis:
                return snap
        return None

    # -- writing -------------------------------------------------------------------------
    def try_create(self, snapshot: Snapshot) -> bool:
        """Publish ``snapshot`` if its id is free; then move the LATEST hint (best effort)."""
        maybe_io_error(IOFaultStep.SNAPSHOT_BEFORE_CREATE)
        created = self.file_io.try_create(
            self.paths.snapshot_path(snapshot.id), snapshot.to_json().encode("utf-8")
        )
        if created:
            maybe_io_error(IOFaultStep.SNAPSHOT_AFTER_CREATE)
            maybe_crash(CrashStep.AFTER_SNAPSHOT_BEFORE_HINT)
            self.commit_latest_hint(snapshot.id)
            if snapshot.id == 1 or not self.file_io.exists(self.paths.earliest_hint):
                self.commit_earliest_hint(self.earliest_id() or snapshot.id)
        return created

    def commit_latest_hint(self, snapshot_id: int) -> None:
        try:
            self.file_io.overwrite_atomic(self.paths.latest_hint, str(snapshot_id).encode())
        except OSError:
            pass  # a hint only; readers fall back to listing

    def commit_earliest_hint(self, snapshot_id: int) -> None:
        try:
            self.file_io.overwrite_atomic(self.paths.earliest_hint, str(snapshot_id).encode())
        except OSError:
            pass
