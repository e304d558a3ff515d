"""Run pypaimon (in its own venv) from the main test suite and compare its reads with ours.

pypaimon pins pyarrow < 20 while lakecore uses pyarrow 26, so pypaimon runs in ``.venv-paimon``
through ``paimon_driver.py`` in a subprocess. Inputs go over as Arrow IPC files in a temporary
directory, results come back as JSON on stdout and IPC files loaded here with pyarrow 26.

Every process start costs about 1.4 s (mostly pypaimon's imports): batch several operations
into one ``paimon_script`` call when a test needs more than one or two.
"""

from __future__ import annotations

import decimal
import functools
import json
import math
import os
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("paimon_driver.py")
PAIMON_PYTHON = Path(
    os.environ.get("LAKECORE_PAIMON_PYTHON") or REPO_ROOT / ".venv-paimon" / "bin" / "python"
)
DEFAULT_TIMEOUT = float(os.environ.get("LAKECORE_PAIMON_TIMEOUT", "300"))
SKIP_REASON = "pypaimon venv missing: run make .venv-paimon"

Step = Mapping[str, Any]
PathLike = str | os.PathLike[str]


class PaimonDriverError(RuntimeError):
    """The driver failed; carries its stderr (pypaimon's traceback) so the test shows the cause."""

    def __init__(self, argv: Sequence[str], returncode: int | None, stderr: str) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr
        status = "timed out" if returncode is None else f"exited {returncode}"
        super().__init__(f"paimon driver {status}: {' '.join(self.argv)}\n{stderr}")


