"""Catalog options for the lock, in Paimon's shape, parsed into a value, then into a lock.

Paimon's keys: ``lock.enabled``, ``lock.type``, ``lock-acquire-timeout`` (8 min),
``lock-check-max-sleep`` (8 s), ``catalog-key`` (``jdbc``), ``lock-key-max-length`` (255, the
lock table's ``lock_id`` width when lakecore creates it). ``lock.uri`` is the SQLAlchemy URL
of the lock database (Paimon's JDBC catalog uses its own ``uri``). ``lock-expire-time`` is
lakecore's own: how long a row stays valid if its holder dies (default: the acquire timeout,
which is what Paimon's JDBC lock stores).

The lock is on by default when the warehouse is not on the local filesystem: ``FileIO``
creates a snapshot file atomically (link without overwrite) only there. A catalog that commits
with conditional writes (``commit.protocol=conditional-put``, ``lakecore.lock.protocol``) needs
no lock, so there it is off by default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from lakecore.errors import CatalogLockError, OptionError
from lakecore.lock.base import (
    DEFAULT_ACQUIRE_TIMEOUT,
    DEFAULT_CHECK_MAX_SLEEP,
    CatalogLock,
    NoopLock,
)
from lakecore.lock.drivers import unsupported
from lakecore.lock.protocol import CommitProtocol, parse_commit_protocol
from lakecore.options.parse import parse_bool, parse_duration

LOCK_ENABLED = "lock.enabled"
LOCK_TYPE = "lock.type"
LOCK_URI = "lock.uri"
LOCK_ACQUIRE_TIMEOUT = "lock-acquire-timeout"
LOCK_CHECK_MAX_SLEEP = "lock-check-max-sleep"
LOCK_EXPIRE_TIME = "lock-expire-time"
LOCK_KEY_MAX_LENGTH = "lock-key-max-length"
CATALOG_KEY = "catalog-key"
LOCK_KEYS = (LOCK_ENABLED, LOCK_TYPE, LOCK_URI, LOCK_ACQUIRE_TIMEOUT, LOCK_CHECK_MAX_SLEEP,
             LOCK_EXPIRE_TIME, LOCK_KEY_MAX_LENGTH)
DEFAULT_LOCK_KEY_MAX_LENGTH = 255
LOCK_TYPES = ("jdbc",)

# Airflow's Connection.get_uri() and hand-written URLs name no driver (or a legacy one):
# point them at the drivers lakecore ships (psycopg 3, PyMySQL).
_SCHEME_REWRITES = {
    "postgres": "postgresql+psycopg",
    "postgresql": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
}


@dataclass(frozen=True)
class LockOptions:
    """The catalog lock's options, parsed once from the catalog's option map."""

    enabled: bool
    type: str = "jdbc"
    uri: str | None = None
    catalog_key: str = "jdbc"
    acquire_timeout: timedelta = DEFAULT_ACQUIRE_TIMEOUT
    check_max_sleep: timedelta = DEFAULT_CHECK_MAX_SLEEP
    expire: timedelta | None = None
    lock_key_max_length: int = DEFAULT_LOCK_KEY_MAX_LENGTH


def normalize_lock_uri(uri: str) -> str:
    """A SQLAlchemy URL with an installed driver; OptionError (no secrets echoed) if not one."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    text = uri.strip()
    if text.startswith("jdbc:"):
        raise OptionError(LOCK_URI, "expected a SQLAlchemy URL such as "
                          "postgresql+psycopg://user@host/db, not a JDBC URL")
    scheme, sep, rest = text.partition("://")
    if not sep:
        raise OptionError(LOCK_URI, "expected a SQLAlchemy URL such as "
                          "postgresql+psycopg://user@host/db or sqlite:////path/locks.db")
    text = f"{_SCHEME_REWRITES.get(scheme.lower(), scheme)}://{rest}"
    try:
        url = make_url(text)
    except ArgumentError as e:
        raise OptionError(LOCK_URI, f"not a valid SQLAlchemy URL (scheme {scheme!r})") from e
    if "__extra__" in url.query:  # Airflow's get_uri() packs connection extras there
        url = url.difference_update_query(["__extra__"])
    why = unsupported(url)
    if why is not None:
        raise OptionError(LOCK_URI, why)
    return url.render_as_string(hide_password=False)


def _duration(options: Mapping[str, str], key: str, default: timedelta) -> timedelta:
    if key not in options:
        return default
    try:
        value = parse_duration(options[key])
    except ValueError as e:
        raise OptionError(key, str(e)) from e
    if value <= timedelta(0):
        raise OptionError(key, f"must be a positive duration, got {options[key]!r}")
    return value


