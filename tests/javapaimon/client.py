"""Drive the Java Paimon oracle (``target/paimon-oracle.jar``) from the tests.

One long-lived JVM per :class:`JavaPaimon`; :meth:`JavaPaimon.call` sends one JSON command line
and reads one JSON answer line (the protocol and the commands: ``tests/javapaimon/README.md``).
:func:`to_rows` / :func:`from_rows` convert between pyarrow tables and the driver's row encoding,
:func:`paimon_fields` turns a pyarrow schema into the ``fields`` of a ``create`` command.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

HERE = Path(__file__).resolve().parent
JAR = HERE / "target" / "paimon-oracle.jar"
SKIP_REASON = "make test builds tests/javapaimon (mvn)"
# Small footprint, fast start: the oracle runs short commands on small tables. C1 only
# (TieredStopAtLevel=1) starts and warms up faster than C2 for this kind of work.
JVM_FLAGS = (
    "-Xmx1g",
    "-Xss4m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Dfile.encoding=UTF-8",
)
DEFAULT_TIMEOUT = float(os.environ.get("LAKECORE_JAVA_PAIMON_TIMEOUT", "300"))


def java_available() -> bool:
    """The jar is built and ``java`` is on the PATH."""
    return JAR.is_file() and shutil.which("java") is not None


class JavaPaimonError(RuntimeError):
    """A command failed inside Java Paimon: ``message`` is "<exception class>: <message>"."""

    def __init__(self, message: str, trace: str = "", root_cause: str | None = None) -> None:
        self.message = message
        self.trace = trace
        self.root_cause = root_cause
        text = message if root_cause is None else f"{message} (root cause: {root_cause})"
        super().__init__(text)


class JavaPaimonDied(RuntimeError):
    """The JVM is gone (or did not answer in time); carries the tail of its stderr."""


class JavaPaimon:
    """A running oracle JVM; a context manager. Thread-safe: calls are serialized."""

    def __init__(self, jar: Path = JAR, jvm_args: tuple[str, ...] = (),
                 env: dict[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        if not jar.is_file():
            raise FileNotFoundError(f"{jar} is missing: {SKIP_REASON}")
        self.timeout = timeout
        self._lock = threading.Lock()
        self._stderr = tempfile.TemporaryFile(mode="w+b")
        started = time.monotonic()
        self._proc = subprocess.Popen(
            ["java", *JVM_FLAGS, *jvm_args, "-jar", str(jar)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            env={**os.environ, **(env or {})},
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._reader = threading.Thread(target=self._read_stdout, daemon=True,
                                        name="java-paimon-stdout")
        self._reader.start()
        try:
            answer = self.call("ping", timeout=min(self.timeout, 120))
        except BaseException:
            self.close()
            raise
        #: seconds from starting the JVM to its first answer
        self.start_seconds = time.monotonic() - started
        self.paimon_version: str = answer["paimon_version"]

    def _read_stdout(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line)
        self._lines.put(b"")  # end of stream

    def stderr_tail(self, limit: int = 4000) -> str:
        self._stderr.flush()
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - limit))
        return self._stderr.read().decode("utf-8", "replace")

    def call(self, op: str, timeout: float | None = None, **fields: Any) -> dict[str, Any]:
        """Run one command; its answer without ``ok``. Raises :class:`JavaPaimonError` when
        Java failed, :class:`JavaPaimonDied` when the process is gone or silent too long."""
        line = json.dumps({"op": op, **fields}, separators=(",", ":")) + "\n"
        with self._lock:
            if self._proc.poll() is not None:
                raise JavaPaimonDied(self._died(f"before {op!r}"))
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write(line.encode())
                self._proc.stdin.flush()
            except (BrokenPipeError, OSError) as e:
                raise JavaPaimonDied(self._died(f"writing {op!r}: {e}")) from e
            try:
                raw = self._lines.get(timeout=self.timeout if timeout is None else timeout)
            except queue.Empty:
                raise JavaPaimonDied(self._died(f"no answer to {op!r} in time")) from None
            if not raw:
                self._proc.wait(timeout=10)
                raise JavaPaimonDied(self._died(f"during {op!r}"))
        answer = json.loads(raw)
        if not answer.pop("ok", False):
            raise JavaPaimonError(answer.get("error", "?"), answer.get("trace", ""),
                                  answer.get("root_cause"))
        return answer

    def _died(self, when: str) -> str:
        code = self._proc.poll()
        state = "is still running" if code is None else f"exited with {code}"
        return f"Java Paimon oracle {state} ({when}); stderr tail:\n{self.stderr_tail()}"

    def close(self) -> None:
        if self._stderr.closed:
            return
        if self._proc.poll() is None:
            try:
                with self._lock:
                    assert self._proc.stdin is not None
                    self._proc.stdin.write(b'{"op":"exit"}\n')
                    self._proc.stdin.flush()
                    self._proc.stdin.close()
                self._proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        self._reader.join(timeout=10)
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()
        self._stderr.close()

    def __enter__(self) -> JavaPaimon:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------ the row encoding

def _encode(value: Any, t: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_decimal(t):
        return format(value, "f")
    if pa.types.is_timestamp(t):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat(timespec="microseconds")
    if pa.types.is_date(t):
        return value.isoformat()
    if pa.types.is_time(t):
        return value.isoformat(timespec="milliseconds")
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return base64.b64encode(value).decode()
    if pa.types.is_map(t):
        return [[_encode(k, t.key_type), _encode(v, t.item_type)] for k, v in value]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [_encode(v, t.value_type) for v in value]
    if pa.types.is_struct(t):
        return [_encode(value.get(f.name), f.type) for f in t]
    if pa.types.is_floating(t):
        return float(value)
    return value


def _decode(value: Any, t: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_decimal(t):
        return decimal.Decimal(value)
    if pa.types.is_timestamp(t):
        parsed = dt.datetime.fromisoformat(value)
        return parsed.replace(tzinfo=dt.UTC) if t.tz is not None else parsed
    if pa.types.is_date(t):
        return dt.date.fromisoformat(value)
    if pa.types.is_time(t):
        return dt.time.fromisoformat(value)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return base64.b64decode(value)
    if pa.types.is_map(t):
        return [(_decode(k, t.key_type), _decode(v, t.item_type)) for k, v in value]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [_decode(v, t.value_type) for v in value]
    if pa.types.is_struct(t):
        return {f.name: _decode(v, f.type) for f, v in zip(t, value, strict=True)}
    if pa.types.is_floating(t):
        return float(value)
    return value


def to_rows(table: pa.Table | pa.RecordBatch) -> list[list[Any]]:
    """A pyarrow table as the driver's positional rows (in the table's column order)."""
    types = [f.type for f in table.schema]
    return [[_encode(v, t) for v, t in zip(row.values(), types, strict=True)]
            for row in table.to_pylist()]


def from_rows(answer: dict[str, Any], schema: pa.Schema) -> pa.Table:
    """A ``read`` answer as a pyarrow table of ``schema`` (matched by field name; a schema
    field the answer lacks is an error)."""
    names = list(answer["fields"])
    missing = [f.name for f in schema if f.name not in names]
    if missing:
        raise KeyError(f"the answer has no fields {missing} (it has {names})")
    positions = [names.index(f.name) for f in schema]
    columns = {
        f.name: [_decode(row[p], f.type) for row in answer["rows"]]
        for f, p in zip(schema, positions, strict=True)
    }
    return pa.Table.from_pydict(columns, schema=schema)


def _paimon_type(t: pa.DataType) -> str:
    if pa.types.is_int8(t):
        return "TINYINT"
    if pa.types.is_int16(t):
        return "SMALLINT"
    if pa.types.is_int32(t):
        return "INT"
    if pa.types.is_int64(t):
        return "BIGINT"
    if pa.types.is_float32(t):
        return "FLOAT"
    if pa.types.is_float64(t):
        return "DOUBLE"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "STRING"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "BYTES"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    if pa.types.is_date32(t):
        return "DATE"
    if pa.types.is_timestamp(t):
        precision = {"s": 0, "ms": 3, "us": 6, "ns": 9}[t.unit]
        return f"TIMESTAMP_LTZ({precision})" if t.tz is not None else f"TIMESTAMP({precision})"
    if pa.types.is_map(t):
        key = _paimon_type(t.key_type) + " NOT NULL"
        item = _paimon_type(t.item_type) + ("" if t.item_field.nullable else " NOT NULL")
        return f"MAP<{key}, {item}>"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = _paimon_type(t.value_type) + ("" if t.value_field.nullable else " NOT NULL")
        return f"ARRAY<{item}>"
    if pa.types.is_struct(t):
        inner = ", ".join(
            f"`{f.name}` {_paimon_type(f.type)}{'' if f.nullable else ' NOT NULL'}" for f in t)
        return f"ROW<{inner}>"
    raise TypeError(f"no Paimon type for {t}")


def paimon_fields(schema: pa.Schema) -> list[dict[str, str]]:
    """``fields`` for a ``create`` command: Paimon SQL type strings of a pyarrow schema."""
    return [{"name": f.name, "type": _paimon_type(f.type) + ("" if f.nullable else " NOT NULL")}
            for f in schema]


# Shared by the test modules: the oracle's table address and two common field lists.
KV = [{"name": "id", "type": "BIGINT NOT NULL"}, {"name": "v", "type": "STRING"}]
PKV = [
    {"name": "id", "type": "BIGINT NOT NULL"},
    {"name": "p", "type": "STRING NOT NULL"},
    {"name": "v", "type": "STRING"},
]


def at(wh: Path, table: str = "db.t") -> dict[str, str]:
    """The ``warehouse`` / ``table`` fields of a command."""
    return {"warehouse": str(wh), "table": table}

