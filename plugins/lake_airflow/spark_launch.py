"""The application ``spark-submit`` runs for every lakecore job the DAGs start.

    spark-submit ... spark_launch.py <ingest|compact|maintain> --warehouse W --table db.t ...

It runs ``lakecore.spark.jobs.<job>.main`` with the given arguments, adding the catalog lock's
database URL from ``$LAKECORE_LOCK_URI`` as ``--catalog-option lock.uri=...`` and the tables
file's ``catalog_options`` (``$LAKECORE_CATALOG_OPTIONS``, a JSON object: S3 endpoint and
credentials, commit protocol) as ``--catalog-option`` pairs. Both can hold secrets, so they
travel in the environment of the Spark driver, never in the spark-submit command line (which
``ps``, the Spark UI and the Airflow task log show). The driver hands the S3 options to its
executors inside the tasks. Standard library only until the job is imported.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import MutableMapping, Sequence

JOBS = ("ingest", "compact", "maintain")
LOCK_URI_ENV = "LAKECORE_LOCK_URI"
CATALOG_OPTIONS_ENV = "LAKECORE_CATALOG_OPTIONS"


def job_argv(argv: Sequence[str], environ: MutableMapping[str, str]) -> tuple[str, list[str]]:
    if not argv or argv[0] not in JOBS:
        raise SystemExit(f"usage: spark_launch.py {{{'|'.join(JOBS)}}} JOB-ARGS...")
    args = list(argv[1:])
    uri = environ.pop(LOCK_URI_ENV, None)
    if uri:
        args += ["--catalog-option", f"lock.uri={uri}"]
    options = json.loads(environ.pop(CATALOG_OPTIONS_ENV, None) or "{}")
    for key, value in options.items():
        args += ["--catalog-option", f"{key}={value}"]
    return argv[0], args


def main(argv: Sequence[str] | None = None) -> int:
    job, args = job_argv(list(sys.argv[1:] if argv is None else argv), os.environ)
    module = importlib.import_module(f"lakecore.spark.jobs.{job}")
    return int(module.main(args))


if __name__ == "__main__":
    sys.exit(main())
