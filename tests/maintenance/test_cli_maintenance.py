"""The maintenance subcommands, driven the way lakecore.cli.main does: register + run."""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timedelta

from lakecore import CatalogFactory
from lakecore.cli.maintenance import COMMANDS, register, run
from tests.core.helpers import table_files, write
from tests.maintenance.helpers import commit_n, pk_table, rows

FUTURE = (datetime.now() + timedelta(days=2)).isoformat()


def cli(tmp_path, capsys, *argv: str) -> tuple[int, dict, str]:
    parser = argparse.ArgumentParser(prog="lakecore")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args([argv[0], "--warehouse", str(tmp_path), "--table", "db.t",
                              "--json", *argv[1:]])
    table = CatalogFactory.create({"warehouse": str(tmp_path)}).get_table("db.t")
    code = run(args, table)
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else {}, err


def test_every_command_is_registered():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    register(sub)
    assert set(sub.choices) == set(COMMANDS)


def test_expire_snapshots_dry_run_then_real(tmp_path, capsys):
    t = pk_table(tmp_path, **{"snapshot.num-retained.min": "2"})
    commit_n(t, 5)
    files = table_files(t)
    code, out, _ = cli(tmp_path, capsys, "expire-snapshots", "--dry-run", "--now", FUTURE)
    assert code == 0 and out["dry_run"] and out["snapshots_removed"] == 3
    assert table_files(t) == files
    code, out, _ = cli(tmp_path, capsys, "expire-snapshots", "--now", FUTURE, "--paths")
    assert code == 0 and not out["dry_run"] and out["snapshots_removed"] == 3
    assert t.snapshot_manager.list_ids() == [4, 5] and out["plan"]["paths"]


def test_tags_rollback_and_errors(tmp_path, capsys):
    t = pk_table(tmp_path)
    commit_n(t, 3)
    code, out, _ = cli(tmp_path, capsys, "create-tag", "--tag", "t1", "--snapshot", "1")
    assert code == 0 and out["snapshot_id"] == 1
    code, out, _ = cli(tmp_path, capsys, "list-tags")
    assert [x["name"] for x in out["tags"]] == ["t1"]
    code, out, _ = cli(tmp_path, capsys, "rollback", "--tag", "t1", "--dry-run")
    assert code == 0 and out["plan"]["snapshot_ids"] == [3, 2]
    assert t.snapshot_manager.latest_id() == 3
    code, out, _ = cli(tmp_path, capsys, "rollback", "--tag", "t1")
    assert code == 0 and t.snapshot_manager.latest_id() == 1
    code, out, _ = cli(tmp_path, capsys, "delete-tag", "--tag", "t1")
    assert code == 0 and out["tag"] == "t1" and not t.file_io.exists(t.paths.tag_path("t1"))
    code, _, err = cli(tmp_path, capsys, "rollback", "--tag", "missing")
    assert code == 1 and "does not exist" in err


def test_expire_partitions_and_orphans(tmp_path, capsys):
    t = pk_table(tmp_path, **{"partition.expiration-time": "1 d",
                              "partition.timestamp-formatter": "yyyyMMdd"})
    write(t, rows([1], "20230101", 1), rows([2], "20990101", 1))
    code, out, _ = cli(tmp_path, capsys, "expire-partitions", "--now", "2023-01-05T00:00:00")
    assert code == 0 and out["partitions_removed"] == 1
    code, out, _ = cli(tmp_path, capsys, "remove-orphan-files", "--older-than", "0 s",
                    "--now", FUTURE, "--dry-run")
    assert code == 0 and out["dry_run"] and out["paths"] == []
    code, _, err = cli(tmp_path, capsys, "remove-orphan-files", "--older-than",
                       "2999-01-01T00:00:00")
    assert code == 1 and "later than now" in err


def test_maintain_runs_every_step(tmp_path, capsys):
    t = pk_table(tmp_path, **{"snapshot.num-retained.min": "1"})
    commit_n(t, 4)
    code, out, _ = cli(tmp_path, capsys, "maintain", "--compact", "full", "--now", FUTURE)
    steps = {s["step"]: s for s in out["steps"]}
    assert code == 0 and out["ok"]
    assert steps["compact"]["status"] in ("ok", "skipped")
    assert steps["expire-snapshots"]["report"]["snapshots_removed"] >= 3
    assert steps["expire-partitions"]["status"] == "skipped"
    assert steps["remove-orphan-files"]["status"] == "ok"
    code, again, _ = cli(tmp_path, capsys, "maintain", "--now", FUTURE)  # idempotent
    assert code == 0
    assert {s["step"]: s for s in again["steps"]}["expire-snapshots"]["report"][
        "snapshots_removed"] == 0


def test_text_output(tmp_path, capsys):
    pk_table(tmp_path)
    parser = argparse.ArgumentParser(prog="lakecore")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(["list-tags", "--warehouse", str(tmp_path), "--table", "db.t"])
    table = CatalogFactory.create({"warehouse": str(tmp_path)}).get_table("db.t")
    assert run(args, table) == 0
    assert "operation: list-tags" in capsys.readouterr().out
