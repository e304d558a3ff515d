"""Drive pypaimon from a subprocess so the test suite can compare lakecore with Paimon itself.

This script runs under ``.venv-paimon`` (pypaimon pins pyarrow < 20, lakecore uses pyarrow 26), so
it imports only pypaimon, pyarrow and the standard library. Tables and schemas cross the process
boundary as Arrow IPC files (readable by both pyarrow versions); everything else as JSON.

Commands (each prints one JSON result on stdout; on error: traceback on stderr, exit code 1)::

    create    --warehouse W --table db.t --schema-ipc S.arrow [--partition-keys a,b]
              [--primary-keys id] [--option k=v ...] [--ignore-if-exists]
    write     --warehouse W --table db.t --data D.arrow [--data D2.arrow ...]
              [--overwrite k=v,... | --overwrite '{"k": v}' | --overwrite-all] [--dynamic-overwrite]
    read      --warehouse W --table db.t --out O.arrow [--snapshot-id N] [--projection a,b]
              [--filter '[["dt", "equal", "a"], ...]']
    plan      --warehouse W --table db.t [--snapshot-id N]
    snapshots --warehouse W --table db.t
    (alter: script steps only, ``{"op": "alter", "changes": [Paimon's JSON schema changes]}``)
    script    --steps steps.json   (a JSON list of steps run in one process; ``-`` reads stdin)

A step is ``{"op": "create" | "write" | "read" | "plan" | "snapshots", "warehouse": ...,
"table": ...}`` plus the command's options in snake_case (``schema_ipc``, ``partition_keys``,
``primary_keys``, ``options`` (object), ``data`` (list of paths), ``overwrite`` (object or null),
``overwrite_all``, ``dynamic_overwrite``, ``postpone_fixed_bucket``, ``out``, ``snapshot_id``,
``projection`` (list), ``filter``). ``script`` prints the list of step results; one process
start costs ~1.4 s, so tests batch their steps.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import traceback
from typing import Any

import pyarrow as pa
import pyarrow.ipc
from pypaimon import CatalogFactory, Schema
from pypaimon.schema.data_types import PyarrowFieldParser

Step = dict[str, Any]


def read_ipc(path: str) -> pa.Table:
    """Read an Arrow IPC file in either the file or the stream format."""
    try:
        with pa.ipc.open_file(path) as reader:
            return reader.read_all()
    except pa.ArrowInvalid:
        with pa.ipc.open_stream(path) as reader:
            return reader.read_all()


def write_ipc(path: str, table: pa.Table) -> None:
    """Write the IPC file format; pyarrow 26 in the main venv reads it back."""
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def _catalog(warehouse: str) -> Any:
    return CatalogFactory.create({"warehouse": warehouse})


def _table(step: Step) -> Any:
    table = _catalog(step["warehouse"]).get_table(step["table"])
    if step.get("snapshot_id") is not None:
        table = table.copy({"scan.snapshot-id": str(step["snapshot_id"])})
    return table


def _latest_snapshot_id(table: Any) -> int | None:
    snapshot = table.snapshot_manager().get_latest_snapshot()
    return None if snapshot is None else snapshot.id


def _typed_partition(table: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """Cast text partition values to the partition column types.

    pypaimon builds an ``equal`` predicate from the spec, so ``"1"`` would never match an INT
    partition; JSON callers may already pass typed values, which are kept as they are.
    """
    arrow_types = {f.name: f.type for f in PyarrowFieldParser.from_paimon_schema(table.fields)}
    typed: dict[str, Any] = {}
    for key, value in spec.items():
        if key not in table.partition_keys:
            raise ValueError(f"overwrite key {key!r} is not a partition key {table.partition_keys}")
        if isinstance(value, str) and not pa.types.is_string(arrow_types[key]):
            value = pa.array([value]).cast(arrow_types[key])[0].as_py()
        typed[key] = value
    return typed


def run_create(step: Step) -> dict[str, Any]:
    """Create the table (and its database when missing) from an empty IPC file's schema."""
    catalog = _catalog(step["warehouse"])
    database = step["table"].split(".", 1)[0]
    catalog.create_database(database, True)
    schema = read_ipc(step["schema_ipc"]).schema
    paimon_schema = Schema.from_pyarrow_schema(
        schema,
        partition_keys=list(step.get("partition_keys") or []),
        primary_keys=list(step.get("primary_keys") or []),
        options={k: str(v) for k, v in (step.get("options") or {}).items()},
    )
    catalog.create_table(step["table"], paimon_schema, bool(step.get("ignore_if_exists")))
    return {"table": step["table"]}


