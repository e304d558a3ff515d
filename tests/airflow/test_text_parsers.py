"""The plugin's Airflow-free copies of lakecore's parsers and maintenance order, pinned to
lakecore's own: the same inputs (valid and invalid) give the same results."""

from __future__ import annotations

import re

import pytest
from lake_airflow.submit import (
    DURATION_PATTERN,
    PARTITION_PATTERN,
    MaintenanceStep,
    parse_partition,
)

from lakecore.maintenance.maintain import MaintenanceStep as LakeStep
from lakecore.options import cli_text

KEYS = ("dt", "hr")
PARTITIONS = [
    "dt=2026-11-01", "dt=2026-11-01,hr=3", " dt = 2026-11-01 , hr= 3", "hr=3,dt=x", "dt=a,dt=b",
    "dt=a=b", "dt=a b", "dt", "dt=", "dt= ", "=x", "dt=1,", ",dt=1", "", " ", "id=1",
    "dt=1,id=2", "DT=1", "dt=2026-11-01;hr=3", "dt=x,,hr=1",
]
DURATIONS = [
    "1 d", "12 h", "30min", "30 m", "5 s", "5 sec", "500 ms", "2 day", "7 days", " 1 d ",
    "1d", "0 s", "soon", "", "1", "1 w", "-1 d", "1.5 h", "1 H", "d", "1 d 2 h",
]


def _outcome(fn, *args):
    try:
        return fn(*args)
    except ValueError as e:
        return f"ValueError: {e}"


@pytest.mark.parametrize("text", PARTITIONS)
def test_parse_partition_is_lakecores(text: str) -> None:
    assert _outcome(parse_partition, text, KEYS) == \
        _outcome(cli_text.parse_partition, text, "partition", KEYS)


@pytest.mark.parametrize("text", PARTITIONS)
def test_partition_param_pattern_accepts_only_what_the_parser_accepts(text: str) -> None:
    if re.search(PARTITION_PATTERN, text):
        assert cli_text.parse_partition(text, "partition")


@pytest.mark.parametrize("text", DURATIONS)
def test_duration_param_pattern_accepts_only_what_the_jobs_accept(text: str) -> None:
    if re.search(DURATION_PATTERN, text):
        cli_text.parse_age(text)  # raises ValueError for a text the jobs refuse


def test_the_canonical_texts_pass_everywhere() -> None:
    for text in ("dt=2026-11-01", "dt=2026-11-01,hr=3"):
        assert re.search(PARTITION_PATTERN, text) and parse_partition(text, KEYS)
    for text in ("1 d", "12 h", "30 min", "500 ms"):
        assert re.search(DURATION_PATTERN, text) and cli_text.parse_age(text).total_seconds()


def test_the_maintenance_dag_runs_lakecores_order() -> None:
    lake = {"expire-partitions": LakeStep.EXPIRE_PARTITIONS,
            "expire-snapshots": LakeStep.EXPIRE_SNAPSHOTS,
            "remove-orphans": LakeStep.REMOVE_ORPHAN_FILES}
    ours = [lake[s.value] for s in MaintenanceStep]
    assert ours == [s for s in LakeStep if s in ours]
