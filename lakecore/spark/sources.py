"""Ingest sources: files (Parquet, CSV, JSON) or a Spark table / SQL query."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

from pyspark.sql import DataFrame, SparkSession

from lakecore.errors import SchemaError


class SourceFormat(Enum):
    """The source formats the ingest job reads through Spark."""

    PARQUET = "parquet"
    CSV = "csv"
    JSON = "json"


# CSV columns stay strings (no inference pass): lakecore casts them to the table's types on
# the executors and names the column when a value does not parse. Malformed records fail.
_DEFAULTS: dict[SourceFormat, dict[str, str]] = {
    SourceFormat.PARQUET: {},
    SourceFormat.CSV: {"header": "true", "inferSchema": "false", "mode": "FAILFAST"},
    SourceFormat.JSON: {"mode": "FAILFAST"},
}


def load_source(
    spark: SparkSession,
    *,
    path: str | None = None,
    fmt: SourceFormat = SourceFormat.PARQUET,
    options: Mapping[str, str] | None = None,
    table: str | None = None,
    query: str | None = None,
) -> DataFrame:
    given = [x for x in (path, table, query) if x is not None]
    if len(given) != 1:
        raise SchemaError("give exactly one source: a path, a Spark table or a SQL query")
    if table is not None:
        return spark.table(table)
    if query is not None:
        return spark.sql(query)
    reader = spark.read.format(fmt.value).options(**{**_DEFAULTS[fmt], **dict(options or {})})
    return reader.load(path)
