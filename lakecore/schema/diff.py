"""Schema plans: the ALTER that brings a table to a declared schema, or to a source's columns.

Both functions are pure: they read two schemas and return a ``SchemaUpdatePlan`` (a frozen
value: the ``SchemaChange`` list to hand to ``catalog.alter_table``, and the refusals, each
naming a column or an option). The caller does the I/O: it applies a compatible plan with one
ALTER, and raises ``plan.check()``'s ``IncompatibleSchemaError`` for any other, so a refused
plan changes nothing.

* ``plan_declared_update(current, declared)``: a declaration (the pipeline's tables file)
  against the table's latest schema. Compatible: new nullable columns (at their declared
  place), widened types (Paimon's implicit casts), NOT NULL -> nullable, column and table
  comments, options Paimon lets change. Refused: a column of the table missing from the
  declaration (a drop or a rename), another primary key or partition, a type that is not a
  widening, nullable -> NOT NULL, a key column's type, a reordering, a new NOT NULL column,
  ``bucket`` (once the table has data), and whatever Paimon's own ALTER rules refuse
  (``apply_changes`` runs as a dry run). Options the table has but the declaration does not
  mention are left alone (``plan.kept_options``).
* ``plan_merge_schema(current, source)``: Paimon's ``write.merge-schema`` for a write whose
  source has columns the table lacks: add them (nullable), and widen a column whose source
  type is wider (``write.merge-schema.explicit-cast``: any cast Paimon allows). Columns the
  source lacks, or holds in a narrower type, are left to the write's own conversion.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pyarrow as pa

from lakecore.errors import IncompatibleSchemaError, LakecoreValidationError
from lakecore.options.registry import BUCKET, PATH
from lakecore.schema.casts import can_execute, is_implicit, supports_cast
from lakecore.schema.evolution import apply_changes
from lakecore.schema.schema import Schema, TableSchema
from lakecore.schema.schema_change import (
    AddColumn,
    Move,
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
from lakecore.schema.types import NESTED_ROOTS, DataField, DataType, from_arrow


@dataclass(frozen=True)
class Refusal:
    """One reason a plan cannot be applied: ``subject`` names the column or option."""

    subject: str  # "column 'amount'", "option 'bucket'", "primary key"
    reason: str

    def __str__(self) -> str:
        return f"{self.subject}: {self.reason}"


@dataclass(frozen=True)
class SchemaUpdatePlan:
    """What one ALTER would do (``changes``), or why it must not run (``refusals``)."""

    table: str
    changes: tuple[SchemaChange, ...] = ()
    refusals: tuple[Refusal, ...] = ()
    kept_options: tuple[str, ...] = field(default=())  # set on the table, not declared

    @property
    def compatible(self) -> bool:
        return not self.refusals

    @property
    def empty(self) -> bool:
        """Nothing to change (and nothing refused)."""
        return not self.changes and not self.refusals

    @property
    def added_columns(self) -> tuple[str, ...]:
        return tuple(".".join(c.field_names) for c in self.changes if isinstance(c, AddColumn))

    def describe(self) -> list[str]:
        """One line per change, for logs and task results."""
        return [describe_change(c) for c in self.changes]

    def check(self) -> None:
        """Raise ``IncompatibleSchemaError`` (naming the table and every refusal) if any."""
        if self.refusals:
            raise IncompatibleSchemaError(self.table, [str(r) for r in self.refusals])


def describe_change(change: SchemaChange) -> str:
    """A change in words: ``add column c BIGINT``, ``set option 'x' = 'y'``..."""
    if isinstance(change, AddColumn):
        where = ""
        if change.move is not None:
            ref = change.move.reference_field_name
            where = f" {change.move.type.value.lower()}" + (f" {ref}" if ref else "")
        return f"add column {'.'.join(change.field_names)} {change.data_type}{where}"
    if isinstance(change, UpdateColumnType):
        return f"column {'.'.join(change.field_names)}: type -> {change.new_data_type}"
    if isinstance(change, UpdateColumnNullability):
        state = "nullable" if change.new_nullability else "NOT NULL"
        return f"column {'.'.join(change.field_names)}: {state}"
    if isinstance(change, UpdateColumnComment):
        return f"column {'.'.join(change.field_names)}: comment {change.new_comment!r}"
    if isinstance(change, UpdateComment):
        return f"table comment {change.comment!r}"
    if isinstance(change, SetOption):
        return f"set option {change.key!r} = {change.value!r}"
    if isinstance(change, RemoveOption):
        return f"remove option {change.key!r}"
    if isinstance(change, RenameColumn):
        return f"rename column {'.'.join(change.field_names)} to {change.new_name}"
    if isinstance(change, UpdateColumnPosition):
        return f"move column {change.move.field_name} {change.move.type.value.lower()}"
    return repr(change)


def _col(name: str) -> str:
    return f"column {name!r}"


def _shape(t: DataType) -> DataType:
    """``t`` without field ids, descriptions and top-level nullability: what a declaration
    and a stored schema can be compared on (ids are the table's, never the declaration's)."""
    return replace(
        t,
        nullable=True,
        element=_nested_shape(t.element),
        key=_nested_shape(t.key),
        value=_nested_shape(t.value),
        fields=tuple(DataField(0, f.name, _nested_shape(f.type) or f.type) for f in t.fields),
    )


def _nested_shape(t: DataType | None) -> DataType | None:
    return None if t is None else replace(_shape(t), nullable=t.nullable)


def _dry_run(current: TableSchema, changes: Sequence[SchemaChange],
             has_snapshots: bool) -> list[Refusal]:
    """Paimon's own ALTER rules (``apply_changes``, pure) over the planned changes."""
    if not changes:
        return []
    try:
        apply_changes(current, changes, has_snapshots=lambda: has_snapshots, time_millis=0)
    except LakecoreValidationError as error:
        return [Refusal("ALTER", str(error))]
    return []


