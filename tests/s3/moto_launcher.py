"""Run moto's S3 server on 127.0.0.1 with a free port: ``.venv-moto/bin/python moto_launcher.py``.

This file runs in ``.venv-moto`` (moto needs python-dateutil<3, Airflow's constraints pin 4), not
in the test environment: it imports only moto, werkzeug and the standard library. It binds
127.0.0.1 port 0, prints ``PORT <n>`` on stdout once it accepts connections, and serves until
SIGTERM / SIGINT.

One change to the stock ``moto_server``: moto checks ``If-None-Match: *`` and then stores the
object in two steps, so two threads of its threaded server can both pass the check. Real S3
makes a conditional PUT atomic. Requests that carry a precondition header are therefore run one
at a time (a process-wide lock around exactly those requests); every other request stays
concurrent. Without it the eight-committer test would be testing moto's race, not lakecore's.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

_CONDITIONAL = ("HTTP_IF_NONE_MATCH", "HTTP_IF_MATCH")


class SerializeConditionalWrites:
    """WSGI middleware: a request with If-None-Match / If-Match runs under one lock."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any],
                 start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") in ("PUT", "POST") and any(
                h in environ for h in _CONDITIONAL):
            with self.lock:
                # consume the response inside the lock: the object is stored by then
                return list(self.app(environ, start_response))
        return self.app(environ, start_response)


def main() -> None:
    host = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1"
    app = SerializeConditionalWrites(DomainDispatcherApplication(create_backend_app))
    server = make_server(host, 0, app, threaded=True, request_handler=MotoRequestHandler)

    def stop(signum: int, frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"PORT {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
