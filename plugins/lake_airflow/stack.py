"""A real local Airflow: api-server (the Execution API the LocalExecutor's tasks talk to),
scheduler and triggerer, each in its own process group, for ``make demo`` and the tests.

DAGs are serialized once (``airflow dags reserialize``) instead of running a dag-processor.
The DAGs that write the lake (ingest, backfill, compaction) stay paused, so that the
scheduler leaves them alone while ``lake_airflow.localrun`` runs them in-process; the
downstream DAGs (asset-scheduled, sensors) are unpaused and run by the scheduler, on the
LocalExecutor, with deferred tasks in the triggerer.

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

    def __init__(self, env: dict[str, str], log_dir: Path, unpause: Sequence[str] = ()) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**env,
                    "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                    "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
                    "AIRFLOW__API__BASE_URL": self.url,
                    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
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
        for name in self.COMPONENTS:
            args = [airflow_bin, name]
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
            for p, name in zip(self.procs, self.COMPONENTS, strict=True):
                if p.poll() is not None:
                    raise RuntimeError(f"airflow {name} exited ({p.returncode}); see "
                                       f"{self.log_dir / (name + '.log')}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health",
                                            timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the api-server did not answer within {timeout:.0f} s")

    def stop(self) -> None:
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
        self.procs.clear()

    def __enter__(self) -> AirflowStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
