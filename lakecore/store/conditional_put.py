"""Create-if-absent on S3 with a conditional PUT (``If-None-Match: *``), through obstore.

pyarrow's S3 filesystem cannot send a precondition: its writes silently overwrite. So only the
small files a commit must create exclusively (``snapshot-N``, tags, ``schema-N``, the
commit-protocol marker: every ``FileIO.try_create``) go through obstore's ``put(mode="create")``;
data files and manifests stay on pyarrow. Why obstore, not boto3 or s3fs: botocore (under both)
requires ``python-dateutil<3`` and Airflow's constraints pin 4.0, so neither installs beside the
pipeline; obstore has no Python dependencies, maps 412 to ``AlreadyExistsError`` for us, and
its one S3 client also speaks GCS and Azure should those warehouses follow.

The outcome of a create is never guessed:

* 412 (the key exists): we lost the race, unless the object holds exactly our bytes. That
  happens when our PUT landed but its response was lost and the client retried it (the retry
  then sees our own object). Every caller's bytes are unique (a snapshot names its manifest
  lists, which carry random names), so "equal bytes" means "ours".
* 409 ``ConditionalRequestConflict`` (S3: another conditional write to the key is in flight):
  retried after a short pause, since the other write may still fail.
* any other failure: the object is read back; our bytes -> created, other bytes -> lost,
  absent -> the error is raised (the PUT did not land). If even that read fails, the outcome
  is unknown: ``CommitOutcomeUnknownError`` (a committer must then keep its manifests).
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from typing import Any

from lakecore.errors import CommitOutcomeUnknownError
from lakecore.store.s3 import S3Options

log = logging.getLogger(__name__)

_CONFLICT_RETRIES = 8


class ConditionalPut:
    """``create(path, data)``: a conditional PUT of ``bucket/key``; True if we created it."""

    def __init__(self, options: S3Options) -> None:
        self.options = options
        self._stores: dict[str, Any] = {}
        self._pid = os.getpid()
        self._mutex = threading.Lock()

    def __repr__(self) -> str:
        return f"ConditionalPut({self.options.describe()})"

    def __getstate__(self) -> dict[str, Any]:  # stores and locks are per process
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    # -- the store -------------------------------------------------------------------------
    def _config(self, bucket: str) -> tuple[dict[str, Any], dict[str, Any]]:
        o = self.options
        config: dict[str, Any] = {"conditional_put": "etag"}
        client: dict[str, Any] = {}
        if o.endpoint is not None:
            host = f"{bucket}.{o.endpoint}" if o.virtual_hosted else o.endpoint
            config["endpoint"] = f"{o.scheme}://{host}"
            if o.scheme == "http":
                client["allow_http"] = True
        config["virtual_hosted_style_request"] = o.virtual_hosted
        if o.region:
            config["region"] = o.region
        if o.access_key:
            config["access_key_id"] = o.access_key
            config["secret_access_key"] = o.secret_key
            if o.session_token:
                config["session_token"] = o.session_token
        return config, client

    def _store(self, bucket: str) -> Any:
        with self._mutex:
            if self._pid != os.getpid():  # a forked child: the parent's clients are not ours
                self._stores.clear()
                self._pid = os.getpid()
            store = self._stores.get(bucket)
            if store is None:
                from obstore.store import S3Store

                config, client = self._config(bucket)
                store = S3Store(bucket, config=config, client_options=client)  # type: ignore[arg-type]
                self._stores[bucket] = store
            return store

    # -- create if absent ------------------------------------------------------------------
    def create(self, path: str, data: bytes) -> bool:
        """Create ``path`` (``bucket/key``) holding ``data`` unless it exists."""
        import obstore
        from obstore.exceptions import AlreadyExistsError

        bucket, _, key = path.partition("/")
        store = self._store(bucket)
        for attempt in range(_CONFLICT_RETRIES + 1):
            try:
                obstore.put(store, key, data, mode="create", use_multipart=False)
                return True
            except AlreadyExistsError as e:
                return self._settle(store, path, key, data, e)
            except Exception as e:  # noqa: BLE001 - every other failure: look at the object
                if _is_conflict(e) and attempt < _CONFLICT_RETRIES:
                    time.sleep(0.01 * (2 ** attempt) * (0.5 + random.random()))
                    continue
                return self._settle(store, path, key, data, e)
        raise AssertionError("unreachable")

    def _read(self, store: Any, key: str) -> bytes | None:
        import obstore

        try:
            return bytes(obstore.get(store, key).bytes())
        except FileNotFoundError:
            return None

    def _settle(self, store: Any, path: str, key: str, data: bytes, error: Exception) -> bool:
        """After a failed PUT: did it land anyway? Raises ``error`` if it did not."""
        try:
            found = self._read(store, key)
        except Exception as e:  # noqa: BLE001
            raise CommitOutcomeUnknownError(
                f"conditional PUT of {path} failed ({_short(error)}) and reading it back "
                f"failed too ({_short(e)}): it may or may not exist") from error
        if _is_precondition(error):  # the ordinary lost race (or our own retried PUT)
            return found == data
        if found is None:
            raise error
        log.warning("conditional PUT of %s reported %s, but the object exists (%s)", path,
                    _short(error), "ours" if found == data else "another writer's")
        return found == data


def _is_conflict(error: Exception) -> bool:
    text = str(error)
    return "409" in text and "Conflict" in text


def _is_precondition(error: Exception) -> bool:
    from obstore.exceptions import AlreadyExistsError

    return isinstance(error, AlreadyExistsError)


def _short(error: BaseException) -> str:
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {first}"[:300]
