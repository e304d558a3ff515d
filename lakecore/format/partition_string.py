"""The text of a partition value in a directory name, as Paimon writes it.

With ``partition.legacy-name`` (Paimon's default, true) the text is Java's ``toString`` of
the internal value: a DATE is its epoch-day number, a TIMESTAMP is
``LocalDateTime.toString`` (``2024-01-01T12:00``, seconds and fraction only when non-zero),
FLOAT/DOUBLE are ``Float/Double.toString`` (``0.1``, ``100.0``, ``1.0E20``). Without it, the
SQL cast to string is used (``2024-01-01``, ``2024-01-01 12:00:00``). Two writers that
disagree here cannot read each other's files, so this follows Paimon to the character.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import numpy as np

from lakecore.schema.types import DataType, TypeRoot

_EPOCH = dt.date(1970, 1, 1)


def _nanos(value: Any) -> int:
    return value.microsecond * 1000 + int(getattr(value, "nanosecond", 0) or 0)


def _java_local_date_time(value: dt.datetime) -> str:
    text = f"{value.year:04d}-{value.month:02d}-{value.day:02d}T{value.hour:02d}:{value.minute:02d}"
    nanos = _nanos(value)
    if value.second or nanos:
        text += f":{value.second:02d}"
        if nanos:
            if nanos % 1_000_000 == 0:
                text += f".{nanos // 1_000_000:03d}"
            elif nanos % 1000 == 0:
                text += f".{nanos // 1000:06d}"
            else:
                text += f".{nanos:09d}"
    return text


def _sql_timestamp(value: dt.datetime, precision: int) -> str:
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    fraction = f"{_nanos(value):09d}"
    while len(fraction) > precision and fraction.endswith("0"):
        fraction = fraction[:-1]
    return f"{text}.{fraction}" if fraction else text


def java_float_string(value: float, single: bool) -> str:
    """Java's Float/Double.toString: shortest round-trip digits, scientific outside
    [1e-3, 1e7), always a fractional part."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    shortest = str(np.float32(value)) if single else repr(float(value))
    d = Decimal(shortest)
    if d == 0:
        return "-0.0" if str(shortest).startswith("-") else "0.0"
    if Decimal("0.001") <= abs(d) < Decimal("1e7"):
        text = format(d, "f")
        if "." not in text:
            text += ".0"
        text = text.rstrip("0")
        return text + "0" if text.endswith(".") else text
    sign, digits, exp = d.as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    if not isinstance(exp, int):  # NaN / infinity have a letter exponent; handled above
        raise ValueError(f"not a finite decimal: {d}")
    exponent = exp + len(digits) - 1
    mantissa = ds[0] + "." + (ds[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{exponent}"


def partition_value_string(value: Any, data_type: DataType, legacy: bool = True) -> str | None:
    """The directory text for ``value``; None for null or blank (-> partition.default-name)."""
    if value is None:
        return None
    r = data_type.root
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif r in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
        text = java_float_string(float(value), r is TypeRoot.FLOAT)
    elif r in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        if value.tzinfo is not None:  # LTZ: Paimon uses the UTC fields
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        text = (_java_local_date_time(value) if legacy
                else _sql_timestamp(value, data_type.precision or 6))
    elif r is TypeRoot.DATE:
        text = str((value - _EPOCH).days) if legacy else value.isoformat()
    elif r is TypeRoot.TIME:
        millis = ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + (
            value.microsecond // 1000)
        text = str(millis) if legacy else value.isoformat()
    elif isinstance(value, bytes):
        text = value.decode("utf-8", errors="replace")
    else:
        text = str(value)
    return text if text.strip() else None
