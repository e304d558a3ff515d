"""Crash tests: SIGKILL an expirer (and a rollback) at each step, rerun, and check that every
retained snapshot and tag still reads the same, nothing a retained snapshot references is gone,
and the table ends exactly as an uninterrupted run leaves it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from lakecore import CatalogFactory
from lakecore.maintenance import ExpireConfig, create_tag, expire_snapshots, rollback_to
from lakecore.maintenance.rollback import plan_rollback
from lakecore.utils.faults import ENV_VAR, CrashStep
from tests.compat.pypaimon_runner import paimon_available
from tests.core.helpers import table_files, write
from tests.maintenance.helpers import (
    commit_n,
    full_compact,
    missing_referenced_files,
    paimon_reads,
    pk_table,
    read_snapshot,
    read_views,
    rows,
    upgrade_single_files,
)

NOW = datetime.now() + timedelta(days=1)
EXPIRE_STEPS = [s for s in CrashStep if s.value.startswith("expire-")]
ROLLBACK_STEPS = [s for s in CrashStep if s.value.startswith("rollback-")]
KEEP = 3

CHILD = """
import sys, json
from datetime import datetime, timedelta
from lakecore import CatalogFactory
from lakecore.maintenance import ExpireConfig, expire_snapshots, rollback_to
warehouse, what, now = sys.argv[1], sys.argv[2], datetime.fromisoformat(sys.argv[3])
table = CatalogFactory.create({"warehouse": warehouse}).get_table("db.t")
if what == "expire":
    cfg = ExpireConfig(KEEP, KEEP, timedelta(0), 1000)
    expire_snapshots(table, dry_run=False, now=now, config=cfg)
else:
    rollback_to(table, tag="base", dry_run=False)
""".replace("KEEP", str(KEEP))


def config() -> ExpireConfig:
    return ExpireConfig(KEEP, KEEP, timedelta(0), 1000)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A table whose expiry has every kind of work: data, changelog, manifests, lists."""
    wh = tmp_path_factory.mktemp("base")
    t = pk_table(wh, **{"changelog-producer": "input", "manifest.merge-min-count": "3"})
    commit_n(t, 3)
    create_tag(t, "base", 2)
    write(t, rows([1, 2], "2024-01-01", 5), overwrite={"dt": "2024-01-01"})
    commit_n(t, 2, start=10, dt="2024-01-02")
    upgrade_single_files(t)
    full_compact(t)
    commit_n(t, 3, start=20)
    create_tag(t, "late")
    commit_n(t, 2, start=30)
    return wh, read_views(t)


def _table(wh: Path):
    return CatalogFactory.create({"warehouse": str(wh)}).get_table("db.t")


def _crash(wh: Path, what: str, step: CrashStep) -> int:
    env = {**os.environ, ENV_VAR: step.value}
    done = subprocess.run([sys.executable, "-c", CHILD, str(wh), what, NOW.isoformat()],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, -signal.SIGKILL), done.stderr
    return done.returncode


@pytest.fixture(scope="module")
def reference(base, tmp_path_factory):
    wh = tmp_path_factory.mktemp("ref")
    shutil.copytree(base[0], wh, dirs_exist_ok=True)
    expire_snapshots(_table(wh), dry_run=False, now=NOW, config=config())
    return table_files(_table(wh))


@pytest.mark.slow
def test_expirer_killed_at_each_step_then_rerun(base, reference, tmp_path):
    src, before = base
    warehouses = []
    for step in EXPIRE_STEPS:
        wh = tmp_path / step.value
        shutil.copytree(src, wh)
        assert _crash(wh, "expire", step) == -signal.SIGKILL, step
        t = _table(wh)
        end = max(t.snapshot_manager.list_ids()) - KEEP + 1
        # right after the crash: what the plan retains still reads the same
        for (kind, ref), content in before.items():
            if kind == "tag" or ref >= end:
                assert read_snapshot(t, _view(t, kind, ref)) == content, (step, kind, ref)
        expire_snapshots(t, dry_run=False, now=NOW, config=config())
        after = read_views(t)
        assert after == {k: before[k] for k in after}, step
        assert missing_referenced_files(t) == [], step
        assert table_files(t) == reference, step  # no leak, nothing extra deleted
        warehouses.append(wh)
    if paimon_available():
        reqs = [{"warehouse": wh, "table": "db.t", "snapshot_id": sid}
                for wh in warehouses for sid in _table(wh).snapshot_manager.list_ids()]
        reqs += [{"warehouse": wh, "table": "db.t", "tag": tag}
                 for wh in warehouses for tag in ("base", "late")]
        got = paimon_reads(reqs)
        for req, content in zip(reqs, got, strict=True):
            key = ("tag", req["tag"]) if "tag" in req else ("snapshot", req["snapshot_id"])
            assert content == before[key], req


