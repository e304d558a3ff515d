"""Filesystem catalog over a warehouse: ``<warehouse>/<db>.db/<table>/`` as Paimon lays out."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from lakecore.errors import (
    CatalogError,
    DatabaseAlreadyExistError,
    DatabaseNotExistError,
    OptionError,
    SchemaChangeError,
    TableAlreadyExistError,
    TableNotExistError,
)
from lakecore.lock import CatalogLock, lock_from_options
from lakecore.lock.protocol import COMMIT_PROTOCOL, CommitProtocol, parse_commit_protocol
from lakecore.schema import Schema, TableSchema
from lakecore.schema.partition_time import check_partition_expiration_options
from lakecore.schema.schema_change import SchemaChange
from lakecore.store.commit_protocol import (
    CommitProtocolGuard,
    mismatch_message,
    record_commit_protocol,
)
from lakecore.store.file_io import FileIO
from lakecore.store.s3 import is_s3_key
from lakecore.store.schema_manager import SchemaManager
from lakecore.table import FileStoreTable

DB_SUFFIX = ".db"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-]*$")


def is_catalog_option(key: str) -> bool:
    """Whether ``key`` configures the catalog (lock, S3 filesystem, commit protocol) rather
    than a table: how the command line splits its ``--option`` pairs."""
    return (key.startswith(("lock.", "lock-")) or key in ("catalog-key", COMMIT_PROTOCOL)
            or is_s3_key(key))


def _check_name(kind: str, name: str) -> None:
    if not _NAME.match(name):
        raise CatalogError(f"invalid {kind} name {name!r}: use letters, digits, '_' and '-'")


def _split_identifier(identifier: str) -> tuple[str, str]:
    parts = identifier.split(".")
    if len(parts) != 2 or not all(parts):
        raise CatalogError(f"table identifier {identifier!r} must be 'database.table'")
    return parts[0], parts[1]


class FileSystemCatalog:
    """Tables under a warehouse. Its catalog lock comes from the ``lock.*`` options
    (``lakecore.lock.lock_from_options``) unless one is passed in; ``s3.*`` options configure
    an S3 warehouse and ``commit.protocol`` how its commits exclude each other
    (docs/object-stores.md)."""

    def __init__(self, options: Mapping[str, str], lock: CatalogLock | None = None) -> None:
        if "warehouse" not in options:
            raise CatalogError("catalog option 'warehouse' is required")
        self.options = dict(options)
        self.commit_protocol = parse_commit_protocol(self.options)
        self.file_io, self.warehouse = FileIO.for_uri(
            str(options["warehouse"]), self.options,
            conditional_put=self.commit_protocol is CommitProtocol.CONDITIONAL_PUT)
        self.warehouse = self.warehouse.rstrip("/")
        self.lock: CatalogLock = (
            lock if lock is not None
            else lock_from_options(self.options, warehouse_is_local=self.file_io.is_local)
        )

    def close(self) -> None:
        """Release the lock's database connections (if it has any)."""
        close = getattr(self.lock, "close", None)
        if close is not None:
            close()

    # -- databases -----------------------------------------------------------------------
    def database_path(self, name: str) -> str:
        return f"{self.warehouse}/{name}{DB_SUFFIX}"

    def list_databases(self) -> list[str]:
        return sorted(
            st.path.rsplit("/", 1)[-1][: -len(DB_SUFFIX)]
            for st in self.file_io.list_status(self.warehouse)
            if st.is_dir and st.path.endswith(DB_SUFFIX)
        )

    def create_database(self, name: str, ignore_if_exists: bool = False,
                        properties: Mapping[str, str] | None = None) -> None:
        _check_name("database", name)
        if self.file_io.exists(self.database_path(name)):
            if ignore_if_exists:
                return
            raise DatabaseAlreadyExistError(f"database {name!r} already exists")
        self.file_io.mkdirs(self.database_path(name))

    def drop_database(self, name: str, ignore_if_not_exists: bool = False,
                      cascade: bool = False) -> None:
        path = self.database_path(name)
        if not self.file_io.exists(path):
            if ignore_if_not_exists:
                return
            raise DatabaseNotExistError(f"database {name!r} does not exist")
        if self.list_tables(name) and not cascade:
            raise CatalogError(f"database {name!r} is not empty; pass cascade=True")
        self.file_io.fs.delete_dir(path)

    # -- tables --------------------------------------------------------------------------
    def table_path(self, identifier: str) -> str:
        db, name = _split_identifier(identifier)
        return f"{self.database_path(db)}/{name}"

    def list_tables(self, database: str) -> list[str]:
        if not self.file_io.exists(self.database_path(database)):
            raise DatabaseNotExistError(f"database {database!r} does not exist")
        out = []
        for st in self.file_io.list_status(self.database_path(database)):
            if st.is_dir and SchemaManager(self.file_io, st.path).exists():
                out.append(st.path.rsplit("/", 1)[-1])
        return sorted(out)

    def create_table(self, identifier: str, schema: Schema, ignore_if_exists: bool = False
                     ) -> None:
        db, name = _split_identifier(identifier)
        _check_name("table", name)
        if not self.file_io.exists(self.database_path(db)):
            raise DatabaseNotExistError(f"database {db!r} does not exist")
        path = self.table_path(identifier)
        ts = TableSchema.from_schema(0, schema, int(time.time() * 1000))
        check_partition_expiration_options(ts.core_options, ts.partition_keys)
        if not self.file_io.is_local and not SchemaManager(self.file_io, path).exists():
            # before schema-0: no writer can see the table without its protocol
            recorded = record_commit_protocol(self.file_io, path, self.commit_protocol)
            if recorded is not self.commit_protocol:
                raise OptionError(COMMIT_PROTOCOL, mismatch_message(
                    identifier, recorded, self.commit_protocol, True))
        if not SchemaManager(self.file_io, path).create(ts):
            if ignore_if_exists:
                return
            raise TableAlreadyExistError(f"table {identifier!r} already exists")

    def _latest_schema(self, identifier: str) -> TableSchema:
        schema = SchemaManager(self.file_io, self.table_path(identifier)).latest()
        if schema is None:
            raise TableNotExistError(f"table {identifier!r} does not exist")
        return schema

    def _table_lock(self, identifier: str) -> CatalogLock:
        """The lock a table's commits and ALTERs take: on an object store it first checks that
        the table's recorded commit protocol is this catalog's (a table never mixes two)."""
        if self.file_io.is_local:
            return self.lock
        return CommitProtocolGuard(self.lock, self.file_io, self.table_path(identifier),
                                   identifier, self.commit_protocol)

    def get_table(self, identifier: str) -> FileStoreTable:
        schema = self._latest_schema(identifier)
        return FileStoreTable(self.file_io, identifier, self.table_path(identifier), schema,
                              lock=self._table_lock(identifier))

    def alter_table(self, identifier: str, changes: Sequence[SchemaChange],
                    ignore_if_not_exists: bool = False) -> TableSchema | None:
        """Apply schema changes (pypaimon's ``SchemaChange`` shape) as one new schema version.

        Paimon's rules (``lakecore.schema.evolution``): key and partition columns protected,
        type changes within Paimon's casts, options Paimon lets change. A refused change raises
        a typed error naming the column or option and writes nothing. Runs under the catalog
        lock, as Paimon's catalog does. Returns the new schema (None: no table and
        ``ignore_if_not_exists``, or no changes)."""
        db, name = _split_identifier(identifier)
        manager = SchemaManager(self.file_io, self.table_path(identifier))
        if not manager.exists():
            if ignore_if_not_exists:
                return None
            raise TableNotExistError(f"table {identifier!r} does not exist")
        changes = list(changes)
        if not changes:
            return None
        bad = [c for c in changes if not isinstance(c, SchemaChange)]
        if bad:
            raise SchemaChangeError(f"not a SchemaChange: {bad[0]!r}")

        def check(new: TableSchema) -> None:  # before anything is written
            check_partition_expiration_options(new.core_options, new.partition_keys)

        return self._table_lock(identifier).run_with_lock(
            db, name, lambda: manager.commit_changes(changes, check=check))

    def drop_table(self, identifier: str, ignore_if_not_exists: bool = False) -> None:
        path = self.table_path(identifier)
        if not SchemaManager(self.file_io, path).exists():
            if ignore_if_not_exists:
                return
            raise TableNotExistError(f"table {identifier!r} does not exist")
        self.file_io.fs.delete_dir(path)


class CatalogFactory:
    """Creates a catalog from options, as pypaimon's CatalogFactory.create."""

    @staticmethod
    def create(options: Mapping[str, Any]) -> FileSystemCatalog:
        """``{"warehouse": uri, ...catalog options}`` -> a filesystem catalog."""
        return FileSystemCatalog({k: str(v) for k, v in options.items()})
