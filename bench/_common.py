"""Shared helpers of the benchmarks: data, phases, child processes, reporting.

Imported by every benchmark, also by the pypaimon children (``paimon_*.py``, run in
``.venv-paimon`` with pyarrow 19), so it uses only the standard library, numpy and pyarrow.
Data crosses the process boundary as Arrow IPC files; results as one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
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


def commit_arrow(table: Any, data: pa.Table) -> None:
    """One batch commit of ``data`` into a lakecore ``table`` (its write closed either way)."""
    builder = table.new_batch_write_builder()
    write = builder.new_write()
    try:
        write.write_arrow(data)
        builder.new_commit().commit(write.prepare_commit())
    finally:
        write.close()


def cold_start() -> None:
    """Forget the manifests this process decoded or wrote (``lakecore.store.manifest_cache``):
    a read job, a plan or an Airflow run's commit is a new process's. (A streaming writer
    keeps them from its previous commits, as Paimon's writers keep their manifest cache.)"""
    from lakecore.store import manifest_cache

    manifest_cache.clear()


def read_all(catalog: Any, name: str) -> pa.Table:
    """A full read of the lakecore table ``name`` of ``catalog``, as a new process makes it."""
    cold_start()
    builder = catalog.get_table(name).new_read_builder()
    return builder.new_read().to_arrow(builder.new_scan().plan().splits())


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


def link_copy(src: str, dst: str) -> None:
    """Copy the directory tree ``src`` to ``dst`` as hard links (``cp -al``: fast for tables of
    many small files), except the snapshot hints LATEST and EARLIEST, which are real copies: a
    writer may rewrite a hint in place (pypaimon does when its rename fails), which would
    change ``src`` too."""
    subprocess.run(["cp", "-al", src, dst], check=True)
    for folder, _, files in os.walk(dst):
        for name in files:
            if name in ("LATEST", "EARLIEST"):
                path = os.path.join(folder, name)
                os.unlink(path)
                shutil.copyfile(os.path.join(src, os.path.relpath(path, dst)), path)


def median_p99(seconds: list[float]) -> tuple[float, float]:
    """Median and 99th percentile (nearest rank) of timings in seconds, in milliseconds."""
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return float(np.median(ordered)) * 1000, p99 * 1000


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
    entry = record_run(out, name, seconds)
    entry["peak_rss_mib"] = max(entry["peak_rss_mib"], peak_rss_mib())
    return value


def record_run(out: Result, name: str, seconds: float) -> Result:
    """Add one timed run to ``out[name]`` (its runs, and their best as its seconds)."""
    entry: Result = out.setdefault(name, {"runs": [], "peak_rss_mib": 0.0})
    entry["runs"].append(seconds)
    entry["seconds"] = min(entry["runs"])
    return entry


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

BENCH = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(BENCH, "out")
RESULTS_MD = os.path.join(BENCH, "RESULTS.md")
PAIMON_PYTHON = os.path.join(os.path.dirname(BENCH), ".venv-paimon", "bin", "python")
# Scratch directories wait here until the run ends (``discard``); ``run_all.py`` sets
# DEFER_CLEANUP_ENV so that one benchmark's cleanup cannot land in the next one's timings.
TRASH_DIR = os.path.join(OUT_DIR, ".trash")
DEFER_CLEANUP_ENV = "LAKECORE_BENCH_DEFER_CLEANUP"
TARGETS = {"write": 0.4, "upsert": 0.4, "read": 0.35}  # ratios to raw pyarrow (zstd)
BIG_RSS_LIMIT_MIB = 1024  # writing 10M rows: peak RSS < 1 GiB (issue 17; was 1.5 GiB)
COLUMNS = ("phase", "system", "rows", "seconds", "rows/s", "ratio", "target", "result", "peak RSS")
SUMMARY_COLUMNS = ("benchmark", "phase", "system", "rows/s or ms", "ratio to baseline",
                   "baseline", "target", "PASS/MISS", "peak RSS")


def row(phase: str, system: str, rows: int, seconds: float, base_rate: float | None,
        target: float | None = None, rss: float | None = None,
        baseline: str | None = None) -> Result:
    """One table row. ``baseline`` names what the ratio is over: a row with one goes into the
    summary of ``run_all.py``; baseline and information rows leave it out."""
    rate = rows / seconds
    ratio = None if base_rate is None else rate / base_rate
    result = None if target is None or ratio is None else ("PASS" if ratio >= target else "MISS")
    return {"phase": phase, "system": system, "rows": rows, "seconds": seconds,
            "rows_per_s": rate, "ratio": ratio, "target": f">= {target}x" if target else None,
            "result": result, "peak_rss_mib": rss, "baseline": baseline}


def rss_limit(entry: Result, limit_mib: float) -> Result:
    """Judge ``entry`` by its peak RSS against ``limit_mib`` instead of by its ratio."""
    ok = entry["peak_rss_mib"] < limit_mib
    entry.update(target=f"RSS < {limit_mib / 1024:g} GiB", result="PASS" if ok else "MISS")
    return entry


def rate_label(name: str, rate: float | None) -> str | None:
    return None if rate is None else f"{name} ({rate:,.0f} rows/s)"


def build_rows(main: Result | None, big: Result | None,
               others: Sequence[tuple[str, Result | None]] = (),
               targets: Mapping[str, float] = TARGETS) -> list[Result]:
    """The write/read report's rows from the children's results (None: skipped/failed):
    ``main`` (raw pyarrow and lakecore, judged by ``targets``), ``big`` (the memory run) and
    ``others``, (label, result) of the pypaimon children (same phases as lakecore's, no
    targets)."""
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
        if "raw-write-zstd-files" in main:  # as many files as lakecore writes (information)
            k = main["layout_files"]
            for phase, base_rate in (("write", w_rate), ("read", r_rate)):
                res = main[f"raw-{phase}-zstd-files"]
                rows.append(row(phase, f"pyarrow (zstd, {k} files)", n, res["seconds"],
                                base_rate, rss=res["peak_rss_mib"]))
        lake = main if "read" in main else None
    labels = {"write": rate_label("pyarrow write zstd", w_rate),
              "read": rate_label("pyarrow read zstd", r_rate)}
    for system, res, goals in (("lakecore", lake, targets),
                               *((label, res, {}) for label, res in others)):
        if res is None:
            continue
        for phase, n, base_rate in (("write", res["rows"], w_rate),
                                    ("upsert", res["upsert_rows"], w_rate),
                                    ("read", res["rows"], r_rate)):
            label = "read (merged)" if phase == "read" else phase
            rows.append(row(label, system, n, res[phase]["seconds"], base_rate,
                            goals.get(phase), res[phase]["peak_rss_mib"],
                            labels["read" if phase == "read" else "write"]))
    if big is not None:
        label = f"write {big['rows'] / 1e6:g}M"
        rows.append(rss_limit(row(label, "lakecore", big["rows"], big["seconds"], w_rate,
                                  rss=big["peak_rss_mib"], baseline=labels["write"]),
                              BIG_RSS_LIMIT_MIB))
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
        mib(row.get("peak_rss_mib")),
    ]


