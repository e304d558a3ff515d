"""Eight processes committing to one ``s3://`` table with conditional writes and no lock.

Each process (its own interpreter, its own S3 clients) makes small APPEND commits as its own
commit user. Afterwards every commit has landed exactly once, the history is linear
(contiguous ids, each snapshot built on the one before), every row reads back once, and the
moto log shows the lost races were real: conditional PUTs answered 412.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pyarrow as pa
import pytest

from lakecore import CatalogFactory, Schema
from lakecore.lock import NoopLock
from tests.faults.harness import check_history, missing_files, read_rows
from tests.lock.backends import REPO_ROOT, child_env
from tests.s3.server import MotoServer

PROCESSES, COMMITS, ROWS = 8, 5, 3  # 8 processes make the races; 5 commits each suffice
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("writer", pa.string())])


def _precondition_failures(server: MotoServer, bucket: str) -> int:
    return sum(1 for line in server.log_path.read_text(errors="replace").splitlines()
               if f"/{bucket}/" in line and "/snapshot/snapshot-" in line
               and '" 412 ' in line)


@pytest.mark.slow
def test_eight_processes_commit_with_conditional_writes_and_no_lock(moto_server, bucket):
    options = {**moto_server.catalog_options(bucket), "commit.protocol": "conditional-put"}
    catalog = CatalogFactory.create(options)
    assert isinstance(catalog.lock, NoopLock)  # nothing but the conditional PUT
    catalog.create_database("db")
    # lost races are the point here; a short retry wait keeps the test short, not simpler
    catalog.create_table("db.t", Schema.from_pyarrow_schema(
        SCHEMA, options={"commit.max-retry-wait": "200 ms"}))

    users = [f"ingest-{i}" for i in range(PROCESSES)]
    procs = [subprocess.Popen(
        [sys.executable, "-m", "tests.lock.workers", "commit", json.dumps({
            "catalog": options, "table": "db.t", "user": user, "n": COMMITS, "rows": ROWS,
            "base": i * 1_000_000})],
        cwd=REPO_ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) for i, user in enumerate(users)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0] * PROCESSES, [err[-2000:] for _, err in outs]

    table = catalog.get_table("db.t")
    snaps = check_history(table)  # contiguous, linear, no (user, identifier) twice
    assert len(snaps) == PROCESSES * COMMITS
    assert Counter(s.commit_user for s in snaps) == {u: COMMITS for u in users}
    for user in users:  # each committer's identifiers landed once, in its own order
        assert [s.commit_identifier for s in snaps if s.commit_user == user] == list(
            range(1, COMMITS + 1))
    ids = Counter(r["id"] for r in read_rows(table))
    expected = {i * 1_000_000 + ident * 10 + k for i in range(PROCESSES)
                for ident in range(1, COMMITS + 1) for k in range(ROWS)}
    assert set(ids) == expected and max(ids.values()) == 1
    assert missing_files(table) == set()
    assert _precondition_failures(moto_server, bucket) > 0  # the races happened
    catalog.close()
