"""A real local Airflow: api-server (the Execution API the LocalExecutor's tasks talk to),
scheduler and triggerer (and, for ``make airflow``, the dag-processor), each in its own process
group, for ``make demo``, ``make airflow`` (``lake_airflow.local_airflow``) and the tests.

DAGs are serialized once at start (``airflow dags reserialize``), so they are there before the
api-server answers; without a dag-processor nothing parses them again. In ``make demo`` the DAGs
that write the lake (ingest, backfill, compaction) stay paused, so that the scheduler leaves
them alone while ``lake_airflow.localrun`` runs them; the downstream DAGs (asset-scheduled,
sensors) are unpaused and run by the scheduler, on the LocalExecutor, with deferred tasks in
the triggerer.

Nothing listens beyond 127.0.0.1: the api-server binds loopback, and the scheduler and
triggerer run without their log servers (which bind every interface); every component shares
one machine and ``base_log_folder``, where the api-server reads task logs directly. The login
is whatever the environment configures (``lake_airflow.installation.secret_env``).

Standard library only (Airflow runs in the subprocesses).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AirflowStack:
    """``with AirflowStack(env, log_dir) as stack:`` starts the components, stops them after."""

    COMPONENTS = ("api-server", "scheduler", "triggerer")
    ALL_COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
    _ARGS = {"scheduler": ["--skip-serve-logs"], "triggerer": ["--skip-serve-logs"]}

    def __init__(self, env: dict[str, str], log_dir: Path, unpause: Sequence[str] = (), *,
                 port: int | None = None, components: Sequence[str] = COMPONENTS) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.components = tuple(components)
        self.env = {**env,
                    "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                    "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
                    "AIRFLOW__API__BASE_URL": self.url,
                    "AIRFLOW__API__HOST": "127.0.0.1",
                    "AIRFLOW__API__PORT": str(self.port),
                    "AIRFLOW__CORE__PARALLELISM": "4",
                    "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
                    "AIRFLOW__SCHEDULER__MAX_DAGRUNS_TO_CREATE_PER_LOOP": "4",
                    "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1"}
        self.log_dir = log_dir
        self.unpause = list(unpause)
        self.procs: list[subprocess.Popen[bytes]] = []

    def airflow(self, *args: str, timeout: float = 300) -> str:
        cmd = [str(Path(sys.executable).parent / "airflow"), *args]
        done = subprocess.run(cmd, env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"airflow {' '.join(args)}:\n{done.stdout[-2000:]}\n"
                               f"{done.stderr[-3000:]}")
        return done.stdout

    def start(self) -> AirflowStack:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.airflow("dags", "reserialize")
        for dag_id in self.unpause:
            self.airflow("dags", "unpause", dag_id)
        airflow_bin = str(Path(sys.executable).parent / "airflow")
        for name in self.components:
            args = [airflow_bin, name, *self._ARGS.get(name, [])]
            if name == "api-server":
                args += ["--host", "127.0.0.1", "--port", str(self.port)]
            with open(self.log_dir / f"{name}.log", "ab") as out:  # the child keeps its copy
                self.procs.append(subprocess.Popen(args, env=self.env, stdout=out,
                                                   stderr=subprocess.STDOUT,
                                                   start_new_session=True))
        self._wait_healthy()
        return self

    def _wait_healthy(self, timeout: float = 90) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            self.check_alive()
            try:
                with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health",
                                            timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the api-server did not answer within {timeout:.0f} s")

    def pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in zip(self.components, self.procs, strict=False)}

    def check_alive(self) -> None:
        """Raise if a component has exited (naming it and its log)."""
        for p, name in zip(self.procs, self.components, strict=False):
            if p.poll() is not None:
                raise RuntimeError(f"airflow {name} exited ({p.returncode}); see "
                                   f"{self.log_dir / (name + '.log')}")

    def stop(self) -> None:
        """SIGTERM to every component's process group (their task processes and Spark jobs
        included), SIGKILL after 20 s; then SIGKILL to whatever is left in those groups."""
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        for p in self.procs:  # children that outlived their component (a task's spark-submit)
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.procs.clear()

    def __enter__(self) -> AirflowStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
