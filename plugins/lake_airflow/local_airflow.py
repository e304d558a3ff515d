"""``make airflow``: the Airflow of a ``make demo`` installation, to stay in.

    python -m lake_airflow.local_airflow [--root .demo] [--port 8080]

Starts a real Airflow on the embedded default, on the installation ``make demo`` left in
``--root`` (its SQLite metadata DB, warehouse and landing data): api-server, scheduler,
dag-processor and triggerer on the LocalExecutor (``lake_airflow.stack``), with this checkout's
``dags/`` and ``plugins/``, no example DAGs, bound to 127.0.0.1. It prints the URL and the login
(user ``admin``, the password in the installation's ``airflow/secrets/passwords.json``,
generated per installation), then runs until Ctrl-C or SIGTERM, which stops every process it
started (each component's process group: its task processes and Spark jobs too). A component
that dies stops the rest and names its log. Exit status 2 when the root is not an
installation (run ``make demo`` first) or the port is taken.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from lake_airflow.installation import (
    ADMIN_USER,
    REPO,
    Installation,
    InstallationError,
    write_config,
)

DEFAULT_PORT = 8080


class Stopped(Exception):
    """SIGTERM (or SIGINT) arrived: stop the components."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signal.Signals(signum).name)


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def banner(inst: Installation, url: str, pids: dict[str, int]) -> str:
    return "\n".join([
        "",
        f"Airflow is up: {url}",
        f"  log in as {ADMIN_USER!r}; the password is in {inst.passwords_file}",
        f"    (cat {inst.passwords_file})",
        f"  DAGs from {REPO / 'dags'}; warehouse {inst.warehouse}; landing data {inst.landing}",
        f"  Lake tables page: {url}/plugin/lake-tables (Browse -> Lake tables)",
        f"  components' output: {inst.component_logs}/<component>.log; task logs in the UI",
        "  Ctrl-C stops it, and these processes (each with its process group):",
        *[f"    {name}: pid {pid}" for name, pid in pids.items()],
        "",
    ])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=str(REPO / ".demo"),
                    help="the installation `make demo` made (default: .demo)")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT)
    args = ap.parse_args(argv)
    inst = Installation(Path(args.root).resolve())
    try:
        inst.check_ready()
    except InstallationError as e:
        print(f"make airflow: {e}", file=sys.stderr)
        return 2
    if not port_free(args.port):
        print(f"make airflow: port {args.port} on 127.0.0.1 is in use: stop what uses it, or "
              f"pick another (make airflow AIRFLOW_PORT=8090)", file=sys.stderr)
        return 2

    from lake_airflow.demo import airflow_env
    from lake_airflow.stack import AirflowStack

    write_config(inst.home)  # refreshes an older airflow.cfg; keeps the secrets
    env = airflow_env(inst.home, inst.warehouse, inst.landing)
    stack = AirflowStack(env, inst.component_logs, port=args.port,
                         components=AirflowStack.ALL_COMPONENTS)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print(f"starting Airflow on {stack.url} from {inst.root} (about a minute) ...", flush=True)
    try:
        stack.airflow("db", "migrate")  # a DB an older Airflow made is brought up to date
        stack.start()
        print(banner(inst, stack.url, stack.pids()), flush=True)
        while True:
            stack.check_alive()
            time.sleep(1)
    except Stopped as e:
        print(f"\n{e}: stopping Airflow ...", flush=True)
        return 0
    except RuntimeError as e:
        print(f"make airflow: {e}", file=sys.stderr)
        return 1
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):  # a second signal must not cut the stop
            signal.signal(sig, signal.SIG_IGN)
        stack.stop()
        print("Airflow stopped.", flush=True)


if __name__ == "__main__":
    sys.exit(main())
