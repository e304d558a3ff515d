"""Maintenance subcommands of the ``lakecore`` command line.

``register(subparsers)`` adds ``expire-snapshots``, ``expire-partitions``,
``remove-orphan-files``, ``create-tag``, ``delete-tag``, ``list-tags``, ``rollback`` and
``maintain``; ``run(args, table)`` executes the chosen one and returns the exit code. The command
line is an explicit request, so deleting commands execute unless ``--dry-run`` is given.
``--now`` pins the clock (ISO date-time, local time when no zone) for reproducible runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from typing import Any

from lakecore import maintenance as m
from lakecore.cli.args import add_table_arguments
from lakecore.errors import LakecoreError
from lakecore.maintenance.maintain import MaintenanceStep
from lakecore.options.cli_text import parse_age
from lakecore.table import FileStoreTable

COMMANDS = ("expire-snapshots", "expire-partitions", "remove-orphan-files", "create-tag",
            "delete-tag", "list-tags", "rollback", "maintain")


def register(subparsers: Any) -> None:
    """Add the maintenance subcommands, each with the shared flags (``cli.args``)."""

    def sub(name: str, help_: str, deletes: bool = True) -> argparse.ArgumentParser:
        p = subparsers.add_parser(name, help=help_)
        add_table_arguments(p)
        if deletes:
            p.add_argument("--dry-run", action="store_true", help="plan and report only")
            p.add_argument("--paths", action="store_true", help="list every file in --json")
        p.add_argument("--now", help="pin the clock: ISO date-time (local time if no zone)")
        return p

    sub("expire-snapshots", "expire snapshots by snapshot.num-retained.* / time-retained")
    sub("expire-partitions", "drop partitions older than partition.expiration-time")
    p = sub("remove-orphan-files", "delete unreferenced files older than --older-than")
    p.add_argument("--older-than", default="1 d",
                   help="an age ('1 d', '12 h') or an ISO date-time cut-off (default 1 d)")
    p = sub("create-tag", "tag a snapshot (default: the latest)", deletes=False)
    p.add_argument("--tag", required=True)
    p.add_argument("--snapshot", type=int)
    p.add_argument("--ignore-if-exists", action="store_true")
    p = sub("delete-tag", "delete a tag and the files only it held")
    p.add_argument("--tag", required=True)
    sub("list-tags", "list tags", deletes=False)
    p = sub("rollback", "roll back to a snapshot or tag (later snapshots are removed)")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--snapshot", type=int)
    target.add_argument("--tag")
    p = sub("maintain", " -> ".join(s.value for s in MaintenanceStep))
    p.add_argument("--older-than", default="1 d", help="orphan-file age or cut-off")
    p.add_argument("--compact", choices=("none", "universal", "full"), default="none")


def _when(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _dispatch(args: argparse.Namespace, table: FileStoreTable) -> tuple[dict[str, Any], bool]:
    now = _when(args.now)
    dry = getattr(args, "dry_run", False)
    paths = getattr(args, "paths", False)
    cmd = args.command
    if cmd == "expire-snapshots":
        return m.expire_snapshots(table, dry_run=dry, now=now).to_dict(paths), True
    if cmd == "expire-partitions":
        return m.expire_partitions(table, now=now, dry_run=dry).to_dict(), True
    if cmd == "remove-orphan-files":
        r = m.remove_orphan_files(table, older_than=parse_age(args.older_than), now=now,
                                  dry_run=dry)
        return r.to_dict(paths or dry), True
    if cmd == "create-tag":
        info = m.create_tag(table, args.tag, args.snapshot,
                            ignore_if_exists=args.ignore_if_exists)
        return {"operation": "create-tag", **info.to_dict()}, True
    if cmd == "delete-tag":
        return m.delete_tag(table, args.tag, dry_run=dry).to_dict(paths), True
    if cmd == "list-tags":
        return {"operation": "list-tags", "tags": [t.to_dict() for t in m.list_tags(table)]}, True
    if cmd == "rollback":
        r2 = m.rollback_to(table, snapshot_id=args.snapshot, tag=args.tag, dry_run=dry)
        return r2.to_dict(paths), True
    if cmd == "maintain":
        r3 = m.maintain(table, dry_run=dry, now=now, older_than=parse_age(args.older_than),
                        compact=args.compact)
        return r3.to_dict(), r3.ok
    raise SystemExit(f"not a maintenance command: {cmd}")


def _text(report: dict[str, Any]) -> str:
    """A short human summary: the top-level scalar fields, one per line."""
    lines = []
    for k, v in report.items():
        if isinstance(v, (dict, list)):
            if k == "steps":
                lines += [f"  {s['step']}: {s['status']} {s['reason']}".rstrip() for s in v]
            elif k == "paths":
                lines += [f"  {p['path']} ({p['size']} bytes)" for p in v]
            elif k == "tags":
                lines += [f"  {t['name']} -> snapshot {t['snapshot_id']}" for t in v]
            continue
        lines.append(f"{k}: {v}")
    return "\n".join(lines)


def run(args: argparse.Namespace, table: FileStoreTable) -> int:
    """Run one maintenance subcommand; 0 on success, 1 on failure (errors on stderr)."""
    try:
        report, ok = _dispatch(args, table)
    except (LakecoreError, ValueError) as e:  # ValueError: a malformed --now / --older-than
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(report, default=str) if args.json else _text(report))
    return 0 if ok else 1