def run_write(step: Step) -> dict[str, Any]:
    """Commit each data file as its own batch commit; report the snapshot after each one.

    pypaimon's default ``dynamic-partition-overwrite=true`` ignores the given partition spec and
    replaces only the partitions present in the data (so "overwrite all" keeps the others, and
    an empty overwrite is a no-op). The driver makes ``overwrite``/``overwrite_all`` mean what
    they say (static overwrite) unless the step asks for ``dynamic_overwrite``.

    On a postpone-bucket table (``bucket = -2``) pypaimon's batch writes land in the postpone
    bucket (Avro files); ``postpone_fixed_bucket`` uses its other writer, which puts the rows
    straight into real buckets (``new_postpone_fixed_bucket_write_builder``).
    """
    table = _table({**step, "snapshot_id": None})
    overwrite = step.get("overwrite")
    if overwrite is not None and step.get("overwrite_all"):
        raise ValueError("give either overwrite (a partition spec) or overwrite_all, not both")
    static_partition = {} if step.get("overwrite_all") else overwrite
    if static_partition:
        static_partition = _typed_partition(table, static_partition)
    if static_partition is not None and not step.get("dynamic_overwrite"):
        table = table.copy({"dynamic-partition-overwrite": "false"})
    snapshot_ids: list[int | None] = []
    for path in step["data"]:
        builder = (table.new_postpone_fixed_bucket_write_builder()
                   if step.get("postpone_fixed_bucket") else table.new_batch_write_builder())
        if static_partition is not None:
            builder.overwrite(static_partition)
        write = builder.new_write()
        commit = builder.new_commit()
        try:
            write.write_arrow(read_ipc(path))
            commit.commit(write.prepare_commit())
        finally:
            write.close()
            commit.close()
        snapshot_ids.append(_latest_snapshot_id(table))
    return {"snapshot_ids": snapshot_ids}


def _predicate(builder: Any, spec: list[list[Any]]) -> Any:
    """AND of ``[field, method, *literals]`` terms, methods named as on PredicateBuilder."""
    predicates_builder = builder.new_predicate_builder()
    terms = [getattr(predicates_builder, method)(field, *args) for field, method, *args in spec]
    return predicates_builder.and_predicates(terms)


def _read_builder(step: Step) -> Any:
    builder = _table(step).new_read_builder()
    if step.get("filter"):
        builder = builder.with_filter(_predicate(builder, step["filter"]))
    if step.get("projection"):
        builder = builder.with_projection(list(step["projection"]))
    return builder


def run_read(step: Step) -> dict[str, Any]:
    """Read every split of the (time-travelled) table into one Arrow table, written to ``out``."""
    builder = _read_builder(step)
    splits = builder.new_scan().plan().splits()
    result = builder.new_read().to_arrow(splits)
    write_ipc(step["out"], result)
    return {"out": step["out"], "num_rows": result.num_rows, "num_splits": len(splits)}


