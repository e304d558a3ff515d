"""The write/read benchmark's pypaimon side; runs under ``.venv-paimon`` (pyarrow 19).

Started by ``write_read.py``. Reads the rows it wrote as Arrow IPC (``base.arrow``, ``upsert.arrow``
in ``--data``), optionally keeps only the first ``--rows`` keys of them (pypaimon is slow), then:
create the PK table, write ``--commits`` commits, upsert in one commit, read everything merged.
Prints one ``@@RESULT {json}`` line with timings and peak RSS.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import version
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    SCHEMA,
    check_merged,
    commit_slices,
    emit,
    read_ipc,
    run_phase,
)
from pypaimon import CatalogFactory, Schema  # noqa: E402


def _scaled(base: pa.Table, upsert: pa.Table, rows: int) -> tuple[pa.Table, pa.Table]:
    """Keep the first ``rows`` base rows (random keys) and the upserts that hit them (pro rata)."""
    if rows >= base.num_rows:
        return base, upsert
    keep = base.slice(0, rows)
    share = round(upsert.num_rows * rows / base.num_rows)
    inside = upsert.filter(pc.is_in(upsert["id"], value_set=keep["id"]))
    return keep, inside.slice(0, share)


def _write(table: Any, data: pa.Table) -> None:
    builder = table.new_batch_write_builder()
    write = builder.new_write()
    commit = builder.new_commit()
    try:
        write.write_arrow(data)
        commit.commit(write.prepare_commit())
    finally:
        write.close()
        commit.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="directory with base.arrow, upsert.arrow")
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--rows", type=int, default=0, help="keep this many base rows (0 = all)")
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=1, help="merged reads; the best is kept")
    args = parser.parse_args()

    base = read_ipc(os.path.join(args.data, "base.arrow"))
    upsert = read_ipc(os.path.join(args.data, "upsert.arrow"))
    base, upsert = _scaled(base, upsert, args.rows or base.num_rows)

    catalog = CatalogFactory.create({"warehouse": args.warehouse})
    catalog.create_database("db", True)
    schema = Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    catalog.create_table("db.t", schema, False)
    table = catalog.get_table("db.t")
    catalog.create_table("db.warmup", schema, False)
    for part in (base.slice(0, 1000), upsert.slice(0, 100)):  # pay one-time imports here
        _write(catalog.get_table("db.warmup"), part)
    builder = catalog.get_table("db.warmup").new_read_builder()
    builder.new_read().to_arrow(builder.new_scan().plan().splits())

    out: dict[str, Any] = {"system": "pypaimon", "version": version("pypaimon"),
                           "pyarrow": pa.__version__, "rows": base.num_rows,
                           "upsert_rows": upsert.num_rows, "commits": args.commits}

    def write_all() -> None:
        for part in commit_slices(base, args.commits):
            _write(table, part)

    def read() -> pa.Table:
        builder = catalog.get_table("db.t").new_read_builder()
        return builder.new_read().to_arrow(builder.new_scan().plan().splits())

    run_phase(out, "write", write_all)
    run_phase(out, "upsert", lambda: _write(table, upsert))
    for _ in range(args.repeat):  # run_phase keeps the best
        merged = run_phase(out, "read", read)
    out["check"] = check_merged(merged, base, upsert)
    emit(out)


if __name__ == "__main__":
    main()
