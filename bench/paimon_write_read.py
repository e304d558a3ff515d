"""The write/read benchmark's pypaimon side; runs under ``.venv-paimon`` (pyarrow 19).

Started by ``write_read.py`` (and ``scaling.py``). Reads the rows it wrote as Arrow IPC
(``base.arrow``, ``upsert.arrow`` in ``--data``), optionally keeps only the first ``--rows``
keys of them (pypaimon is slow), then: create the PK table (``--buckets``), write ``--commits``
commits, upsert in one commit, read everything merged. With ``--native``, pypaimon's optional
Rust core (pypaimon-rust) does what it can: the table is used through ``copy()`` with the
``*.native.enabled`` options, and since pypaimon falls back to Python silently where Rust cannot
serve, the calls that really ran in Rust are counted. Prints one ``@@RESULT {json}`` line with
timings, peak RSS and those counts.
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
    PAIMON_RUST_OPTIONS,
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


def count_native() -> dict[str, dict[str, int]]:
    """Wrap pypaimon's Rust entry points; count per operation the calls Rust served or not."""
    from pypaimon.read.table_read import TableRead
    from pypaimon.read.table_scan import TableScan
    from pypaimon.write.table_commit import TableCommit
    from pypaimon.write.write_builder import WriteBuilder

    counts = {op: {"rust": 0, "python": 0} for op in ("write", "commit", "plan", "read")}

    def wrap(cls: Any, method: str, op: str) -> None:
        inner = getattr(cls, method)

        def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
            value = inner(self, *args, **kwargs)
            counts[op]["python" if value is None else "rust"] += 1
            return value

        setattr(cls, method, counted)

    wrap(WriteBuilder, "_native_write", "write")
    wrap(TableCommit, "_prepare_native_commit", "commit")
    wrap(TableScan, "_try_native_plan", "plan")
    wrap(TableRead, "_try_native_batches", "read")
    return counts


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
    parser.add_argument("--buckets", type=int, default=1)
    parser.add_argument("--native", action="store_true", help="use pypaimon's Rust core")
    args = parser.parse_args()
    options = PAIMON_RUST_OPTIONS if args.native else {}

    base = read_ipc(os.path.join(args.data, "base.arrow"))
    upsert = read_ipc(os.path.join(args.data, "upsert.arrow"))
    base, upsert = _scaled(base, upsert, args.rows or base.num_rows)

    catalog = CatalogFactory.create({"warehouse": args.warehouse})
    catalog.create_database("db", True)
    schema = Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"],
                                        options={"bucket": str(args.buckets)})
    catalog.create_table("db.t", schema, False)
    table = catalog.get_table("db.t").copy(options)
    catalog.create_table("db.warmup", schema, False)
    for part in (base.slice(0, 1000), upsert.slice(0, 100)):  # pay one-time imports here
        _write(catalog.get_table("db.warmup").copy(options), part)
    builder = catalog.get_table("db.warmup").copy(options).new_read_builder()
    builder.new_read().to_arrow(builder.new_scan().plan().splits())

    out: dict[str, Any] = {"system": "pypaimon", "version": version("pypaimon"),
                           "pyarrow": pa.__version__, "rows": base.num_rows,
                           "upsert_rows": upsert.num_rows, "commits": args.commits,
                           "buckets": args.buckets}
    if args.native:
        out["rust"] = version("pypaimon-rust")
        out["native"] = count_native()  # counted from here on: the timed calls only

    def write_all() -> None:
        for part in commit_slices(base, args.commits):
            _write(table, part)

    def read() -> pa.Table:
        builder = catalog.get_table("db.t").copy(options).new_read_builder()
        return builder.new_read().to_arrow(builder.new_scan().plan().splits())

    run_phase(out, "write", write_all)
    run_phase(out, "upsert", lambda: _write(table, upsert))
    for _ in range(args.repeat):  # run_phase keeps the best
        merged = run_phase(out, "read", read)
    out["check"] = check_merged(merged, base, upsert)
    emit(out)


if __name__ == "__main__":
    main()