def _view(t, kind, ref):
    if kind == "tag":
        from lakecore.store.tags import tag_snapshot

        return tag_snapshot(t, ref)
    return t.snapshot_manager.snapshot(ref)


@pytest.mark.slow
def test_rollback_killed_at_each_step_then_rerun(base, tmp_path):
    from lakecore.maintenance import remove_orphan_files

    src, before = base
    ref_wh = tmp_path / "reference"
    shutil.copytree(src, ref_wh)
    rollback_to(_table(ref_wh), tag="base", dry_run=False)
    # orphan removal also drops the commit-user markers of the rolled-back users: apply it to
    # the reference too, so both sides differ only by what the crash did
    remove_orphan_files(_table(ref_wh), older_than=timedelta(0), now=NOW, dry_run=False)
    reference = table_files(_table(ref_wh))
    for step in ROLLBACK_STEPS:
        wh = tmp_path / step.value
        shutil.copytree(src, wh)
        assert plan_rollback(_table(wh), tag="base").snapshot_ids
        assert _crash(wh, "rollback", step) == -signal.SIGKILL, step
        t = _table(wh)
        rollback_to(t, tag="base", dry_run=False)
        assert t.snapshot_manager.latest_id() == 2
        assert read_views(t) == {k: before[k] for k in (("snapshot", 1), ("snapshot", 2),
                                                        ("tag", "base"))}
        # files the crash left unreferenced are exactly what orphan removal collects
        remove_orphan_files(t, older_than=timedelta(0), now=NOW, dry_run=False)
        assert table_files(t) == reference, step
        assert missing_referenced_files(t) == []


def test_crash_hook_is_inert_without_the_variable(tmp_path):
    t = pk_table(tmp_path)
    commit_n(t, 3)
    report = expire_snapshots(t, dry_run=False, now=NOW, config=ExpireConfig(1, 1,
                                                                             timedelta(0), 10))
    assert report.snapshots_removed == 2
    assert json.loads(json.dumps(report.to_dict()))["snapshots_removed"] == 2


LOOPER = """
import sys, os
from datetime import datetime, timedelta
from lakecore import CatalogFactory
from lakecore.maintenance import ExpireConfig, expire_snapshots
warehouse, stop, ready = sys.argv[1], sys.argv[2], sys.argv[3]
table = CatalogFactory.create({"warehouse": warehouse}).get_table("db.t")
cfg = ExpireConfig(3, 3, timedelta(0), 1000)
runs = 0
open(ready, "w").close()  # imports done: the writer starts now
while True:  # at least one run, however fast the writer was
    expire_snapshots(table, dry_run=False, now=datetime.now() + timedelta(days=1), config=cfg)
    runs += 1
    if os.path.exists(stop):
        break
print(runs)
"""


def _wait_for(paths, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, f"expirers not started: {paths}"
        time.sleep(0.05)


@pytest.mark.slow
def test_two_concurrent_expirers_beside_a_writer(tmp_path):
    t = pk_table(tmp_path)
    write(t, rows([0], "a", 0))
    stop = tmp_path / "stop"
    ready = [tmp_path / f"ready-{i}" for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", LOOPER, str(tmp_path), str(stop), str(r)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in ready]
    expected = {}
    try:
        _wait_for(ready)  # both expirers run beside the writer's commits
        for i in range(30):
            if i % 7 == 6:
                full_compact(t)
            elif i % 5 == 4:
                write(t, rows([i % 3], "ab"[i % 2], i), overwrite={"dt": "ab"[i % 2]})
            else:
                write(t, rows([i % 4, 50 + i], "ab"[i % 2], i))
            latest = t.snapshot_manager.latest()
            expected[latest.id] = read_snapshot(t, latest)
    finally:
        stop.write_text("stop")
        outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert int(out) > 0
    expire_snapshots(t, dry_run=False, now=NOW, config=config())
    assert len(t.snapshot_manager.list_ids()) == KEEP
    for (_, sid), content in read_views(t).items():
        assert content == expected[sid]
    assert missing_referenced_files(t) == []
    from lakecore.maintenance import remove_orphan_files

    # no leaks (the commit-user markers of users with no snapshot left are collected too)
    leaked = [f.path for f in remove_orphan_files(t, older_than=timedelta(0), now=NOW).files
              if not f.path.rsplit("/", 1)[-1].startswith("commit-user-")]
    assert leaked == []