def plan_declared_update(current: TableSchema, declared: Schema, *, table: str,
                         has_snapshots: bool) -> SchemaUpdatePlan:
    """The ALTER that makes ``current`` (the table's latest schema) what ``declared`` says.

    ``has_snapshots``: whether the table holds data (then ``bucket`` and Paimon's immutable
    options are fixed). Columns are matched by name: a declaration has no field ids, so a
    renamed column would read as a drop plus an add, and is refused as a drop."""
    refusals: list[Refusal] = []
    changes: list[SchemaChange] = []
    have = {f.name: f for f in current.fields}
    want = {f.name: f for f in declared.fields}
    keys = set(current.primary_keys) | set(current.partition_keys)

    if tuple(declared.primary_keys) != tuple(current.primary_keys):
        refusals.append(Refusal("primary key", (
            f"the table's is {list(current.primary_keys)}, the declaration's "
            f"{list(declared.primary_keys)}: a primary key cannot change")))
    if tuple(declared.partition_keys) != tuple(current.partition_keys):
        refusals.append(Refusal("partition keys", (
            f"the table's are {list(current.partition_keys)}, the declaration's "
            f"{list(declared.partition_keys)}: the partitioning cannot change")))
    for name in have:
        if name not in want:
            what = "a key column; key columns cannot be dropped or renamed" if name in keys \
                else ("the tables file does not drop or rename columns (use `lakecore alter`, "
                      "then declare the result)")
            refusals.append(Refusal(_col(name), f"is in the table but not declared: {what}"))
    kept = [n for n in current.field_names if n in want]
    declared_order = [n for n in declared.field_names if n in have]
    if kept != declared_order:
        refusals.append(Refusal("column order", (
            f"the table has {kept}, the declaration {declared_order}: the tables file does "
            "not reorder columns")))

    fields = declared.fields
    for i, f in enumerate(fields):
        old = have.get(f.name)
        if old is None:
            if not f.type.nullable:
                refusals.append(Refusal(_col(f.name), (
                    f"a new column must be nullable (rows already written have no value for "
                    f"it): declare it {f.type.copy(True)}")))
                continue
            move = None
            if any(g.name in have for g in fields[i + 1:]):  # not at the end: place it
                move = Move.after(f.name, fields[i - 1].name) if i else Move.first(f.name)
            changes.append(AddColumn((f.name,), f.type, f.description, move))
            continue
        changes.extend(_column_changes(old, f, keys, refusals))

    if (declared.comment or None) != (current.comment or None):
        changes.append(UpdateComment(declared.comment))
    for key, value in declared.options.items():
        old_value = current.options.get(key)
        if old_value == value:
            continue
        if key == BUCKET.key and has_snapshots:
            refusals.append(Refusal(f"option {key!r}", (
                f"{old_value or BUCKET.default} -> {value}: the number of buckets cannot change "
                "once the table holds data (its rows are hashed to the old buckets)")))
            continue
        changes.append(SetOption(key, value))
    kept_options = tuple(sorted(k for k in current.options
                                if k not in declared.options and k != PATH.key))
    if not refusals:
        refusals.extend(_dry_run(current, changes, has_snapshots))
    return SchemaUpdatePlan(table, tuple(changes), tuple(refusals), kept_options)


