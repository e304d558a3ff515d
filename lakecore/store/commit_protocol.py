"""The commit protocol a table on an object store was created with, and the check that keeps
every writer on it.

Two protocols make creating ``snapshot-N`` exclusive (``lakecore.lock.protocol``): the catalog
lock, or conditional PUTs. They do not exclude each other: a locked writer's "absent? then
write" can overwrite a snapshot a conditional writer just created, and a conditional writer
ignores the lock. So a table must never see both. The catalog records the protocol in
``<table>/_lakecore/commit-protocol`` (the text ``lock`` or ``conditional-put``) when it creates
the table, before ``schema-0``, and a writer whose catalog uses the other protocol is refused
(``OptionError`` naming ``commit.protocol``) before its first commit or rollback.

A table on an object store without the file was created before lakecore recorded protocols,
or by another Paimon writer: it commits under the lock. ``set_commit_protocol`` moves such a
table to conditional writes (stop its writers first). Tables on the local filesystem record
nothing: there every create is atomic, so locked and unlocked writers mix safely.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from lakecore.errors import CorruptFileError, OptionError
from lakecore.lock.base import CatalogLock
from lakecore.lock.protocol import COMMIT_PROTOCOL, CommitProtocol
from lakecore.store.file_io import FileIO
from lakecore.store.paths import PathFactory

T = TypeVar("T")


def read_commit_protocol(file_io: FileIO, table_path: str) -> CommitProtocol | None:
    """The recorded protocol; None when the table has no record (then: the lock)."""
    path = PathFactory(table_path).commit_protocol_path
    if not file_io.exists(path):
        return None
    text = file_io.read_text(path).strip()
    try:
        return CommitProtocol(text)
    except ValueError:
        raise CorruptFileError(path, f"unknown commit protocol {text!r} (known: "
                               f"{', '.join(p.value for p in CommitProtocol)})") from None


def table_commit_protocol(file_io: FileIO, table_path: str) -> CommitProtocol:
    """The protocol the table's writers must use."""
    return read_commit_protocol(file_io, table_path) or CommitProtocol.LOCK


def record_commit_protocol(file_io: FileIO, table_path: str,
                           protocol: CommitProtocol) -> CommitProtocol:
    """Record ``protocol`` for a table being created; returns the recorded one (another
    creator's, if it was first)."""
    path = PathFactory(table_path).commit_protocol_path
    if file_io.try_create(path, f"{protocol.value}\n".encode()):
        return protocol
    return table_commit_protocol(file_io, table_path)


def set_commit_protocol(file_io: FileIO, table_path: str, protocol: CommitProtocol) -> None:
    """Move an existing table to ``protocol``. Only while no writer runs: a writer that
    checked the old protocol keeps using it until it reopens the table."""
    file_io.overwrite_atomic(PathFactory(table_path).commit_protocol_path,
                             f"{protocol.value}\n".encode())


def mismatch_message(identifier: str, table: CommitProtocol, writer: CommitProtocol,
                     recorded: bool) -> str:
    how = "records" if recorded else "has no commit-protocol record, so it uses"
    return (f"table {identifier!r} {how} commit protocol {table.value!r}, but this catalog "
            f"commits with {writer.value!r}: set the catalog option "
            f"{COMMIT_PROTOCOL}={table.value} (a table never mixes the catalog lock and "
            "conditional writes; lakecore.store.commit_protocol.set_commit_protocol moves a "
            "table whose writers are all stopped)")


class CommitProtocolGuard:
    """A ``CatalogLock`` for one table on an object store: before the first guarded section
    it checks that the table's recorded protocol is this writer's, then delegates to the
    catalog's lock (a ``NoopLock`` under conditional writes)."""

    def __init__(self, inner: CatalogLock, file_io: FileIO, table_path: str, identifier: str,
                 protocol: CommitProtocol) -> None:
        self.inner = inner
        self.file_io = file_io
        self.table_path = table_path
        self.identifier = identifier
        self.protocol = protocol
        self._checked = False
        self._mutex = threading.Lock()

    def check(self) -> None:
        """Raise ``OptionError`` unless the table commits with this writer's protocol."""
        with self._mutex:
            if self._checked:
                return
            recorded = read_commit_protocol(self.file_io, self.table_path)
            table = recorded or CommitProtocol.LOCK
            if table is not self.protocol:
                raise OptionError(COMMIT_PROTOCOL, mismatch_message(
                    self.identifier, table, self.protocol, recorded is not None))
            self._checked = True

    def run_with_lock(self, database: str, table: str, fn: Callable[[], T]) -> T:
        self.check()
        return self.inner.run_with_lock(database, table, fn)

    def close(self) -> None:
        """The catalog owns (and closes) the inner lock."""

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        del state["_mutex"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._mutex = threading.Lock()

    def __repr__(self) -> str:
        return f"CommitProtocolGuard({self.protocol.value}, {self.inner!r})"
