"""Running the jobs through the real ``spark-submit`` on local[2], as Airflow does: lakecore
comes only from ``dist/lakecore.zip`` (``--py-files``), with the editable install and the
checkout hidden from the driver and the executors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.spark.spark_conf import SESSION_CONF

REPO = Path(__file__).resolve().parents[2]

HIDE_EDITABLE = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path[:] = [p for p in sys.path if p and p.rstrip("/") != {root!r}]
"""


def hide_checkout(directory: Path) -> str:
    """A PYTHONPATH entry whose sitecustomize hides the editable install and the checkout,
    so only a shipped zip can provide lakecore."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(HIDE_EDITABLE.format(root=str(REPO)))
    return str(directory)


SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
CONF = {k: v for k, v in SESSION_CONF.items() if k != "spark.sql.session.timeZone"}
TIMEOUT = 300.0


@dataclass(frozen=True)
class Submitted:
    returncode: int
    output: str  # stdout and stderr merged, in order, as Airflow's SparkSubmitHook reads them

    @property
    def summary(self) -> dict[str, Any]:
        lines = [x for x in self.output.splitlines() if x.startswith("{\"job\"")]
        assert len(lines) == 1, f"expected one summary line:\n{self.output[-5000:]}"
        out: dict[str, Any] = json.loads(lines[0])
        return out

    @property
    def last_line(self) -> str:
        return self.output.strip().splitlines()[-1]


def build_zip() -> Path:
    """``make dist/lakecore.zip``: the Makefile's target is what users ship."""
    subprocess.run(["make", "-s", "dist/lakecore.zip"], cwd=REPO, check=True, timeout=120,
                   capture_output=True)
    return REPO / "dist" / "lakecore.zip"


def command(job: str, args: list[str], zip_path: Path,
            conf: dict[str, str] | None = None) -> list[str]:
    argv = [str(SPARK_SUBMIT), "--master", "local[2]", "--py-files", str(zip_path)]
    for k, v in {**CONF, **(conf or {})}.items():
        argv += ["--conf", f"{k}={v}"]
    return [*argv, str(REPO / "lakecore" / "spark" / "jobs" / f"{job}.py"), *args]


def environment(workdir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECORE_SPARK_PAUSE")}
    env.update({
        "PATH": f"{SPARK_SUBMIT.parent}{os.pathsep}{env.get('PATH', '')}",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": hide_checkout(workdir / "hide"),
    })
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    env.pop("LAKECORE_FAULT_CRASH_AT", None)
    env.update(extra or {})
    return env


def start(job: str, args: list[str], zip_path: Path, workdir: Path,
          env: dict[str, str] | None = None,
          conf: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """A job in its own process group (so a test can SIGKILL all of it at once); ``conf``:
    more ``--conf`` settings."""
    return subprocess.Popen(command(job, args, zip_path, conf), cwd=workdir,
                            env=environment(workdir, env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def finish(proc: subprocess.Popen[str], timeout: float = TIMEOUT) -> Submitted:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(proc)
        out, _ = proc.communicate()
        raise AssertionError(f"job timed out after {timeout} s:\n{out[-5000:]}") from None
    return Submitted(proc.returncode, out)


def run(job: str, args: list[str], zip_path: Path, workdir: Path,
        env: dict[str, str] | None = None) -> Submitted:
    return finish(start(job, args, zip_path, workdir, env))


def kill(proc: subprocess.Popen[str]) -> None:
    """SIGKILL spark-submit and everything it started (JVM, Python driver and workers)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=60)


def run_until_paused(job: str, args: list[str], zip_path: Path, workdir: Path, point: str,
                     timeout: float = TIMEOUT) -> None:
    """Run a job until it reaches the pause point ``point``, then SIGKILL it there."""
    marker = workdir / f"paused-{point}-{time.monotonic_ns()}"
    proc = start(job, args, zip_path, workdir, {"LAKECORE_SPARK_PAUSE_AT": point,
                                                "LAKECORE_SPARK_PAUSE_MARKER": str(marker)})
    deadline = time.monotonic() + timeout
    try:
        while not marker.exists():
            if proc.poll() is not None:
                out, _ = proc.communicate()
                raise AssertionError(f"job ended before pausing at {point}:\n{out[-5000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"job did not reach {point} in {timeout} s")
            time.sleep(0.2)
    finally:
        kill(proc)
        proc.communicate()
