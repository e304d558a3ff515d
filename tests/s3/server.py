"""A moto S3 server for tests and benchmarks: started as a subprocess, stopped when done.

``MotoServer()`` runs ``tests/s3/moto_launcher.py`` in ``.venv-moto`` (``make moto-venv``), on
127.0.0.1 and a free port the server picks itself (no race for the port), and logs requests to
a file (never a pipe nobody reads). ``catalog_options(bucket)`` are the lakecore catalog options
that reach it: Paimon's ``s3.*`` keys, path-style requests, dummy credentials.
"""

from __future__ import annotations

import os
import select
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
MOTO_PYTHON = Path(os.environ.get("LAKECORE_MOTO_PYTHON")
                   or REPO_ROOT / ".venv-moto" / "bin" / "python")
LAUNCHER = Path(__file__).with_name("moto_launcher.py")
ACCESS_KEY = "lakecore-test-access"
SECRET_KEY = "lakecore-test-secret-do-not-log"
REGION = "us-east-1"


def moto_available() -> bool:
    return MOTO_PYTHON.exists()


class MotoServer:
    """The moto server process; ``endpoint`` is ``http://127.0.0.1:<port>``."""

    def __init__(self, log_dir: str | Path | None = None) -> None:
        if not moto_available():
            raise RuntimeError(f"{MOTO_PYTHON} is missing: run `make moto-venv`")
        self._tmp = None if log_dir is not None else tempfile.TemporaryDirectory()
        self.log_path = Path(log_dir or self._tmp.name) / "moto.log"  # type: ignore[union-attr]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        self.proc = subprocess.Popen(
            [str(MOTO_PYTHON), str(LAUNCHER), "127.0.0.1"], stdout=subprocess.PIPE,
            stderr=self._log, stdin=subprocess.DEVNULL, env=env)
        self.port = self._read_port(timeout=60)
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def _read_port(self, timeout: float) -> int:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if ready:
                line = self.proc.stdout.readline().decode().strip()
                if line.startswith("PORT "):
                    return int(line.split()[1])
            if self.proc.poll() is not None:
                break
        self.stop()
        raise RuntimeError(f"moto server did not start: {self.log_path.read_text()[-2000:]}")

    def catalog_options(self, bucket: str, prefix: str = "wh") -> dict[str, str]:
        """Catalog options for a warehouse at ``s3://<bucket>/<prefix>`` on this server."""
        return {
            "warehouse": f"s3://{bucket}/{prefix}",
            "s3.endpoint": self.endpoint,
            "s3.access-key": ACCESS_KEY,
            "s3.secret-key": SECRET_KEY,
            "s3.region": REGION,
            "s3.path.style.access": "true",
        }

    def filesystem(self) -> Any:
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(endpoint_override=f"127.0.0.1:{self.port}", scheme="http",
                                 access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION,
                                 allow_bucket_creation=True, allow_bucket_deletion=True)

    def new_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh name unless given) and return its name."""
        bucket = name or f"b-{uuid.uuid4().hex[:16]}"
        self.filesystem().create_dir(bucket)
        return bucket

    def request_count(self) -> int:
        """Requests served so far (lines of the request log)."""
        return sum(1 for line in self.log_path.read_bytes().splitlines() if b'HTTP/1.1"' in line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> MotoServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
