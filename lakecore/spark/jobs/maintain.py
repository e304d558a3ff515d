"""Maintenance job: expire partitions / snapshots, remove orphan files; prints a JSON report.

    spark-submit [--py-files dist/lakecore.zip] lakecore/spark/jobs/maintain.py \\
        --warehouse W --table db.t --expire-snapshots --expire-partitions \\
        --remove-orphans [--older-than "1 d"] [--dry-run]

Retention comes from the table's options (``snapshot.num-retained.min/max``,
``snapshot.time-retained``, ``partition.expiration-time``, ...); override them for one run with
``--table-option``. The steps run in lakecore's one maintenance order (partitions, snapshots,
orphans; ``lakecore.maintenance.maintain.MaintenanceStep``). The work is metadata on the
driver, so no Spark session is started.
"""

from __future__ import annotations

if __name__ == "__main__" and not __package__:  # run as a file: find lakecore if not installed
    import importlib.util
    import os
    import sys

    if importlib.util.find_spec("lakecore") is None:
        sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 3)))

import argparse  # noqa: E402
import sys  # noqa: E402
from collections.abc import Mapping, Sequence  # noqa: E402
from datetime import datetime  # noqa: E402
from typing import Any  # noqa: E402

from lakecore.options.cli_text import parse_age  # noqa: E402
from lakecore.spark.jobs.common import (  # noqa: E402
    JobArgumentError,
    JobContext,
    parse_arg,
    run_job,
    table_parser,
)
from lakecore.spark.maintain import MaintainRequest, maintain_table  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    p = table_parser("lakecore-spark-maintain", "Expire snapshots and partitions, remove "
                     "orphan files.")
    p.add_argument("--expire-snapshots", action="store_true",
                   help="expire snapshots by the table's snapshot.* retention options")
    p.add_argument("--expire-partitions", action="store_true",
                   help="drop partitions older than partition.expiration-time")
    p.add_argument("--remove-orphans", action="store_true",
                   help="delete unreferenced files older than --older-than")
    p.add_argument("--older-than", default=None,
                   help="orphan age ('1 d', '12 h') or an ISO date-time cut-off (default 1 d)")
    p.add_argument("--now", default=None,
                   help="pin the clock: ISO date-time (local time when no zone)")
    p.add_argument("--dry-run", action="store_true", help="plan and report only")
    return p


def _body(ctx: JobContext) -> Mapping[str, Any]:
    a = ctx.args
    older_than = None if a.older_than is None else parse_arg(parse_age, a.older_than)
    request = MaintainRequest(
        expire_snapshots=a.expire_snapshots, expire_partitions=a.expire_partitions,
        remove_orphans=a.remove_orphans, dry_run=a.dry_run, older_than=older_than,
        now=datetime.fromisoformat(a.now) if a.now else None,
    )
    if not request.any:
        raise JobArgumentError("nothing to do: give --expire-snapshots, --expire-partitions "
                               "and/or --remove-orphans")
    return maintain_table(ctx.open_table(), request, stage=ctx.stage)


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("maintain", build_parser(), _body, argv)


if __name__ == "__main__":
    sys.exit(main())
