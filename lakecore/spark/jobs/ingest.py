"""Ingest job: a source (files, Spark table or query) -> one commit into a lakecore table.

    spark-submit [--py-files dist/lakecore.zip] lakecore/spark/jobs/ingest.py \\
        --warehouse W --table db.t --source PATH --source-format parquet \\
        --commit-identifier 20261101 [--commit-user U] [--catalog-option lock.uri=...] \\
        [--overwrite-partition dt=2026-11-01 | --dynamic-overwrite] [--merge-schema]

The pair (commit user, commit identifier) makes a rerun idempotent: a rerun of a committed
pair writes nothing. Pass both from the Airflow run (or let the user default to a hash of the
table and identifier: one user per run, see "Commit users" in docs/architecture.md).

``--merge-schema`` (Paimon's ``write.merge-schema``, also a table option or
``--table-option write.merge-schema=true``) adds the source's new columns to the table with one
ALTER before writing; without it a new source column fails the job, naming the column.
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

from lakecore.options.cli_text import parse_pairs  # noqa: E402
from lakecore.spark.ingest import (  # noqa: E402
    IngestRequest,
    already_committed,
    default_commit_user,
    ingest_dataframe,
    ingest_parquet,
)
from lakecore.spark.jobs.common import JobContext, parse_arg, run_job, table_parser  # noqa: E402
from lakecore.spark.sources import SourceFormat, load_source  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    p = table_parser("lakecore-spark-ingest", "Write a source into a table with one commit.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--source", help="path (or URI) of the source files")
    src.add_argument("--source-table", help="a Spark table name")
    src.add_argument("--source-query", help="a Spark SQL query")
    p.add_argument("--source-format", choices=["parquet", "csv", "json"], default="parquet")
    p.add_argument("--source-option", action="append", default=[], metavar="KEY=VALUE",
                   help="Spark reader option, e.g. delimiter=; (repeatable)")
    p.add_argument("--commit-identifier", type=int, required=True,
                   help="commit identifier from the orchestrator run (an integer)")
    p.add_argument("--commit-user", default=None,
                   help="commit user (default: derived from the table and the identifier)")
    ow = p.add_mutually_exclusive_group()
    ow.add_argument("--overwrite-partition", action="append", default=[], metavar="KEY=VALUE",
                    help="replace this static partition atomically (repeatable per key)")
    ow.add_argument("--dynamic-overwrite", action="store_true",
                    help="replace exactly the partitions present in the source")
    p.add_argument("--merge-schema", action="store_true", default=None,
                   help="add the source's new columns (and widen types) with one ALTER "
                        "before writing (Paimon's write.merge-schema; default: the table's)")
    p.add_argument("--merge-schema-explicit-cast", action="store_true", default=None,
                   help="with --merge-schema: also change types by casts that are not "
                        "widenings (write.merge-schema.explicit-cast)")
    p.add_argument("--parallelism", type=int, default=None,
                   help="Spark partitions of the write stage (default: Spark's shuffle setting)")
    return p


def _body(ctx: JobContext) -> Mapping[str, Any]:
    a = ctx.args
    with ctx.stage("plan"):
        table = ctx.open_table()
        request = IngestRequest(
            commit_identifier=a.commit_identifier,
            commit_user=a.commit_user or default_commit_user("ingest", table.identifier,
                                                             a.commit_identifier),
            overwrite_partition=parse_arg(parse_pairs, a.overwrite_partition,
                                          "--overwrite-partition") or None,
            dynamic_overwrite=a.dynamic_overwrite,
            parallelism=a.parallelism,
            merge_schema=a.merge_schema,
            merge_schema_explicit_cast=a.merge_schema_explicit_cast,
        )
        done = already_committed(table, request)
    if done:
        return {"commit_user": request.commit_user, "commit_identifier": a.commit_identifier,
                "snapshot_ids": [], "skipped": True, "rows": 0, "files": 0, "bytes": 0}
    spark = ctx.session()
    fmt = SourceFormat(a.source_format)
    options = parse_arg(parse_pairs, a.source_option, "--source-option")
    if a.source and fmt is SourceFormat.PARQUET and not options:  # executors read the files
        result = ingest_parquet(spark, a.source, table, ctx.warehouse, request,
                                ctx.catalog_options, stage=ctx.stage)
        return result.summary()
    with ctx.stage("read-source"):
        df = load_source(spark, path=a.source, fmt=fmt, options=options,
                         table=a.source_table, query=a.source_query)
    result = ingest_dataframe(spark, df, table, ctx.warehouse, request,
                              ctx.catalog_options, stage=ctx.stage)
    return result.summary()


def main(argv: Sequence[str] | None = None) -> int:
    return run_job("ingest", build_parser(), _body, argv)


if __name__ == "__main__":
    sys.exit(main())