def mib(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} MiB"


def format_table(header: Sequence[str], cells: list[list[str]], markdown: bool = False) -> str:
    """A plain-text (aligned columns) or markdown table."""
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in cells])
    table = [list(header), *cells]
    widths = [max(len(c[i]) for c in table) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def text_table(rows: list[dict[str, Any]]) -> str:
    return format_table(COLUMNS, [_cells(r) for r in rows])


def markdown_table(rows: list[dict[str, Any]]) -> str:
    return format_table(COLUMNS, [_cells(r) for r in rows], markdown=True)


def discard(path: str) -> None:
    """Remove the scratch directory ``path``, at the end of the run, not now (``empty_trash``).

    On ext4 a mass delete makes file creation slow near the freed inodes for a minute after
    (measured here: 15 us per create before deleting 3,000 files, 340 us 5-15 s after, 110 us
    30 s after): a cleanup between phases would charge the next phase's creates, lakecore's
    one file per (commit, bucket) against the baseline's one file, to the harness. A rename
    frees no inode; a directory on another filesystem is deleted at once."""
    if not os.path.lexists(path):
        return
    os.makedirs(TRASH_DIR, exist_ok=True)
    try:
        os.rename(path, os.path.join(tempfile.mkdtemp(dir=TRASH_DIR), "x"))
    except OSError:
        shutil.rmtree(path, ignore_errors=True)


def empty_trash(force: bool = False) -> None:
    """Delete what ``discard`` set aside, unless ``run_all.py`` defers it to its own end."""
    if force or not os.environ.get(DEFER_CLEANUP_ENV):
        shutil.rmtree(TRASH_DIR, ignore_errors=True)


def create_cost_us(directory: str, files: int = 200) -> float:
    """Microseconds of one empty file's creation in a new directory under ``directory`` (the
    files are kept until the run ends: ``discard``). Varies on this VM's ext4 by where the
    directory lands and what was deleted near it lately; lakecore creates a file per
    (commit, bucket), the raw baselines one, so the line under each table shows it."""
    os.makedirs(directory, exist_ok=True)
    probe = tempfile.mkdtemp(prefix="create-probe-", dir=directory)
    start = time.perf_counter()
    for i in range(files):
        with open(os.path.join(probe, str(i)), "wb"):
            pass
    took = (time.perf_counter() - start) / files * 1e6
    discard(probe)
    return took


def machine_info() -> dict[str, Any]:
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
        "create_us": create_cost_us(OUT_DIR),
    }


