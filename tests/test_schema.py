"""Schema validation, the schema-file JSON, and compatibility with files pypaimon writes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakecore.errors import CorruptFileError, OptionError, SchemaError
from lakecore.options import MergeEngine
from lakecore.schema import Schema, TableSchema, highest_field_id
from lakecore.schema.types import TypeRoot

PAIMON_PYTHON = Path(
    os.environ.get("LAKECORE_PAIMON_PYTHON")
    or Path(__file__).resolve().parents[1] / ".venv-paimon" / "bin" / "python"
)
T0 = 1_700_000_000_000

# Built in both interpreters (pyarrow 26 here, pypaimon's pyarrow there), so that the same
# definitions reach lakecore and pypaimon.
SCHEMAS_SRC = """
import pyarrow as pa
SCHEMAS = {
    "pk": pa.schema([
        pa.field("id", pa.int64(), nullable=False),
        pa.field("dt", pa.string(), nullable=False),
        pa.field("v", pa.float64(), metadata={b"description": b"the value"}),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("m", pa.map_(pa.string(), pa.int32())),
        pa.field("r", pa.struct([("a", pa.int32()), ("b", pa.string())])),
        pa.field("ts", pa.timestamp("us")),
        pa.field("d", pa.decimal128(10, 2)),
        pa.field("flag", pa.bool_()),
        pa.field("day", pa.date32()),
        pa.field("bin", pa.binary()),
    ]),
    "append": pa.schema([pa.field("a", pa.int32()), pa.field("b", pa.string())]),
    "deep": pa.schema([
        pa.field("k", pa.int32(), nullable=False),
        pa.field("outer", pa.struct([
            ("x", pa.int32()),
            ("inner", pa.struct([("p", pa.string()), ("q", pa.int64())])),
        ])),
        pa.field("items", pa.list_(pa.struct([("name", pa.string()), ("n", pa.int32())]))),
        pa.field("lookup", pa.map_(pa.string(), pa.struct([("z", pa.float32())]))),
        pa.field("last", pa.int8()),
    ]),
}
TABLES = {
    "pk": dict(partition_keys=["dt"], primary_keys=["id", "dt"],
               options={"bucket": "2", "merge-engine": "deduplicate",
                        "write-buffer-size": "64 mb", "snapshot.time-retained": "2 h"},
               comment="hello"),
    "append": dict(partition_keys=[], primary_keys=[], options={}, comment=None),
    "deep": dict(partition_keys=[], primary_keys=["k"], options={"bucket": "1"},
                 comment="nested ids"),
}
"""
_ns: dict[str, Any] = {}
exec(SCHEMAS_SRC, _ns)  # noqa: S102 - the shared definitions above
SCHEMAS: dict[str, pa.Schema] = _ns["SCHEMAS"]
TABLES: dict[str, dict[str, Any]] = _ns["TABLES"]


def pk_schema(**kw: Any) -> Schema:
    args: dict[str, Any] = {
        "partition_keys": ["dt"],
        "primary_keys": ["id", "dt"],
        "options": {"bucket": "2"},
    }
    args.update(kw)
    return Schema.from_pyarrow_schema(SCHEMAS["pk"], **args)


# --- Schema ---------------------------------------------------------------------------------


def test_from_pyarrow_schema() -> None:
    s = pk_schema(options={"bucket": 4, "write-only": True}, comment="c")
    assert s.field_names[:3] == ["id", "dt", "v"]
    assert s.partition_keys == ("dt",) and s.primary_keys == ("id", "dt")
    assert s.options == {"bucket": "4", "write-only": "true"}
    assert s.comment == "c"
    assert s.fields[2].description == "the value"
    assert str(s.fields[0].type) == "BIGINT NOT NULL"
    assert [f.id for f in s.fields] == [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12]
    row = s.fields[5].type
    assert row.root is TypeRoot.ROW and [f.id for f in row.fields] == [6, 7]


def test_nested_field_ids_follow_paimon() -> None:
    s = Schema.from_pyarrow_schema(SCHEMAS["deep"], primary_keys=["k"], options={"bucket": "1"})
    outer = s.fields[1].type
    # Top-level id first; a nested field takes its id after the fields nested inside it.
    assert s.fields[1].id == 1
    assert [f.id for f in outer.fields[1].type.fields] == [3, 4]
    assert [f.id for f in outer.fields] == [2, 5]
    assert s.fields[2].id == 6 and [f.id for f in s.fields[2].type.element.fields] == [7, 8]
    assert s.fields[3].id == 9 and s.fields[3].type.value.fields[0].id == 10
    assert s.fields[4].id == 11
    assert highest_field_id(s.fields) == 11


def test_schema_is_frozen() -> None:
    s = pk_schema()
    with pytest.raises(AttributeError):
        s.comment = "x"  # type: ignore[misc]
    assert isinstance(s.fields, tuple)


SCHEMA_REJECTIONS: list[tuple[dict[str, Any], type[Exception], list[str]]] = [
    ({"primary_keys": ["id", "nope"]}, SchemaError, ["primary key 'nope' is not a column"]),
    ({"partition_keys": ["nope"], "primary_keys": ["id"]}, SchemaError,
     ["partition key 'nope' is not a column"]),
    ({"partition_keys": ["dt", "dt"]}, SchemaError, ["duplicate partition key", "'dt'"]),
    ({"primary_keys": ["id", "id", "dt"]}, SchemaError, ["duplicate primary key", "'id'"]),
    ({"partition_keys": ["r"], "primary_keys": ["id", "r"]}, SchemaError,
     ["partition key 'r' has nested type"]),
    ({"partition_keys": ["id", "dt"]}, SchemaError, ["partition keys only"]),
    ({"options": {"bucket": "2", "bukcet-key": "id"}}, OptionError, ["'bukcet-key'"]),
    ({"primary_keys": ["id"], "options": {}}, OptionError,
     ["'bucket'", "cross-partition upsert", "['dt']", "include the partition keys"]),
    ({"primary_keys": ["id"], "options": {"bucket": "-1"}}, OptionError,
     ["'bucket'", "dynamic bucket mode", "fixed number of buckets"]),
    ({"options": {"bucket": "2", "bucket-key": "dt"}}, OptionError,
     ["'bucket-key'", "'dt' is a partition key"]),
    ({"options": {"bucket": "2", "path": "/x"}}, OptionError, ["'path'", "catalog"]),
    ({"options": {"bucket": "2", "rowkind.field": "v"}}, OptionError,
     ["'rowkind.field'", "string column"]),
    ({"options": {"bucket": "2", "merge-engine": "aggregation",
                  "fields.tags.aggregate-function": "sum"}}, OptionError,
     ["'fields.tags.aggregate-function'", "numeric"]),
    ({"options": {"bucket": "2", "merge-engine": "aggregation",
                  "fields.v.aggregate-function": "bool_or"}}, OptionError,
     ["'fields.v.aggregate-function'", "BOOLEAN"]),
    ({"options": {"bucket": "2", "merge-engine": "aggregation",
                  "fields.v.aggregate-function": "listagg"}}, OptionError, ["VARCHAR"]),
    ({"options": {"bucket": "2", "merge-engine": "aggregation",
                  "fields.m.aggregate-function": "max"}}, OptionError, ["comparable"]),
    ({"options": {"bucket": "2", "merge-engine": "aggregation",
                  "fields.default-aggregate-function": "sum"}}, OptionError,
     ["'fields.default-aggregate-function'", "numeric"]),
    ({"options": {"bucket": "2", "partition.timestamp-pattern": "$day"}}, OptionError,
     ["'partition.timestamp-pattern'", "$day"]),
]


@pytest.mark.parametrize(("kw", "error", "fragments"), SCHEMA_REJECTIONS)
def test_schema_rejections(
    kw: dict[str, Any], error: type[Exception], fragments: list[str]
) -> None:
    with pytest.raises(error) as info:
        pk_schema(**kw)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_nullable_primary_key_columns_become_not_null() -> None:
    """Paimon's (and pypaimon's) normalisation: pyarrow's nullable default is accepted for
    key columns, which the stored schema declares NOT NULL; other columns keep theirs."""
    schema = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.float64())])
    s = Schema.from_pyarrow_schema(schema, partition_keys=["dt"], primary_keys=["id", "dt"],
                                   options={"bucket": "2"})
    nullable = {f.name: f.type.nullable for f in s.fields}
    assert nullable == {"id": False, "dt": False, "v": True}
    stored = TableSchema.from_schema(0, s, time_millis=T0).to_json()
    assert '"BIGINT NOT NULL"' in stored and '"STRING NOT NULL"' in stored
    # an append table's columns are left as given
    assert Schema.from_pyarrow_schema(schema).fields[0].type.nullable


def test_postpone_bucket_tables_need_a_primary_key() -> None:
    s = pk_schema(options={"bucket": "-2", "postpone.default-bucket-num": "3"})
    assert s.options["bucket"] == "-2"
    with pytest.raises(OptionError, match="postpone"):
        Schema.from_pyarrow_schema(pa.schema([("v", pa.int64())]), options={"bucket": "-2"})
    with pytest.raises(OptionError, match="postpone.default-bucket-num"):
        pk_schema(options={"bucket": "-2", "postpone.default-bucket-num": "0"})


def test_sequence_field_with_cross_partition_key_is_rejected() -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("dt", pa.string()),
                        ("ts", pa.int64())])
    with pytest.raises(OptionError) as info:
        Schema.from_pyarrow_schema(schema, partition_keys=["dt"], primary_keys=["id"],
                                   options={"bucket": "2", "sequence.field": "ts"})
    assert info.value.key == "sequence.field"
    # Without sequence.field a fixed-bucket table whose key omits the partition is allowed
    # (Paimon allows it too: keys are then unique per partition).
    Schema.from_pyarrow_schema(schema, partition_keys=["dt"], primary_keys=["id"],
                               options={"bucket": "2"})


def test_duplicate_and_reserved_column_names() -> None:
    dup = pa.schema([("a", pa.int32()), ("a", pa.string())])
    with pytest.raises(SchemaError, match="duplicate column name"):
        Schema.from_pyarrow_schema(dup)
    for name in ("_SEQUENCE_NUMBER", "_VALUE_KIND", "rowkind", "_KEY_id"):
        with pytest.raises(SchemaError, match="reserved"):
            Schema.from_pyarrow_schema(pa.schema([(name, pa.int64())]))
    with pytest.raises(SchemaError, match="at least one column"):
        Schema.from_pyarrow_schema(pa.schema([]))


def test_unsupported_arrow_type_names_the_column() -> None:
    with pytest.raises(SchemaError, match="column 'u'"):
        Schema.from_pyarrow_schema(pa.schema([("u", pa.uint64())]))


def test_append_table_buckets() -> None:
    schema = SCHEMAS["append"]
    assert Schema.from_pyarrow_schema(schema).options == {}
    fixed = Schema.from_pyarrow_schema(schema, options={"bucket": "3", "bucket-key": "a"})
    assert fixed.options["bucket-key"] == "a"
    with pytest.raises(OptionError) as info:
        Schema.from_pyarrow_schema(schema, options={"bucket": "3"})
    assert info.value.key == "bucket-key"
    with pytest.raises(OptionError) as info:
        Schema.from_pyarrow_schema(schema, options={"bucket": "-2"})
    assert info.value.key == "bucket"
    with pytest.raises(OptionError) as info:
        Schema.from_pyarrow_schema(schema, options={"merge-engine": "first-row"})
    assert info.value.key == "merge-engine"


def test_aggregation_schema_accepted() -> None:
    s = pk_schema(options={
        "bucket": "2", "merge-engine": "aggregation", "fields.v.aggregate-function": "sum",
        "fields.flag.aggregate-function": "bool_and", "fields.ts.aggregate-function": "max",
        "fields.default-aggregate-function": "last_value",
    })
    table = TableSchema.from_schema(0, s, T0)
    assert table.core_options.merge_engine is MergeEngine.AGGREGATION


def test_option_values_must_be_text_like() -> None:
    with pytest.raises(OptionError) as info:
        pk_schema(options={"bucket": 2.5})
    assert info.value.key == "bucket"


# --- TableSchema ----------------------------------------------------------------------------


def test_table_schema_helpers() -> None:
    t = TableSchema.from_schema(3, pk_schema(), T0)
    assert (t.version, t.id, t.time_millis, t.highest_field_id) == (3, 3, T0, 12)
    assert t.trimmed_primary_keys == ("id",)
    assert t.bucket_keys == ("id",) and t.num_buckets == 2
    assert t.partition_type.names == ["dt"]
    assert t.key_type.names == ["id"]
    assert t.bucket_key_type.names == ["id"]
    assert t.row_type.names == t.field_names
    arrow = t.arrow_schema()
    assert arrow.field("id").type == pa.int64() and not arrow.field("id").nullable
    assert arrow.field("ts").type == pa.timestamp("us")
    assert t.to_schema() == pk_schema()
    bucketed = TableSchema.from_schema(
        0, Schema.from_pyarrow_schema(SCHEMAS["append"], options={"bucket": "2", "bucket-key": "b"})
    )
    assert bucketed.bucket_keys == ("b",) and bucketed.trimmed_primary_keys == ()
    assert bucketed.time_millis > T0  # defaults to now


def test_json_layout_matches_paimon() -> None:
    t = TableSchema.from_schema(0, pk_schema(comment="hi"), T0)
    text = t.to_json()
    obj = json.loads(text)
    assert list(obj) == ["version", "id", "fields", "highestFieldId", "partitionKeys",
                         "primaryKeys", "options", "comment", "timeMillis"]
    assert obj["fields"][0] == {"id": 0, "name": "id", "type": "BIGINT NOT NULL"}
    assert obj["fields"][2]["description"] == "the value"
    assert obj["fields"][5]["type"]["type"] == "ROW"
    assert obj["options"] == {"bucket": "2"}
    assert text.startswith('{\n  "version": 3,\n  "id": 0,\n')
    no_comment = json.loads(TableSchema.from_schema(0, pk_schema(), T0).to_json())
    assert "comment" not in no_comment  # Java writes it only when set


def test_json_round_trip() -> None:
    for name, table in TABLES.items():
        schema = Schema.from_pyarrow_schema(
            SCHEMAS[name], table["partition_keys"], table["primary_keys"],
            table["options"], table["comment"],
        )
        t = TableSchema.from_schema(7, schema, T0)
        back = TableSchema.from_json(t.to_json(), "schema-7")
        assert back == t
        assert back.to_json() == t.to_json()


def test_from_json_old_versions_get_their_defaults() -> None:
    t = TableSchema.from_schema(0, pk_schema(), T0)
    obj = json.loads(t.to_json())
    obj["options"] = {}
    del obj["version"], obj["timeMillis"]
    old = TableSchema.from_json(json.dumps(obj), "p")
    assert old.version == 1 and old.time_millis == 0
    assert old.options == {"bucket": "1", "file.format": "orc"}
    obj["version"] = 2
    assert TableSchema.from_json(json.dumps(obj), "p").options == {"file.format": "orc"}


def test_from_json_is_lenient_with_foreign_options() -> None:
    t = TableSchema.from_schema(0, pk_schema(), T0)
    obj = json.loads(t.to_json())
    obj["options"].update({"bucket": "-1", "row-tracking.enabled": True, "x": 3})
    back = TableSchema.from_json(json.dumps(obj), "p")
    assert back.options["row-tracking.enabled"] == "true" and back.options["x"] == "3"
    assert back.core_options.bucket == -1
    assert back.core_options.unknown_keys == ("row-tracking.enabled", "x")


CORRUPT: list[tuple[str, str]] = [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"version": 3}', "missing key"),
]


@pytest.mark.parametrize(("text", "fragment"), CORRUPT)
def test_from_json_corrupt_names_path(text: str, fragment: str) -> None:
    with pytest.raises(CorruptFileError) as info:
        TableSchema.from_json(text, "/wh/db.db/t/schema/schema-0")
    assert info.value.path == "/wh/db.db/t/schema/schema-0"
    assert "/wh/db.db/t/schema/schema-0" in str(info.value) and fragment in str(info.value)


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda o: o.pop("fields"), "missing key 'fields'"),
        (lambda o: o.pop("options"), "missing key 'options'"),
        (lambda o: o.pop("highestFieldId"), "missing key 'highestFieldId'"),
        (lambda o: o.update(id="zero"), "'id' must be an integer"),
        (lambda o: o.update(fields={}), "'fields' must be a JSON array"),
        (lambda o: o["fields"][0].pop("name"), "missing key 'name'"),
        (lambda o: o.update(primaryKeys=["ghost"]), "['ghost'] are not columns"),
        (lambda o: o["options"].update(bucket=[1]), "non-scalar"),
    ],
)
def test_from_json_malformed(mutate: Any, fragment: str) -> None:
    obj = json.loads(TableSchema.from_schema(0, pk_schema(), T0).to_json())
    mutate(obj)
    with pytest.raises(CorruptFileError) as info:
        TableSchema.from_json(json.dumps(obj), "schema-0")
    assert "schema-0" in str(info.value) and fragment in str(info.value)


def test_from_json_unsupported_type_is_a_schema_error_naming_path() -> None:
    obj = json.loads(TableSchema.from_schema(0, pk_schema(), T0).to_json())
    obj["fields"][2]["type"] = "VARIANT"
    with pytest.raises(SchemaError, match="schema-0"):
        TableSchema.from_json(json.dumps(obj), "schema-0")


# --- compatibility with pypaimon ------------------------------------------------------------


def run_paimon(code: str) -> Any:
    """Run ``code`` under pypaimon's interpreter; its last stdout line is JSON."""
    if not PAIMON_PYTHON.is_file():
        pytest.skip(f"pypaimon venv missing ({PAIMON_PYTHON})")
    done = subprocess.run(
        [str(PAIMON_PYTHON), "-c", code], capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0 and "No module named 'pypaimon'" in done.stderr:
        pytest.skip("pypaimon is not importable in the pypaimon venv")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def paimon_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tables created by pypaimon from the shared definitions."""
    warehouse = tmp_path_factory.mktemp("paimon") / "wh"
    run_paimon(
        SCHEMAS_SRC
        + f"""
import json
from pypaimon import CatalogFactory, Schema
catalog = CatalogFactory.create({{"warehouse": {str(warehouse)!r}}})
catalog.create_database("db", True)
for name, schema in SCHEMAS.items():
    t = TABLES[name]
    catalog.create_table("db." + name, Schema.from_pyarrow_schema(
        schema, partition_keys=t["partition_keys"], primary_keys=t["primary_keys"],
        options=t["options"], comment=t["comment"]), False)
print(json.dumps("ok"))
"""
    )
    return warehouse


def _schema_file(warehouse: Path, name: str) -> Path:
    return warehouse / "db.db" / name / "schema" / "schema-0"


@pytest.mark.compat
@pytest.mark.parametrize("name", sorted(TABLES))
def test_reads_pypaimon_schema_files(paimon_warehouse: Path, name: str) -> None:
    path = _schema_file(paimon_warehouse, name)
    raw = json.loads(path.read_text())
    t = TableSchema.from_json(path.read_text(), str(path))
    table = TABLES[name]
    assert (t.version, t.id, t.time_millis) == (3, 0, raw["timeMillis"])
    assert list(t.partition_keys) == table["partition_keys"]
    assert list(t.primary_keys) == table["primary_keys"]
    assert t.options == table["options"]
    assert t.comment == table["comment"]
    assert t.highest_field_id == raw["highestFieldId"]
    # lakecore builds the same fields (ids, names, types, nullability) from the same arrow
    # schema as pypaimon did.
    ours = TableSchema.from_schema(
        0,
        Schema.from_pyarrow_schema(
            SCHEMAS[name], table["partition_keys"], table["primary_keys"], table["options"],
            table["comment"],
        ),
        raw["timeMillis"],
    )
    assert ours == t
    assert t.arrow_schema() == ours.arrow_schema()


@pytest.mark.compat
def test_pypaimon_reads_our_schema_files(paimon_warehouse: Path, tmp_path: Path) -> None:
    """Our re-serialization of pypaimon's files parses in pypaimon to the same schema, and a
    table whose schema file lakecore wrote is writable and readable by pypaimon."""
    ours_dir = tmp_path / "ours"
    ours_dir.mkdir()
    for name in TABLES:
        path = _schema_file(paimon_warehouse, name)
        t = TableSchema.from_json(path.read_text(), str(path))
        (ours_dir / name).write_text(t.to_json())
    simple = Schema.from_pyarrow_schema(
        pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())]),
        primary_keys=["id"],
        options={"bucket": "2"},
        comment="made by lakecore",
    )
    table_dir = tmp_path / "wh" / "db.db" / "simple" / "schema"
    table_dir.mkdir(parents=True)
    (table_dir / "schema-0").write_text(TableSchema.from_schema(0, simple, T0).to_json())
    result = run_paimon(
        f"""
import json
import pyarrow as pa
from pypaimon import CatalogFactory
from pypaimon.schema.table_schema import TableSchema

def view(s):
    return {{"version": s.version, "id": s.id, "fields": [f.to_dict() for f in s.fields],
             "highestFieldId": s.highest_field_id, "partitionKeys": s.partition_keys,
             "primaryKeys": s.primary_keys, "options": s.options, "comment": s.comment,
             "timeMillis": s.time_millis}}

out = {{}}
for name in {sorted(TABLES)!r}:
    theirs = open({str(paimon_warehouse)!r} + "/db.db/" + name + "/schema/schema-0").read()
    ours = open({str(ours_dir)!r} + "/" + name).read()
    out[name] = [view(TableSchema.from_json(theirs)), view(TableSchema.from_json(ours))]
catalog = CatalogFactory.create({{"warehouse": {str(tmp_path / "wh")!r}}})
table = catalog.get_table("db.simple")
builder = table.new_batch_write_builder()
write = builder.new_write()
write.write_arrow(pa.table({{"id": pa.array([1, 2, 1], pa.int64()),
                            "v": ["a", "b", "c"]}},
                           schema=pa.schema([pa.field("id", pa.int64(), nullable=False),
                                             ("v", pa.string())])))
builder.new_commit().commit(write.prepare_commit())
read_builder = table.new_read_builder()
splits = read_builder.new_scan().plan().splits()
rows = read_builder.new_read().to_arrow(splits).sort_by("id").to_pylist()
out["simple"] = {{"rows": rows, "comment": table.table_schema.comment,
                  "options": table.table_schema.options}}
print(json.dumps(out))
"""
    )
    for name in TABLES:
        theirs, ours = result[name]
        assert ours == theirs, name
    assert result["simple"]["rows"] == [{"id": 1, "v": "c"}, {"id": 2, "v": "b"}]
    assert result["simple"]["comment"] == "made by lakecore"
    assert result["simple"]["options"]["bucket"] == "2"
