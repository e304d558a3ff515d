"""What a run's Params must satisfy beyond what each Param's JSON schema says: the checks of
the DAGs' first task, which runs before ``prepare`` and Spark, changes nothing and fails
without retry.

Airflow 3.3 validates each Param on its own (JSON schema, at trigger time: the REST API and
the form answer 400); nothing in the trigger path sees two Params together, so a range whose
end is before its start, a partition of keys the chosen tables do not have, or a date whose
landing data does not exist is refused here, with one line saying what is wrong and what to
choose instead. Pure functions (the standard library and the tables file): no Airflow, no
lakecore.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, timedelta

from lake_airflow.config import DATE_PLACEHOLDER, TableSpec
from lake_airflow.submit import parse_partition


class RunRefused(ValueError):
    """The run's Params (or its date) cannot work; the message says why, in one line."""


def backfill_dates(start: str, end: str, max_days: int) -> list[str]:
    """Every date from ``start`` to ``end`` inclusive; RunRefused says what is wrong."""
    try:
        first, last = date.fromisoformat(start), date.fromisoformat(end)
    except (TypeError, ValueError):
        raise RunRefused(f"Start date {start!r} and End date {end!r} must be dates "
                         "(YYYY-MM-DD)") from None
    if last < first:
        raise RunRefused(f"End date {end} is before Start date {start}: the range is "
                         "inclusive, so End date must be on or after Start date")
    days = (last - first).days + 1
    if days > max_days:
        raise RunRefused(f"{start} to {end} is {days} partitions; a backfill rewrites at most "
                         f"{max_days} (airflow.backfill_max_days in the tables file): split "
                         "the range")
    return [(first + timedelta(days=i)).isoformat() for i in range(days)]


def landing_dates(spec: TableSpec, newest: int = 3) -> list[str]:
    """The newest dates that have local landing data for ``spec`` (its source path's last
    component holds ``{date}``), newest first; empty when they cannot be listed."""
    head, _, tail = spec.source.path.rpartition("/")
    if DATE_PLACEHOLDER not in tail or DATE_PLACEHOLDER in head or "://" in head:
        return []
    pattern = re.compile(re.escape(tail).replace(re.escape(DATE_PLACEHOLDER),
                                                 r"(\d{4}-\d{2}-\d{2})") + "$")
    try:
        names = os.listdir(head)
    except OSError:
        return []
    found = sorted((m.group(1) for n in names if (m := pattern.match(n))), reverse=True)
    return found[:newest]


def missing_source(spec: TableSpec, day: date) -> str | None:
    """Why ``spec`` has no landing data for ``day`` (one clause), or None when it has, or
    when its source is not a local path (an object store is checked by the job itself)."""
    path = spec.source.path_for(day)
    if "://" in path and not path.startswith("file://"):
        return None
    if os.path.exists(path.removeprefix("file://")):
        return None
    near = landing_dates(spec)
    hint = (f"; dates with landing data: {', '.join(near)}" if near
            else "; no date has landing data yet")
    return f"{spec.name} reads {path}, which does not exist{hint}"


def check_sources(specs: Iterable[TableSpec], day: date) -> None:
    """RunRefused naming every table without landing data for ``day``."""
    missing = [m for spec in specs if (m := missing_source(spec, day))]
    if missing:
        raise RunRefused(f"no landing data for {day.isoformat()}: " + "; ".join(missing)
                         + ". Trigger the run with the logical date of a day that has "
                         "landing data (the date picks the source path's {date})")


def check_partition_keys(specs: Sequence[TableSpec], partitions: Sequence[str]
                         ) -> dict[str, list[dict[str, str]]]:
    """Each partition text parsed for each table (``{table: [spec, ...]}``); RunRefused when
    a text is malformed or names a key one of the tables does not partition by."""
    if not partitions:
        return {s.name: [] for s in specs}
    out: dict[str, list[dict[str, str]]] = {}
    for spec in specs:
        if not spec.partition_keys:
            keyed = [s.name for s in specs if s.partition_keys] or ["none"]
            raise RunRefused(f"Partitions {list(partitions)} given, but {spec.name} is not "
                             "partitioned: choose only partitioned tables in Tables "
                             f"({', '.join(keyed)}) or leave Partitions empty")
        try:
            out[spec.name] = [parse_partition(p, spec.partition_keys) for p in partitions]
        except ValueError as e:
            raise RunRefused(f"{spec.name}: {e}; its partition keys are "
                             f"{', '.join(spec.partition_keys)} (e.g. "
                             f"{spec.partition_keys[0]}=2026-11-01)") from None
    return out


def check_partitions_exist(table: str, wanted: Sequence[Mapping[str, str]],
                           live: Sequence[Mapping[str, str]]) -> None:
    """RunRefused naming each of ``wanted`` that matches none of the table's ``live``
    partitions (a spec may name a subset of the keys)."""
    def label(spec: Mapping[str, str]) -> str:
        return ",".join(f"{k}={v}" for k, v in spec.items())

    absent = [label(w) for w in wanted
              if not any(all(p.get(k) == v for k, v in w.items()) for p in live)]
    if absent:
        have = ", ".join(label(p) for p in live[-5:]) or "none"
        raise RunRefused(f"{table} has no partition {', '.join(absent)} (newest partitions: "
                         f"{have})")