def machine_line(machine: Result) -> str:
    """Date and machine, and lakecore's version when the caller put it in ``machine``."""
    line = (f"{machine['date']} — {machine['nproc']} CPUs, {machine['cpu']}, Python "
            f"{machine['python']}, pyarrow {machine['pyarrow']}")
    line += f", lakecore {machine['lakecore']}" if "lakecore" in machine else ""
    if "create_us" in machine:
        line += f"; creating a file in bench/out took {machine['create_us']:.0f} us"
    return line


def load_note(machine: Result) -> str:
    machine["loadavg_end"] = os.getloadavg()[0]
    return (f"1-min load average: {machine['loadavg_start']:.1f} at start, "
            f"{machine['loadavg_end']:.1f} at end (other work on the machine skews timings).")


def failures(ran: Iterable[tuple[str, Any, bool]]) -> list[str]:
    """Names of the (name, result, tried) children that were tried and gave no result."""
    return [name for name, res, tried in ran if tried and res is None]


def spawn(command: list[str], label: str, env: dict[str, str] | None = None) -> Result | None:
    """Run a child; its result line, or None (its stderr's tail printed) when it failed."""
    print(f"running {label} ...", file=sys.stderr, flush=True)
    done = subprocess.run(command, capture_output=True, text=True,
                          env=None if env is None else {**os.environ, **env})
    if done.returncode != 0:
        print(f"{label} FAILED (exit {done.returncode}):\n{done.stderr[-4000:]}", file=sys.stderr)
        return None
    return parse_result(done.stdout)


PAIMON_RUST_OPTIONS = {  # pypaimon 2.1's switches for its optional Rust core (pypaimon-rust)
    "write.native.enabled": "true", "read.native.enabled": "true",
    "scan.native-plan.enabled": "true", "commit.native.enabled": "true"}


def paimon_venv() -> Result:
    """What ``.venv-paimon`` offers: {"pypaimon": version, "rust": version} (None: missing)
    and "why" the Rust core cannot be used, if it cannot."""
    if not os.path.exists(PAIMON_PYTHON):
        return {"pypaimon": None, "rust": None, "why": f"no venv at {PAIMON_PYTHON}"}
    probe = ("import importlib.metadata as m, pypaimon\nprint(m.version('pypaimon'))\n"
             "import pypaimon_rust.datafusion\nprint(m.version('pypaimon-rust'))\n")
    done = subprocess.run([PAIMON_PYTHON, "-c", probe], capture_output=True, text=True)
    found = done.stdout.split()
    why = None if len(found) == 2 else (done.stderr.strip().splitlines() or ["?"])[-1]
    return {"pypaimon": found[0] if found else None,
            "rust": found[1] if len(found) == 2 else None, "why": why}


def prepare_data(workdir: str, rows: int, upsert: int) -> None:
    """``base.arrow`` and ``upsert.arrow`` (``make_data``) in ``workdir``, for the children."""
    base, changes = make_data(rows, upsert)
    for name, table in (("base", base), ("upsert", changes)):
        write_ipc(os.path.join(workdir, f"{name}.arrow"), table)


def data_args(parser: argparse.ArgumentParser, rounds_help: str) -> None:
    """The options of the write benchmark's data: rows, commits, upserted keys, rounds."""
    parser.add_argument("--rows", type=int, default=1_000_000, help="base rows (default 1M)")
    parser.add_argument("--commits", type=int, default=10, help="commits for the base rows")
    parser.add_argument("--upsert", type=int, default=200_000, help="existing keys upserted")
    parser.add_argument("--rounds", type=int, default=3, help=rounds_help)


def child_args(parser: argparse.ArgumentParser, children: Iterable[str]) -> None:
    """``--keep`` and the hidden options by which a benchmark starts its own children."""
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--child", choices=sorted(children), help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--warehouse", help=argparse.SUPPRESS)


def run_as_child(args: argparse.Namespace, children: dict[str, Callable[[Any], Result]]) -> bool:
    """If this process was started as a child (``--child KIND``), run it and emit its result."""
    if not args.child:
        return False
    emit(children[args.child](args))
    return True


def start(name: str, rows: int, upsert: int) -> tuple[Result, str]:
    """Machine facts (at the start) and a work directory under ``bench/out`` holding the
    rows of ``prepare_data``."""
    machine = machine_info()
    os.makedirs(OUT_DIR, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix=f"{name}-", dir=OUT_DIR)
    prepare_data(workdir, rows, upsert)
    return machine, workdir


