"""``lakecore alter``: schema changes from the command line (``catalog.alter_table``).

Each flag is one change, applied in the order given, all in one new schema version::

    lakecore alter --warehouse W --table db.t \\
        --add-column note STRING --rename amount=amount_eur --type qty=BIGINT \\
        --drop legacy --set snapshot.num-retained.min=20

``--add-column NAME TYPE``, ``--rename OLD=NEW``, ``--drop NAME``, ``--type NAME=TYPE``,
``--nullable NAME``, ``--not-null NAME``, ``--column-comment NAME=TEXT``, ``--set KEY=VALUE``,
``--unset KEY``, ``--comment TEXT``; types in Paimon's spelling (``BIGINT``,
``DECIMAL(12, 2)``). A dotted name is a nested field's path (``address.city``); anything else
(a name with a dot, ARRAY/MAP/ROW types, positions) as Paimon's JSON form with ``--change
'{"action": "addColumn", ...}'``. ``--dry-run`` prints the schema the changes would make and
writes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from lakecore.catalog import FileSystemCatalog
from lakecore.cli.args import add_table_arguments
from lakecore.errors import LakecoreError, TableNotExistError
from lakecore.schema import TableSchema
from lakecore.schema.evolution import apply_changes
from lakecore.schema.schema_change import SchemaChange
from lakecore.store.schema_manager import SchemaManager

COMMAND = "alter"


def _path(name: str) -> list[str]:
    return name.split(".")


def _pair(text: str, flag: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{flag} expects NAME=VALUE, got {text!r}")
    return key, value


def _change(build: Callable[[str], SchemaChange]) -> Callable[[str], SchemaChange]:
    """An argparse ``type`` turning a flag's text into a change (errors name the flag)."""

    def convert(text: str) -> SchemaChange:
        try:
            return build(text)
        except LakecoreError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        except (ValueError, json.JSONDecodeError) as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return convert


class _AddColumn(argparse.Action):
    """``--add-column NAME TYPE`` (two values) into the shared, ordered change list."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        name, type_text = values
        try:
            change = SchemaChange.add_column(_path(name), type_text)
        except LakecoreError as e:
            parser.error(f"{option_string}: {e}")
        _append(namespace, change)


class _Append(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _append(namespace, values)


def _append(namespace: argparse.Namespace, change: SchemaChange) -> None:
    changes = list(getattr(namespace, "changes", None) or [])
    changes.append(change)
    namespace.changes = changes


def register(subparsers: Any) -> None:
    """Add ``alter`` with the shared table flags and one flag per kind of change."""
    p = subparsers.add_parser(COMMAND, help="change the table's schema (one new version)")
    add_table_arguments(p)
    p.set_defaults(changes=[])
    p.add_argument("--add-column", nargs=2, metavar=("NAME", "TYPE"), action=_AddColumn,
                   help="add a nullable column (e.g. --add-column note STRING)")
    flags: list[tuple[str, str, Callable[[str], SchemaChange], str]] = [
        ("--rename", "OLD=NEW", lambda t: SchemaChange.rename_column(
            _path(_pair(t, "--rename")[0]), _pair(t, "--rename")[1]), "rename a column"),
        ("--drop", "NAME", lambda t: SchemaChange.drop_column(_path(t)), "drop a column"),
        ("--type", "NAME=TYPE", lambda t: SchemaChange.update_column_type(
            _path(_pair(t, "--type")[0]), _pair(t, "--type")[1], keep_nullability=True),
         "change a column's type (Paimon's casts; nullability kept)"),
        ("--nullable", "NAME", lambda t: SchemaChange.update_column_nullability(_path(t), True),
         "make a column nullable"),
        ("--not-null", "NAME", lambda t: SchemaChange.update_column_nullability(_path(t), False),
         "make a column NOT NULL (needs alter-column-null-to-not-null.disabled=false)"),
        ("--column-comment", "NAME=TEXT", lambda t: SchemaChange.update_column_comment(
            _path(_pair(t, "--column-comment")[0]), _pair(t, "--column-comment")[1]),
         "set a column's comment"),
        ("--set", "KEY=VALUE", lambda t: SchemaChange.set_option(*_pair(t, "--set")),
         "set a table option"),
        ("--unset", "KEY", SchemaChange.remove_option, "remove a table option"),
        ("--comment", "TEXT", SchemaChange.update_comment, "set the table comment"),
        ("--change", "JSON", lambda t: SchemaChange.from_json(json.loads(t)),
         "one change in Paimon's JSON form"),
    ]
    for flag, metavar, build, help_ in flags:
        p.add_argument(flag, metavar=metavar, type=_change(build), action=_Append, help=help_)
    p.add_argument("--dry-run", action="store_true",
                   help="print the schema the changes would make; write nothing")


def run(args: argparse.Namespace, catalog: FileSystemCatalog) -> int:
    """Apply (or, with ``--dry-run``, preview) the changes; prints the new schema."""
    changes: list[SchemaChange] = list(args.changes or [])
    if not changes:
        print("error: no changes given (see lakecore alter --help)", file=sys.stderr)
        return 2
    if args.dry_run:
        manager = SchemaManager(catalog.file_io, catalog.table_path(args.table))
        old = manager.latest()
        if old is None:
            raise TableNotExistError(f"table {args.table!r} does not exist")
        new: TableSchema | None = apply_changes(old, changes,
                                                has_snapshots=manager.has_snapshots)
    else:
        new = catalog.alter_table(args.table, changes)
    assert new is not None
    if args.json:
        print(json.dumps({"dry_run": bool(args.dry_run), "schema": json.loads(new.to_json())}))
    else:
        verb = "would create" if args.dry_run else "created"
        print(f"{args.table}: {verb} schema {new.id}")
        for f in new.fields:
            print(f"  {f.id:>4}  {f.name}  {f.type}")
        if new.options:
            print("  options: " + ", ".join(f"{k}={v}" for k, v in sorted(new.options.items())))
    return 0
