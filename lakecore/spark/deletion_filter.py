"""Deletion vectors applied inside Spark's own scan: one row filter, no join.

A native scan of deletion-vector files must drop the rows the vectors mark. An anti-join of
the scan with the deleted (file, row index) pairs is correct everywhere but slow: probing a
relation of a million keys costs Spark more than the scan itself (docs/spark-datasource.md,
"Native reads, measured"). Instead each row is tested against its file's vector where it is:

    NOT deleted.contains(_metadata.file_size << 32 | _metadata.row_index)

``deleted`` is a 64-bit RoaringBitmap (``org.roaringbitmap.longlong.Roaring64NavigableMap``:
Spark ships RoaringBitmap; Paimon's vectors are RoaringBitmaps too) of every deleted row's key,
its file's size in the high 32 bits and its position in the low. It is a Spark broadcast
variable, named by an object literal in the plan: it reaches each executor once, and the
driver makes it with a few dozen py4j calls whatever the number of files (``jvm``).
``_metadata.file_size`` and ``_metadata.row_index`` are constant or generated per batch by
Spark's Parquet reader: no string is built per row, and a lookup reads a bitmap container
that stays in the CPU's cache while a file is read.

The file's size is the key because it is a number Spark has for every row; the planner's size
of each file (its manifest entry) must therefore name it alone, and be the file's real size.
The filter is used only when every file of the scan is under 2 GiB and no file with deleted
rows shares its size with another file of the scan. That the sizes are real is checked on the
driver, once: Spark's listing of the scan's files (which it makes when the scan is created)
must add up to the manifests' sizes, else the read fails with ``CorruptFileError`` naming the
file (a manifest that disagrees with its file) rather than keep rows it should drop. (A check
in every row, ``CASE WHEN`` the size is known, cost the scan 5-10 %.) Otherwise, or where the
session has no JVM to build the literal in (Spark Connect), the caller anti-joins. The
expression is built through py4j from Catalyst's ``Invoke``, an internal API, and the listing
is read from the scan's ``FileIndex``: a Spark whose classes differ makes either fail, and the
anti-join is used.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession

from lakecore.errors import CorruptFileError
from lakecore.read.raw_convertible import RawFile
from lakecore.spark import jvm

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


def keep_filter(spark: SparkSession, scan: DataFrame, files: Sequence[RawFile],
                positions: Mapping[str, np.ndarray]) -> Column | None:
    """The filter that keeps the rows of ``scan`` (the Spark scan of ``files``) no vector
    deletes, or None when the anti-join must do (``usable`` says no, or the session's JVM
    cannot build it). ``CorruptFileError`` when a file's size is not its manifest entry's."""
    if not usable(files, positions):
        return None
    try:
        index = scan._jdf.queryExecution().analyzed().relation().location()
        listed = int(index.sizeInBytes())
    except Exception:  # py4j's errors, a Spark without these classes, Spark Connect
        return None
    if listed != sum(f.file_size for f in files):
        _raise_for_size(index, files)
    try:
        return _build(spark, files, positions)
    except Exception:
        return None


def _raise_for_size(index: Any, files: Sequence[RawFile]) -> None:
    """Name the file whose listed size differs from its manifest entry's (file names are
    unique in a table)."""
    expected = {f.file_name: f for f in files}
    statuses = index.allFiles()
    for i in range(statuses.length()):
        status = statuses.apply(i)
        name = status.getPath().getName()
        f = expected.get(name)
        if f is not None and int(status.getLen()) != f.file_size:
            raise CorruptFileError(f.path, (
                f"is {int(status.getLen())} bytes, which differs from its manifest entry "
                f"({f.file_size} bytes): its deletion vector cannot be applied"))
    raise CorruptFileError(files[0].path, (
        "the scan's files do not add up to their manifest entries' sizes: deletion vectors "
        "cannot be applied"))


def _build(spark: SparkSession, files: Sequence[RawFile],
           positions: Mapping[str, np.ndarray]) -> Column:
    """The filter, in a few dozen py4j calls (``jvm``: classes named, not looked up)."""
    from pyroaring import BitMap64

    sizes = {f.file_name: f.file_size for f in files}
    keys = np.concatenate([
        (np.uint64(sizes[name]) << np.uint64(32)) | np.asarray(p, dtype=np.uint64)
        for name, p in positions.items() if len(p)])
    # an array.array: pyroaring's fast path (a numpy array goes item by item)
    deleted = jvm.java_class(spark, BITMAP_CLASS)()
    deleted.deserializePortable(jvm.java_class(spark, "java.io.DataInputStream")(
        jvm.java_class(spark, "java.io.ByteArrayInputStream")(
            bytearray(BitMap64(array("Q", keys.tobytes())).serialize()))))
    functions = jvm.handles(spark).functions
    row = functions.expr("shiftleft(_metadata.file_size, 32) | _metadata.row_index")
    return Column(getattr(functions, "not")(_contains(spark, deleted, BITMAP_CLASS, row)))


def _contains(spark: SparkSession, bitmap: Any, bitmap_class: str, key: Any) -> Any:
    """The JVM column ``bitmap.contains(key)`` (``key`` a JVM column). The bitmap travels as
    a broadcast variable, the literal holds its handle: each executor fetches it once (not
    with every task), and the plan's text shows "Broadcast(n)", not the bitmap's values (its
    toString runs to 512 KB)."""
    catalyst = "org.apache.spark.sql.catalyst.expressions."
    invoke = jvm.java_class(spark, catalyst + "objects.Invoke")
    utils = jvm.java_class(spark, "org.apache.spark.sql.classic.ExpressionUtils")
    nil = jvm.scala_object(spark, "scala.collection.immutable.Nil")

    def object_type(name: str) -> Any:
        return jvm.java_class(spark, "org.apache.spark.sql.types.ObjectType")(
            jvm.java_class(spark, "java.lang.Class").forName(name))

    handle = spark.sparkContext._jsc.broadcast(bitmap)
    target = jvm.java_class(spark, catalyst + "Literal").create(
        handle, object_type("org.apache.spark.broadcast.Broadcast"))
    # Invoke(target, method, type, arguments, input types, propagateNull, returnNullable,
    #        isDeterministic)
    value = invoke(target, "value", object_type(bitmap_class), nil, nil, True, False, True)
    boolean = jvm.scala_object(spark, "org.apache.spark.sql.types.BooleanType")
    argument = getattr(nil, "$colon$colon")(utils.expression(key))  # a one-element List
    return utils.column(invoke(value, "contains", boolean, argument, nil, True, False, True))
