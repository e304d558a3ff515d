"""Applying schema changes to a stored schema: Paimon's ``SchemaManager.generateTableSchema``.

``apply_changes(old, changes, has_snapshots=...)`` is pure: it returns the next
``TableSchema`` (id + 1) or raises a typed error naming the column or option, and writes
nothing, so a refused ALTER leaves the table as it was. The rules are Paimon's:

* field ids are never reused: an added column takes ``highestFieldId + 1`` (its nested ROW
  fields the ids after it); a dropped column's id is gone for good, so dropping and re-adding a
  name gives a new, empty column;
* partition columns cannot be renamed, dropped or retyped; primary-key columns cannot be
  dropped, retyped or made nullable (they can be renamed; ``primaryKeys`` and the options that
  name columns follow the rename);
* added columns must be nullable; NULL -> NOT NULL is refused unless the table sets
  ``alter-column-null-to-not-null.disabled = false``;
* type changes follow ``lakecore.schema.casts`` (Paimon's implicit and, unless
  ``disable-explicit-type-casting``, explicit casts that the read path can execute);
* once the table has a snapshot, Paimon's immutable options (``merge-engine``,
  ``bucket-key``, ``sequence.snapshot-ordering``, ...) cannot change, ``bucket`` cannot become
  or stop being -1 nor be reset, and ``ignore-delete`` cannot go from true to false.

Nested columns are addressed by path (``["address", "city"]``; ``element`` / ``value`` step
into an ARRAY / MAP), as in Paimon.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from itertools import count

from lakecore.errors import (
    ColumnAlreadyExistError,
    ColumnNotExistError,
    LakecoreValidationError,
    OptionError,
    SchemaChangeError,
)
from lakecore.options import CoreOptions
from lakecore.options.parse import parse_bool
from lakecore.options.registry import (
    ADD_COLUMN_BEFORE_PARTITION,
    ALTER_COLUMN_NULL_TO_NOT_NULL_DISABLED,
    BUCKET,
    BUCKET_KEY,
    DISABLE_EXPLICIT_TYPE_CASTING,
    IGNORE_DELETE,
    PATH,
    ROWKIND_FIELD,
    SEQUENCE_FIELD,
)
from lakecore.schema.casts import can_execute, supports_cast
from lakecore.schema.schema import CURRENT_VERSION, TableSchema, _reassign_ids
from lakecore.schema.schema_change import (
    AddColumn,
    DropColumn,
    Move,
    MoveType,
    RemoveOption,
    RenameColumn,
    SchemaChange,
    SetOption,
    UpdateColumnComment,
    UpdateColumnNullability,
    UpdateColumnPosition,
    UpdateColumnType,
    UpdateComment,
)
from lakecore.schema.special_fields import KEY_PREFIX, SYSTEM_FIELD_NAMES
from lakecore.schema.types import DataField, DataType, TypeRoot
from lakecore.schema.validation import validate_schema

# Paimon's CoreOptions.IMMUTABLE_OPTIONS (as pypaimon 2.1 lists them): fixed once the table
# has a snapshot. ``type`` can never change.
IMMUTABLE_OPTIONS = frozenset({
    "type", "bucket-key", "bucket-function.type", "data-file.path-directory", "merge-engine",
    "sequence.snapshot-ordering", "aggregation.remove-record-on-delete",
    "partial-update.remove-record-on-delete", "partial-update.remove-record-on-sequence-group",
    "rowkind.field", "primary-key", "primary-key.nullable", "partition",
    "dynamic-bucket.initial-buckets", "force-lookup", "row-tracking.enabled",
    "data-evolution.enabled", "index-file-in-data-file-dir", "blob-field", "video-frame-field",
    "blob-descriptor-field", "blob-view-field", "pk-clustering-override",
})
IGNORE_UPDATE_BEFORE = "ignore-update-before"
# fields.<name>.<suffix> keys whose key names a column (Paimon renames them with the column)
_FIELD_KEY_SUFFIXES = ("aggregate-function", "ignore-retract", "distinct", "list-agg-delimiter")
# fields.<a,b>.<suffix> keys whose key and value both list columns
_FIELD_LIST_SUFFIXES = ("sequence-group", "nested-key")


def apply_changes(
    old: TableSchema,
    changes: Sequence[SchemaChange],
    *,
    has_snapshots: Callable[[], bool],
    time_millis: int | None = None,
) -> TableSchema:
    """The schema after ``changes`` (applied in order), id ``old.id + 1``.

    ``has_snapshots`` is asked (lazily) only when an option change needs it. Raises
    ``SchemaChangeError`` (``ColumnNotExistError``, ``ColumnAlreadyExistError``) or
    ``OptionError`` naming what is wrong; nothing is written here.
    """
    if not changes:
        raise SchemaChangeError("no schema changes given")
    flags = _Flags(old.options)
    fields = list(old.fields)
    options = dict(old.options)
    ids = _IdCounter(old.highest_field_id)
    comment = old.comment
    primary_keys = list(old.primary_keys)
    snapshots: list[bool] = []

    def table_has_snapshots() -> bool:
        if not snapshots:
            snapshots.append(bool(has_snapshots()))
        return snapshots[0]

    for change in changes:
        if isinstance(change, SetOption):
            if change.key == PATH.key:
                raise OptionError(PATH.key, "the table location cannot be changed")
            if options.get(change.key) == change.value:
                continue  # unchanged: nothing to check
            if change.key == "type":
                raise OptionError("type", "the table type cannot be changed")
            if table_has_snapshots():
                _check_alter_option(old.options, change.key, old.options.get(change.key),
                                    change.value)
            options[change.key] = change.value
        elif isinstance(change, RemoveOption):
            if change.key not in options:
                continue
            if change.key in ("type", PATH.key):
                raise OptionError(change.key, "cannot be removed")
            if table_has_snapshots():
                _check_reset_option(change.key)
            del options[change.key]
        elif isinstance(change, UpdateComment):
            comment = change.comment
        elif isinstance(change, AddColumn):
            _add_column(change, fields, ids, old.partition_keys, flags.add_before_partition)
        elif isinstance(change, RenameColumn):
            _protect(old, change.field_names, "rename", partition=True, primary=False)
            _rename_column(change, fields)
        elif isinstance(change, DropColumn):
            _protect(old, change.field_names, "drop", partition=True, primary=True)
            _drop_column(change, fields)
        elif isinstance(change, UpdateColumnType):
            _protect(old, change.field_names, "change the type of", partition=True, primary=True)
            _update_column_type(change, fields, flags)
        elif isinstance(change, UpdateColumnNullability):
            if change.new_nullability:
                _protect(old, change.field_names, "make nullable", partition=False, primary=True)
            _update_nullability(change, fields, flags)
        elif isinstance(change, UpdateColumnComment):
            _update_comment(change, fields)
        elif isinstance(change, UpdateColumnPosition):
            _apply_move(fields, change.move)
        else:
            raise SchemaChangeError(f"unsupported schema change {change!r}")

    renames = {c.field_names[0]: c.new_name for c in changes
               if isinstance(c, RenameColumn) and len(c.field_names) == 1}
    new = TableSchema(
        version=CURRENT_VERSION,
        id=old.id + 1,
        fields=tuple(fields),
        highest_field_id=ids.highest,
        partition_keys=old.partition_keys,
        primary_keys=tuple(_rename_all(primary_keys, renames)),
        options=_rename_in_options(options, renames),
        comment=comment,
        time_millis=int(time.time() * 1000) if time_millis is None else time_millis,
    )
    validate_evolved(old, new)
    return new


def validate_evolved(old: TableSchema, new: TableSchema) -> None:
    """An ALTER must not make a table invalid. A table lakecore could have created is held
    to lakecore's creation rules (``validate_schema``: unknown options, lakecore's limits);
    a table another engine made, which may use things lakecore does not, gets the structural
    checks only: names, keys, and the options that name columns."""
    try:
        validate_schema(old.fields, old.partition_keys, old.primary_keys, old.options)
        strict = True
    except LakecoreValidationError:
        strict = False
    if strict:
        validate_schema(new.fields, new.partition_keys, new.primary_keys, new.options)
        return
    names = [f.name for f in new.fields]
    if len(set(names)) != len(names):
        raise SchemaChangeError(f"duplicate column names in {names}")
    for name in names:
        if name in SYSTEM_FIELD_NAMES or name.startswith(KEY_PREFIX):
            raise SchemaChangeError(f"column name {name!r} is reserved by Paimon")
    for what, keys in (("partition key", new.partition_keys),
                       ("primary key", new.primary_keys)):
        missing = [k for k in keys if k not in names]
        if missing:
            raise SchemaChangeError(f"{what}(s) {missing} would no longer be columns")
    core = CoreOptions.from_map(new.options, primary_keys=new.primary_keys, column_names=names,
                                strict=False)
    for option, columns in ((BUCKET_KEY, core.bucket_key), (SEQUENCE_FIELD, core.sequence_field),
                            (ROWKIND_FIELD, (core.rowkind_field,) if core.rowkind_field else ())):
        missing = [c for c in columns if c not in names]
        if missing:
            raise OptionError(option.key, f"names {missing}, which would no longer be columns")
    # Paimon validates the new schema's merge function: a sequence group naming a dropped
    # column fails there ("Field %s can not be found in table schema")
    for group in core.sequence_groups:
        missing = [c for c in (*group.sequence_fields, *group.fields) if c not in names]
        if missing:
            raise OptionError(group.key, f"names {missing}, which would no longer be columns")


# --- options ----------------------------------------------------------------------------------


class _Flags:
    """The evolution switches, read from the options before the changes (as Paimon does)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        def flag(key: str, default: bool) -> bool:
            text = options.get(key)
            if text is None:
                return default
            try:
                return parse_bool(text)
            except ValueError as error:
                raise OptionError(key, str(error)) from None

        self.null_to_not_null_disabled = flag(ALTER_COLUMN_NULL_TO_NOT_NULL_DISABLED.key, True)
        self.allow_explicit = not flag(DISABLE_EXPLICIT_TYPE_CASTING.key, False)
        self.add_before_partition = flag(ADD_COLUMN_BEFORE_PARTITION.key, False)


