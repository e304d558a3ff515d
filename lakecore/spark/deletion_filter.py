"""Deletion vectors applied inside Spark's own scan: one row filter, no join.

A native scan of deletion-vector files must drop the rows the vectors mark. An anti-join of
the scan with the deleted (file, row index) pairs is correct everywhere but slow: probing a
relation of a million keys costs Spark more than the scan itself (docs/spark-datasource.md,
"Native reads, measured"). Instead each row is tested against its file's vector where it is:

    CASE WHEN known.contains(_metadata.file_size)
         THEN NOT deleted.contains(_metadata.file_size << 32 | _metadata.row_index)
         ELSE raise_error(...) END

``deleted`` is a 64-bit RoaringBitmap (``org.roaringbitmap.longlong.Roaring64NavigableMap``:
Spark ships RoaringBitmap; Paimon's vectors are RoaringBitmaps too) of every deleted row's key,
its file's size in the high 32 bits and its position in the low; ``known`` holds the sizes of
the scan's files. Each is a Spark broadcast variable, named by an object literal in the plan:
it reaches each executor once, and the driver makes both with a handful of py4j calls whatever
the number of files.
``_metadata.file_size`` and ``_metadata.row_index`` are constant or generated per batch by
Spark's Parquet reader: no string is built per row, and a lookup reads a bitmap container
that stays in the CPU's cache while a file is read.

The file's size is the key because it is a number Spark has for every row; the planner's size
of each file (its manifest entry) must therefore name it alone. The filter is used only when
every file of the scan is under 2 GiB and no file with deleted rows shares its size with
another file of the scan; a row of a file whose size the planner did not know fails the read
(a manifest that disagrees with its file) rather than keep rows it should drop. Otherwise, or
where the session has no JVM to build the literal in (Spark Connect), the caller anti-joins.
The expression is built through py4j from Catalyst's ``Invoke``, an internal API: a Spark
whose classes differ makes the build fail, and the anti-join is used.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F  # noqa: N812

from lakecore.read.raw_convertible import RawFile

INT_MAX = 2**31 - 1
BITMAP_CLASS = "org.roaringbitmap.longlong.Roaring64NavigableMap"


def usable(files: Sequence[RawFile], positions: Mapping[str, np.ndarray]) -> bool:
    """Whether ``files`` (one scan) can take the filter: sizes and positions fit an ``int``
    and every file with deleted rows is the only one of its size."""
    if any(f.file_size > INT_MAX for f in files):
        return False
    if any(len(p) and int(p.max()) > INT_MAX for p in positions.values()):
        return False
    sizes = Counter(f.file_size for f in files)
    return all(sizes[f.file_size] == 1 for f in files if len(positions.get(f.file_name, ())))


def keep_filter(spark: SparkSession, files: Sequence[RawFile],
                positions: Mapping[str, np.ndarray]) -> Column | None:
    """The filter that keeps the rows no vector deletes, or None when the anti-join must do
    (``usable`` says no, or the session's JVM cannot build it)."""
    if not usable(files, positions):
        return None
    try:
        return _build(spark, files, positions)
    except Exception:  # py4j's errors, a Spark without these classes, Spark Connect
        return None


def _build(spark: SparkSession, files: Sequence[RawFile],
           positions: Mapping[str, np.ndarray]) -> Column:
    from pyroaring import BitMap, BitMap64

    jvm: Any = spark._jvm
    sizes = {f.file_name: f.file_size for f in files}
    keys = np.concatenate([
        (np.uint64(sizes[name]) << np.uint64(32)) | np.asarray(p, dtype=np.uint64)
        for name, p in positions.items() if len(p)])
    # an array.array: pyroaring's fast path (a numpy array goes item by item)
    deleted = jvm.org.roaringbitmap.longlong.Roaring64NavigableMap()
    deleted.deserializePortable(jvm.java.io.DataInputStream(jvm.java.io.ByteArrayInputStream(
        bytearray(BitMap64(array("Q", keys.tobytes())).serialize()))))
    known = jvm.org.roaringbitmap.RoaringBitmap()  # sizes fit an int (``usable``)
    known.deserialize(jvm.java.nio.ByteBuffer.wrap(
        bytearray(BitMap(sorted({f.file_size for f in files})).serialize())))
    exprs = jvm.org.apache.spark.sql.catalyst.expressions
    types = jvm.org.apache.spark.sql.types
    utils = jvm.org.apache.spark.sql.classic.ExpressionUtils

    def object_type(name: str) -> Any:
        return types.ObjectType(jvm.java.lang.Class.forName(name))

    boolean = getattr(types, "BooleanType$").__getattr__("MODULE$")

    seq = jvm.org.apache.spark.api.python.PythonUtils.toSeq

    def invoke(target: Any, method: str, result: Any, args: list[Any]) -> Any:
        # Invoke(target, method, type, arguments, input types, propagateNull,
        #        returnNullable, isDeterministic)
        return exprs.objects.Invoke(target, method, result, seq(args).toList(),
                                    seq([]).toList(), True, False, True)

    def contains(bitmap: Any, bitmap_class: str, key: Column) -> Column:
        # The bitmap travels as a broadcast variable, the literal holds its handle: each
        # executor fetches it once (not with every task), and the plan's text shows
        # "Broadcast(n)", not the bitmap's values (its toString runs to 512 KB)
        handle = spark.sparkContext._jsc.broadcast(bitmap)
        target = exprs.Literal.create(handle, object_type("org.apache.spark.broadcast.Broadcast"))
        value = invoke(target, "value", object_type(bitmap_class), [])
        return Column(utils.column(invoke(value, "contains", boolean,
                                          [utils.expression(key._jc)])))

    size = F.col("_metadata.file_size")
    row = F.shiftleft(size, 32).bitwiseOR(F.col("_metadata.row_index"))
    unknown = F.raise_error(F.concat(
        F.lit("lakecore: a data file's size differs from its manifest entry's, so its "
              "deletion vector cannot be applied: "), F.col("_metadata.file_path")))
    return F.when(contains(known, "org.roaringbitmap.RoaringBitmap", size.cast("int")),
                  ~contains(deleted, BITMAP_CLASS, row)).otherwise(unknown)
