"""``SchemaManager``: a table's ``schema/schema-<id>`` files (Paimon's ``SchemaManager``).

Schema versions only grow: ``commit_changes`` (ALTER TABLE) reads the latest version, applies
the changes (``lakecore.schema.evolution``, pure and fully validated) and creates the next
``schema-<id>`` exclusively; losing that race to another ALTER re-applies the changes on the
winner's schema, as Paimon does. Nothing else is ever written, so a refused change leaves the
table exactly as it was.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from lakecore.errors import TableNotExistError
from lakecore.schema import TableSchema
from lakecore.schema.evolution import apply_changes
from lakecore.schema.schema_change import SchemaChange
from lakecore.store.file_io import FileIO
from lakecore.store.paths import SCHEMA_PREFIX, PathFactory
from lakecore.store.snapshot_manager import SnapshotManager
from lakecore.utils.faults import CrashStep, maybe_crash

_SCHEMA_FILE = re.compile(rf"^{SCHEMA_PREFIX}(\d+)$")


class SchemaManager:
    """Lists, reads and creates the schema versions of one table."""

    def __init__(self, file_io: FileIO, table_path: str) -> None:
        self.file_io = file_io
        self.paths = PathFactory(table_path)

    def exists(self) -> bool:
        """Whether the table has a schema directory (Paimon's test for "the table exists")."""
        return self.file_io.exists(self.paths.schema_dir)

    def list_ids(self) -> list[int]:
        """Every schema id on disk, ascending."""
        ids = []
        for st in self.file_io.list_status(self.paths.schema_dir):
            m = _SCHEMA_FILE.match(st.path.rsplit("/", 1)[-1])
            if m and not st.is_dir:
                ids.append(int(m.group(1)))
        return sorted(ids)

    def latest_id(self) -> int | None:
        """The newest schema id, or None when the table has none."""
        ids = self.list_ids()
        return ids[-1] if ids else None

    def schema(self, schema_id: int) -> TableSchema:
        """One schema version; ``CorruptFileError`` names the file when it cannot be read."""
        path = self.paths.schema_path(schema_id)
        return TableSchema.from_json(self.file_io.read_text(path), path)

    def latest(self) -> TableSchema | None:
        """The newest schema version, or None when the table has none."""
        latest = self.latest_id()
        return self.schema(latest) if latest is not None else None

    def create(self, schema: TableSchema) -> bool:
        """Write ``schema-<id>`` if absent; False when that version already exists."""
        return self.file_io.try_create(self.paths.schema_path(schema.id),
                                       schema.to_json().encode())

    def has_snapshots(self) -> bool:
        """Whether the table has committed anything (Paimon's immutable options freeze then)."""
        return SnapshotManager(self.file_io, self.paths).latest_id() is not None

    def commit_changes(self, changes: Sequence[SchemaChange],
                       check: Callable[[TableSchema], None] | None = None) -> TableSchema:
        """Apply ``changes`` to the latest schema and create the next version; returns it.

        Typed errors (``SchemaChangeError``, ``OptionError``...) name what is wrong, with
        nothing written; ``check`` may refuse the new schema the same way. When another ALTER
        created the same id first, the changes are applied again on top of it (so two ALTERs
        never overwrite each other)."""
        while True:
            old = self.latest()
            if old is None:
                raise TableNotExistError(f"no table at {self.paths.table_path}")
            new = apply_changes(old, changes, has_snapshots=self.has_snapshots)
            if check is not None:
                check(new)
            maybe_crash(CrashStep.ALTER_BEFORE_SCHEMA)
            if self.create(new):
                maybe_crash(CrashStep.ALTER_AFTER_SCHEMA)
                return new
