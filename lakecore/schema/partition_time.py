"""Partition values -> a local date-time, as Paimon's ``PartitionTimeExtractor`` does.

``partition.timestamp-pattern`` builds the timestamp text from partition values (``$dt``,
``$year-$month-$day $hour:00:00``; without a pattern the first partition value is used).
``partition.timestamp-formatter`` parses it with a Java ``DateTimeFormatter`` pattern
(``yyyyMMdd``, ``yyyy-MM-dd HH:mm:ss``, ...); without a formatter Paimon's default accepts
``yyyy-M-d`` with an optional `` H:m:s[.fraction]``. A date without a time means midnight.

Supported formatter letters: ``y``/``u`` (year), ``M`` (month number), ``d``, ``H``, ``m``,
``s``, ``S`` (fraction), quoted literals and punctuation. Anything else is rejected when the
option is validated, so a table never silently stops expiring.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from lakecore.errors import OptionError
from lakecore.options import CoreOptions

_DEFAULT = re.compile(
    r"(\d{1,10})-(\d{1,2})-(\d{1,2})(?: (\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,9}))?)?")
_FIELDS = {"y": "year", "u": "year", "M": "month", "d": "day", "H": "hour", "m": "minute",
           "s": "second", "S": "fraction"}


class PartitionTimeError(ValueError):
    """A partition value that does not parse as a time (reported, never silently kept)."""


@dataclass(frozen=True)
class _Formatter:
    regex: re.Pattern[str]
    groups: tuple[str, ...]
    two_digit_year: bool


def compile_formatter(pattern: str) -> _Formatter:
    """A Java DateTimeFormatter pattern as a regex; ``OptionError`` for what we don't support."""
    out: list[str] = []
    groups: list[str] = []
    two_digit_year = False
    i, n = 0, len(pattern)
    tokens: list[tuple[str, int]] = []  # (letter or '' for literal text, count) / literal
    literals: list[str] = []
    while i < n:
        c = pattern[i]
        if c == "'":
            j = pattern.find("'", i + 1)
            if j < 0:
                raise OptionError("partition.timestamp-formatter", f"unclosed quote in {pattern!r}")
            text = "'" if j == i + 1 else pattern[i + 1:j]
            tokens.append(("", len(literals)))
            literals.append(text)
            i = j + 1
        elif c.isalpha():
            j = i
            while j < n and pattern[j] == c:
                j += 1
            if c not in _FIELDS or (c in "Md" and j - i > 2) or (c in "Hms" and j - i > 2):
                raise OptionError("partition.timestamp-formatter",
                                  f"unsupported pattern letters {pattern[i:j]!r} in {pattern!r}")
            tokens.append((c, j - i))
            i = j
        else:
            tokens.append(("", len(literals)))
            literals.append(c)
            i += 1
    for k, (letter, count) in enumerate(tokens):
        if not letter:
            out.append(re.escape(literals[count]))
            continue
        nxt = tokens[k + 1][0] if k + 1 < len(tokens) else ""
        adjacent = bool(nxt)  # Java's adjacent value parsing: a field directly followed by another
        name = _FIELDS[letter]
        if name == "year":
            if count == 2:
                two_digit_year = True
                out.append(r"(\d{2})")
            else:
                out.append(rf"(\d{{{max(count, 1)}}})" if adjacent else rf"(\d{{{count},9}})")
        elif name == "fraction":
            out.append(rf"(\d{{{count}}})")
        else:
            out.append(r"(\d{2})" if count == 2 or adjacent else r"(\d{1,2})")
        if name in groups:
            raise OptionError("partition.timestamp-formatter", f"{name} repeats in {pattern!r}")
        groups.append(name)
    if "year" not in groups or "month" not in groups or "day" not in groups:
        raise OptionError("partition.timestamp-formatter",
                          f"{pattern!r} must contain a year, a month and a day")
    return _Formatter(re.compile("".join(out)), tuple(groups), two_digit_year)


def _build(parts: dict[str, int], lenient: bool, frac_digits: int = 0) -> datetime:
    year, month, day = parts["year"], parts["month"], parts["day"]
    hour, minute, second = parts.get("hour", 0), parts.get("minute", 0), parts.get("second", 0)
    micro = parts.get("fraction", 0)
    if frac_digits:
        micro = int(str(micro).rjust(frac_digits, "0")[:6].ljust(6, "0"))
    if lenient:  # Paimon's default formatter resolves LENIENT: overflow rolls over
        base = datetime(year, 1, 1) + timedelta(days=day - 1)
        months = base.month - 1 + month - 1
        y, m = base.year + months // 12, months % 12 + 1
        d = min(base.day, calendar.monthrange(y, m)[1])
        return datetime(y, m, d) + timedelta(hours=hour, minutes=minute, seconds=second,
                                             microseconds=micro)
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 60):
        raise PartitionTimeError("field out of range")
    day = min(day, calendar.monthrange(year, month)[1])  # Java SMART: the 31st of a short month
    return datetime(year, month, day, hour, minute, second, micro)


