"""Parsers for the text forms of Paimon option values.

Paimon stores every table option as a string (``"10 s"``, ``"256 mb"``, ``"true"``) and parses
it with Java's rules: ``TimeUtils.parseDuration``, ``MemorySize.parseBytes``, and
``OptionsUtils.convertTo*``. Each parser here follows those rules closely, so that a value
lakecore accepts is one Paimon accepts and reads the same way, and the other way round.

Every parser takes the raw string and returns the typed value, or raises ``ValueError`` whose
message says what was expected; ``lakecore.options`` turns that into an ``OptionError`` naming
the key.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum
from typing import TypeVar

E = TypeVar("E", bound=Enum)

INT_MIN = -(2**31)
INT_MAX = 2**31 - 1
LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1

# Java's TimeUtils.TimeUnit labels, in nanoseconds per unit. "m" is minutes, as in Paimon.
_DURATION_UNITS_NS: dict[str, int] = {}
for _labels, _ns in (
    (("d", "day", "days"), 86_400 * 10**9),
    (("h", "hour", "hours"), 3_600 * 10**9),
    (("min", "m", "minute", "minutes"), 60 * 10**9),
    (("s", "sec", "secs", "second", "seconds"), 10**9),
    (("ms", "milli", "millis", "millisecond", "milliseconds"), 10**6),
    (("µs", "micro", "micros", "microsecond", "microseconds"), 10**3),
    (("ns", "nano", "nanos", "nanosecond", "nanoseconds"), 1),
):
    for _label in _labels:
        _DURATION_UNITS_NS[_label] = _ns

# Java's MemorySize.MemoryUnit labels: binary multiples, as in Paimon ("1 kb" = 1024 bytes).
_MEMORY_UNITS: dict[str, int] = {}
_memory_labels: tuple[str, ...]
for _memory_labels, _mult in (
    (("b", "bytes"), 1),
    (("k", "kb", "kibibytes"), 1 << 10),
    (("m", "mb", "mebibytes"), 1 << 20),
    (("g", "gb", "gibibytes"), 1 << 30),
    (("t", "tb", "tebibytes"), 1 << 40),
):
    for _label in _memory_labels:
        _MEMORY_UNITS[_label] = _mult

_LEADING_DIGITS = re.compile(r"^(\d*)(.*)$", re.DOTALL)
_JAVA_INT = re.compile(r"^[+-]?\d+$")
# Decimal forms Java's Double.parseDouble takes (no hex floats, no "d"/"f" suffixes, no NaN).
_JAVA_DOUBLE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")

_MAX_TIMEDELTA_NS = (timedelta.max.days * 86_400 + timedelta.max.seconds) * 10**9


def _split_number(text: str, what: str, example: str) -> tuple[int, str]:
    """Split ``"<digits> <unit>"`` the way Paimon does: digits first, then an optional label."""
    trimmed = text.strip()
    if not trimmed:
        raise ValueError(f"expected {what} such as {example}, got an empty string")
    match = _LEADING_DIGITS.match(trimmed)
    assert match is not None
    number, unit = match.group(1), match.group(2).strip().lower()
    if not number:
        raise ValueError(f"expected {what} such as {example}: the text must start with a number")
    value = int(number)
    if value > LONG_MAX:
        raise ValueError(f"{number} does not fit in a 64-bit number")
    return value, unit


def parse_duration(text: str) -> timedelta:
    """``"10 s"``, ``"1h"``, ``"30min"``, ``"7 d"``, ``"500"`` (milliseconds, as in Paimon).

    Units follow Paimon's TimeUtils: d/day(s), h/hour(s), min/m/minute(s), s/sec(s)/second(s),
    ms/milli(s)/millisecond(s), µs/micro(s)/microsecond(s), ns/nano(s)/nanosecond(s).
    No sign and no fractions (Paimon accepts neither). Sub-microsecond values that
    ``timedelta`` cannot hold exactly are rejected rather than silently rounded.
    """
    value, unit = _split_number(text, "a duration", "'10 s', '1 h' or '500 ms'")
    if not unit:
        unit = "ms"
    per_unit = _DURATION_UNITS_NS.get(unit)
    if per_unit is None:
        raise ValueError(
            f"unknown time unit {unit!r}; expected one of d, h, min, s, ms, µs, ns "
            "(or their long forms such as 'hours', 'seconds')"
        )
    nanos = value * per_unit
    if nanos > _MAX_TIMEDELTA_NS:
        raise ValueError(f"duration {text.strip()!r} is too long")
    if nanos % 1000:
        raise ValueError(f"duration {text.strip()!r} is not a whole number of microseconds")
    return timedelta(microseconds=nanos // 1000)


def parse_memory_size(text: str) -> int:
    """``"256 mb"``, ``"128 MB"``, ``"64kb"``, ``"1 gb"``, ``"4096"`` (bytes) -> bytes.

    Units are Paimon's binary ones: b/bytes, k/kb/kibibytes, m/mb/mebibytes, g/gb/gibibytes,
    t/tb/tebibytes, case-insensitive.
    """
    value, unit = _split_number(text, "a memory size", "'256 mb', '64 kb' or '1 gb'")
    multiplier = 1
    if unit:
        found = _MEMORY_UNITS.get(unit)
        if found is None:
            raise ValueError(
                f"unknown memory unit {unit!r}; expected one of b, kb, mb, gb, tb "
                "(or k, m, g, t, bytes, kibibytes, mebibytes, gibibytes, tebibytes)"
            )
        multiplier = found
    result = value * multiplier
    if result > LONG_MAX:
        raise ValueError(f"memory size {text.strip()!r} does not fit in 64 bits of bytes")
    return result


def parse_bool(text: str) -> bool:
    """``true`` or ``false``, case-insensitive, nothing else (Paimon's convertToBoolean)."""
    lowered = text.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    raise ValueError("expected 'true' or 'false'")


def _parse_java_int(text: str, low: int, high: int, kind: str) -> int:
    if not _JAVA_INT.match(text):
        raise ValueError(f"expected {kind}")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{text} is out of range for {kind}")
    return value


def parse_int(text: str) -> int:
    """A 32-bit integer in Java's ``Integer.parseInt`` form (optional sign, digits only)."""
    return _parse_java_int(text, INT_MIN, INT_MAX, "a 32-bit integer")


def parse_long(text: str) -> int:
    """A 64-bit integer in Java's ``Long.parseLong`` form."""
    return _parse_java_int(text, LONG_MIN, LONG_MAX, "a 64-bit integer")


def parse_float(text: str) -> float:
    """A decimal number such as ``0.7`` or ``1e-3`` (NaN and infinities are refused)."""
    stripped = text.strip()
    if not _JAVA_DOUBLE.match(stripped):
        raise ValueError("expected a decimal number such as 0.7")
    return float(stripped)


def parse_string(text: str) -> str:
    """Free text, kept as written."""
    return text


def parse_non_blank(text: str) -> str:
    """Free text that must not be blank (a blank value is a mistake, never a choice)."""
    if not text.strip():
        raise ValueError("expected a non-blank value")
    return text


def parse_name_list(text: str) -> tuple[str, ...]:
    """A comma-separated list of column names (``"a,b"``); blanks around names are dropped."""
    names = tuple(n.strip() for n in text.split(","))
    if not names or any(not n for n in names):
        raise ValueError("expected a comma-separated list of column names such as 'a,b'")
    return names


def enum_parser(enum_cls: type[E]) -> Callable[[str], E]:
    """Match an enum by value, case-insensitive, like Paimon's ``convertToEnum``."""
    by_value = {str(member.value).lower(): member for member in enum_cls}
    choices = ", ".join(str(member.value) for member in enum_cls)

    def parse(text: str) -> E:
        member = by_value.get(text.lower())
        if member is None:
            raise ValueError(f"expected one of: {choices}")
        return member

    return parse


@dataclass(frozen=True)
class StatsMode:
    """``metadata.stats-mode``: ``none``, ``counts``, ``full`` or ``truncate(N)``.

    ``truncate_length`` is N for truncate mode (min/max strings cut to N characters), else None.
    """

    kind: str
    truncate_length: int | None = None

    def __str__(self) -> str:
        if self.kind == "truncate":
            return f"truncate({self.truncate_length})"
        return self.kind


_TRUNCATE = re.compile(r"^truncate\((\d+)\)$")


def parse_stats_mode(text: str) -> StatsMode:
    """Paimon's stats-mode spellings (case-insensitive, as Paimon lower-cases them)."""
    lowered = text.strip().lower()
    if lowered in ("none", "counts", "full"):
        return StatsMode(lowered)
    match = _TRUNCATE.match(lowered)
    if match and int(match.group(1)) > 0:
        return StatsMode("truncate", int(match.group(1)))
    raise ValueError("expected one of: none, counts, full, truncate(N) with N > 0")


def parse_incremental_between(text: str) -> tuple[int, int] | tuple[str, str]:
    """``"start,end"``: two snapshot ids (``(5, 10)``) or else two tag names, decided as Paimon
    does: both parts numeric means snapshot ids."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise ValueError("expected 'start,end' (two snapshot ids or two tag names)")
    if all(p.isdigit() for p in parts):
        return int(parts[0]), int(parts[1])
    return parts[0], parts[1]
