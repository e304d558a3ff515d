"""Build the ``--py-files`` artifact: a zip of the ``lakecore`` package alone.

    python -m lakecore.spark.package dist/lakecore.zip      (the Makefile's dist/lakecore.zip)

Only the standard library is used, so any Python builds it. The zip is reproducible (sorted
entries, fixed timestamps) and replaces the old one atomically. Executors still need
lakecore's dependencies (pyarrow, numpy, fastavro, backports.zstd, SQLAlchemy) installed in
the Python that ``spark.pyspark.python`` names; the zip carries lakecore only.
"""

from __future__ import annotations

import os
import sys
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

PACKAGE = "lakecore"
_SUFFIXES = (".py", ".typed")
_EPOCH = (1980, 1, 1, 0, 0, 0)


def package_files(root: Path) -> Iterator[Path]:
    """The package's source files, relative to ``root``, in a stable order."""
    for dirpath, dirnames, filenames in os.walk(root / PACKAGE):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(_SUFFIXES):
                yield Path(dirpath, name).relative_to(root)


def build_zip(out: Path, root: Path) -> int:
    """Write ``out``; return the number of files in it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    count = 0
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for rel in package_files(root):
            info = zipfile.ZipInfo(rel.as_posix(), _EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, (root / rel).read_bytes())
            count += 1
    os.replace(tmp, out)
    return count


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m lakecore.spark.package OUT.zip", file=sys.stderr)
        return 2
    root = Path(__file__).resolve().parents[2]
    n = build_zip(Path(args[0]).resolve(), root)
    print(f"{args[0]}: {n} files of the {PACKAGE} package")
    return 0


if __name__ == "__main__":
    sys.exit(main())
