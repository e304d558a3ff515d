"""A Parquet footer (``FileMetaData``, Thrift compact protocol): decoded, changed, re-encoded.

Arrow writes every timestamp column of a file either as INT64 or, with its per-file
``use_deprecated_int96_timestamps``, as INT96; Paimon chooses per column (INT96 for a precision
above 6 only, ``parquet_layout``). lakecore therefore hands Arrow such a column as the 12-byte
values Paimon's writer stores (``FIXED_LEN_BYTE_ARRAY(12)``, whose pages are byte for byte the
pages of an INT96 column: PLAIN and dictionary encodings both store the 12 bytes as they are)
and, when the file is closed, rewrites its footer: those leaves become INT96 (schema element and
every row group's column metadata), and Arrow's stored schema (``ARROW:schema``) names them as
timestamps again. ``HoldingSink`` holds back what Arrow writes while it closes the file (the last
column chunk's pages, then the footer), so the footer is rewritten before it reaches the stream.

The codec keeps every field it does not change, in the order it came (unknown fields too);
``patch_footer`` is the only change made to a file.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

MAGIC = b"PAR1"

# Thrift compact protocol types
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE = 0, 1, 2, 3, 4, 5, 6, 7
_BINARY, _LIST, _SET, _MAP, _STRUCT = 8, 9, 10, 11, 12

# parquet.thrift: Type
INT96, FIXED_LEN_BYTE_ARRAY = 3, 7
# FileMetaData
_FMD_SCHEMA, _FMD_ROW_GROUPS, _FMD_KEY_VALUE = 2, 4, 5
# SchemaElement
_SE_TYPE, _SE_TYPE_LENGTH, _SE_NUM_CHILDREN = 1, 2, 5
# RowGroup.columns, ColumnChunk.meta_data, ColumnMetaData.type / .statistics
_RG_COLUMNS, _CC_META, _CMD_TYPE, _CMD_STATISTICS = 1, 3, 1, 12
# Statistics: max, min, max_value, min_value, is_max_value_exact, is_min_value_exact
_STATS_MIN_MAX = (1, 2, 5, 6, 7, 8)
ARROW_SCHEMA_KEY = b"ARROW:schema"


@dataclass
class TStruct:
    """A Thrift struct: its fields as [field id, compact type, value], in their order."""

    fields: list[list[Any]] = field(default_factory=list)

    def get(self, fid: int) -> Any:
        for f in self.fields:
            if f[0] == fid:
                return f[2]
        return None

    def set(self, fid: int, ctype: int, value: Any) -> None:
        for f in self.fields:
            if f[0] == fid:
                f[1], f[2] = ctype, value
                return
        self.fields.append([fid, ctype, value])
        self.fields.sort(key=lambda f: f[0])

    def drop(self, fid: int) -> None:
        self.fields = [f for f in self.fields if f[0] != fid]


@dataclass
class TList:
    """A Thrift list (or set) of ``etype`` elements."""

    etype: int
    items: list[Any]


# ------------------------------------------------------------------ decoding

class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        out = shift = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if b < 0x80:
                return out
            shift += 7

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, ctype: int) -> Any:
        if ctype in (_TRUE, _FALSE):  # a bool in a container is one byte
            return self.byte() == _TRUE
        if ctype == _BYTE:
            return struct.unpack("b", bytes([self.byte()]))[0]
        if ctype in (_I16, _I32, _I64):
            return self.zigzag()
        if ctype == _DOUBLE:
            (d,) = struct.unpack_from("<d", self.data, self.pos)
            self.pos += 8
            return d
        if ctype == _BINARY:
            n = self.varint()
            raw = self.data[self.pos:self.pos + n]
            self.pos += n
            return raw
        if ctype in (_LIST, _SET):
            head = self.byte()
            size, etype = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            return TList(etype, [self.value(etype) for _ in range(size)])
        if ctype == _MAP:
            size = self.varint()
            if size == 0:
                return (0, 0, [])
            kinds = self.byte()
            kt, vt = kinds >> 4, kinds & 0x0F
            return (kt, vt, [(self.value(kt), self.value(vt)) for _ in range(size)])
        if ctype == _STRUCT:
            return self.tstruct()
        raise ValueError(f"unknown Thrift compact type {ctype}")

    def tstruct(self) -> TStruct:
        out = TStruct()
        last = 0
        while True:
            head = self.byte()
            ctype = head & 0x0F
            if ctype == _STOP:
                return out
            delta = head >> 4
            fid = last + delta if delta else self.zigzag()
            if ctype in (_TRUE, _FALSE):
                value: Any = ctype == _TRUE
            else:
                value = self.value(ctype)
            out.fields.append([fid, ctype, value])
            last = fid


def decode(data: bytes) -> TStruct:
    """A Thrift struct from its compact encoding."""
    return _Reader(data).tstruct()


# ------------------------------------------------------------------ encoding

def _varint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _zigzag(out: bytearray, n: int) -> None:
    _varint(out, (n << 1) ^ (n >> 63))


def _write_value(out: bytearray, ctype: int, value: Any) -> None:
    if ctype in (_TRUE, _FALSE):
        out.append(_TRUE if value else _FALSE)
    elif ctype == _BYTE:
        out += struct.pack("b", value)
    elif ctype in (_I16, _I32, _I64):
        _zigzag(out, value)
    elif ctype == _DOUBLE:
        out += struct.pack("<d", value)
    elif ctype == _BINARY:
        _varint(out, len(value))
        out += value
    elif ctype in (_LIST, _SET):
        n = len(value.items)
        if n < 15:
            out.append((n << 4) | value.etype)
        else:
            out.append(0xF0 | value.etype)
            _varint(out, n)
        for item in value.items:
            _write_value(out, value.etype, item)
    elif ctype == _MAP:
        kt, vt, pairs = value
        _varint(out, len(pairs))
        if pairs:
            out.append((kt << 4) | vt)
            for k, v in pairs:
                _write_value(out, kt, k)
                _write_value(out, vt, v)
    elif ctype == _STRUCT:
        _write_struct(out, value)
    else:
        raise ValueError(f"unknown Thrift compact type {ctype}")


def _write_struct(out: bytearray, s: TStruct) -> None:
    last = 0
    for fid, ctype, value in s.fields:
        if ctype in (_TRUE, _FALSE):
            ctype = _TRUE if value else _FALSE
        if 0 < fid - last <= 15:
            out.append(((fid - last) << 4) | ctype)
        else:
            out.append(ctype)
            _zigzag(out, fid)
        if ctype not in (_TRUE, _FALSE):
            _write_value(out, ctype, value)
        last = fid
    out.append(_STOP)


def encode(s: TStruct) -> bytes:
    """The compact encoding of a Thrift struct."""
    out = bytearray()
    _write_struct(out, s)
    return bytes(out)


# ------------------------------------------------------------------ the footer change

def leaf_elements(metadata: TStruct) -> list[TStruct]:
    """The schema elements of the file's leaf columns, in column order."""
    schema: TList = metadata.get(_FMD_SCHEMA)
    return [e for e in schema.items[1:] if e.get(_SE_NUM_CHILDREN) is None]


