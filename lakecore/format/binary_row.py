"""Paimon's BinaryRow, one row at a time (partition values, min/max keys, stats).

Layout (Java ``BinaryRowWriter``): a header + null-bit region of
``((arity + 63 + 8) // 64) * 8`` bytes (byte 0 = row kind, null bit of field ``i`` at bit
``8 + i``), one 8-byte little-endian slot per field, then a variable-length part whose
pieces are padded to 8-byte words. Manifests store the row behind a 4-byte big-endian
arity prefix; that prefixed form is what :func:`encode_row` returns and :func:`decode_row`
takes. The vectorized twin used for bucketing lives in :mod:`lakecore.format.bucket`.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

from lakecore.errors import SchemaError
from lakecore.schema.types import DataType, TypeRoot

HEADER_SIZE_IN_BITS = 8
MAX_FIX_PART_DATA_SIZE = 7
MAX_COMPACT_PRECISION = 18  # DECIMAL(p <= 18) is an unscaled long in the slot
MAX_COMPACT_TIMESTAMP_PRECISION = 3  # TIMESTAMP(p <= 3) is epoch millis in the slot
NON_COMPACT_DECIMAL_BYTES = 16  # Java always reserves 16 var bytes for a big decimal

EMPTY_ROW: bytes = b"\x00\x00\x00\x00" + bytes(8)
"""The serialized row of arity 0 (Java's ``BinaryRow.EMPTY_ROW``)."""

_EPOCH_DATE_ORDINAL = dt.date(1970, 1, 1).toordinal()
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_DECIMAL_CTX = Context(prec=100, rounding=ROUND_HALF_UP)
_VAR_LEN_ROOTS = frozenset({TypeRoot.CHAR, TypeRoot.VARCHAR, TypeRoot.BINARY, TypeRoot.VARBINARY})


def null_bits_size(arity: int) -> int:
    """Bytes of the header + null-bit region (always a whole number of 8-byte words)."""
    return ((arity + 63 + HEADER_SIZE_IN_BITS) // 64) * 8


def round_to_word(n: int) -> int:
    return (n + 7) & ~7


def is_compact_decimal(t: DataType) -> bool:
    return (t.precision if t.precision is not None else 10) <= MAX_COMPACT_PRECISION


def is_compact_timestamp(t: DataType) -> bool:
    return (t.precision if t.precision is not None else 6) <= MAX_COMPACT_TIMESTAMP_PRECISION


# ----------------------------------------------------------------------------- value helpers


def decimal_unscaled(value: Any, t: DataType) -> int:
    """The unscaled integer of ``value`` at the type's scale (HALF_UP, like Java's
    ``Decimal.fromBigDecimal``); a value wider than the precision is an error, not a null."""
    precision = t.precision if t.precision is not None else 10
    scale = t.scale or 0
    d = value if isinstance(value, Decimal) else Decimal(str(value))
    rounded = d.quantize(Decimal(1).scaleb(-scale), context=_DECIMAL_CTX)
    digits = rounded.as_tuple().digits
    if rounded != 0 and len(digits) > precision:
        raise SchemaError(f"decimal {value} does not fit {t}")
    return int(rounded.scaleb(scale, context=_DECIMAL_CTX))


def java_big_integer_bytes(v: int) -> bytes:
    """``BigInteger.toByteArray()``: minimal big-endian two's complement (sign bit kept)."""
    magnitude = v if v >= 0 else ~v  # Java's bitLength() excludes the sign bit
    return v.to_bytes(magnitude.bit_length() // 8 + 1, "big", signed=True)


def timestamp_millis_nanos(value: Any, t: DataType) -> tuple[int, int]:
    """(epoch millis, nano-of-millisecond), floored like Java's ``Timestamp``. TIMESTAMP_LTZ
    takes an aware datetime (naive is read as UTC); TIMESTAMP takes a naive one."""
    if not isinstance(value, dt.datetime):
        raise SchemaError(f"{t} needs a datetime, got {type(value).__name__}")
    if value.tzinfo is not None:
        if t.root is not TypeRoot.TIMESTAMP_LTZ:
            raise SchemaError(f"{t} takes a naive datetime, got {value!r}")
        delta = value - _EPOCH_UTC
    else:
        delta = value - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    nanos = micros * 1000 + int(getattr(value, "nanosecond", 0))  # pandas.Timestamp
    return nanos // 1_000_000, nanos % 1_000_000


def date_days(value: Any) -> int:
    if isinstance(value, dt.datetime):
        value = value.date()
    if isinstance(value, dt.date):
        return value.toordinal() - _EPOCH_DATE_ORDINAL
    if isinstance(value, int):
        return value
    raise SchemaError(f"DATE needs a date, got {type(value).__name__}")


def time_millis(value: Any) -> int:
    if isinstance(value, dt.time):
        return (
            value.hour * 3_600_000
            + value.minute * 60_000
            + value.second * 1000
            + value.microsecond // 1000
        )
    if isinstance(value, int):
        return value
    raise SchemaError(f"TIME needs a time, got {type(value).__name__}")


def _var_bytes(value: Any, t: DataType) -> bytes:
    if t.is_string:
        if isinstance(value, str):
            return value.encode("utf-8")
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
        raise SchemaError(f"{t} needs a str, got {type(value).__name__}")
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise SchemaError(f"{t} needs bytes, got {type(value).__name__}")


def _fixed_slot(value: Any, t: DataType) -> bytes:
    """The 8 slot bytes of a fixed-width value (Java writes only the value's own width; the
    rest of the slot stays zero, so a negative TINYINT is ``ff 00 .. 00``)."""
    r = t.root
    if r is TypeRoot.BOOLEAN:
        return struct.pack("<B7x", 1 if value else 0)
    if r is TypeRoot.TINYINT:
        return struct.pack("<b7x", value)
    if r is TypeRoot.SMALLINT:
        return struct.pack("<h6x", value)
    if r is TypeRoot.INT:
        return struct.pack("<i4x", value)
    if r is TypeRoot.BIGINT:
        return struct.pack("<q", value)
    if r is TypeRoot.FLOAT:
        return struct.pack("<f4x", value)
    if r is TypeRoot.DOUBLE:
        return struct.pack("<d", value)
    if r is TypeRoot.DATE:
        return struct.pack("<i4x", date_days(value))
    if r is TypeRoot.TIME:
        return struct.pack("<i4x", time_millis(value))
    if r is TypeRoot.DECIMAL:
        return struct.pack("<q", decimal_unscaled(value, t))
    if r in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        return struct.pack("<q", timestamp_millis_nanos(value, t)[0])
    raise SchemaError(f"BinaryRow cannot hold {t}")


# ----------------------------------------------------------------------------- encode


def encode_row_body(values: Sequence[Any], types: Sequence[DataType]) -> bytes:
    """The BinaryRow bytes without the arity prefix (what ``BinaryRow.hashCode`` hashes)."""
    if len(values) != len(types):
        raise SchemaError(f"row has {len(values)} values for {len(types)} types")
    arity = len(types)
    nb = null_bits_size(arity)
    fixed = bytearray(nb + 8 * arity)  # row kind byte 0 = +I
    var = bytearray()
    fixed_size = len(fixed)
    for i, (value, t) in enumerate(zip(values, types)):
        if t.is_nested:
            raise SchemaError(f"BinaryRow fields must be atomic, got {t}")
        slot = nb + 8 * i
        non_compact_dec = t.root is TypeRoot.DECIMAL and not is_compact_decimal(t)
        non_compact_ts = t.root in (
            TypeRoot.TIMESTAMP,
            TypeRoot.TIMESTAMP_LTZ,
        ) and not is_compact_timestamp(t)
        if value is None:
            bit = i + HEADER_SIZE_IN_BITS
            fixed[bit // 8] |= 1 << (bit % 8)
            # Java still reserves (zeroed) var space for a null big decimal / timestamp and
            # points the slot at it with size 0; every other null is a zero slot.
            if non_compact_dec or non_compact_ts:
                struct.pack_into("<q", fixed, slot, (fixed_size + len(var)) << 32)
                var += bytes(NON_COMPACT_DECIMAL_BYTES if non_compact_dec else 8)
            continue
        if non_compact_dec:
            raw = java_big_integer_bytes(decimal_unscaled(value, t))
            struct.pack_into("<q", fixed, slot, ((fixed_size + len(var)) << 32) | len(raw))
            var += raw + bytes(NON_COMPACT_DECIMAL_BYTES - len(raw))
        elif non_compact_ts:
            millis, nanos = timestamp_millis_nanos(value, t)
            struct.pack_into("<q", fixed, slot, ((fixed_size + len(var)) << 32) | nanos)
            var += struct.pack("<q", millis)
        elif t.root in _VAR_LEN_ROOTS:
            raw = _var_bytes(value, t)
            n = len(raw)
            if n <= MAX_FIX_PART_DATA_SIZE:
                fixed[slot : slot + n] = raw
                fixed[slot + 7] = 0x80 | n
            else:
                struct.pack_into("<q", fixed, slot, ((fixed_size + len(var)) << 32) | n)
                var += raw + bytes(round_to_word(n) - n)
        else:
            fixed[slot : slot + 8] = _fixed_slot(value, t)
    return bytes(fixed) + bytes(var)


def encode_row(values: Sequence[Any], types: Sequence[DataType]) -> bytes:
    """The serialized BinaryRow stored in manifests: big-endian arity + row bytes."""
    return struct.pack(">i", len(types)) + encode_row_body(values, types)


# ----------------------------------------------------------------------------- decode


def _read_var(body: bytes, slot_value: int, slot: int) -> bytes:
    if slot_value & (1 << 63):  # inline: top bit set, length in the next 7 bits
        n = (slot_value >> 56) & 0x7F
        return body[slot : slot + n]
    offset, n = slot_value >> 32, slot_value & 0xFFFFFFFF
    if offset + n > len(body):
        raise SchemaError(f"BinaryRow var field [{offset}, +{n}) past end {len(body)}")
    return body[offset : offset + n]


def _decode_field(body: bytes, slot: int, t: DataType) -> Any:
    r = t.root
    (raw,) = struct.unpack_from("<Q", body, slot)
    if r is TypeRoot.BOOLEAN:
        return body[slot] != 0
    if r is TypeRoot.TINYINT:
        return struct.unpack_from("<b", body, slot)[0]
    if r is TypeRoot.SMALLINT:
        return struct.unpack_from("<h", body, slot)[0]
    if r is TypeRoot.INT:
        return struct.unpack_from("<i", body, slot)[0]
    if r is TypeRoot.BIGINT:
        return struct.unpack_from("<q", body, slot)[0]
    if r is TypeRoot.FLOAT:
        return struct.unpack_from("<f", body, slot)[0]
    if r is TypeRoot.DOUBLE:
        return struct.unpack_from("<d", body, slot)[0]
    if r is TypeRoot.DATE:
        return dt.date.fromordinal(struct.unpack_from("<i", body, slot)[0] + _EPOCH_DATE_ORDINAL)
    if r is TypeRoot.TIME:
        ms = struct.unpack_from("<i", body, slot)[0]
        return (dt.datetime.min + dt.timedelta(milliseconds=ms)).time()
    if r in _VAR_LEN_ROOTS:
        data = _read_var(body, raw, slot)
        return data.decode("utf-8") if t.is_string else bytes(data)
    if r is TypeRoot.DECIMAL:
        if is_compact_decimal(t):
            unscaled = struct.unpack_from("<q", body, slot)[0]
        else:
            unscaled = int.from_bytes(_read_var(body, raw, slot), "big", signed=True)
        return Decimal(unscaled).scaleb(-(t.scale or 0), context=_DECIMAL_CTX)
    if r in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        if is_compact_timestamp(t):
            millis, nanos = struct.unpack_from("<q", body, slot)[0], 0
        else:
            offset, nanos = raw >> 32, raw & 0xFFFFFFFF
            if offset + 8 > len(body):
                raise SchemaError(f"BinaryRow timestamp at {offset} past end {len(body)}")
            millis = struct.unpack_from("<q", body, offset)[0]
        return _to_datetime(millis, nanos, t)
    raise SchemaError(f"BinaryRow cannot hold {t}")


def _to_datetime(millis: int, nanos: int, t: DataType) -> Any:
    total_micros = millis * 1000 + nanos // 1000
    if nanos % 1000:  # sub-microsecond digits: only a pandas.Timestamp keeps them
        import pandas as pd

        ts = pd.Timestamp(millis * 1_000_000 + nanos, unit="ns")
        return ts.tz_localize("UTC") if t.root is TypeRoot.TIMESTAMP_LTZ else ts
    if t.root is TypeRoot.TIMESTAMP_LTZ:
        return _EPOCH_UTC + dt.timedelta(microseconds=total_micros)
    return _EPOCH + dt.timedelta(microseconds=total_micros)


def decode_row(data: bytes, types: Sequence[DataType]) -> tuple[Any, ...]:
    """Inverse of :func:`encode_row`; the arity prefix must equal ``len(types)``."""
    if len(data) < 4:
        raise SchemaError(f"BinaryRow of {len(data)} bytes has no arity prefix")
    (arity,) = struct.unpack_from(">i", data, 0)
    if arity != len(types):
        raise SchemaError(f"BinaryRow arity {arity} does not match {len(types)} types")
    body = bytes(data[4:])
    nb = null_bits_size(arity)
    if len(body) < nb + 8 * arity:
        raise SchemaError(f"BinaryRow of arity {arity} truncated at {len(body)} bytes")
    out: list[Any] = []
    for i, t in enumerate(types):
        bit = i + HEADER_SIZE_IN_BITS
        if body[bit // 8] & (1 << (bit % 8)):
            out.append(None)
        else:
            out.append(_decode_field(body, nb + 8 * i, t))
    return tuple(out)