def run_plan(step: Step) -> dict[str, Any]:
    """Describe pypaimon's splits, so tests can see which files and levels Paimon plans over."""
    splits = _read_builder(step).new_scan().plan().splits()
    return {
        "splits": [
            {
                "partition": list(split.partition.values),
                "bucket": split.bucket,
                "raw_convertible": bool(split.raw_convertible),
                "files": [
                    {
                        "file_name": f.file_name,
                        "level": f.level,
                        "row_count": f.row_count,
                        "delete_row_count": f.delete_row_count,
                        "min_sequence_number": f.min_sequence_number,
                        "max_sequence_number": f.max_sequence_number,
                        "schema_id": f.schema_id,
                    }
                    for f in split.files
                ],
            }
            for split in splits
        ]
    }


def run_snapshots(step: Step) -> list[dict[str, Any]]:
    """The snapshots as pypaimon decodes them (ascending ids)."""
    table = _table({**step, "snapshot_id": None})
    return [
        {
            "id": s.id,
            "schema_id": s.schema_id,
            "commit_kind": s.commit_kind,
            "commit_user": s.commit_user,
            "commit_identifier": s.commit_identifier,
            "total_record_count": s.total_record_count,
            "delta_record_count": s.delta_record_count,
            "changelog_record_count": s.changelog_record_count,
            "time_millis": s.time_millis,
            "base_manifest_list": s.base_manifest_list,
            "delta_manifest_list": s.delta_manifest_list,
            "changelog_manifest_list": s.changelog_manifest_list,
            "index_manifest": s.index_manifest,
            "watermark": s.watermark,
        }
        for s in table.snapshot_manager().list_snapshots()
    ]


def _schema_change(obj: dict[str, Any]) -> Any:
    """A pypaimon ``SchemaChange`` from Paimon's JSON form (what lakecore's ``to_json`` gives)."""
    from pypaimon.schema.data_types import DataTypeParser
    from pypaimon.schema.schema_change import Move, MoveType, SchemaChange

    def move(m: dict[str, Any] | None) -> Any:
        if not m:
            return None
        return Move(m["fieldName"], m.get("referenceFieldName"), MoveType(m["type"]))

    action = obj["action"]
    names = obj.get("fieldNames")
    if action == "setOption":
        return SchemaChange.set_option(obj["key"], obj["value"])
    if action == "removeOption":
        return SchemaChange.remove_option(obj["key"])
    if action == "updateComment":
        return SchemaChange.update_comment(obj.get("comment"))
    if action == "addColumn":
        return SchemaChange.add_column(names, DataTypeParser.parse_data_type(obj["dataType"]),
                                       obj.get("comment"), move(obj.get("move")))
    if action == "renameColumn":
        return SchemaChange.rename_column(names, obj["newName"])
    if action == "dropColumn":
        return SchemaChange.drop_column(names)
    if action == "updateColumnType":
        return SchemaChange.update_column_type(
            names, DataTypeParser.parse_data_type(obj["newDataType"]),
            bool(obj.get("keepNullability", False)))
    if action == "updateColumnNullability":
        return SchemaChange.update_column_nullability(names, bool(obj["newNullability"]))
    if action == "updateColumnComment":
        return SchemaChange.update_column_comment(names, obj.get("newComment"))
    if action == "updateColumnPosition":
        return SchemaChange.update_column_position(move(obj["move"]))
    raise ValueError(f"unknown schema change action {action!r}")


def run_alter(step: Step) -> dict[str, Any]:
    """``catalog.alter_table`` with ``changes``: a list of Paimon's JSON schema changes. With
    ``expect_error`` a refused change is the result (``{"error": ...}``), not a failure."""
    changes = [_schema_change(c) for c in step["changes"]]
    try:
        _catalog(step["warehouse"]).alter_table(step["table"], changes)
    except Exception as error:
        if not step.get("expect_error"):
            raise
        return {"table": step["table"], "error": repr(error)}
    return {"table": step["table"], "error": None}


OPERATIONS = {
    "alter": run_alter,
    "create": run_create,
    "write": run_write,
    "read": run_read,
    "plan": run_plan,
    "snapshots": run_snapshots,
}


