"""Compaction job: plan on the driver, rewrite buckets on the executors, one COMPACT commit.

    spark-submit [--py-files dist/lakecore.zip] lakecore/spark/jobs/compact.py \\
        --warehouse W --table db.t [--partition dt=2026-11-01 ...] [--full] \\
        [--max-buckets N] [--parallelism N] [--catalog-option lock.uri=...]

Safe while ingest jobs commit: the COMPACT commit conflicts only on its own inputs.
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
from typing import Any  # noqa: E402

from lakecore.options.cli_text import parse_partition  # noqa: E402
from lakecore.spark.compact import (  # noqa: E402
    CompactOutcome,
    CompactRequest,
    compact_table,
    plan_compact,
)
from lakecore.spark.jobs.common import JobContext, parse_arg, run_job, table_parser  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    p = table_parser("lakecore-spark-compact", "Compact a table's buckets on Spark.")
    p.add_argument("--partition", action="append", default=[], metavar="K=V[,K=V]",
                   help="compact only this partition (repeatable; keys joined by commas)")
    p.add_argument("--full", action="store_true",
                   help="full compaction (rewrite every bucket into its top level)")
    p.add_argument("--bucket", action="append", default=None, metavar="[K=V[,K=V]:]N",
                   help="compact only this bucket (repeatable), e.g. dt=2026-11-01:0; "
                        "bucket N of an unpartitioned table is just N")
    p.add_argument("--max-buckets", type=int, default=None,
                   help="compact at most this many buckets, the biggest first")
    p.add_argument("--parallelism", type=int, default=None,
                   help="Spark tasks for the rewrites (default: Spark's default parallelism)")
    p.add_argument("--commit-identifier", type=int, default=None,
                   help="commit identifier (default: the id of the snapshot compacted)")
    p.add_argument("--commit-user", default=None,
                   help="commit user (default: derived from the table and the identifier)")
    return p


def _partitions(specs: Sequence[str]) -> tuple[dict[str, str], ...] | None:
    out = tuple(parse_arg(parse_partition, s, "--partition") for s in specs)
    return out or None


def parse_bucket(text: str, keys: Sequence[str]) -> tuple[dict[str, str], int]:
    """``dt=2026-11-01:0`` -> ({"dt": "2026-11-01"}, 0); ``3`` for an unpartitioned table."""
    spec, sep, number = text.rpartition(":")
    if not number.strip().isdigit():
        raise ValueError(f"--bucket {text!r}: expected [K=V[,K=V]:]BUCKET")
    if keys and not sep:
        raise ValueError(f"--bucket {text!r}: name the partition, e.g. "
                         f"{keys[0]}=VALUE:{number.strip()}")
    if not keys and sep:
        raise ValueError(f"--bucket {text!r}: the table is not partitioned")
    return (parse_partition(spec, "--bucket", list(keys)) if sep else {}), int(number)


def _buckets(specs: Sequence[str] | None, keys: Sequence[str]
             ) -> tuple[tuple[dict[str, str], int], ...] | None:
    if specs is None:
        return None
    return tuple(parse_arg(parse_bucket, s, keys) for s in specs)


def _body(ctx: JobContext) -> Mapping[str, Any]:
    a = ctx.args
    table = ctx.open_table()
    request = CompactRequest(
        partitions=_partitions(a.partition), full=a.full, max_buckets=a.max_buckets,
        parallelism=a.parallelism, commit_user=a.commit_user,
        commit_identifier=a.commit_identifier,
        buckets=_buckets(a.bucket, table.partition_keys),
    )
    with ctx.stage("plan"):
        plan = plan_compact(table, request)
    if not plan.tasks:  # nothing to do: no Spark session needed
        return CompactOutcome(table.identifier, plan.snapshot_id,
                              skipped_reason=plan.skipped_reason).summary()
    outcome = compact_table(ctx.session(), table, ctx.warehouse, request, ctx.catalog_options,
                            stage=ctx.stage, plan=plan)
    return outcome.summary()


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("compact", build_parser(), _body, argv)


if __name__ == "__main__":
    sys.exit(main())
