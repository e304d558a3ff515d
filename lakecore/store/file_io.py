"""Every byte lakecore reads or writes goes through ``FileIO`` (pyarrow.fs underneath).

Local paths, ``file://``, ``s3://``, ``gs://`` and ``hdfs://`` URIs are resolved by
``pyarrow.fs.FileSystem.from_uri``. Snapshot files are created with ``try_create``: write a
temporary file, then publish it under its final name only if that name is still free. On a
local filesystem that is ``os.link`` (atomic, fails if the target exists); object stores have
no such primitive, so there the catalog lock must serialize committers (``lock.enabled``).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from lakecore.errors import CorruptFileError


@dataclass(frozen=True)
class FileStatus:
    """A listed file or directory: path, size, modification time."""

    path: str
    size: int
    mtime_millis: int | None
    is_dir: bool


class FileIO:
    """A filesystem plus helpers that keep the table's invariants (no overwritten snapshot)."""

    def __init__(self, fs: pafs.FileSystem) -> None:
        self.fs = fs

    @staticmethod
    def for_uri(uri: str) -> tuple[FileIO, str]:
        """Return the FileIO for ``uri`` and the path inside that filesystem."""
        if "://" not in uri:
            return FileIO(pafs.LocalFileSystem()), os.path.abspath(uri)
        fs, path = pafs.FileSystem.from_uri(uri)
        return FileIO(fs), path

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    @property
    def is_object_store(self) -> bool:
        return self.fs.type_name in ("s3", "gcs")

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
        self.mkdirs(_parent(path))
        return self.fs.open_output_stream(path)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a new (uniquely named) file, or overwrite a hint file."""
        with self.open_output_stream(path) as f:
            f.write(data)

    def overwrite_atomic(self, path: str, data: bytes) -> None:
        """Replace ``path`` so readers see the old or the new content, never a torn file."""
        tmp = f"{_parent(path)}/.{_name(path)}.{uuid.uuid4().hex}.tmp"
        self.write_bytes(tmp, data)
        self.fs.move(tmp, path)

    def try_create(self, path: str, data: bytes) -> bool:
        """Create ``path`` with ``data`` only if it does not exist. True if we created it."""
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
