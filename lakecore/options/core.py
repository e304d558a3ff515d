"""Table options: validation of Paimon's option map and typed access to it.

Paimon keeps a table's options as a ``dict[str, str]`` in the schema file. ``CoreOptions`` wraps
such a map: ``from_map`` checks every key against the registry (``lakecore.options.registry``),
parses every value with Paimon's text rules (``lakecore.options.parse``), runs the cross-option
checks (``lakecore.options.checks``) and exposes typed snake_case accessors (those of
``OptionsView``, ``lakecore.options.view``). ``to_map`` gives the original strings back, so what
lakecore stores is exactly what the user wrote.

Two modes, because the same map is met twice:

* ``strict=True`` (creating a table, or ``with_options`` overrides): unknown keys, values out
  of range and contradictory combinations are errors, each naming the key.
* ``strict=False`` (opening a table someone else wrote): unknown keys are kept but ignored,
  known keys must still parse, and lakecore's creation-time restrictions are not applied.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

from lakecore.errors import OptionError
from lakecore.options.checks import CROSS_CHECKS, check_scan
from lakecore.options.registry import (
    ConfigOption,
    field_key_columns,
    resolve_key,
    unknown_key_message,
)
from lakecore.options.unimplemented import check_implemented
from lakecore.options.view import OptionsView

__all__ = ["CoreOptions"]

T = TypeVar("T")


@dataclass(frozen=True, eq=False, repr=False)
class CoreOptions(OptionsView):
    """A validated, immutable view of one table's option map. Build it with ``from_map``."""

    @staticmethod
    def from_map(
        options: Mapping[str, str],
        *,
        primary_keys: Sequence[str] = (),
        column_names: Sequence[str] = (),
        strict: bool = True,
    ) -> CoreOptions:
        """Validate ``options`` and wrap them.

        ``primary_keys`` and ``column_names`` let the options that name columns be checked
        (``sequence.field``, ``bucket-key``, ``fields.<name>.*``, ...). An empty
        ``column_names`` means the columns are not known here, and those checks are skipped.
        """
        raw = dict(options)
        values: dict[str, Any] = {}
        field_values: dict[tuple[str, str], Any] = {}
        unknown: list[str] = []
        columns = tuple(column_names)
        for key, text in raw.items():
            if not isinstance(key, str) or not isinstance(text, str):
                raise OptionError(str(key), f"keys and values must be strings, got {text!r}")
            option, column = resolve_key(key)
            if option is None:
                if strict:
                    raise OptionError(key, unknown_key_message(key, columns))
                unknown.append(key)
                continue
            value = _parse(option, key, text, strict)
            if column is None:
                _store(values, raw, option, key, value, strict)
                continue
            if strict:
                _check_columns(key, option, column, columns)
            field_values[(column, option.field_suffix)] = value
        result = CoreOptions(
            MappingProxyType(raw),
            MappingProxyType(values),
            MappingProxyType(field_values),
            tuple(primary_keys),
            columns,
            strict,
            tuple(unknown),
        )
        if strict:
            for check in CROSS_CHECKS:
                check(result)
        else:  # another writer's table: refused if it relies on what lakecore lacks
            check_implemented(raw)
        return result

    def with_options(self, updates: Mapping[str, str]) -> CoreOptions:
        """These options overridden by ``updates`` (``table.copy``, e.g. for time travel).

        Each override is checked strictly (an unknown override is a typo, never a key some
        other writer left behind); the merged map keeps this map's mode for the rest.
        """
        for key, text in updates.items():
            option, column = resolve_key(key)
            if option is None:
                raise OptionError(key, unknown_key_message(key, self.column_names))
            if column is not None:
                _check_columns(key, option, column, self.column_names)
            _parse(option, key, text, strict=True)
        merged = CoreOptions.from_map(
            {**self._raw, **updates},
            primary_keys=self.primary_keys,
            column_names=self.column_names,
            strict=self.strict,
        )
        check_scan(merged)  # time-travel choices are the caller's, whatever the base mode
        return merged


def _parse(option: ConfigOption[T], key: str, text: str, strict: bool) -> T:
    """Parse one value; in strict mode also apply lakecore's creation-time check."""
    try:
        value = option.parser(text)
    except ValueError as error:
        raise OptionError(key, f"invalid value {text!r}: {error}") from None
    if strict and option.check is not None:
        problem = option.check(value)
        if problem is not None:
            raise OptionError(key, f"invalid value {text!r}: {problem}")
    return value


def _check_columns(key: str, option: ConfigOption[Any], column: str,
                   columns: Sequence[str]) -> None:
    """The column(s) a ``fields.<name>.*`` key names exist (``fields.g1,g2.sequence-group``
    names two)."""
    try:
        names = field_key_columns(option, column)
    except ValueError as error:
        raise OptionError(key, f"invalid column list {column!r}: {error}") from None
    for name in names:
        if columns and name not in columns:
            raise OptionError(
                key, f"column {name!r} is not in the table (columns: {list(columns)})")


def _store(
    values: dict[str, Any],
    raw: Mapping[str, str],
    option: ConfigOption[Any],
    key: str,
    value: Any,
    strict: bool,
) -> None:
    """Record a value. As in Paimon's ``Options.get``, the key itself wins over its old
    spellings, and among those the first set in ``fallback_keys`` order wins (whatever the
    map's order); in strict mode, spellings that disagree are an error rather than a pick."""
    if key == option.key:
        values[option.key] = value
        return
    if option.key in raw:
        if strict and raw[option.key] != raw[key]:
            raise OptionError(
                key, f"is an old spelling of {option.key!r}, which is also set; keep one of them"
            )
        return
    if strict and option.key in values and values[option.key] != value:
        raise OptionError(key, f"disagrees with another old spelling of {option.key!r}")
    earlier = option.fallback_keys[: option.fallback_keys.index(key)]
    if not any(k in raw for k in earlier):
        values[option.key] = value
