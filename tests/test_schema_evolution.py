"""Schema changes applied to a stored schema (pure): Paimon's rules, field ids, errors."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from lakecore.errors import (
    ColumnAlreadyExistError,
    ColumnNotExistError,
    LakecoreValidationError,
    OptionError,
    SchemaChangeError,
)
from lakecore.schema import Schema, TableSchema
from lakecore.schema.casts import can_execute, supports_cast
from lakecore.schema.evolution import apply_changes
from lakecore.schema.schema_change import Move, SchemaChange
from lakecore.schema.types import parse_type

SC = SchemaChange


def table_schema(fields: pa.Schema | None = None, pk: list[str] | None = None,
                 parts: list[str] | None = None, options: dict[str, str] | None = None
                 ) -> TableSchema:
    fields = fields or pa.schema([
        pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False), ("a", pa.int32()),
        ("b", pa.string()), ("s", pa.struct([("x", pa.int32()), ("y", pa.string())])),
        ("arr", pa.list_(pa.int32())), ("m", pa.map_(pa.string(), pa.int32())),
    ])
    opts = {"bucket": "2"} if pk is None or pk else {}
    opts.update(options or {})
    schema = Schema.from_pyarrow_schema(fields, partition_keys=["dt"] if parts is None else parts,
                                        primary_keys=["id", "dt"] if pk is None else pk,
                                        options=opts)
    return TableSchema.from_schema(0, schema, time_millis=1)


def evolve(old: TableSchema, *changes: SchemaChange, snapshots: bool = True) -> TableSchema:
    return apply_changes(old, list(changes), has_snapshots=lambda: snapshots, time_millis=2)


def ids(schema: TableSchema) -> dict[str, int]:
    return {f.name: f.id for f in schema.fields}


# --- field ids ------------------------------------------------------------------------------


def test_add_column_takes_the_next_id_and_nested_ids_after_it() -> None:
    old = table_schema()
    assert old.highest_field_id == 8  # 7 columns + 2 nested fields of s
    new = evolve(old, SC.add_column("c", "BIGINT", comment="new"),
                 SC.add_column("r", pa.struct([("p", pa.int32()), ("q", pa.string())])))
    assert new.id == 1 and new.version == 3
    assert ids(new)["c"] == 9 and new.row_type.field("c").description == "new"
    r = new.row_type.field("r")
    assert r.id == 10 and [f.id for f in r.type.fields] == [11, 12]
    assert new.highest_field_id == 12
    assert new.field_names[-2:] == ["c", "r"]


def test_dropped_ids_are_never_reused() -> None:
    old = table_schema()
    dropped = evolve(old, SC.drop_column("a"))
    assert "a" not in dropped.field_names and dropped.highest_field_id == 8
    readded = evolve(dropped, SC.add_column("a", "INT"))
    assert ids(readded)["a"] == 9 != ids(old)["a"]


def test_rename_keeps_the_id_and_follows_in_keys_and_options() -> None:
    known = table_schema(options={"sequence.field": "a", "merge-engine": "aggregation",
                                  "fields.b.aggregate-function": "last_value"})
    # fields.<a>.sequence-group is Paimon's (lakecore does not write it): a foreign table
    old = TableSchema(3, 0, known.fields, known.highest_field_id, known.partition_keys,
                      known.primary_keys, {**known.options, "fields.a.sequence-group": "b"},
                      None, 1)
    new = evolve(old, SC.rename_column("a", "a2"), SC.rename_column("b", "b2"),
                 SC.rename_column("id", "key"))
    assert ids(new)["a2"] == ids(old)["a"] and ids(new)["key"] == ids(old)["id"]
    assert new.primary_keys == ("key", "dt")
    assert new.options["sequence.field"] == "a2"
    assert new.options["fields.b2.aggregate-function"] == "last_value"
    assert "fields.b.aggregate-function" not in new.options
    assert new.options["fields.a2.sequence-group"] == "b2"


def test_rename_and_add_clashes_are_typed() -> None:
    old = table_schema()
    with pytest.raises(ColumnAlreadyExistError):
        evolve(old, SC.rename_column("a", "b"))
    with pytest.raises(ColumnAlreadyExistError):
        evolve(old, SC.add_column("a", "INT"))
    with pytest.raises(ColumnNotExistError):
        evolve(old, SC.drop_column("nope"))
    with pytest.raises(ColumnNotExistError):
        evolve(old, SC.rename_column(["s", "nope"], "z"))
    with pytest.raises(LakecoreValidationError, match="reserved"):
        evolve(old, SC.rename_column("a", "_KEY_a"))


# --- protected columns ----------------------------------------------------------------------


@pytest.mark.parametrize("change", [
    SC.rename_column("dt", "day"), SC.drop_column("dt"), SC.update_column_type("dt", "INT"),
    SC.drop_column("id"), SC.update_column_type("id", "INT"),
    SC.update_column_nullability("id", True),
])
def test_key_and_partition_columns_are_protected(change: SchemaChange) -> None:
    with pytest.raises(SchemaChangeError, match="partition column|primary-key column"):
        evolve(table_schema(), change)


def test_added_columns_must_be_nullable_and_not_null_needs_the_switch() -> None:
    old = table_schema()
    with pytest.raises(SchemaChangeError, match="NOT NULL"):
        evolve(old, SC.add_column("c", "INT NOT NULL"))
    with pytest.raises(SchemaChangeError, match="alter-column-null-to-not-null"):
        evolve(old, SC.update_column_nullability("a", False))
    with pytest.raises(SchemaChangeError, match="alter-column-null-to-not-null"):
        evolve(old, SC.update_column_type("a", "BIGINT NOT NULL"))
    kept = evolve(old, SC.update_column_type("a", "BIGINT NOT NULL", keep_nullability=True))
    assert kept.row_type.field("a").type == parse_type("BIGINT")
    allowed = table_schema(options={"alter-column-null-to-not-null.disabled": "false"})
    assert not evolve(allowed, SC.update_column_nullability("a", False)).row_type.field(
        "a").type.nullable
    append = table_schema(pk=[], options={"bucket": "-1"})
    assert evolve(append, SC.update_column_nullability("dt", True)).row_type.field(
        "dt").type.nullable  # a partition column may become nullable


# --- types ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("source", "target", "implicit"), [
    ("TINYINT", "INT", True), ("INT", "BIGINT", True), ("BIGINT", "DOUBLE", True),
    ("FLOAT", "DOUBLE", True), ("INT", "DECIMAL(12, 2)", True), ("DECIMAL(10, 2)", "DOUBLE", True),
    ("CHAR(3)", "STRING", True), ("TIMESTAMP(3)", "TIMESTAMP(6)", True),
    ("TIMESTAMP(6)", "DATE", True), ("BINARY(4)", "BYTES", True),
    ("BIGINT", "INT", False), ("DOUBLE", "INT", False), ("INT", "STRING", False),
    ("STRING", "BIGINT", False), ("BOOLEAN", "INT", False),
])
def test_paimon_cast_rules(source: str, target: str, implicit: bool) -> None:
    s, t = parse_type(source), parse_type(target)
    assert supports_cast(s, t, allow_explicit=True)
    assert supports_cast(s, t, allow_explicit=False) is implicit
    assert can_execute(s, t)


@pytest.mark.parametrize(("source", "target"), [
    ("DOUBLE", "BOOLEAN"), ("DATE", "INT"), ("BYTES", "INT"), ("INT", "BYTES"),
])
def test_casts_paimon_refuses(source: str, target: str) -> None:
    assert not supports_cast(parse_type(source), parse_type(target), allow_explicit=True)


def test_type_updates() -> None:
    old = table_schema()
    new = evolve(old, SC.update_column_type("a", "BIGINT"))
    assert new.row_type.field("a").type == parse_type("BIGINT")
    assert evolve(old, SC.update_column_type("b", "INT")).row_type.field("a").id == 2
    strict = table_schema(options={"disable-explicit-type-casting": "true"})
    with pytest.raises(SchemaChangeError, match="disable-explicit-type-casting"):
        evolve(strict, SC.update_column_type("b", "INT"))
    evolve(strict, SC.update_column_type("a", "DOUBLE"))
    with pytest.raises(SchemaChangeError, match="cannot be read as"):  # no pyarrow kernel fits
        evolve(old, SC.update_column_type("a", "DECIMAL(5, 2)"))
    with pytest.raises(SchemaChangeError, match="cannot be converted"):  # a ROW as a whole
        evolve(old, SC.update_column_type("s", pa.struct([("x", pa.int64())])))


def test_nested_paths() -> None:
    old = table_schema()
    new = evolve(
        old,
        SC.add_column(["s", "z"], "DOUBLE"),
        SC.rename_column(["s", "y"], "why"),
        SC.update_column_type(["s", "x"], "BIGINT"),
        SC.update_column_type(["arr", "element"], "BIGINT"),
        SC.update_column_type(["m", "value"], "BIGINT"),
        SC.drop_column(["s", "why"]),
    )
    s = new.row_type.field("s").type
    assert [(f.name, f.id, str(f.type)) for f in s.fields] == [("x", 5, "BIGINT"),
                                                               ("z", 9, "DOUBLE")]
    assert str(new.row_type.field("arr").type.element) == "BIGINT"
    assert str(new.row_type.field("m").type.value) == "BIGINT"
    assert new.highest_field_id == 9
    with pytest.raises(ColumnNotExistError):
        evolve(old, SC.update_column_type(["arr", "items"], "BIGINT"))
    with pytest.raises(SchemaChangeError, match="last field"):
        evolve(old, SC.drop_column(["s", "x"]), SC.drop_column(["s", "y"]))


def test_positions() -> None:
    old = table_schema()
    first = evolve(old, SC.add_column("c", "INT", move=Move.first("c")))
    assert first.field_names[0] == "c"
    after = evolve(old, SC.add_column("c", "INT", move=Move.after("c", "a")))
    assert after.field_names[:4] == ["id", "dt", "a", "c"]
    moved = evolve(old, SC.update_column_position(Move.before("b", "id")))
    assert moved.field_names[:3] == ["b", "id", "dt"]
    last = evolve(old, SC.update_column_position(Move.last("id")))
    assert last.field_names[-1] == "id"
    with pytest.raises(SchemaChangeError):
        evolve(old, SC.update_column_position(Move.after("a", "a")))
    before_part = table_schema(options={"add-column-before-partition": "true"})
    assert evolve(before_part, SC.add_column("c", "INT")).field_names[:2] == ["id", "c"]


# --- options --------------------------------------------------------------------------------


def test_immutable_options_once_there_are_snapshots() -> None:
    old = table_schema()
    with pytest.raises(OptionError, match="merge-engine"):
        evolve(old, SC.set_option("merge-engine", "first-row"))
    assert evolve(old, SC.set_option("merge-engine", "first-row"), snapshots=False).options[
        "merge-engine"] == "first-row"
    with pytest.raises(OptionError, match="bucket"):
        evolve(old, SC.remove_option("bucket"))
    assert evolve(old, SC.set_option("bucket", "4")).options["bucket"] == "4"
    unaware = table_schema(pk=[], options={"bucket": "-1"})
    with pytest.raises(OptionError, match="-1"):
        evolve(unaware, SC.set_option("bucket", "2"))
    deletes = table_schema(options={"ignore-delete": "true"})
    with pytest.raises(OptionError, match="true to false"):
        evolve(deletes, SC.set_option("ignore-delete", "false"))
    with pytest.raises(OptionError):
        evolve(old, SC.set_option("type", "format-table"))
    with pytest.raises(OptionError):
        evolve(old, SC.set_option("path", "/elsewhere"))
    # an unchanged value is not a change, even of an immutable option
    assert evolve(old, SC.set_option("bucket", "2")).options == old.options


def test_option_values_and_references_are_validated() -> None:
    old = table_schema(options={"sequence.field": "a"})
    with pytest.raises(OptionError, match="snapshot.num-retained.min"):
        evolve(old, SC.set_option("snapshot.num-retained.min", "zero"))
    with pytest.raises(OptionError, match="unknown option"):
        evolve(old, SC.set_option("snapshot.num-retained.minimum", "3"))
    with pytest.raises(LakecoreValidationError, match="sequence.field"):
        evolve(old, SC.drop_column("a"))
    new = evolve(old, SC.set_option("snapshot.num-retained.min", 3), SC.update_comment("c"))
    assert new.options["snapshot.num-retained.min"] == "3" and new.comment == "c"


def test_foreign_tables_get_structural_checks_only() -> None:
    """A table another engine made may carry options lakecore does not know: an ALTER keeps
    them and checks what it can."""
    old = table_schema()
    foreign = TableSchema(3, 0, old.fields, old.highest_field_id, old.partition_keys,
                          old.primary_keys, {**old.options, "deletion-vectors.enabled": "true"},
                          None, 1)
    new = evolve(foreign, SC.add_column("c", "INT"))
    assert new.options["deletion-vectors.enabled"] == "true"
    with pytest.raises(OptionError, match="bucket-key"):
        evolve(TableSchema(3, 0, old.fields, old.highest_field_id, (), (),
                           {"bucket": "2", "bucket-key": "a", "x.y": "z"}, None, 1),
               SC.drop_column("a"))


def test_no_changes_is_an_error_and_nothing_is_mutated() -> None:
    old = table_schema()
    before = old.to_json()
    with pytest.raises(SchemaChangeError):
        evolve(old)
    with pytest.raises(SchemaChangeError):
        evolve(old, SC.add_column("c", "INT"), SC.drop_column("id"))
    assert old.to_json() == before


# --- JSON -----------------------------------------------------------------------------------


def test_changes_round_trip_through_paimon_json() -> None:
    changes = [
        SC.set_option("a", True), SC.remove_option("a"), SC.update_comment(None),
        SC.add_column(["s", "z"], {"type": "ARRAY", "element": "INT"}, "c", Move.first("z")),
        SC.rename_column("a", "b"), SC.drop_column(["s", "x"]),
        SC.update_column_type("a", "DECIMAL(12, 2) NOT NULL", keep_nullability=True),
        SC.update_column_nullability("a", False), SC.update_column_comment("a", "doc"),
        SC.update_column_position(Move.after("a", "b")),
    ]
    text = json.dumps([c.to_json() for c in changes])
    assert [SchemaChange.from_json(o) for o in json.loads(text)] == changes
    assert changes[0].to_json() == {"action": "setOption", "key": "a", "value": "true"}
    with pytest.raises(SchemaChangeError, match="unknown schema change action"):
        SchemaChange.from_json({"action": "dropTable"})
    with pytest.raises(SchemaChangeError, match="malformed"):
        SchemaChange.from_json({"action": "renameColumn", "fieldNames": ["a"]})


def test_schema_file_is_paimons_layout() -> None:
    new = evolve(table_schema(), SC.add_column("c", "INT"))
    obj = json.loads(new.to_json())
    assert list(obj) == ["version", "id", "fields", "highestFieldId", "partitionKeys",
                         "primaryKeys", "options", "timeMillis"]
    assert obj["fields"][-1] == {"id": 9, "name": "c", "type": "INT"}
    assert TableSchema.from_json(new.to_json(), "p") == new


def test_default_values_survive_an_alter() -> None:
    old = table_schema()
    obj = json.loads(old.to_json())
    obj["fields"][2]["defaultValue"] = "7"
    foreign = TableSchema.from_json(json.dumps(obj), "p")
    new = evolve(foreign, SC.add_column("c", "INT"))
    assert json.loads(new.to_json())["fields"][2]["defaultValue"] == "7"

