"""``SchemaManager``: a table's ``schema/schema-<id>`` files (Paimon's ``SchemaManager``)."""

from __future__ import annotations

import re

from lakecore.schema import TableSchema
from lakecore.store.file_io import FileIO
from lakecore.store.paths import SCHEMA_PREFIX, PathFactory

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

    def schema(self, schema_id: int) -> TableSchema:
        """One schema version; ``CorruptFileError`` names the file when it cannot be read."""
        path = self.paths.schema_path(schema_id)
        return TableSchema.from_json(self.file_io.read_text(path), path)

    def latest(self) -> TableSchema | None:
        """The newest schema version, or None when the table has none."""
        ids = self.list_ids()
        return self.schema(ids[-1]) if ids else None

    def create(self, schema: TableSchema) -> bool:
        """Write ``schema-<id>`` if absent; False when that version already exists."""
        return self.file_io.try_create(self.paths.schema_path(schema.id),
                                       schema.to_json().encode())
