"""Schema plans (pure): a declaration, or a write's source, against a table's latest schema."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakecore.errors import IncompatibleSchemaError
from lakecore.schema import Schema, TableSchema
from lakecore.schema.diff import SchemaUpdatePlan, plan_declared_update, plan_merge_schema
from lakecore.schema.evolution import apply_changes
from lakecore.schema.schema_change import (
    AddColumn,
    Move,
    SetOption,
    UpdateColumnComment,
    UpdateColumnNullability,
    UpdateColumnType,
    UpdateComment,
)

BASE = [pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False),
        pa.field("qty", pa.int32()), pa.field("price", pa.float32()),
        pa.field("name", pa.string(), False)]
OPTIONS = {"bucket": "2", "snapshot.num-retained.max": "30"}


def schema(fields: list[pa.Field] | None = None, pk: list[str] | None = None,
           parts: list[str] | None = None, options: dict[str, str] | None = None,
           comment: str | None = None) -> Schema:
    return Schema.from_pyarrow_schema(
        pa.schema(BASE if fields is None else fields),
        partition_keys=["dt"] if parts is None else parts,
        primary_keys=["dt", "id"] if pk is None else pk,
        options=OPTIONS if options is None else options, comment=comment)


CURRENT = TableSchema.from_schema(0, schema(), time_millis=1)


def plan(declared: Schema, snapshots: bool = True) -> SchemaUpdatePlan:
    return plan_declared_update(CURRENT, declared, table="db.t", has_snapshots=snapshots)


def reasons(p: SchemaUpdatePlan) -> str:
    return " | ".join(map(str, p.refusals))


def test_the_same_declaration_plans_nothing() -> None:
    p = plan(schema())
    assert p.empty and p.compatible and p.changes == () and p.kept_options == ()
    p.check()  # raises nothing


def test_compatible_changes_become_one_alter_that_reaches_the_declaration() -> None:
    fields = list(BASE)
    fields[2] = pa.field("qty", pa.int64())  # INT -> BIGINT
    fields[3] = pa.field("price", pa.float64(), metadata={"description": "unit price"})
    fields[4] = pa.field("name", pa.string())  # NOT NULL -> nullable
    fields.insert(3, pa.field("note", pa.string()))  # in the middle
    fields.append(pa.field("city", pa.string(), metadata={"description": "shipping city"}))
    declared = schema(fields, options={**OPTIONS, "snapshot.num-retained.max": "50",
                                       "write-buffer-size": "64 mb"}, comment="orders")
    p = plan(declared)
    assert p.compatible, reasons(p)
    assert p.changes == (
        UpdateColumnType(("qty",), declared.fields[2].type, keep_nullability=True),
        AddColumn(("note",), declared.fields[3].type, None, Move.after("note", "qty")),
        UpdateColumnType(("price",), declared.fields[4].type, keep_nullability=True),
        UpdateColumnComment(("price",), "unit price"),
        UpdateColumnNullability(("name",), True),
        AddColumn(("city",), declared.fields[6].type, "shipping city", None),
        UpdateComment("orders"),
        SetOption("snapshot.num-retained.max", "50"),
        SetOption("write-buffer-size", "64 mb"),
    )
    assert p.added_columns == ("note", "city")
    assert "add column note STRING after qty" in p.describe()
    new = apply_changes(CURRENT, p.changes, has_snapshots=lambda: True, time_millis=2)
    assert [(f.name, f.type, f.description) for f in new.fields] == [
        (f.name, f.type, f.description) for f in declared.fields]
    assert new.options == declared.options and new.comment == "orders"
    # applied, the declaration plans nothing more
    assert plan_declared_update(new, declared, table="db.t", has_snapshots=True).empty


def test_a_new_first_column_is_placed_first() -> None:
    p = plan(schema([pa.field("src", pa.string()), *BASE]))
    assert p.changes == (AddColumn(("src",), p.changes[0].data_type,  # type: ignore[attr-defined]
                                   None, Move.first("src")),)


@pytest.mark.parametrize(("fields", "pk", "parts", "words"), [
    (BASE[:4], None, None, ["column 'name'", "not declared", "does not drop or rename"]),
    ([*BASE[:4], pa.field("title", pa.string())], None, None, ["column 'name'", "not declared"]),
    ([BASE[0], BASE[1], pa.field("qty", pa.int16()), *BASE[3:]], None, None,
     ["column 'qty'", "INT -> SMALLINT is not a widening"]),
    ([BASE[0], BASE[1], pa.field("qty", pa.string()), *BASE[3:]], None, None,
     ["column 'qty'", "INT -> STRING is not a widening"]),
    ([BASE[0], pa.field("id", pa.int32(), False), *BASE[2:]], None, None,
     ["column 'id'", "primary-key or partition column's type cannot change"]),
    ([*BASE[:4], pa.field("name", pa.string(), False), pa.field("c", pa.int32(), False)], None,
     None, ["column 'c'", "a new column must be nullable", "declare it INT"]),
    ([*BASE[:2], pa.field("qty", pa.int32(), False), *BASE[3:]], None, None,
     ["column 'qty'", "cannot become NOT NULL"]),
    (None, ["dt", "id", "qty"], None, ["primary key", "cannot change"]),
    (None, ["dt", "id"], [], ["partition keys", "cannot change"]),
    ([BASE[1], BASE[0], *BASE[2:]], None, None, ["column order", "does not reorder"]),
])
def test_incompatible_declarations_are_refused_naming_the_column(
        fields: list[pa.Field] | None, pk: list[str] | None, parts: list[str] | None,
        words: list[str]) -> None:
    p = plan(schema(fields, pk, parts))
    assert not p.compatible
    for w in words:
        assert w in reasons(p)
    with pytest.raises(IncompatibleSchemaError) as e:
        p.check()
    assert e.value.table == "db.t" and "'db.t'" in str(e.value) and words[0] in str(e.value)


def test_bucket_changes_only_while_the_table_is_empty() -> None:
    declared = schema(options={**OPTIONS, "bucket": "4"})
    p = plan(declared)
    assert "option 'bucket': 2 -> 4" in reasons(p) and "holds data" in reasons(p)
    assert plan(declared, snapshots=False).changes == (SetOption("bucket", "4"),)


def test_paimons_own_alter_rules_are_applied_as_a_dry_run() -> None:
    p = plan(schema(options={**OPTIONS, "merge-engine": "first-row"}))
    assert "option 'merge-engine'" in reasons(p) and "snapshots" in reasons(p)
    assert plan(schema(options={**OPTIONS, "merge-engine": "first-row"}), False).compatible


def test_options_the_declaration_does_not_mention_are_kept() -> None:
    p = plan(schema(options={"bucket": "2"}))
    assert p.empty and p.kept_options == ("snapshot.num-retained.max",)


# --- write.merge-schema --------------------------------------------------------------------


def test_merge_schema_adds_new_source_columns_and_widens() -> None:
    source = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("qty", pa.int64()),
                        ("price", pa.float32()), ("name", pa.string()), ("extra", pa.int32()),
                        ("tags", pa.list_(pa.string()))])
    p = plan_merge_schema(CURRENT, source, table="db.t")
    assert p.compatible, reasons(p)
    assert p.added_columns == ("extra", "tags")
    assert [type(c) for c in p.changes] == [UpdateColumnType, AddColumn, AddColumn]
    new = apply_changes(CURRENT, p.changes, has_snapshots=lambda: True, time_millis=2)
    assert [f.type.root.name for f in new.fields][-3:] == ["VARCHAR", "INT", "ARRAY"]
    assert all(f.type.nullable for f in new.fields[-2:])
    assert str(new.row_type.field("qty").type) == "BIGINT"


def test_merge_schema_never_narrows_or_retypes_keys() -> None:
    source = pa.schema([("dt", pa.string()), ("id", pa.int32()), ("qty", pa.int8()),
                        ("price", pa.float32()), ("name", pa.string())])
    assert plan_merge_schema(CURRENT, source, table="db.t").empty
    # a conversion that is not a widening needs explicit-cast
    source = pa.schema([("price", pa.string())])
    assert plan_merge_schema(CURRENT, source, table="db.t").empty
    p = plan_merge_schema(CURRENT, source, table="db.t", explicit_cast=True)
    assert [type(c) for c in p.changes] == [UpdateColumnType]
