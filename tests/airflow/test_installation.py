"""The local installation ``make demo`` makes and ``make airflow`` starts: an ``airflow.cfg``
that Airflow itself reads as this repository's DAGs and plugin, no examples, loopback, and
every path under the installation (so a copy is self-contained); secrets random per
installation, private, reused by later starts; ``make airflow`` refusing a root that is not
an installation."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from lake_airflow.installation import (
    CONFIG_MARKER,
    Installation,
    ensure_secrets,
    write_config,
)

from tests.airflow.conftest import PLUGINS, REPO, run_python

READ_CONF = """
import json
from airflow.configuration import conf
keys = [("core", "dags_folder"), ("core", "plugins_folder"), ("core", "load_examples"),
        ("core", "executor"), ("core", "simple_auth_manager_all_admins"),
        ("core", "simple_auth_manager_passwords_file"), ("database", "sql_alchemy_conn"),
        ("logging", "base_log_folder"), ("api", "host"), ("api_auth", "jwt_secret")]
print(json.dumps({f"{s}.{k}": conf.get(s, k) for s, k in keys}))
"""


def airflow_reads(home: Path) -> dict[str, str]:
    """What Airflow's configuration says with nothing but AIRFLOW_HOME set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "LAKECORE_"))}
    out = run_python(READ_CONF, {**env, "AIRFLOW_HOME": str(home)})
    return dict(json.loads(out.strip().splitlines()[-1]))


def test_a_copied_installation_reads_its_own_paths(tmp_path: Path) -> None:
    original = Installation(tmp_path / "a" / ".demo")
    write_config(original.home)
    shutil.copytree(original.root, tmp_path / "b")
    copy = Installation(tmp_path / "b")
    got = airflow_reads(copy.home)
    assert got["core.dags_folder"] == str(REPO / "dags")
    assert got["core.plugins_folder"] == str(REPO / "plugins")
    assert (got["core.load_examples"], got["core.executor"]) == ("False", "LocalExecutor")
    assert got["core.simple_auth_manager_all_admins"] == "False"
    assert got["core.simple_auth_manager_passwords_file"] == str(copy.passwords_file)
    assert got["database.sql_alchemy_conn"] == f"sqlite:///{copy.home}/airflow.db"
    assert got["logging.base_log_folder"] == str(copy.task_logs)
    assert got["api.host"] == "127.0.0.1"
    assert got["api_auth.jwt_secret"] == (copy.secrets_dir / "jwt_secret").read_text()
    text = (copy.home / "airflow.cfg").read_text()
    assert str(original.root) not in text and got["api_auth.jwt_secret"] not in text


def test_secrets_are_random_private_and_kept(tmp_path: Path) -> None:
    homes = [tmp_path / "one", tmp_path / "two"]
    for home in homes:
        write_config(home)
    secrets = [(h / "secrets" / "jwt_secret").read_text() for h in homes]
    admin = [json.loads((h / "secrets" / "passwords.json").read_text())["admin"] for h in homes]
    assert secrets[0] != secrets[1] and len(secrets[0]) >= 64
    assert admin[0] != admin[1] and len(admin[0]) >= 16
    folder = homes[0] / "secrets"
    assert folder.stat().st_mode & 0o777 == 0o700
    assert {p.stat().st_mode & 0o777 for p in folder.iterdir()} == {0o600}
    write_config(homes[0])  # a later start of the same installation
    ensure_secrets(homes[0])
    assert (folder / "jwt_secret").read_text() == secrets[0]
    assert json.loads((folder / "passwords.json").read_text())["admin"] == admin[0]
    tracked = subprocess.run(["git", "grep", "-l", "-F", secrets[0]], cwd=REPO,
                             capture_output=True, text=True)
    assert tracked.stdout == ""


def test_airflows_own_config_is_replaced_and_kept(tmp_path: Path) -> None:
    home = tmp_path / "airflow"
    home.mkdir()
    (home / "airflow.cfg").write_text("[core]\nload_examples = True\n")
    write_config(home)
    assert (home / "airflow.cfg").read_text().startswith(CONFIG_MARKER)
    assert "load_examples = True" in (home / "airflow.cfg.replaced").read_text()


def test_make_airflow_asks_for_make_demo_first(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "lake_airflow.local_airflow", "--root",
                           str(tmp_path / "nothing"), "--port", "1"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(PLUGINS)})
    assert done.returncode == 2
    assert "run `make demo` first" in done.stderr and str(tmp_path / "nothing") in done.stderr