def summarize(rows: list[Result]) -> list[Result]:
    """The rows measured against a baseline, in the form of ``run_all.py``'s summary."""
    return [summary_row(r["phase"], r["system"], r["rows_per_s"], "rows/s", r["ratio"],
                        r["baseline"], r.get("target"), r.get("result"), r.get("peak_rss_mib"))
            for r in rows if r.get("baseline")]


def summary_row(phase: str, system: str, value: float, unit: str, ratio: float | None = None,
                baseline: str | None = None, target: str | None = None,
                result: str | None = None, rss: float | None = None,
                ratio_unit: str = "x") -> Result:
    """One row of the summary: ``value`` in ``unit`` (rows/s, ms, s, commits/s); ``ratio`` is
    a factor (``ratio_unit`` "x") or a difference in ``ratio_unit`` (e.g. "ms")."""
    return {"phase": phase, "system": system, "value": value, "unit": unit, "ratio": ratio,
            "ratio_unit": ratio_unit, "baseline": baseline, "target": target, "result": result,
            "peak_rss_mib": rss}


def summary_cells(entry: Result) -> list[str]:
    value, unit = entry["value"], entry["unit"]
    shown = f"{value:,.0f} {unit}" if value >= 100 else f"{value:,.1f} {unit}"
    ratio = entry.get("ratio")
    if ratio is None:
        ratio_text = "-"
    elif entry.get("ratio_unit", "x") == "x":
        ratio_text = f"{ratio:.2f}x"
    else:
        ratio_text = f"{ratio:+.1f} {entry['ratio_unit']}"
    return [entry.get("benchmark", "-"), entry["phase"], entry["system"], shown, ratio_text,
            entry.get("baseline") or "-", entry.get("target") or "-", entry.get("result") or "-",
            mib(entry.get("peak_rss_mib"))]


def render(head: str, rows: list[Result], notes: list[str]) -> tuple[str, str]:
    """(text for stdout, markdown section body) of one results table with its notes."""
    return render_table(head, COLUMNS, [_cells(r) for r in rows], notes)


def render_table(head: str, header: Sequence[str], cells: list[list[str]],
                 notes: list[str]) -> tuple[str, str]:
    """Like ``render``, for a table of other columns."""
    text = "\n".join([head, format_table(header, cells), *notes])
    body = "\n".join([head, "", format_table(header, cells, markdown=True), "",
                      *(f"- {n}" for n in notes)])
    return text, body


def publish(name: str, doc: Result, text: str, body: str) -> None:
    """Print ``text``; write ``doc`` to ``bench/out/<name>.json`` and ``body`` as the
    ``## <name>`` section of ``bench/RESULTS.md``."""
    print(text)
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, f"{name}.json"), "w") as out:
        json.dump(doc, out, indent=2)
    replace_section(RESULTS_MD, f"## {name}", body)


def finish(name: str, machine: Result, args: argparse.Namespace, workdir: str,
           rows: list[Result], notes: list[str], failed: list[str],
           profiled: tuple[str, Result | None] = ("", None), **extra: Any) -> int:
    """End a benchmark: publish its table (``rows``, ``notes``, the FAILED children), print
    the profile of the (phase, child result) ``profiled``, remove ``workdir`` unless
    ``--keep``; return the exit code. ``extra`` goes into the JSON."""
    if failed:
        notes.append(f"FAILED: {', '.join(failed)} (see stderr)")
    text, body = render(machine_line(machine), rows, notes)
    publish(name, {"machine": machine, "args": vars(args), "rows": rows, "notes": notes,
                   "summary": summarize(rows), **extra}, text, body)
    phase, result = profiled
    if result is not None:
        print(f"\nprofile of lakecore {phase} (extra run, cProfile, top 15 cumulative):")
        print(result.get("profile", "(none)"))
    if not args.keep:
        discard(workdir)
    empty_trash()
    return 1 if failed else 0


def replace_section(path: str, heading: str, body: str, top: bool = False) -> None:
    """Put ``heading`` + ``body`` into the markdown file, replacing that section if present;
    a new section goes at the end, or (``top``) right under the file's title."""
    try:
        with open(path) as md:
            text = md.read()
    except FileNotFoundError:
        text = "# Benchmark results\n"
    lines = text.rstrip("\n").split("\n")
    start = next((i for i, line in enumerate(lines) if line.strip() == heading), None)
    section = [heading, "", *body.rstrip("\n").split("\n")]
    if start is not None:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), None)
        tail = [] if end is None else ["", *lines[end:]]
        lines = lines[:start] + section + tail
    elif top:
        first = next((i for i, line in enumerate(lines) if line.startswith("## ")), len(lines))
        head = lines[:first]
        while head and not head[-1].strip():
            head.pop()
        lines = [*head, "", *section, *([""] + lines[first:] if first < len(lines) else [])]
    else:
        lines += ["", *section]
    with open(path, "w") as md:
        md.write("\n".join(lines) + "\n")
