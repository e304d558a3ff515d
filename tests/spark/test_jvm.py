"""The few-round-trip plan building of native reads (``lakecore.spark.jvm``), against a real
session's JVM."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T  # noqa: N812

from lakecore.spark import jvm


def _calls(monkeypatch):
    """A counter of py4j round trips from now on."""
    import py4j.clientserver as cs

    sent = [0]
    real = cs.ClientServerConnection.send_command

    def counted(self, command):
        sent[0] += 1
        return real(self, command)

    monkeypatch.setattr(cs.ClientServerConnection, "send_command", counted)
    return sent


def test_strings_reach_the_jvm_as_they_are_in_a_few_calls(spark, monkeypatch):
    values = ["a", "", "line\nbreak", "tab\tand ` back'tick", "é€😀", "file:///x y/z.parquet"]
    jvm.handles(spark)  # looked up once per gateway
    sent = _calls(monkeypatch)
    seq = jvm.string_seq(spark, values * 500)
    assert sent[0] <= 3  # not one call per element
    assert seq.length() == 3000
    assert [seq.apply(i) for i in range(len(values))] == values
    assert jvm.string_seq(spark, []).length() == 0
    with pytest.raises(ValueError, match="NUL"):
        jvm.string_seq(spark, ["a\u0000b"])


def test_files_read_and_projected_as_sql(spark, tmp_path):
    out = str(tmp_path / "t")
    spark.range(30).selectExpr("id", "CAST(id AS INT) AS `odd name`").repartition(3) \
        .write.parquet(out)
    paths = ["file://" + str(p) for p in sorted((tmp_path / "t").glob("*.parquet"))]
    assert len(paths) == 3
    schema = T.StructType([T.StructField("id", T.LongType()),
                           T.StructField("odd name", T.IntegerType())])
    df = jvm.read_files(spark, "parquet", schema, paths, {"mergeSchema": "false"})
    assert df.schema == schema
    got = jvm.select_sql(df, spark, [f"CAST({jvm.quoted('odd name')} AS BIGINT) AS `x``y`",
                                     "coalesce(id, CAST(0 AS BIGINT)) AS id"])
    assert got.schema == T.StructType([T.StructField("x`y", T.LongType()),
                                       T.StructField("id", T.LongType(), False)])
    assert sorted(r["x`y"] for r in got.collect()) == list(range(30))


def test_sql_types_name_nested_fields_quoted():
    t = T.StructType([T.StructField("a b", T.ArrayType(T.DecimalType(12, 3))),
                      T.StructField("m`", T.MapType(T.StringType(), T.TimestampNTZType()))])
    assert jvm.sql_type(t) == ("STRUCT<`a b`: ARRAY<DECIMAL(12,3)>, "
                               "`m```: MAP<STRING, TIMESTAMP_NTZ>>")
