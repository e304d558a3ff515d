"""The layer contracts of docs/architecture.md hold, and they catch the wrong-way arrows they exist
to forbid: each case copies lakecore, adds one such import to the copy and runs import-linter
with the repository's own configuration against it."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter over the ``lakecore`` package found first under ``root``."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), str(REPO / "pyproject.toml"), "--no-cache"],
        cwd=root, env=env, capture_output=True, text=True, timeout=120,
    )


def test_the_contracts_hold_on_this_tree() -> None:
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


# (module file, import statement, how it is placed, the contract the arrow breaks)
WRONG_WAY = [
    # a commit that asks maintenance whether a partition expired
    ("commit/file_store_commit.py", "from lakecore.maintenance import expire_partitions",
     "function", "lakecore.commit is not allowed to import lakecore.maintenance"),
    # a scan that reads tags through maintenance
    ("read/scan.py", "from lakecore.maintenance import tags", "function",
     "lakecore.read is not allowed to import lakecore.maintenance"),
    # a reader that borrows the writer's constants or merge
    ("read/split_read.py", "from lakecore.write import table_write", "module",
     "lakecore.read is not allowed to import lakecore.write"),
    # the catalog reaching into maintenance instead of through the table
    ("catalog.py", "from lakecore.maintenance import expire_partitions", "module",
     "lakecore.catalog is not allowed to import lakecore.maintenance"),
    # an operation typed on the facade (the knot that closed through FileStoreTable)
    ("store/snapshot_manager.py", "from lakecore.table import FileStoreTable", "type-checking",
     "lakecore.store is not allowed to import lakecore.table"),
    ("compact/executor.py", "from lakecore.table import FileStoreTable", "type-checking",
     "lakecore.compact is not allowed to import lakecore.table"),
    # a format module that reaches up into the store
    ("format/manifest.py", "from lakecore.store import paths", "function",
     "lakecore.format is not allowed to import lakecore.store"),
    # options that look at the schema they configure
    ("options/core.py", "from lakecore.schema import types", "module",
     "lakecore.options is not allowed to import lakecore.schema"),
    # compaction that commits through the write layer
    ("compact/job.py", "from lakecore.write import write_builder", "function",
     "lakecore.compact is not allowed to import lakecore.write"),
    # engines and orchestration stay out of the library
    ("write/merge_tree_writer.py", "import pyspark", "function",
     "pyspark only in lakecore.spark"),
    ("io/data_file_writer.py", "import airflow", "function",
     "lakecore knows nothing of Airflow"),
]


def _add_import(path: Path, statement: str, placement: str) -> None:
    source = path.read_text()
    tree = ast.parse(source)
    # after the last top-level import, so the module still reads as a module
    last = max(n.end_lineno or 0 for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom))
    lines = source.splitlines(keepends=True)
    if placement == "module":
        block = f"{statement}  # noqa\n"
    elif placement == "function":
        block = f"\n\ndef _wrong_way_probe() -> None:\n    {statement}  # noqa\n\n\n"
    else:
        block = (f"\nfrom typing import TYPE_CHECKING  # noqa\n\n"
                 f"if TYPE_CHECKING:\n    {statement}\n")
    lines.insert(last, block)
    path.write_text("".join(lines))


@pytest.mark.parametrize(("module", "statement", "placement", "broken"), WRONG_WAY,
                         ids=[f"{m}:{s}" for m, s, _, _ in WRONG_WAY])
def test_a_wrong_way_import_breaks_a_contract(
    tmp_path: Path, module: str, statement: str, placement: str, broken: str
) -> None:
    shutil.copytree(REPO / "lakecore", tmp_path / "lakecore",
                    ignore=shutil.ignore_patterns("__pycache__"))
    _add_import(tmp_path / "lakecore" / module, statement, placement)
    result = lint_imports(tmp_path)
    assert result.returncode != 0, result.stdout
    assert broken in result.stdout, result.stdout