def patch_footer(footer: bytes, int96_leaves: Iterable[int], arrow_schema: bytes | None
                 ) -> bytes:
    """The footer with the leaf columns ``int96_leaves`` (indices in column order, written as
    ``FIXED_LEN_BYTE_ARRAY(12)``) turned into INT96 columns, without min/max statistics (INT96
    has no defined order; parquet-mr writes none), and Arrow's stored schema replaced by
    ``arrow_schema`` (its value as Arrow writes it: base64 of the serialized schema)."""
    md = decode(footer)
    leaves = leaf_elements(md)
    wanted = sorted(set(int96_leaves))
    for i in wanted:
        e = leaves[i]
        if e.get(_SE_TYPE) != FIXED_LEN_BYTE_ARRAY or e.get(_SE_TYPE_LENGTH) != 12:
            raise ValueError(f"leaf column {i} is not FIXED_LEN_BYTE_ARRAY(12)")
        e.set(_SE_TYPE, _I32, INT96)
        e.drop(_SE_TYPE_LENGTH)
    groups: TList | None = md.get(_FMD_ROW_GROUPS)
    for group in (groups.items if groups is not None else []):
        columns: TList = group.get(_RG_COLUMNS)
        for i in wanted:
            meta: TStruct = columns.items[i].get(_CC_META)
            meta.set(_CMD_TYPE, _I32, INT96)
            stats: TStruct | None = meta.get(_CMD_STATISTICS)
            if stats is not None:
                for fid in _STATS_MIN_MAX:
                    stats.drop(fid)
    if arrow_schema is not None:
        kv: TList | None = md.get(_FMD_KEY_VALUE)
        for entry in (kv.items if kv is not None else []):
            if entry.get(1) == ARROW_SCHEMA_KEY:
                entry.set(2, _BINARY, arrow_schema)
    return encode(md)


def arrow_schema_value(schema: pa.Schema) -> bytes:
    """``ARROW:schema`` as Arrow's Parquet writer stores it: base64 of the serialized schema."""
    return base64.b64encode(schema.serialize().to_pybytes())


class HoldingSink:
    """A file-like sink for ``pq.ParquetWriter`` over ``stream``: writes pass through until
    ``hold``; then they are kept, and ``finish`` writes them with the footer at their end
    (the last 8 bytes name its length) rewritten by ``patch``."""

    def __init__(self, stream: pa.NativeFile) -> None:
        self.stream = stream
        self._held: bytearray | None = None
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data)
        if self._held is not None:
            self._held += view
        else:
            self.stream.write(view)
        return view.nbytes

    def tell(self) -> int:
        return self.stream.tell() + (len(self._held) if self._held is not None else 0)

    def flush(self) -> None:
        if self._held is None:
            self.stream.flush()

    def close(self) -> None:
        self.closed = True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def hold(self) -> None:
        if self._held is None:
            self._held = bytearray()

    def finish(self, patch: Callable[[bytes], bytes]) -> None:
        held = bytes(self._held or b"")
        self._held = None
        if len(held) < 8 or held[-4:] != MAGIC:
            raise ValueError("the bytes held back do not end with a Parquet footer")
        (length,) = struct.unpack("<i", held[-8:-4])
        start = len(held) - 8 - length
        if start < 0:
            raise ValueError("the Parquet footer was not held back whole")
        footer = patch(held[start:-8])
        self.stream.write(held[:start])
        self.stream.write(footer + struct.pack("<i", len(footer)) + MAGIC)