def _column_changes(old: DataField, new: DataField, keys: set[str],
                    refusals: list[Refusal]) -> list[SchemaChange]:
    out: list[SchemaChange] = []
    name, path = new.name, (new.name,)
    if _shape(old.type) != _shape(new.type):
        nested = old.type.root in NESTED_ROOTS or new.type.root in NESTED_ROOTS
        if name in keys:
            refusals.append(Refusal(_col(name), (
                f"type {old.type.copy(True)} -> {new.type.copy(True)}: a primary-key or "
                "partition column's type cannot change")))
        elif nested:
            refusals.append(Refusal(_col(name), (
                f"type {old.type.copy(True)} -> {new.type.copy(True)}: nested types change "
                "field by field with `lakecore alter`, not from the tables file")))
        elif is_implicit(old.type, new.type):
            out.append(UpdateColumnType(path, new.type, keep_nullability=True))
        else:
            refusals.append(Refusal(_col(name), (
                f"type {old.type.copy(True)} -> {new.type.copy(True)} is not a widening "
                "(allowed: Paimon's implicit casts such as INT -> BIGINT, FLOAT -> DOUBLE, a "
                "longer VARCHAR, a wider DECIMAL)")))
    if old.type.nullable and not new.type.nullable:
        refusals.append(Refusal(_col(name), (
            "cannot become NOT NULL: rows already written may hold nulls")))
    elif not old.type.nullable and new.type.nullable:
        if name in keys:
            refusals.append(Refusal(_col(name), "a key column cannot become nullable"))
        else:
            out.append(UpdateColumnNullability(path, True))
    if (old.description or None) != (new.description or None):
        out.append(UpdateColumnComment(path, new.description))
    return out


def plan_merge_schema(current: TableSchema, source: pa.Schema, *, table: str,
                      explicit_cast: bool = False) -> SchemaUpdatePlan:
    """Paimon's ``write.merge-schema``: add the source's new columns (nullable, in source
    order, at the end) and widen a column whose source type is wider than the table's
    (``explicit_cast``: any conversion Paimon allows and lakecore's readers can do). Key and
    nested columns are never retyped, and a narrower source type never narrows the table."""
    refusals: list[Refusal] = []
    changes: list[SchemaChange] = []
    have = {f.name: f for f in current.fields}
    keys = set(current.primary_keys) | set(current.partition_keys)
    for f in source:
        try:
            src = from_arrow(f.type, True)
        except LakecoreValidationError as error:
            refusals.append(Refusal(_col(f.name), f"source type {f.type} has no Paimon type: "
                                                  f"{error}"))
            continue
        old = have.get(f.name)
        if old is None:
            changes.append(AddColumn((f.name,), src))
            continue
        if _shape(old.type) == _shape(src) or f.name in keys:
            continue
        if src.root in NESTED_ROOTS or old.type.root in NESTED_ROOTS:
            continue
        if is_implicit(old.type, src) or (
                explicit_cast and supports_cast(old.type, src, True)
                and can_execute(old.type, src) and not is_implicit(src, old.type)):
            changes.append(UpdateColumnType((f.name,), src, keep_nullability=True))
    if not refusals:
        refusals.extend(_dry_run(current, changes, has_snapshots=True))
    return SchemaUpdatePlan(table, tuple(changes), tuple(refusals))


__all__ = ["Refusal", "SchemaUpdatePlan", "describe_change", "plan_declared_update",
           "plan_merge_schema"]
