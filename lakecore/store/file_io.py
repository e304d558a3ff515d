"""Every byte lakecore reads or writes goes through ``FileIO`` (pyarrow.fs underneath).

Local paths and ``file://`` are the local filesystem; ``s3://`` (and ``s3a://``) warehouses get
pyarrow's S3 filesystem built from Paimon's ``s3.*`` catalog options (``lakecore.store.s3``);
other URIs (``gs://``, ``hdfs://``, an ``s3://`` URI carrying pyarrow's own parameters) are
resolved by ``pyarrow.fs.FileSystem.from_uri``.

Files that must be created exclusively (snapshots, tags, schemas) go through ``try_create``:

* local filesystem: write a temporary file, ``os.link`` it to its name (atomic, fails if the
  name exists);
* S3 with conditional writes (``commit.protocol=conditional-put``): one PUT with
  ``If-None-Match: *`` (``lakecore.store.conditional_put``), atomic on the store;
* any other store: "absent? then write", which is only safe under the catalog lock.

On object stores a single PUT replaces an object atomically (readers see the old or the new
bytes), so there ``overwrite_atomic`` and ``try_create`` write in place: no temporary object,
no copy, nothing left behind by a crash.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from lakecore.errors import CorruptFileError, OptionError
from lakecore.lock.protocol import COMMIT_PROTOCOL, S3_SCHEMES, warehouse_scheme
from lakecore.store.conditional_put import ConditionalPut
from lakecore.store.s3 import has_s3_options, parse_s3_options, split_s3_uri


@dataclass(frozen=True)
class FileStatus:
    """A listed file or directory: path, size, modification time."""

    path: str
    size: int
    mtime_millis: int | None
    is_dir: bool


class FileIO:
    """A filesystem plus helpers that keep the table's invariants (no overwritten snapshot)."""

    def __init__(self, fs: pafs.FileSystem, conditional: ConditionalPut | None = None) -> None:
        self.fs = fs
        self.conditional = conditional

    @staticmethod
    def for_uri(uri: str, options: Mapping[str, str] | None = None,
                conditional_put: bool = False) -> tuple[FileIO, str]:
        """Return the FileIO for ``uri`` and the path inside that filesystem.

        ``options`` are the catalog options (the ``s3.*`` keys configure an S3 warehouse; they
        are validated whatever the warehouse). ``conditional_put`` creates files exclusively
        with ``If-None-Match: *`` (S3 warehouses only).
        """
        options = options or {}
        s3 = parse_s3_options(options)  # a typo in an s3.* key is an error everywhere
        scheme = warehouse_scheme(uri)
        if scheme not in S3_SCHEMES:
            if conditional_put:
                raise OptionError(COMMIT_PROTOCOL, f"conditional-put needs an s3:// warehouse, "
                                  f"not {uri!r}")
            if not scheme:
                return FileIO(pafs.LocalFileSystem()), os.path.abspath(uri)
            fs, path = pafs.FileSystem.from_uri(uri)
            return FileIO(fs), path
        path, uri_params = split_s3_uri(uri)
        if uri_params:  # pyarrow's own syntax: s3://key:secret@bucket/wh?endpoint_override=...
            if has_s3_options(options) or conditional_put:
                raise OptionError("warehouse", "give the S3 endpoint and credentials as s3.* "
                                  "catalog options, not as parameters in the warehouse URI "
                                  "(required for conditional-put, and not both)")
            fs, path = pafs.FileSystem.from_uri(f"s3://{uri.split('://', 1)[1]}")
            return FileIO(fs), path.rstrip("/")
        if s3.endpoint is None and s3.region is None:
            s3 = s3.with_bucket_region(path.split("/", 1)[0])
        conditional = None
        if conditional_put:
            conditional = ConditionalPut(s3)
        return FileIO(s3.filesystem(), conditional), path

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    @property
    def is_object_store(self) -> bool:
        return self.fs.type_name in ("s3", "gcs")

    @property
    def conditional_writes(self) -> bool:
        """Whether ``try_create`` is a conditional PUT (no lock needed)."""
        return self.conditional is not None

    # -- reading -------------------------------------------------------------------------
    def read_bytes(self, path: str) -> bytes:
        try:
            with self.fs.open_input_stream(path) as f:
                return f.read()
        except FileNotFoundError as e:
            raise CorruptFileError(path, "file is missing") from e

    def read_text(self, path: str) -> str:
        data = self.read_bytes(path)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptFileError(path, "not valid UTF-8 text") from e

    def open_input_file(self, path: str) -> pa.NativeFile:
        try:
            return self.fs.open_input_file(path)
        except FileNotFoundError as e:
            raise CorruptFileError(path, "file is missing") from e

    def exists(self, path: str) -> bool:
        return self.fs.get_file_info(path).type != pafs.FileType.NotFound

    def missing(self, paths: Sequence[str]) -> list[str]:
        """Those of ``paths`` that do not exist, in order: one listing call on a local file
        system, requests side by side (up to 16) on an object store, where each is a round
        trip."""
        if not self.is_object_store or len(paths) <= 1:
            infos = self.fs.get_file_info(list(paths))
            return [p for p, i in zip(paths, infos) if i.type == pafs.FileType.NotFound]
        with ThreadPoolExecutor(max_workers=min(16, len(paths))) as pool:
            return [p for p, ok in zip(paths, pool.map(self.exists, paths)) if not ok]

    def get_status(self, path: str) -> FileStatus:
        info = self.fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise CorruptFileError(path, "file is missing")
        return _status(info)

    def list_status(self, path: str, recursive: bool = False) -> list[FileStatus]:
        """Entries under ``path``; an absent directory lists as empty."""
        sel = pafs.FileSelector(path, allow_not_found=True, recursive=recursive)
        return [_status(i) for i in self.fs.get_file_info(sel)]

    # -- writing -------------------------------------------------------------------------
    def mkdirs(self, path: str) -> None:
        self.fs.create_dir(path, recursive=True)

    def open_output_stream(self, path: str) -> pa.NativeFile:
        if not self.is_object_store:  # object stores have no directories to make
            self.mkdirs(_parent(path))
        return self.fs.open_output_stream(path)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a new (uniquely named) file, or overwrite a hint file."""
        with self.open_output_stream(path) as f:
            f.write(data)

    def overwrite_atomic(self, path: str, data: bytes) -> None:
        """Replace ``path`` so readers see the old or the new content, never a torn file."""
        if self.is_object_store:  # one PUT is atomic
            self.write_bytes(path, data)
            return
        tmp = f"{_parent(path)}/.{_name(path)}.{uuid.uuid4().hex}.tmp"
        self.write_bytes(tmp, data)
        self.fs.move(tmp, path)

    def try_create(self, path: str, data: bytes) -> bool:
        """Create ``path`` with ``data`` only if it does not exist. True if we created it.

        Exclusive on the local filesystem and with conditional writes; elsewhere only under
        the catalog lock (see the module docstring)."""
        if self.conditional is not None:
            return self.conditional.create(path, data)
        if self.is_object_store:
            if self.exists(path):
                return False
            self.write_bytes(path, data)
            return True
        tmp = f"{_parent(path)}/.{_name(path)}.{uuid.uuid4().hex}.tmp"
        self.write_bytes(tmp, data)
        try:
            if self.is_local:
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    return False
                return True
            if self.exists(path):
                return False
            self.fs.move(tmp, path)
            return True
        finally:
            self.delete_quietly(tmp)

    def delete(self, path: str) -> None:
        self.fs.delete_file(path)

    def delete_quietly(self, path: str) -> bool:
        try:
            self.fs.delete_file(path)
            return True
        except (FileNotFoundError, OSError):
            return False

    def delete_dir_quietly(self, path: str) -> None:
        try:
            self.fs.delete_dir(path)
        except (FileNotFoundError, OSError):
            pass


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0]


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _status(info: pafs.FileInfo) -> FileStatus:
    mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else None
    return FileStatus(info.path, info.size or 0, mtime, info.type == pafs.FileType.Directory)