def parse_timestamp(text: str, formatter: str | None) -> datetime:
    """Parse like Paimon's ``PartitionTimeExtractor.toLocalDateTime``."""
    try:
        if formatter is None:
            m = _DEFAULT.fullmatch(text)
            if not m:
                raise PartitionTimeError(f"{text!r} is not yyyy-M-d[ H:m:s[.S]]")
            vals = [int(g) if g is not None else None for g in m.groups()]
            parts = dict(zip(("year", "month", "day", "hour", "minute", "second"),
                             (v or 0 for v in vals[:6]), strict=True))
            frac = m.group(7)
            if frac:
                parts["fraction"] = int(frac)
            return _build(parts, lenient=True, frac_digits=len(frac) if frac else 0)
        f = compile_formatter(formatter)
        m = f.regex.fullmatch(text)
        if not m:
            raise PartitionTimeError(f"{text!r} does not match {formatter!r}")
        parts = {name: int(v) for name, v in zip(f.groups, m.groups(), strict=True)}
        if f.two_digit_year:
            parts["year"] += 2000
        frac_len = len(m.group(f.groups.index("fraction") + 1)) if "fraction" in f.groups else 0
        return _build(parts, lenient=False, frac_digits=frac_len)
    except (ValueError, OverflowError) as e:
        if isinstance(e, PartitionTimeError):
            raise
        raise PartitionTimeError(f"{text!r}: {e}") from e


def _scan_pattern(pattern: str, keys: Sequence[str]) -> list[str | int]:
    """``pattern`` as literal text and key indices (``$key``, longer keys first so ``$dt``
    never matches inside ``$dt1``), the way Paimon's ``PartitionTimeExtractor`` replaces it."""
    order = sorted(range(len(keys)), key=lambda i: -len(keys[i]))
    out: list[str | int] = []
    i = 0
    while i < len(pattern):
        if pattern[i] == "$":
            for k in order:
                if pattern.startswith(keys[k], i + 1):
                    out.append(k)
                    i += 1 + len(keys[k])
                    break
            else:
                out.append("$")
                i += 1
            continue
        out.append(pattern[i])
        i += 1
    return out


def substitute_pattern(pattern: str, keys: Sequence[str], values: Sequence[str]) -> str:
    """``$key`` -> value, longer keys first so ``$dt`` never matches inside ``$dt1``."""
    return "".join(values[p] if isinstance(p, int) else p for p in _scan_pattern(pattern, keys))


def extract_time(keys: Sequence[str], values: Sequence[str | None], pattern: str | None,
                 formatter: str | None) -> datetime:
    """A partition's local date-time; ``PartitionTimeError`` for unparsable values, or for a
    null in a field the time is read from (the first field without a pattern, else the fields
    the pattern names). A null elsewhere does not matter, as in Paimon, whose extractor only
    reads the values it substitutes."""
    if pattern is None:
        if values[0] is None:
            raise PartitionTimeError("partition has a null value")
        return parse_timestamp(values[0], formatter)
    parts = _scan_pattern(pattern, keys)
    nulls = sorted({keys[p] for p in parts if isinstance(p, int) and values[p] is None})
    if nulls:
        raise PartitionTimeError(f"partition has a null value in {', '.join(nulls)}")
    text = "".join(str(values[p]) if isinstance(p, int) else p for p in parts)
    return parse_timestamp(text, formatter)


def validate_partition_expiration(
    partition_keys: Sequence[str], pattern: str | None, formatter: str | None,
    expiration_set: bool,
) -> None:
    """Option checks for table creation: expiry needs partitions, the pattern may only name
    partition keys, and the formatter must be one we can parse."""
    if expiration_set and not partition_keys:
        raise OptionError("partition.expiration-time", "the table has no partition keys")
    if pattern is not None:
        rest = substitute_pattern(pattern, partition_keys, ["" for _ in partition_keys])
        unknown = re.findall(r"\$([A-Za-z_][A-Za-z0-9_]*)", rest)
        if unknown:
            raise OptionError("partition.timestamp-pattern",
                              f"names ${unknown[0]}, which is not a partition key "
                              f"(partition keys: {list(partition_keys)})")
    if formatter is not None:
        compile_formatter(formatter)


def check_partition_expiration_options(opts: CoreOptions, partition_keys: Sequence[str]) -> None:
    """For table creation (and ``ALTER``): ``validate_partition_expiration`` on an option map."""
    validate_partition_expiration(partition_keys, opts.partition_timestamp_pattern,
                                  opts.partition_timestamp_formatter,
                                  opts.partition_expiration_time is not None)
