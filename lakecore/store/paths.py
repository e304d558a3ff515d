"""The one owner of every file name and directory in a table (Paimon's layout)."""

from __future__ import annotations

import copy
import hashlib
import itertools
import re
import uuid
from collections.abc import Sequence
from typing import Any

from lakecore.errors import PartitionValueError
from lakecore.format.bucket import POSTPONE_BUCKET
from lakecore.format.partition_string import partition_value_string
from lakecore.schema.types import DataType

SCHEMA_DIR = "schema"
SCHEMA_PREFIX = "schema-"
SNAPSHOT_DIR = "snapshot"
SNAPSHOT_PREFIX = "snapshot-"
LATEST_HINT = "LATEST"
EARLIEST_HINT = "EARLIEST"
MANIFEST_DIR = "manifest"
INDEX_MANIFEST_PREFIX = "index-manifest-"
INDEX_DIR = "index"  # HASH and deletion-vector index files
INDEX_FILE_PREFIX = "index-"
TAG_DIR = "tag"
TAG_PREFIX = "tag-"
CHANGELOG_DIR = "changelog"  # Java Paimon's long-lived changelogs (lakecore writes none)
CHANGELOG_PREFIX = "changelog-"
CONSUMER_DIR = "consumer"  # Paimon's streaming consumers
CONSUMER_PREFIX = "consumer-"
BRANCH_DIR = "branch"
BUCKET_PREFIX = "bucket-"
POSTPONE_BUCKET_DIR = "bucket-postpone"  # bucket -2 of a postpone-bucket table
DATA_FILE_PREFIX = "data-"
DEFAULT_PARTITION_NAME = "__DEFAULT_PARTITION__"

# lakecore's own bookkeeping under the table; Paimon's readers ignore it
STATE_DIR = "_lakecore"
COMMIT_USERS_DIR = "commit-users"
COMMIT_USER_PREFIX = "commit-user-"
EXPIRED_PARTITIONS_DIR = "expired-partitions"
PARTITION_EXPIRE_LAST_CHECK = "partition-expire-last-check"
COMMIT_PROTOCOL_FILE = "commit-protocol"  # lakecore.store.commit_protocol

# Java PartitionPathUtils escapes these (plus control characters) as %XX.
_ESCAPE = set("\"#%'*/:=?\\{}[]^")


def escape_path_name(value: str) -> str:
    return "".join(
        f"%{ord(c):02X}" if ord(c) < 32 or ord(c) == 127 or c in _ESCAPE else c for c in value
    )


def check_partition_value(name: str, text: str) -> None:
    """Refuse values that would escape the table directory or be ambiguous as paths."""
    if "/" in text or "\\" in text or text in (".", "..") or ".." in text.split("/"):
        raise PartitionValueError(
            f"partition value {text!r} for column {name!r} contains a path separator or '..'"
        )
    if any(ord(c) < 32 for c in text):
        raise PartitionValueError(
            f"partition value {text!r} for column {name!r} contains control characters"
        )


