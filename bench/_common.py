"""Shared helpers for the write/read benchmark.

Imported by ``write_read.py`` (main venv, pyarrow 26) and by ``paimon_write_read.py``
(``.venv-paimon``, pyarrow 19), so it uses only the standard library, numpy and pyarrow.
Data crosses the process boundary as Arrow IPC files; results as one JSON line on stdout.
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc

SEED = 20240601
RESULT_MARKER = "@@RESULT "
Result = dict[str, Any]
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("i32", pa.int32()),
        pa.field("i64", pa.int64()),
        pa.field("f64", pa.float64()),
        pa.field("s", pa.string()),
        pa.field("ts", pa.timestamp("us")),
    ]
)
_TS_BASE_US = 1_700_000_000_000_000


def make_rows(ids: np.ndarray, rng: np.random.Generator) -> pa.Table:
    """Random values (numpy, seeded) for the given keys, in the given (shuffled) key order."""
    n = len(ids)
    labels = pc.cast(pa.array(rng.integers(0, 10**12, n, dtype=np.int64)), pa.string())
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "i32": pa.array(rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int32)),
            "i64": pa.array(rng.integers(-(2**62), 2**62, n, dtype=np.int64)),
            "f64": pa.array(rng.standard_normal(n)),
            "s": pc.binary_join_element_wise("row-", labels, ""),
            "ts": pa.array(_TS_BASE_US + rng.integers(0, 10**14, n, dtype=np.int64)).cast(
                pa.timestamp("us")
            ),
        },
        schema=SCHEMA,
    )


def make_data(rows: int, upsert: int, seed: int = SEED) -> tuple[pa.Table, pa.Table]:
    """The base rows (keys 0..rows-1, shuffled) and ``upsert`` rows for random existing keys."""
    rng = np.random.default_rng(seed)
    base = make_rows(rng.permutation(rows).astype(np.int64), rng)
    upsert_ids = rng.choice(rows, size=min(upsert, rows), replace=False).astype(np.int64)
    return base, make_rows(upsert_ids, rng)


def make_chunk(index: int, rows: int, seed: int = SEED) -> pa.Table:
    """Chunk ``index`` of a big write: keys index*rows..(index+1)*rows-1, shuffled."""
    rng = np.random.default_rng([seed, index])
    return make_rows(index * rows + rng.permutation(rows).astype(np.int64), rng)


def commit_slices(table: pa.Table, commits: int) -> list[pa.Table]:
    """Split the rows into ``commits`` contiguous slices of (almost) equal size."""
    bounds = np.linspace(0, table.num_rows, commits + 1).astype(int)
    return [table.slice(a, b - a) for a, b in zip(bounds[:-1], bounds[1:])]


def expected_merged(base: pa.Table, upsert: pa.Table) -> pa.Table:
    """What a deduplicate merge of ``upsert`` over ``base`` must read back, sorted by id."""
    kept = base.filter(pc.invert(pc.is_in(base["id"], value_set=upsert["id"])))
    return pa.concat_tables([kept, upsert]).sort_by("id")


def check_merged(result: pa.Table, base: pa.Table, upsert: pa.Table) -> str:
    """Assert the merged read equals the model (row count, upserted values, every row)."""
    if result.num_rows != base.num_rows:
        raise AssertionError(f"merged read has {result.num_rows} rows, expected {base.num_rows}")
    got = result.select(SCHEMA.names).cast(SCHEMA).sort_by("id")
    want = expected_merged(base, upsert)
    probe = upsert.slice(0, 1000).sort_by("id")
    spot = got.filter(pc.is_in(got["id"], value_set=probe["id"])).sort_by("id")
    if not spot.equals(probe):
        raise AssertionError("spot check failed: upserted keys do not carry the upserted values")
    if not got.equals(want):
        raise AssertionError("merged read differs from the expected rows")
    return f"ok: {result.num_rows} rows, {upsert.num_rows} upserted values verified"


def write_ipc(path: str, table: pa.Table) -> None:
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def read_ipc(path: str) -> pa.Table:
    with pa.OSFile(path, "rb") as source:
        return pa.ipc.open_file(source).read_all()


def peak_rss_mib() -> float:
    """This process's peak resident set size (VmHWM), in MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0), so the next peak is one phase's own.

    Garbage and memory the Arrow pool keeps cached from earlier phases are released first.
    """
    import gc

    gc.collect()
    pa.default_memory_pool().release_unused()
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def run_phase(out: Result, name: str, fn: Callable[[], Any], profile: str | None = None) -> Any:
    """Run one phase; record its seconds (best over calls) and its own peak RSS (VmHWM reset
    before it; the max over calls)."""
    reset_peak_rss()
    profiler = cProfile.Profile() if profile == name else None
    start = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    value = fn()
    if profiler is not None:
        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(15)
        out["profile"] = text.getvalue()
    seconds = time.perf_counter() - start
    entry = out.setdefault(name, {"runs": [], "peak_rss_mib": 0.0})
    entry["runs"].append(seconds)
    entry["seconds"] = min(entry["runs"])
    entry["peak_rss_mib"] = max(entry["peak_rss_mib"], peak_rss_mib())
    return value


def emit(result: dict[str, Any]) -> None:
    """Hand the child's result to the parent: one marked JSON line on stdout."""
    sys.stdout.write(RESULT_MARKER + json.dumps(result) + "\n")
    sys.stdout.flush()