def run_step(step: Step) -> Any:
    try:
        operation = OPERATIONS[step["op"]]
    except KeyError:
        raise ValueError(f"unknown op {step.get('op')!r}; known: {sorted(OPERATIONS)}") from None
    return operation(step)


def run_script(steps: list[Step]) -> list[Any]:
    """Run steps in order; a failure names the step so the caller's error is actionable."""
    results = []
    for index, step in enumerate(steps):
        try:
            results.append(run_step(step))
        except Exception as error:
            raise RuntimeError(f"step {index} ({step.get('op')}) failed: {error!r}") from error
    return results


def _csv(text: str | None) -> list[str]:
    return [part for part in (text or "").split(",") if part]


def _key_values(pairs: list[str]) -> dict[str, str]:
    result = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"expected key=value, got {pair!r}")
        result[key] = value
    return result


def _overwrite_spec(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    if text.lstrip().startswith("{"):
        return dict(json.loads(text))
    return _key_values(_csv(text))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def table_command(name: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name)
        sub.add_argument("--warehouse", required=True)
        sub.add_argument("--table", required=True, help="db.table")
        return sub

    create = table_command("create")
    create.add_argument("--schema-ipc", required=True)
    create.add_argument("--partition-keys")
    create.add_argument("--primary-keys")
    create.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    create.add_argument("--ignore-if-exists", action="store_true")

    write = table_command("write")
    write.add_argument("--data", action="append", required=True, help="repeat: one commit each")
    mode = write.add_mutually_exclusive_group()
    mode.add_argument("--overwrite", help="k=v,... or a JSON object of partition values")
    mode.add_argument("--overwrite-all", action="store_true")
    write.add_argument(
        "--dynamic-overwrite", action="store_true", help="keep pypaimon's dynamic overwrite"
    )

    for name in ("read", "plan"):
        sub = table_command(name)
        if name == "read":
            sub.add_argument("--out", required=True)
            sub.add_argument("--projection")
        sub.add_argument("--snapshot-id", type=int)
        sub.add_argument("--filter", help='JSON: [["field", "method", literal...], ...]')

    table_command("snapshots")

    script = commands.add_parser("script")
    script.add_argument("--steps", required=True, help="JSON file of steps, or - for stdin")
    return parser.parse_args(argv)


def step_from_args(args: argparse.Namespace) -> Step:
    """Turn a single command's arguments into the same step dict ``script`` takes."""
    step: Step = {"op": args.command, "warehouse": args.warehouse, "table": args.table}
    if args.command == "create":
        step.update(
            schema_ipc=args.schema_ipc,
            partition_keys=_csv(args.partition_keys),
            primary_keys=_csv(args.primary_keys),
            options=_key_values(args.option),
            ignore_if_exists=args.ignore_if_exists,
        )
    elif args.command == "write":
        step.update(
            data=args.data,
            overwrite=_overwrite_spec(args.overwrite),
            overwrite_all=args.overwrite_all,
            dynamic_overwrite=args.dynamic_overwrite,
        )
    elif args.command in ("read", "plan"):
        step.update(
            snapshot_id=args.snapshot_id,
            filter=json.loads(args.filter) if args.filter else None,
        )
        if args.command == "read":
            step.update(out=args.out, projection=_csv(args.projection) or None)
    return step


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    stdout = sys.stdout
    try:
        # Anything pypaimon prints must not corrupt the JSON result on stdout.
        with contextlib.redirect_stdout(sys.stderr):
            if args.command == "script":
                if args.steps == "-":
                    steps = json.load(sys.stdin)
                else:
                    with open(args.steps, encoding="utf-8") as handle:
                        steps = json.load(handle)
                result: Any = run_script(steps)
            else:
                result = run_step(step_from_args(args))
    except Exception:
        traceback.print_exc(file=sys.stderr)
        return 1
    json.dump(result, stdout)
    stdout.write("\n")
    stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
