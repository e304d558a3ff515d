"""The history curve's pypaimon side (``scaling.py``); runs under ``.venv-paimon`` (pyarrow 19).

``--template`` is a warehouse that lakecore built (``commit.py``'s table ``db.t``: id, v; many
OVERWRITE snapshots of one row). Every round works on a fresh hard-linked copy of it: one
timed batch commit of one row (pypaimon gives every batch commit a new commit user, as a
per-run user of lakecore) unless ``--skip-commit``, and ``--plans`` timed scan plans
(``new_read_builder().new_scan().plan()``) on a freshly opened table. With ``--native`` the
table is used with pypaimon-rust's options (``PAIMON_RUST_OPTIONS``) and the plans that really
ran in Rust are counted. A first round is a warm-up (imports), not timed. Prints one
``@@RESULT {json}`` line.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from importlib.metadata import version
from typing import Any

import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    PAIMON_RUST_OPTIONS,
    discard,
    emit,
    link_copy,
    peak_rss_mib,
    reset_peak_rss,
)
from paimon_write_read import count_native  # noqa: E402
from pypaimon import CatalogFactory  # noqa: E402

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])  # commit.py's


def open_table(warehouse: str, options: dict[str, str]) -> Any:
    return CatalogFactory.create({"warehouse": warehouse}).get_table("db.t").copy(options)


def timed_commit(table: Any, row_id: int) -> float:
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    try:
        write.write_arrow(pa.table({"id": [row_id], "v": [f"v{row_id}"]}, schema=SCHEMA))
        messages = write.prepare_commit()
        start = time.perf_counter()
        commit.commit(messages)
        return time.perf_counter() - start
    finally:
        write.close()
        commit.close()


def timed_plan(table: Any) -> float:
    start = time.perf_counter()
    table.new_read_builder().new_scan().plan()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--template", required=True, help="warehouse holding db.t")
    parser.add_argument("--workdir", required=True, help="where the copies go")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--plans", type=int, default=10, help="plans per round")
    parser.add_argument("--native", action="store_true", help="use pypaimon's Rust core")
    parser.add_argument("--skip-commit", action="store_true")
    args = parser.parse_args()
    options = PAIMON_RUST_OPTIONS if args.native else {}
    copy = os.path.join(args.workdir, "paimon-copy")
    out: dict[str, Any] = {"version": version("pypaimon"), "pyarrow": pa.__version__,
                           "commit": [], "plan": []}
    if args.native:
        out["rust"] = version("pypaimon-rust")
    for round_ in range(args.rounds + 1):  # round 0: warm-up
        if round_ == 1:
            reset_peak_rss()
            if args.native:
                out["native"] = count_native()  # counted from here on: the timed calls only
        discard(copy)
        link_copy(args.template, copy)
        if not args.skip_commit:
            took = timed_commit(open_table(copy, options), 10**9 + round_)
            out["commit"] += [took] if round_ else []
        for _ in range(args.plans):
            took = timed_plan(open_table(copy, options))
            out["plan"] += [took] if round_ else []
    discard(copy)
    out["peak_rss_mib"] = peak_rss_mib()
    emit(out)


if __name__ == "__main__":
    main()
