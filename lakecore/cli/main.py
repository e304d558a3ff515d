"""The ``lakecore`` command line. Every subcommand takes ``--warehouse W --table db.t``,
catalog/table options as ``--option key=value`` and ``--json`` for machine-readable output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from lakecore.catalog import CatalogFactory, is_catalog_option
from lakecore.cli import alter as cli_alter
from lakecore.cli import maintenance as cli_maintenance
from lakecore.cli.args import add_table_arguments
from lakecore.errors import LakecoreError
from lakecore.maintenance.inspect import format_report, inspect_table
from lakecore.options.cli_text import parse_pairs, parse_partition

CATALOG_KEYS = frozenset({"catalog-key", "lock-acquire-timeout", "lock-check-max-sleep"})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lakecore", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("inspect", help="snapshots, live files per partition/bucket/level, "
                       "HASH index buckets, deletion vectors, what compaction would do")
    add_table_arguments(p)
    p.add_argument("--max-snapshots", type=int, default=20)
    p = sub.add_parser("compact", help="compact buckets that need it; one COMPACT snapshot")
    add_table_arguments(p)
    p.add_argument("--partition", action="append", default=[], metavar="K=V[,K=V]",
                   help="only these partitions (repeatable)")
    p.add_argument("--full", action="store_true", help="full compaction to the max level")
    cli_maintenance.register(sub)
    cli_alter.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        opts = parse_pairs(args.option, "--option")
        parts = [parse_partition(p) for p in getattr(args, "partition", [])] or None
    except ValueError as e:  # a malformed --option / --partition
        raise SystemExit(str(e)) from None
    try:
        catalog_opts = {k: v for k, v in opts.items()
                        if k in CATALOG_KEYS or k.startswith("lock") or is_catalog_option(k)}
        table_opts = {k: v for k, v in opts.items() if k not in catalog_opts}
        catalog = CatalogFactory.create({"warehouse": args.warehouse, **catalog_opts})
        if args.command == cli_alter.COMMAND:
            return cli_alter.run(args, catalog)
        table = catalog.get_table(args.table)
        if table_opts:
            table = table.copy(table_opts)
        if args.command in cli_maintenance.COMMANDS:
            return cli_maintenance.run(args, table)
        if args.command == "inspect":
            report = inspect_table(table, args.max_snapshots)
            print(json.dumps(report) if args.json else format_report(report))
        elif args.command == "compact":
            result = table.compact(parts, full=args.full).to_dict()
            if args.json:
                print(json.dumps(result))
            else:
                print(f"compacted {result['buckets']} bucket(s): {result['files_before']} -> "
                      f"{result['files_after']} files, snapshots {list(result['snapshot_ids'])}"
                      + (f" ({result['skipped_reason']})" if result["skipped_reason"] else ""))
        return 0
    except LakecoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
