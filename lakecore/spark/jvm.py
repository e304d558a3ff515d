"""A read's Spark plan built in a few py4j round trips, whatever the number of files.

Every py4j call is a socket round trip from the driver's Python to its JVM (0.3-0.7 ms on a
2-core machine). PySpark's Column API makes 10-20 of them per operation (``F.col`` 19,
``cast`` 16, ``alias`` 11, measured on pyspark 4.3), and a Python list handed to the JVM
costs one per element: a native read of 40 files and 7 columns made 668 calls, 0.3-0.5 s
of driver time against a 3 s scan, and a read of 10,000 files would spend seconds on its
paths alone. So a read is built from:

* JVM classes named (``java_class``), not looked up through py4j's package views (a path
  such as ``jvm.org.apache.spark`` costs a call per segment), and the compiled splitter kept
  per gateway (``handles``);
* a list of strings sent as one string, split in the JVM (``string_seq``);
* projections as SQL text, one ``selectExpr`` for all columns (``select_sql``).

Only a classic session has a JVM in this process (``pyspark.sql.classic``); this module is
for the native read, which needs one anyway (deletion filters, the executors' merge).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

# joins the strings of ``string_seq``: NUL is in no path or SQL text
_SEPARATOR = "\u0000"


@dataclass(frozen=True)
class Handles:
    """The JVM classes and objects a read uses, made once per gateway."""

    functions: Any  # org.apache.spark.sql.functions
    python_utils: Any  # org.apache.spark.api.python.PythonUtils
    array_seq: Any  # scala.collection.immutable.ArraySeq
    splitter: Any  # a compiled java.util.regex.Pattern of the separator


_HANDLES: dict[int, tuple[Any, Handles]] = {}


def handles(spark: SparkSession) -> Handles:
    """The session's ``Handles`` (looked up on its gateway's first use)."""
    view: Any = spark._jvm
    held = _HANDLES.get(id(view))
    if held is None or held[0] is not view:
        regex = java_class(spark, "java.util.regex.Pattern")
        held = (view, Handles(
            functions=java_class(spark, "org.apache.spark.sql.functions"),
            python_utils=java_class(spark, "org.apache.spark.api.python.PythonUtils"),
            array_seq=java_class(spark, "scala.collection.immutable.ArraySeq"),
            splitter=regex.compile(_SEPARATOR, regex.LITERAL),
        ))
        _HANDLES[id(view)] = held  # the entry holds its JVM view: its id is not reused
    return held[1]


def java_class(spark: SparkSession, name: str) -> Any:
    """The JVM class ``name`` (fully qualified), without a call: py4j names it in each call
    to its members."""
    from py4j.java_gateway import JavaClass  # type: ignore[import-untyped]

    view: Any = spark._jvm
    return JavaClass(name, view._gateway_client)


def scala_object(spark: SparkSession, name: str) -> Any:
    """The Scala ``object`` ``name`` (fully qualified): its class ``name$``'s ``MODULE$``."""
    return java_class(spark, name + "$").__getattr__("MODULE$")


def string_seq(spark: SparkSession, values: Sequence[str]) -> Any:
    """``values`` as a Scala ``Seq[String]`` in two calls (py4j would add them one by
    one)."""
    h = handles(spark)
    if not values:
        return h.python_utils.toSeq([])
    if any(_SEPARATOR in v for v in values):
        raise ValueError("a string holds a NUL character")
    return h.array_seq.unsafeWrapArray(h.splitter.split(_SEPARATOR.join(values), -1))


def _classic(jdf: Any, spark: SparkSession) -> DataFrame:
    return DataFrame(jdf, spark)  # as PySpark's own reader wraps one


def read_files(spark: SparkSession, fmt: str, schema: StructType, paths: Sequence[str],
               options: Mapping[str, str]) -> DataFrame:
    """``spark.read.format(fmt).schema(schema).options(options).load(*paths)``."""
    session: Any = spark._jsparkSession
    reader = session.read().format(fmt).schema(session.parseDataType(schema.json()))
    for key, value in options.items():
        reader = reader.option(key, value)
    return _classic(reader.load(string_seq(spark, paths)), spark)


def select_sql(df: DataFrame, spark: SparkSession, expressions: Sequence[str]) -> DataFrame:
    """``df.selectExpr(*expressions)``."""
    return _classic(df._jdf.selectExpr(string_seq(spark, expressions)), spark)


def quoted(name: str) -> str:
    """A column or field name as a SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def sql_type(t: DataType) -> str:
    """``t`` in SQL (nested types with nullable children: the only ones a file scan gives)."""
    if isinstance(t, StructType):
        return "STRUCT<" + ", ".join(f"{quoted(f.name)}: {sql_type(f.dataType)}"
                                     for f in t.fields) + ">"
    if isinstance(t, ArrayType):
        return f"ARRAY<{sql_type(t.elementType)}>"
    if isinstance(t, MapType):
        return f"MAP<{sql_type(t.keyType)}, {sql_type(t.valueType)}>"
    return t.simpleString().upper()
