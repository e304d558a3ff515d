"""One local Airflow installation on the embedded default (``make demo``, ``make airflow``):
its home's ``airflow.cfg`` and its secrets.

A root (``.demo/``) holds ``airflow/`` (``AIRFLOW_HOME``: ``airflow.cfg``, the SQLite metadata
DB ``airflow.db``, the lock's ``lakecore_locks.db``, task logs under ``logs/``, ``secrets/``),
``warehouse/``, ``landing/`` and ``logs/`` (the components' own output).

``airflow.cfg`` names nothing under the root by an absolute path: its values say
``${AIRFLOW_HOME}`` (Airflow expands environment variables in configuration values), so a
copied root is an installation of its own, writing its own DB and logs. Only the code it runs
(the repository's ``dags/`` and ``plugins/``) is named absolutely; ``make airflow`` also sets
those, and every path under the root, in its processes' environment.

Secrets are per installation, random, made on first use and kept in ``secrets/`` (0700, files
0600), never in the repository: the JWT signing secret (so a token one installation minted is
refused by every other) and the admin's password (the Simple auth manager's passwords file).
Airflow reads the JWT secret through ``jwt_secret_cmd``: the value is in no configuration file
and no process environment, hence in no task's environment either.

Standard library only.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ADMIN_USER = "admin"
CONFIG_MARKER = "# lakecore installation config"
_JWT_FILE, _API_KEY_FILE, _PASSWORDS_FILE = "jwt_secret", "api_secret_key", "passwords.json"


class InstallationError(RuntimeError):
    """The root is not an installation ``make airflow`` can start (named, with what to do)."""


@dataclass(frozen=True)
class Installation:
    root: Path

    @property
    def home(self) -> Path:
        return self.root / "airflow"

    @property
    def secrets_dir(self) -> Path:
        return self.home / "secrets"

    @property
    def passwords_file(self) -> Path:
        return self.secrets_dir / _PASSWORDS_FILE

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    @property
    def landing(self) -> Path:
        return self.root / "landing"

    @property
    def component_logs(self) -> Path:
        return self.root / "logs"

    @property
    def task_logs(self) -> Path:
        return self.home / "logs"

    def check_ready(self) -> None:
        """Refuse a root ``make demo`` has not made (no metadata DB)."""
        if not (self.home / "airflow.db").is_file():
            raise InstallationError(
                f"no Airflow installation at {self.root} (no {self.home / 'airflow.db'}): "
                "run `make demo` first (it creates the metadata DB, the warehouse and the "
                "demo's sources there)")

    def admin_password(self) -> str:
        return str(json.loads(self.passwords_file.read_text())[ADMIN_USER])


def ensure_secrets(home: Path) -> Path:
    """The installation's secrets directory, made with fresh random secrets when missing;
    existing secrets are kept (a later start of the same installation reuses them)."""
    return make_secrets(home / "secrets")


def make_secrets(folder: Path, admin_password: str | None = None) -> Path:
    """``folder`` (0700) with ``jwt_secret``, ``api_secret_key`` and the Simple auth
    manager's ``passwords.json`` (0600 each), random unless present; ``admin_password``
    (docker compose's AIRFLOW_ADMIN_PASSWORD) replaces the admin's password."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    _write_once(folder / _JWT_FILE, secrets.token_urlsafe(64))
    _write_once(folder / _API_KEY_FILE, secrets.token_urlsafe(32))
    if admin_password:
        (folder / _PASSWORDS_FILE).unlink(missing_ok=True)
    _write_once(folder / _PASSWORDS_FILE,
                json.dumps({ADMIN_USER: admin_password or secrets.token_urlsafe(12)}))
    return folder


def _write_once(path: Path, value: str) -> None:
    if path.exists():
        path.chmod(0o600)
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value)


def secret_env(home: Path) -> dict[str, str]:
    """Environment for Airflow processes of the installation at ``home``: its secrets by
    reference (``_CMD`` options read the files; no value in the environment) and its login."""
    folder = ensure_secrets(home)
    return {
        "AIRFLOW__API_AUTH__JWT_SECRET_CMD": f"cat {shlex.quote(str(folder / _JWT_FILE))}",
        "AIRFLOW__API__SECRET_KEY_CMD": f"cat {shlex.quote(str(folder / _API_KEY_FILE))}",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN_USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(folder / _PASSWORDS_FILE),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
    }


def _cat(name: str) -> str:
    # run without a shell by Airflow (shlex.split): sh expands $AIRFLOW_HOME at read time
    return f"sh -c 'cat \"$AIRFLOW_HOME/secrets/{name}\"'"


def config_text(repo: Path = REPO) -> str:
    return f"""{CONFIG_MARKER} (lake_airflow.installation): every path under this
# installation is relative to ${{AIRFLOW_HOME}}, so a copy of it is self-contained; `make airflow`
# also sets these in its processes' environment. Secrets live in ${{AIRFLOW_HOME}}/secrets.
[core]
dags_folder = {repo / 'dags'}
plugins_folder = {repo / 'plugins'}
load_examples = False
executor = LocalExecutor
dags_are_paused_at_creation = True
simple_auth_manager_users = {ADMIN_USER}:admin
simple_auth_manager_all_admins = False
simple_auth_manager_passwords_file = ${{AIRFLOW_HOME}}/secrets/{_PASSWORDS_FILE}

[database]
sql_alchemy_conn = sqlite:///${{AIRFLOW_HOME}}/airflow.db

[logging]
base_log_folder = ${{AIRFLOW_HOME}}/logs
dag_processor_child_process_log_directory = ${{AIRFLOW_HOME}}/logs/dag_processor

[api]
host = 127.0.0.1
secret_key_cmd = {_cat(_API_KEY_FILE)}

[api_auth]
jwt_secret_cmd = {_cat(_JWT_FILE)}
"""


def write_config(home: Path, repo: Path = REPO) -> Path:
    """``home/airflow.cfg`` as above. A config Airflow wrote itself (absolute paths, examples
    on) is kept beside it as ``airflow.cfg.replaced``; one written here is refreshed."""
    cfg = home / "airflow.cfg"
    home.mkdir(parents=True, exist_ok=True)
    if cfg.exists() and not cfg.read_text().startswith(CONFIG_MARKER):
        cfg.replace(home / "airflow.cfg.replaced")
    cfg.write_text(config_text(repo))
    ensure_secrets(home)
    return cfg


def main(argv: list[str] | None = None) -> int:
    """``python -m lake_airflow.installation --compose-secrets DIR``: docker compose's
    airflow-init makes the installation's secrets in its auth volume (AIRFLOW_ADMIN_PASSWORD,
    when set, is the admin's password)."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--compose-secrets", metavar="DIR", required=True)
    args = ap.parse_args(argv)
    folder = make_secrets(Path(args.compose_secrets),
                          os.environ.get("AIRFLOW_ADMIN_PASSWORD") or None)
    print(f"secrets of this installation in {folder} (admin password: "
          f"{folder / _PASSWORDS_FILE})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