def parse_result(stdout: str) -> dict[str, Any]:
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            result: dict[str, Any] = json.loads(line[len(RESULT_MARKER) :])
            return result
    raise RuntimeError("child printed no result line")


# --- reporting (main venv only, but free of lakecore imports) ---------------------------------

TARGETS = {"write": 0.4, "upsert": 0.4, "read": 0.35}  # ratios to raw pyarrow (zstd)
BIG_RSS_LIMIT_MIB = 1.5 * 1024
COLUMNS = ("phase", "system", "rows", "seconds", "rows/s", "ratio", "target", "result", "peak RSS")


def row(phase: str, system: str, rows: int, seconds: float, base_rate: float | None,
        target: float | None = None, rss: float | None = None) -> Result:
    rate = rows / seconds
    ratio = None if base_rate is None else rate / base_rate
    result = None if target is None or ratio is None else ("PASS" if ratio >= target else "MISS")
    return {"phase": phase, "system": system, "rows": rows, "seconds": seconds,
            "rows_per_s": rate, "ratio": ratio, "target": f">= {target}x" if target else None,
            "result": result, "peak_rss_mib": rss}


def build_rows(main: Result | None, paimon: Result | None, big: Result | None,
               paimon_label: str) -> list[Result]:
    """The report's rows from the children's results (None: that child was skipped/failed)."""
    rows: list[Result] = []
    w_rate = r_rate = None
    lake = None
    if main is not None:
        n = main["rows"]
        w_rate = n / main["raw-write-zstd"]["seconds"]
        r_rate = n / main["raw-read-zstd"]["seconds"]
        for codec in ("zstd", "snappy"):
            for phase, base_rate in (("write", w_rate), ("read", r_rate)):
                res = main[f"raw-{phase}-{codec}"]
                rows.append(row(phase, f"pyarrow ({codec})", n, res["seconds"], base_rate,
                                rss=res["peak_rss_mib"]))
        lake = main if "read" in main else None
    for system, res, targets in (("lakecore", lake, TARGETS), (paimon_label, paimon, {})):
        if res is None:
            continue
        for phase, n, base_rate in (("write", res["rows"], w_rate),
                                    ("upsert", res["upsert_rows"], w_rate),
                                    ("read", res["rows"], r_rate)):
            label = "read (merged)" if phase == "read" else phase
            rows.append(row(label, system, n, res[phase]["seconds"], base_rate,
                            targets.get(phase), res[phase]["peak_rss_mib"]))
    if big is not None:
        label = f"write {big['rows'] / 1e6:g}M"
        big_row = row(label, "lakecore", big["rows"], big["seconds"], w_rate,
                      rss=big["peak_rss_mib"])
        ok = big["peak_rss_mib"] < BIG_RSS_LIMIT_MIB
        big_row.update(target="RSS < 1.5 GiB", result="PASS" if ok else "MISS")
        rows.append(big_row)
    return rows


def _cells(row: dict[str, Any]) -> list[str]:
    def num(key: str, fmt: str) -> str:
        return "-" if row.get(key) is None else format(row[key], fmt)

    return [
        row["phase"],
        row["system"],
        num("rows", ","),
        num("seconds", ".3f"),
        num("rows_per_s", ",.0f"),
        "-" if row.get("ratio") is None else f"{row['ratio']:.3f}x",
        row.get("target") or "-",
        row.get("result") or "-",
        "-" if row.get("peak_rss_mib") is None else f"{row['peak_rss_mib']:,.0f} MiB",
    ]


def text_table(rows: list[dict[str, Any]]) -> str:
    cells = [list(COLUMNS)] + [_cells(r) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in rows]
    return "\n".join(lines)


def machine_info() -> dict[str, Any]:
    import os
    import platform

    cpu = "unknown"
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "numpy": np.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "loadavg_start": os.getloadavg()[0],
    }


def replace_section(path: str, heading: str, body: str) -> None:
    """Put ``heading`` + ``body`` into the markdown file, replacing that section if present."""
    try:
        with open(path) as md:
            text = md.read()
    except FileNotFoundError:
        text = "# Benchmark results\n"
    lines = text.rstrip("\n").split("\n")
    start = next((i for i, line in enumerate(lines) if line.strip() == heading), None)
    section = [heading, "", *body.rstrip("\n").split("\n")]
    if start is None:
        lines += ["", *section]
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), None)
        tail = [] if end is None else ["", *lines[end:]]
        lines = lines[:start] + section + tail
    with open(path, "w") as md:
        md.write("\n".join(lines) + "\n")
