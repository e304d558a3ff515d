"""Paimon options that change what a table holds or how it is read, and that lakecore does
not implement. A table another writer (Java Paimon) made with one of them set is refused when
it is opened (``UnsupportedFeatureError`` naming the option), before anything is read or
written: ignoring such an option would read rows Paimon does not show, or write rows where
Paimon does not look. (lakecore's own tables cannot have them: creating a table with an
unknown key is an ``OptionError``.)

Each was found by reading, writing and compacting tables Java Paimon made
(``tests/javapaimon/test_java_to_lakecore.py``); the Paimon class that implements it is named.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from lakecore.errors import UnsupportedFeatureError


def _set(value: str) -> bool:
    return bool(value.strip())


def _true(value: str) -> bool:
    return value.strip().lower() == "true"


def _not(default: str) -> Callable[[str], bool]:
    return lambda value: value.strip().lower() != default


# key -> (what it does in Paimon, whether a value turns it on)
UNIMPLEMENTED: Mapping[str, tuple[str, Callable[[str], bool]]] = {
    "bucket-function.type": (
        "rows are routed to buckets by another function than the default hash "
        "(ModBucketFunction)", _not("default")),
    "record-level.expire-time": (
        "compaction drops records older than an expiry on a time field (RecordLevelExpire)",
        _set),
    "ignore-update-before": (
        "writers drop -U records (RowKindFilter)", _true),
    "data-file.external-paths": (
        "data files live under external paths (ExternalPathProvider)", _set),
    "manifest.format": (
        "manifests and manifest lists in another format than Avro", _not("avro")),
    "scan.fallback-branch": (
        "reads take the partitions the branch lacks from a fallback branch "
        "(FallbackReadFileStoreTable)", _set),
}


def check_implemented(options: Mapping[str, str]) -> None:
    """Raise ``UnsupportedFeatureError`` for the first option of ``UNIMPLEMENTED`` that is on."""
    for key, (what, on) in UNIMPLEMENTED.items():
        value = options.get(key)
        if value is not None and on(value):
            raise UnsupportedFeatureError(
                f"table option {key}={value!r} is not supported by lakecore ({what}); the "
                "table was left as it is: read and maintain it with Java Paimon")