class PathFactory:
    """Paths of one table. ``new_*`` names are unique per factory (uuid + counter)."""

    def __init__(
        self,
        table_path: str,
        partition_keys: Sequence[str] = (),
        partition_types: Sequence[DataType] = (),
        default_partition_name: str = DEFAULT_PARTITION_NAME,
        file_format: str = "parquet",
        legacy_partition_name: bool = True,
    ) -> None:
        self.table_path = table_path.rstrip("/")
        self.partition_keys = list(partition_keys)
        self.partition_types = list(partition_types)
        self.default_partition_name = default_partition_name
        self.file_format = file_format
        self.legacy_partition_name = legacy_partition_name
        self.data_file_prefix = DATA_FILE_PREFIX
        self._uuid = uuid.uuid4()
        self._counter = itertools.count()

    # -- metadata ------------------------------------------------------------------------
    @property
    def schema_dir(self) -> str:
        return f"{self.table_path}/{SCHEMA_DIR}"

    def schema_path(self, schema_id: int) -> str:
        return f"{self.schema_dir}/{SCHEMA_PREFIX}{schema_id}"

    @property
    def snapshot_dir(self) -> str:
        return f"{self.table_path}/{SNAPSHOT_DIR}"

    def snapshot_path(self, snapshot_id: int) -> str:
        return f"{self.snapshot_dir}/{SNAPSHOT_PREFIX}{snapshot_id}"

    @property
    def latest_hint(self) -> str:
        return f"{self.snapshot_dir}/{LATEST_HINT}"

    @property
    def earliest_hint(self) -> str:
        return f"{self.snapshot_dir}/{EARLIEST_HINT}"

    @property
    def manifest_dir(self) -> str:
        return f"{self.table_path}/{MANIFEST_DIR}"

    def manifest_path(self, file_name: str) -> str:
        return f"{self.manifest_dir}/{file_name}"

    def new_manifest_name(self) -> str:
        return f"manifest-{self._uuid}-{next(self._counter)}"

    def new_manifest_list_name(self) -> str:
        return f"manifest-list-{self._uuid}-{next(self._counter)}"

    def new_index_manifest_name(self) -> str:
        return f"{INDEX_MANIFEST_PREFIX}{self._uuid}-{next(self._counter)}"

    @property
    def index_dir(self) -> str:
        return f"{self.table_path}/{INDEX_DIR}"

    def index_file_path(self, file_name: str, external: str | None = None) -> str:
        """An index file's path (``external``: the entry's own external path, if any)."""
        return external if external else f"{self.index_dir}/{file_name}"

    def new_index_file_name(self) -> str:
        return f"{INDEX_FILE_PREFIX}{self._uuid}-{next(self._counter)}"

    @property
    def tag_dir(self) -> str:
        return f"{self.table_path}/{TAG_DIR}"

    def tag_path(self, name: str) -> str:
        return f"{self.tag_dir}/{TAG_PREFIX}{name}"

    @property
    def changelog_dir(self) -> str:
        return f"{self.table_path}/{CHANGELOG_DIR}"

    @property
    def consumer_dir(self) -> str:
        return f"{self.table_path}/{CONSUMER_DIR}"

    @property
    def branch_dir(self) -> str:
        return f"{self.table_path}/{BRANCH_DIR}"

    # -- lakecore's own state (``_lakecore/``) -----------------------------------------------
    @property
    def state_dir(self) -> str:
        return f"{self.table_path}/{STATE_DIR}"

    @property
    def commit_user_dir(self) -> str:
        return f"{self.state_dir}/{COMMIT_USERS_DIR}"

    def commit_user_path(self, commit_user: str) -> str:
        """The commit-user marker of ``commit_user`` (named by the SHA-256 of the user)."""
        digest = hashlib.sha256(commit_user.encode("utf-8")).hexdigest()
        return f"{self.commit_user_dir}/{COMMIT_USER_PREFIX}{digest}"

    @property
    def expired_partitions_dir(self) -> str:
        return f"{self.state_dir}/{EXPIRED_PARTITIONS_DIR}"

    def expired_partitions_path(self, file_name: str) -> str:
        return f"{self.expired_partitions_dir}/{file_name}"

    @property
    def partition_expire_last_check(self) -> str:
        return f"{self.state_dir}/{PARTITION_EXPIRE_LAST_CHECK}"

    @property
    def commit_protocol_path(self) -> str:
        """The table's commit protocol (object stores): ``lock`` or ``conditional-put``."""
        return f"{self.state_dir}/{COMMIT_PROTOCOL_FILE}"

    # -- data ----------------------------------------------------------------------------
    def partition_path(self, values: Sequence[Any]) -> str:
        """``k1=v1/k2=v2`` for a partition (empty for an unpartitioned table)."""
        parts = []
        for name, t, v in zip(self.partition_keys, self.partition_types, values, strict=True):
            text = partition_value_string(v, t, self.legacy_partition_name)
            if text is None:
                text = self.default_partition_name
            else:
                check_partition_value(name, text)
            parts.append(f"{escape_path_name(name)}={escape_path_name(text)}")
        return "/".join(parts)

    def bucket_path(self, partition: Sequence[Any], bucket: int) -> str:
        rel = self.partition_path(partition)
        base = f"{self.table_path}/{rel}" if rel else self.table_path
        if bucket == POSTPONE_BUCKET:
            return f"{base}/{POSTPONE_BUCKET_DIR}"
        return f"{base}/{BUCKET_PREFIX}{bucket}"

    def new_data_file_name(self, prefix: str | None = None) -> str:
        prefix = self.data_file_prefix if prefix is None else prefix
        return f"{prefix}{self._uuid}-{next(self._counter)}.{self.file_format}"

    def for_postpone_writer(self, commit_user: str, write_id: int) -> PathFactory:
        """These paths for one writer of a postpone bucket: its data files are named
        ``data--u-<user>-s-<write id>-w-<uuid>-<n>`` as Paimon's postpone writers name theirs
        (Java's compaction reads the write id back from ``-s-<id>-``). Characters of the
        commit user other than letters and digits become ``_``, so the name parses."""
        user = re.sub(r"[^A-Za-z0-9]", "_", commit_user)
        other = copy.copy(self)
        other.data_file_prefix = f"{DATA_FILE_PREFIX}-u-{user}-s-{int(write_id)}-w-"
        return other

    def new_changelog_file_name(self) -> str:
        return self.new_data_file_name("changelog-")

    def data_file_path(
        self, partition: Sequence[Any], bucket: int, file_name: str, external: str | None = None
    ) -> str:
        if external:
            return external
        return f"{self.bucket_path(partition, bucket)}/{file_name}"