def _bool_option(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    try:
        return parse_bool(value)
    except ValueError:
        return default


def _check_alter_option(options: Mapping[str, str], key: str, old_value: str | None,
                        new_value: str) -> None:
    """Paimon's ``checkAlterTableOption`` (the table has snapshots)."""
    if key in IMMUTABLE_OPTIONS:
        raise OptionError(key, "cannot be changed once the table has snapshots")
    if key == BUCKET.key:
        try:
            old_bucket = int(old_value) if old_value is not None else BUCKET.default
            new_bucket = int(new_value)
        except ValueError as error:
            raise OptionError(key, f"not a number: {error}") from None
        if old_bucket == -1:
            raise OptionError(key, "cannot be changed when it is -1 (dynamic bucket mode)")
        if new_bucket == -1:
            raise OptionError(key, "cannot be changed to -1 (dynamic bucket mode)")
    for flag in (IGNORE_DELETE.key, IGNORE_UPDATE_BEFORE):
        if key == flag and _bool_option(old_value, False) and not _bool_option(new_value, False):
            raise OptionError(key, "cannot be changed from true to false")


def _check_reset_option(key: str) -> None:
    """Paimon's ``checkResetTableOption`` (the table has snapshots)."""
    if key in IMMUTABLE_OPTIONS:
        raise OptionError(key, "cannot be removed once the table has snapshots")
    if key == BUCKET.key:
        raise OptionError(key, "cannot be reset")


def _rename_all(names: Sequence[str], renames: Mapping[str, str]) -> list[str]:
    return [renames.get(n, n) for n in names]


def _rename_list(text: str, renames: Mapping[str, str]) -> str:
    return ",".join(_rename_all(text.split(","), renames))


def _rename_in_options(options: dict[str, str], renames: Mapping[str, str]) -> dict[str, str]:
    """Paimon's ``applyRenameColumnsToOptions``: options naming a renamed column follow it."""
    if not renames:
        return options
    out = dict(options)
    for key in (BUCKET_KEY.key, SEQUENCE_FIELD.key):
        if out.get(key, "").strip():
            out[key] = _rename_list(out[key], renames)
    for old_name, new_name in renames.items():
        for suffix in _FIELD_KEY_SUFFIXES:
            key = f"fields.{old_name}.{suffix}"
            if key in out:
                out[f"fields.{new_name}.{suffix}"] = out.pop(key)
    for key in list(options):
        for suffix in _FIELD_LIST_SUFFIXES:
            if key.startswith("fields.") and key.endswith("." + suffix) and key in out:
                columns = key[len("fields."):-len(suffix) - 1]
                value = out.pop(key)
                out[f"fields.{_rename_list(columns, renames)}.{suffix}"] = _rename_list(
                    value, renames)
    return out


# --- columns ----------------------------------------------------------------------------------


class _IdCounter:
    """``highestFieldId``: each new field takes the next id; ids are never given twice."""

    def __init__(self, highest: int) -> None:
        self.highest = highest

    def next(self) -> int:
        self.highest += 1
        return self.highest

    def iterator(self) -> Iterator[int]:
        for _ in count():
            yield self.next()


def _path(names: Sequence[str]) -> str:
    return ".".join(names)


def _protect(old: TableSchema, names: Sequence[str], what: str, *, partition: bool,
             primary: bool) -> None:
    """Key columns are top-level: a nested path never names one."""
    if len(names) != 1:
        return
    name = names[0]
    if partition and name in old.partition_keys:
        raise SchemaChangeError(f"cannot {what} partition column {name!r}")
    if primary and name in old.primary_keys:
        raise SchemaChangeError(f"cannot {what} primary-key column {name!r}")


def _index(fields: Sequence[DataField], name: str) -> int | None:
    for i, f in enumerate(fields):
        if f.name == name:
            return i
    return None


def _row_fields(t: DataType, out: list[DataField], names: Sequence[str], pos: int) -> int:
    """The fields of the ROW reached from ``t`` (through ARRAY ``element`` / MAP ``value``
    steps) into ``out``; returns how many path steps that took (Paimon's
    ``extractRowDataFields``)."""
    if t.root is TypeRoot.ROW:
        out.extend(t.fields)
        return 1
    for root, token, child in ((TypeRoot.ARRAY, "element", t.element),
                               (TypeRoot.MAP, "value", t.value)):
        if t.root is root:
            if pos < len(names) and names[pos] != token:
                raise ColumnNotExistError(_path(names[: pos + 1]))
            assert child is not None
            return 1 + _row_fields(child, out, names, pos + 1)
    return 1


def _wrap_row(t: DataType, fields: list[DataField]) -> DataType:
    """``t`` with its innermost ROW's fields replaced (ARRAY / MAP wrappers kept)."""
    if t.root is TypeRoot.ROW:
        return replace(t, fields=tuple(fields))
    if t.root is TypeRoot.ARRAY and t.element is not None:
        return replace(t, element=_wrap_row(t.element, fields))
    if t.root is TypeRoot.MAP and t.value is not None:
        return replace(t, value=_wrap_row(t.value, fields))
    return t


UpdateLast = Callable[[int, list[DataField], str], None]


def _modify(fields: list[DataField], names: Sequence[str], update_last: UpdateLast) -> None:
    """Walk ``names`` into nested ROWs and run ``update_last(depth, fields, name)`` on the
    field list holding the last name; parent types are rebuilt on the way back (Paimon's
    ``NestedColumnModifier``)."""

    def walk(current: list[DataField], previous: list[DataField], depth: int,
             prev_depth: int) -> None:
        if depth == len(names) - 1:
            update_last(depth, current, names[depth])
            return
        if depth >= len(names):  # the path ended inside ARRAY/MAP wrappers
            update_last(prev_depth, previous, names[prev_depth])
            return
        i = _index(current, names[depth])
        if i is None:
            raise ColumnNotExistError(_path(names[: depth + 1]))
        nested: list[DataField] = []
        new_depth = depth + _row_fields(current[i].type, nested, names, depth + 1)
        walk(nested, current, new_depth, depth)
        f = current[i]
        current[i] = replace(f, type=_wrap_row(f.type, nested))

    walk(fields, fields, 0, 0)


def _update_field(fields: list[DataField], names: Sequence[str],
                  fn: Callable[[DataField, int], DataField]) -> None:
    def update_last(depth: int, current: list[DataField], name: str) -> None:
        i = _index(current, name)
        if i is None:
            raise ColumnNotExistError(_path(names))
        current[i] = fn(current[i], depth)

    _modify(fields, names, update_last)


def _root_type(t: DataType, depth: int, max_depth: int) -> DataType:
    """The type at the end of the path (``v.element`` of ARRAY<INT> is the INT)."""
    if depth == max_depth - 1:
        return t
    if t.root is TypeRoot.ARRAY and t.element is not None:
        return _root_type(t.element, depth + 1, max_depth)
    if t.root is TypeRoot.MAP and t.value is not None:
        return _root_type(t.value, depth + 1, max_depth)
    return t


def _with_root_type(t: DataType, target: DataType, depth: int, max_depth: int) -> DataType:
    if depth == max_depth - 1:
        return target
    if t.root is TypeRoot.ARRAY and t.element is not None:
        return replace(t, element=_with_root_type(t.element, target, depth + 1, max_depth))
    if t.root is TypeRoot.MAP and t.value is not None:
        return replace(t, value=_with_root_type(t.value, target, depth + 1, max_depth))
    return target


def _add_column(change: AddColumn, fields: list[DataField], ids: _IdCounter,
                partition_keys: Sequence[str], add_before_partition: bool) -> None:
    names = change.field_names
    if not change.data_type.nullable:
        raise SchemaChangeError(f"column {_path(names)!r} cannot be added as NOT NULL: old "
                                "files have no value for it (add it nullable)")
    field_id = ids.next()
    data_type = _reassign_ids(change.data_type, ids.iterator())
    new_field = DataField(field_id, names[-1], data_type, change.comment)

    def update_last(depth: int, current: list[DataField], name: str) -> None:
        if _index(current, name) is not None:
            raise ColumnAlreadyExistError(_path(names))
        move = change.move
        if move is not None:
            _insert_moved(current, new_field, move)
        elif add_before_partition and partition_keys and len(names) == 1:
            at = next((i for i, f in enumerate(current) if f.name in partition_keys),
                      len(current))
            current.insert(at, new_field)
        else:
            current.append(new_field)

    _modify(fields, names, update_last)


def _insert_moved(fields: list[DataField], new_field: DataField, move: Move) -> None:
    if move.type is MoveType.FIRST:
        fields.insert(0, new_field)
    elif move.type is MoveType.LAST:
        fields.append(new_field)
    else:
        ref = _index(fields, move.reference_field_name or "")
        if ref is None:
            raise ColumnNotExistError(str(move.reference_field_name))
        fields.insert(ref + 1 if move.type is MoveType.AFTER else ref, new_field)


def _rename_column(change: RenameColumn, fields: list[DataField]) -> None:
    names, new_name = change.field_names, change.new_name
    if not new_name:
        raise SchemaChangeError(f"cannot rename {_path(names)!r} to an empty name")

    def update_last(depth: int, current: list[DataField], name: str) -> None:
        i = _index(current, name)
        if i is None:
            raise ColumnNotExistError(_path(names))
        if _index(current, new_name) is not None:
            raise ColumnAlreadyExistError(new_name)
        current[i] = replace(current[i], name=new_name)

    _modify(fields, names, update_last)


def _drop_column(change: DropColumn, fields: list[DataField]) -> None:
    names = change.field_names

    def update_last(depth: int, current: list[DataField], name: str) -> None:
        i = _index(current, name)
        if i is None:
            raise ColumnNotExistError(_path(names))
        current.pop(i)
        if not current:
            raise SchemaChangeError(f"cannot drop {_path(names)!r}: it is the last field")

    _modify(fields, names, update_last)


def _update_comment(change: UpdateColumnComment, fields: list[DataField]) -> None:
    _update_field(fields, change.field_names,
                  lambda f, depth: replace(f, description=change.new_comment))


def _check_null_to_not_null(old_nullable: bool, new_nullable: bool, names: Sequence[str],
                            flags: _Flags) -> None:
    if flags.null_to_not_null_disabled and old_nullable and not new_nullable:
        raise SchemaChangeError(
            f"cannot make nullable column {_path(names)!r} NOT NULL: old files may hold nulls "
            f"(set '{ALTER_COLUMN_NULL_TO_NOT_NULL_DISABLED.key}' = 'false' to allow it)")


def _update_column_type(change: UpdateColumnType, fields: list[DataField],
                        flags: _Flags) -> None:
    names = change.field_names

    def fn(f: DataField, depth: int) -> DataField:
        source = _root_type(f.type, depth, len(names))
        target = change.new_data_type
        if change.keep_nullability:
            target = target.copy(source.nullable)
        else:
            _check_null_to_not_null(source.nullable, target.nullable, names, flags)
        if not supports_cast(source, target, flags.allow_explicit):
            hint = ("" if flags.allow_explicit else
                    f" ('{DISABLE_EXPLICIT_TYPE_CASTING.key}' allows widenings only)")
            raise SchemaChangeError(
                f"column {_path(names)!r}: type {source} cannot be converted to {target}{hint}")
        if not can_execute(source, target):
            raise SchemaChangeError(
                f"column {_path(names)!r}: old files of type {source} cannot be read as "
                f"{target} (no conversion for it)")
        return replace(f, type=_with_root_type(f.type, target, depth, len(names)))

    _update_field(fields, names, fn)


def _update_nullability(change: UpdateColumnNullability, fields: list[DataField],
                        flags: _Flags) -> None:
    names = change.field_names

    def fn(f: DataField, depth: int) -> DataField:
        source = _root_type(f.type, depth, len(names))
        _check_null_to_not_null(source.nullable, change.new_nullability, names, flags)
        target = source.copy(change.new_nullability)
        return replace(f, type=_with_root_type(f.type, target, depth, len(names)))

    _update_field(fields, names, fn)


def _apply_move(fields: list[DataField], move: Move) -> None:
    """Paimon's ``applyMove`` for ``UpdateColumnPosition`` (top-level columns)."""
    i = _index(fields, move.field_name)
    if i is None:
        raise ColumnNotExistError(move.field_name)
    if move.type in (MoveType.FIRST, MoveType.LAST):
        target = 0 if move.type is MoveType.FIRST else len(fields) - 1
        if target == i:
            raise SchemaChangeError(f"column {move.field_name!r} is already there")
        fields.insert(target, fields.pop(i))
        return
    ref = _index(fields, move.reference_field_name or "")
    if ref is None:
        raise ColumnNotExistError(str(move.reference_field_name))
    if ref == i:
        raise SchemaChangeError(f"cannot move column {move.field_name!r} relative to itself")
    target = ref
    if move.type is MoveType.AFTER and i > ref:
        target += 1
    if move.type is MoveType.BEFORE and i < ref:
        target -= 1
    fields.insert(min(target, len(fields) - 1), fields.pop(i))


__all__ = ["IMMUTABLE_OPTIONS", "apply_changes", "validate_evolved"]