@functools.cache
def paimon_available() -> bool:
    """Whether the pypaimon interpreter exists and can import pypaimon (checked once)."""
    if not PAIMON_PYTHON.is_file():
        return False
    try:
        probe = subprocess.run(
            [str(PAIMON_PYTHON), "-c", "import pyarrow, pypaimon"],
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


requires_paimon = pytest.mark.skipif(not paimon_available(), reason=SKIP_REASON)


def run_driver(args: Sequence[str], timeout: float = DEFAULT_TIMEOUT) -> Any:
    """Run one driver command line and return its decoded JSON result."""
    argv = [str(PAIMON_PYTHON), str(DRIVER), *args]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as error:
        stderr = error.stderr.decode(errors="replace") if isinstance(error.stderr, bytes) else ""
        raise PaimonDriverError(argv, None, stderr or f"(no stderr after {timeout} s)") from error
    if done.returncode != 0:
        raise PaimonDriverError(argv, done.returncode, done.stderr)
    return json.loads(done.stdout)


def write_ipc(path: PathLike, data: pa.Table | pa.Schema) -> str:
    """Write a table (or an empty one with the schema) in the IPC file format pyarrow 19 reads."""
    table = data.empty_table() if isinstance(data, pa.Schema) else data
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return str(path)


def read_ipc(path: PathLike) -> pa.Table:
    """Load an IPC file fully into memory, so its temporary directory can go right away."""
    with pa.ipc.open_file(pa.BufferReader(Path(path).read_bytes())) as reader:
        return reader.read_all()


def _driver_step(index: int, step: Step, workdir: Path) -> dict[str, Any]:
    """Turn a Python-side step (Arrow objects) into the driver's JSON step (file paths)."""
    out: dict[str, Any] = {k: v for k, v in step.items() if k not in ("schema", "data")}
    out["warehouse"] = str(step["warehouse"])
    op = step["op"]
    if op == "create":
        out["schema_ipc"] = write_ipc(workdir / f"{index}-schema.arrow", step["schema"])
    elif op == "write":
        data = step["data"]
        tables = [data] if isinstance(data, pa.Table) else list(data)
        out["data"] = [
            write_ipc(workdir / f"{index}-data-{n}.arrow", table) for n, table in enumerate(tables)
        ]
    elif op == "read":
        out["out"] = str(workdir / f"{index}-out.arrow")
    if out.get("projection") is not None:
        out["projection"] = list(out["projection"])
    return out


def _result(op: str, raw: Any) -> Any:
    if op == "read":
        return read_ipc(raw["out"])
    if op == "write":
        return raw["snapshot_ids"]
    if op == "plan":
        return raw["splits"]
    if op == "create":
        return None
    return raw


def paimon_script(
    steps: Sequence[Step], *, timeout: float = DEFAULT_TIMEOUT, workdir: PathLike | None = None
) -> list[Any]:
    """Run several pypaimon operations in one process (one ~1.4 s start instead of many).

    Steps are dicts with ``op`` (``create``, ``write``, ``read``, ``plan``, ``snapshots``,
    ``alter``: see ``alter_step``),
    ``warehouse``, ``table`` and the keyword arguments of the matching ``paimon_*`` function,
    with ``schema`` a ``pa.Schema`` and ``data`` a ``pa.Table`` or a list of them (one commit
    each). Results in step order: create -> None, write -> snapshot ids after each commit,
    read -> ``pa.Table``, plan -> list of split dicts, snapshots -> list of snapshot dicts.
    Pass ``workdir`` to keep the IPC files for debugging.
    """
    with tempfile.TemporaryDirectory(prefix="paimon-driver-") as tmp:
        base = Path(workdir) if workdir is not None else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        driver_steps = [_driver_step(i, step, base) for i, step in enumerate(steps)]
        steps_file = base / "steps.json"
        steps_file.write_text(json.dumps(driver_steps), encoding="utf-8")
        raw = run_driver(["script", "--steps", str(steps_file)], timeout=timeout)
        return [_result(step["op"], result) for step, result in zip(steps, raw, strict=True)]


def paimon_create(
    warehouse: PathLike,
    table: str,
    schema: pa.Schema,
    *,
    partition_keys: Sequence[str] = (),
    primary_keys: Sequence[str] = (),
    options: Mapping[str, str] | None = None,
    ignore_if_exists: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
) -> None:
    """Create ``db.table`` with pypaimon (the database too, when missing)."""
    step = {
        "op": "create",
        "warehouse": warehouse,
        "table": table,
        "schema": schema,
        "partition_keys": list(partition_keys),
        "primary_keys": list(primary_keys),
        "options": dict(options or {}),
        "ignore_if_exists": ignore_if_exists,
    }
    paimon_script([step], timeout=timeout)


def paimon_write(
    warehouse: PathLike,
    table: str,
    data: pa.Table | Sequence[pa.Table],
    *,
    overwrite: Mapping[str, Any] | None = None,
    overwrite_all: bool = False,
    dynamic_overwrite: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
) -> list[int | None]:
    """Batch-write with pypaimon, one commit per table; returns the latest snapshot id after each.

    ``overwrite`` replaces one partition (static: its partition spec is enforced and empty data
    deletes the partition); ``overwrite_all`` the whole table; ``dynamic_overwrite`` keeps
    pypaimon's default of replacing only the partitions present in the data.
    """
    step = {
        "op": "write",
        "warehouse": warehouse,
        "table": table,
        "data": data,
        "overwrite": dict(overwrite) if overwrite is not None else None,
        "overwrite_all": overwrite_all,
        "dynamic_overwrite": dynamic_overwrite,
    }
    result: list[int | None] = paimon_script([step], timeout=timeout)[0]
    return result


def paimon_alter(
    warehouse: PathLike,
    table: str,
    changes: Sequence[Any],
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> None:
    """``catalog.alter_table`` with pypaimon. ``changes`` are lakecore ``SchemaChange``s (sent
    as Paimon's JSON form) or that JSON form itself."""
    paimon_script([alter_step(warehouse, table, changes)], timeout=timeout)


def alter_step(warehouse: PathLike, table: str, changes: Sequence[Any],
               expect_error: bool = False) -> dict[str, Any]:
    """A ``paimon_script`` step altering ``table`` (see ``paimon_alter``). With
    ``expect_error`` its result is ``{"error": repr or None}`` instead of failing the script."""
    return {"op": "alter", "warehouse": warehouse, "table": table, "expect_error": expect_error,
            "changes": [c if isinstance(c, Mapping) else c.to_json() for c in changes]}


def paimon_read(
    warehouse: PathLike,
    table: str,
    *,
    snapshot_id: int | None = None,
    projection: Sequence[str] | None = None,
    filter: Sequence[Sequence[Any]] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> pa.Table:
    """Read the table (or one snapshot of it) through pypaimon's scan + merge read.

    ``filter`` is an AND of ``[field, method, *literals]`` terms with PredicateBuilder's
    method names, e.g. ``[["dt", "equal", "a"], ["v", "greater_than", 3]]``.
    """
    step = {
        "op": "read",
        "warehouse": warehouse,
        "table": table,
        "snapshot_id": snapshot_id,
        "projection": list(projection) if projection is not None else None,
        "filter": [list(term) for term in filter] if filter is not None else None,
    }
    result: pa.Table = paimon_script([step], timeout=timeout)[0]
    return result


def paimon_plan(
    warehouse: PathLike,
    table: str,
    *,
    snapshot_id: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> list[dict[str, Any]]:
    """pypaimon's splits: partition, bucket, raw_convertible and files (name, level, seqs, ...)."""
    step = {"op": "plan", "warehouse": warehouse, "table": table, "snapshot_id": snapshot_id}
    result: list[dict[str, Any]] = paimon_script([step], timeout=timeout)[0]
    return result


def paimon_snapshots(
    warehouse: PathLike, table: str, *, timeout: float = DEFAULT_TIMEOUT
) -> list[dict[str, Any]]:
    """Snapshots as pypaimon decodes them: id, commit_kind, commit_user, record counts, ..."""
    step = {"op": "snapshots", "warehouse": warehouse, "table": table}
    result: list[dict[str, Any]] = paimon_script([step], timeout=timeout)[0]
    return result


def _normalize_column(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Give equal values one representation whichever reader produced them."""
    kind = column.type
    if pa.types.is_dictionary(kind):
        return _normalize_column(column.cast(kind.value_type))
    if pa.types.is_timestamp(kind):
        if kind.tz is not None:
            # Same instant, one zone: compare as naive UTC.
            column = pc.cast(column, pa.timestamp(kind.unit, "UTC")).cast(pa.timestamp(kind.unit))
        if kind.unit == "ns":
            as_us = pc.cast(column, pa.timestamp("us"), safe=False)
            lossless = pc.all(pc.equal(pc.cast(as_us, pa.timestamp("ns")), column)).as_py()
            return as_us if lossless in (True, None) else column.cast(pa.int64())
        return pc.cast(column, pa.timestamp("us"))
    if pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return column.cast(pa.string())
    if pa.types.is_large_binary(kind) or pa.types.is_binary_view(kind):
        return column.cast(pa.binary())
    return column


def _normalize_value(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"  # NaN != NaN would fail equal rows.
    if isinstance(value, decimal.Decimal):
        return value.normalize()  # Decimal("1.50") and Decimal("1.5") print alike.
    return value


def _sort_key(row: Mapping[str, Any], sort_by: Sequence[str]) -> tuple[Any, ...]:
    # Nulls first, like Paimon's key order; the row's repr breaks ties deterministically.
    return (*((row[c] is not None, row[c]) for c in sort_by), repr(sorted(row.items())))


def canonical(
    table: pa.Table, sort_by: str | Sequence[str], *, exclude: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """Rows as dicts with columns in name order, sorted, values normalized for ``==``.

    Two reads of the same data through pypaimon and lakecore compare equal with this even when
    they differ in column order, row order, chunking, string/binary width, timestamp unit or
    zone (instants compared in UTC), decimal scale, dictionary encoding or NaN.
    """
    keys = [sort_by] if isinstance(sort_by, str) else list(sort_by)
    skip = set(exclude)
    names = sorted(n for n in table.column_names if n not in skip)
    columns = {name: _normalize_column(table.column(name)).to_pylist() for name in names}
    rows = [
        {name: _normalize_value(columns[name][i]) for name in names} for i in range(table.num_rows)
    ]
    return sorted(rows, key=lambda row: _sort_key(row, keys))