def _warehouse_is_local(options: Mapping[str, str]) -> bool:
    warehouse = options.get("warehouse", "")
    return "://" not in warehouse or warehouse.lower().startswith("file://")


def parse_lock_options(options: Mapping[str, str],
                       warehouse_is_local: bool | None = None) -> LockOptions:
    """Validate the lock's catalog options; every bad value is an OptionError naming its key."""
    for key in options:
        if (key.startswith("lock.") or key.startswith("lock-")) and key not in LOCK_KEYS:
            raise OptionError(key, f"unknown catalog lock option; known: {', '.join(LOCK_KEYS)}")
    local = _warehouse_is_local(options) if warehouse_is_local is None else warehouse_is_local
    if LOCK_ENABLED in options:
        try:
            enabled = parse_bool(options[LOCK_ENABLED])
        except ValueError as e:
            raise OptionError(LOCK_ENABLED, str(e)) from e
    else:
        enabled = not local and parse_commit_protocol(options) is CommitProtocol.LOCK
    lock_type = options.get(LOCK_TYPE, "jdbc").strip().lower()
    if lock_type not in LOCK_TYPES:
        raise OptionError(LOCK_TYPE, f"unsupported lock type {options[LOCK_TYPE]!r}; "
                          f"supported: {', '.join(LOCK_TYPES)}")
    catalog_key = options.get(CATALOG_KEY, "jdbc")
    if not catalog_key.strip():
        raise OptionError(CATALOG_KEY, "must not be blank")
    uri = options.get(LOCK_URI)
    if uri is not None:
        uri = normalize_lock_uri(uri)
    if enabled and uri is None:
        why = "lock.enabled=true" if LOCK_ENABLED in options else (
            "the lock is on by default for a warehouse that is not on the local filesystem, "
            "unless commit.protocol=conditional-put")
        raise OptionError(LOCK_URI, f"the catalog lock is enabled ({why}) but no lock.uri is "
                          "set: give a SQLAlchemy URL (the Airflow metadata DB, e.g. "
                          "postgresql+psycopg://user@host/airflow, or sqlite:////path/locks.db)"
                          " or set lock.enabled=false")
    acquire_timeout = _duration(options, LOCK_ACQUIRE_TIMEOUT, DEFAULT_ACQUIRE_TIMEOUT)
    # Like Paimon, the row's expiry defaults to the acquire timeout (whole seconds, rounded
    # down); an explicit lock-expire-time must be at least one of them.
    expire = _duration(options, LOCK_EXPIRE_TIME, acquire_timeout)
    if LOCK_EXPIRE_TIME in options and expire < timedelta(seconds=1):
        raise OptionError(LOCK_EXPIRE_TIME, "must be at least 1 s (rows store whole seconds)")
    max_length = DEFAULT_LOCK_KEY_MAX_LENGTH
    if LOCK_KEY_MAX_LENGTH in options:
        try:
            max_length = int(options[LOCK_KEY_MAX_LENGTH])
        except ValueError:
            max_length = 0
        if max_length <= 0:
            raise OptionError(LOCK_KEY_MAX_LENGTH, "must be a positive integer, got "
                              f"{options[LOCK_KEY_MAX_LENGTH]!r}")
    return LockOptions(
        enabled=enabled,
        type=lock_type,
        uri=uri,
        catalog_key=catalog_key,
        acquire_timeout=acquire_timeout,
        check_max_sleep=_duration(options, LOCK_CHECK_MAX_SLEEP, DEFAULT_CHECK_MAX_SLEEP),
        expire=expire,
        lock_key_max_length=max_length,
    )


def lock_from_options(options: Mapping[str, str],
                      warehouse_is_local: bool | None = None) -> CatalogLock:
    """The catalog lock the options ask for: ``SqlCatalogLock`` or ``NoopLock``.

    No database connection is made here; the lock connects (and creates its table) on first
    use, so Spark executors that never commit never open one.
    """
    parsed = parse_lock_options(options, warehouse_is_local)
    if not parsed.enabled:
        return NoopLock()
    from lakecore.lock.sql import SqlCatalogLock  # SQLAlchemy loads only when a lock is used

    assert parsed.uri is not None
    try:
        return SqlCatalogLock(
            parsed.uri,
            catalog_key=parsed.catalog_key,
            acquire_timeout=parsed.acquire_timeout,
            check_max_sleep=parsed.check_max_sleep,
            expire=parsed.expire,
            lock_id_max_length=parsed.lock_key_max_length,
        )
    except CatalogLockError as e:  # unsupported database, in-memory SQLite
        raise OptionError(LOCK_URI, str(e)) from e
