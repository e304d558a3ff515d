"""Ordering of primary keys as compaction planning needs it.

Files carry their min / max key as BinaryRow bytes, and BinaryRow bytes do not sort like the
values they hold (little-endian ints, out-of-line strings). Planning compares keys many times
per file, so ``KeyOrder`` decodes each distinct key once and caches a comparable form.

The comparable form puts nulls first, the same placement the columnar sort of the merge layer
uses (``"at_start"``), so that "non-overlapping" here means what the rewriter will see.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lakecore.format.binary_row import decode_row
from lakecore.format.manifest import DataFileMeta
from lakecore.schema.types import DataType

KeyDecoder = Callable[[bytes], tuple[Any, ...]]
"""Turns BinaryRow key bytes into the tuple of key values."""

SortKey = tuple[tuple[Any, ...], ...]
"""A decoded key in comparable form: ``(False,)`` for a null field, ``(True, value)`` otherwise."""


class KeyOrder:
    """Comparable keys for BinaryRow bytes, decoded once per distinct row and cached.

    Build it from the key columns' types (the usual case) or from any decoding function (tests,
    or a caller that already decodes keys its own way).
    """

    __slots__ = ("_cache", "_decode")

    def __init__(self, key_types_or_decoder: Sequence[DataType] | KeyDecoder) -> None:
        if callable(key_types_or_decoder):
            self._decode: KeyDecoder = key_types_or_decoder
        else:
            types = tuple(key_types_or_decoder)
            self._decode = lambda data: decode_row(data, types)
        self._cache: dict[bytes, SortKey] = {}

    @staticmethod
    def of(spec: KeySpec) -> KeyOrder:
        """``spec`` itself when it is a ``KeyOrder`` (sharing its cache), else a new one."""
        return spec if isinstance(spec, KeyOrder) else KeyOrder(spec)

    def __call__(self, key: bytes) -> SortKey:
        cached = self._cache.get(key)
        if cached is None:
            cached = tuple((False,) if v is None else (True, v) for v in self._decode(key))
            self._cache[key] = cached
        return cached

    def min_key(self, file: DataFileMeta) -> SortKey:
        return self(file.min_key)

    def max_key(self, file: DataFileMeta) -> SortKey:
        return self(file.max_key)


KeySpec = KeyOrder | Sequence[DataType] | KeyDecoder
"""What planners accept for key ordering: a shared ``KeyOrder``, key types, or a decoder."""
