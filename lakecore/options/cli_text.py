"""Parsers for the texts a command line or a job takes: ``KEY=VALUE`` lists, partition specs
(``k=v,k=v``) and ages (``1 d``, ``12 h`` or an ISO date-time).

One parser per text, shared by ``lakecore.cli`` and the Spark jobs (``lakecore.spark.jobs``).
Each raises ``ValueError`` whose message names the flag it parsed; the caller turns it into its
own way of failing (the command line's exit, a job's ``JobArgumentError``). The Airflow plugin
must not import lakecore when it parses DAGs, so ``lake_airflow.submit`` keeps an Airflow-free
copy of ``parse_partition``, pinned to this one by ``tests/airflow/test_text_parsers.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from lakecore.options.parse import parse_duration


def parse_pairs(items: Iterable[str] | None, flag: str) -> dict[str, str]:
    """Repeated ``KEY=VALUE`` arguments -> a dict (a later key wins).

    Each item is split at its first ``=``; blanks around the key and the value are dropped.
    The key must not be blank; the value may be (``--source-option nullValue=``).
    """
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{flag} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def parse_partition(text: str, flag: str = "--partition",
                    keys: Sequence[str] | None = None) -> dict[str, str]:
    """``"dt=2026-11-01"`` (several keys joined by commas) -> a partition spec.

    Blanks around keys and values are dropped; neither may be empty. With ``keys``, every key
    must be one of them (the table's partition keys).
    """
    out: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise ValueError(f"{flag} {text!r}: expected KEY=VALUE[,KEY=VALUE]")
        if keys is not None and key not in keys:
            raise ValueError(f"{flag} {text!r}: {key!r} is not a partition key {list(keys)}")
        out[key] = value
    return out


def parse_age(text: str, flag: str = "--older-than") -> timedelta | datetime:
    """An age or a cut-off: a duration in Paimon's units (``"1 d"``, ``"12 h"``; see
    ``parse_duration``) or an ISO date-time (local time when it names no zone)."""
    try:
        return parse_duration(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{flag} {text!r} is neither a duration ('1 d', '12 h') nor an ISO "
                         "date-time") from None
