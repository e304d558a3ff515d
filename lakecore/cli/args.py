"""The flags every ``lakecore`` subcommand takes: ``--warehouse``, ``--table``, ``--option``,
``--json``."""

from __future__ import annotations

import argparse


def add_table_arguments(p: argparse.ArgumentParser) -> None:
    """Add the shared flags to one subcommand's parser."""
    p.add_argument("--warehouse", required=True, help="warehouse URI or path")
    p.add_argument("--table", required=True, help="database.table")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="catalog or dynamic table option (repeatable)")
    p.add_argument("--json", action="store_true", help="print JSON")
