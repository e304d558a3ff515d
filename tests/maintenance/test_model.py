"""A randomized model test: random writes, overwrites, compactions (rewrite and upgrade-only),
tags, tag deletions, expiries and rollbacks. After every maintenance step each snapshot and tag
still reads what it read when it was made, no file it needs is gone, and at the end no file is
left unreferenced (expiry, tag deletion and rollback clean up after themselves)."""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakecore.maintenance import (
    ExpireConfig,
    create_tag,
    delete_tag,
    expire_snapshots,
    list_tags,
    remove_orphan_files,
    rollback_to,
)
from lakecore.maintenance.refs import live_entries
from tests.core.helpers import write
from tests.maintenance.helpers import (
    full_compact,
    missing_referenced_files,
    pk_table,
    read_snapshot,
    read_views,
    rows,
    upgrade_single_files,
)

FUTURE = datetime.now() + timedelta(days=3)
OPS = ("write", "write", "write", "overwrite", "compact", "upgrade", "tag", "untag", "expire",
       "expire", "rollback")


def _apply(t, op: str, r: int, expected: dict[int, list]) -> bool:
    """Run one op; True when it was a maintenance op (check invariants afterwards)."""
    sm = t.snapshot_manager
    ids = sm.list_ids()
    dt = "abc"[r % 3]
    if op == "write":
        write(t, rows([r % 5, 10 + r % 7], dt, r))
    elif op == "overwrite":
        write(t, rows([r % 4], dt, r), overwrite={"dt": dt})
    elif op == "compact" and ids:
        full_compact(t)
    elif op == "upgrade" and ids:
        latest = sm.latest()
        per_bucket: dict = {}
        for e in live_entries(t.manifest_io(), latest).values():
            per_bucket.setdefault((e.partition, e.bucket), []).append(e.file.level)
        if any(levels == [0] for levels in per_bucket.values()):
            upgrade_single_files(t)
    elif op == "tag" and ids:
        create_tag(t, f"tag{r % 4}", ids[r % len(ids)], ignore_if_exists=True)
    elif op == "untag":
        tags = list_tags(t)
        if tags:
            delete_tag(t, tags[r % len(tags)].name, dry_run=False)
            return True
    elif op == "expire":
        keep = 1 + r % 3
        expire_snapshots(t, dry_run=False, now=FUTURE,
                         config=ExpireConfig(keep, keep + r % 2, timedelta(0), 1 + r % 4))
        return True
    elif op == "rollback" and len(ids) > 1:
        target = ids[r % (len(ids) - 1)]
        rollback_to(t, snapshot_id=target, dry_run=False)
        for sid in [s for s in expected if s > target]:
            del expected[sid]
        return True
    latest = sm.latest()
    if latest is not None and latest.id not in expected:
        for sid in sm.list_ids():
            if sid not in expected:
                expected[sid] = read_snapshot(t, sm.snapshot(sid))
    return False


def _check(t, expected: dict[int, list]) -> None:
    for (_, ref), content in read_views(t).items():
        sid = ref if isinstance(ref, int) else None
        if sid is None:
            sid = next(x.snapshot_id for x in list_tags(t) if x.name == ref)
        assert content == expected[sid], ref
    assert missing_referenced_files(t) == []


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 10**6)), min_size=3,
                max_size=12))
def test_random_histories_stay_readable_and_clean(ops):
    with tempfile.TemporaryDirectory() as tmp:
        t = pk_table(tmp, **{"manifest.merge-min-count": "3"})
        write(t, rows([1, 2], "a", 0))
        expected = {1: read_snapshot(t, t.snapshot_manager.snapshot(1))}
        for op, r in ops:
            if _apply(t, op, r, expected):
                _check(t, expected)
        _check(t, expected)
        for tag in list_tags(t):  # dropping every tag frees everything only tags held
            delete_tag(t, tag.name, dry_run=False)
        leftovers = remove_orphan_files(t, older_than=timedelta(0), now=FUTURE)
        assert leftovers.files == (), [f.path for f in leftovers.files]
