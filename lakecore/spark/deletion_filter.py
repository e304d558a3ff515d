"""Deletion vectors applied inside Spark's own scan: one row filter, no join.

A native scan of deletion-vector files must drop the rows the vectors mark. An anti-join of
the scan with the deleted (file, row index) pairs is correct everywhere but slow: probing a
relation of a million keys costs Spark more than the scan itself (docs/spark-datasource.md,
"Native reads, measured"). Instead each row is tested against its file's vector where it is.

Where the files with deleted rows hold up to ``DENSE_MAX_ROWS`` rows (a bitmap of 8 MiB),
the test is a bit of a dense bitmap, one bit per row of those files, each file's rows from
its ``offset``:

    NOT (words[(offset + _metadata.row_index) >> 6] >>> (offset + _metadata.row_index)) & 1
    with offset = offsets[binarySearch(sizes, _metadata.file_size)]

``words`` and ``offsets`` are array literals (``UnsafeArrayData``: the generated code reads
them in place; the plan's text names them, it does not print them), ``sizes`` the sorted
sizes of those files (a ``long[]`` for ``java.util.Arrays.binarySearch``; a file without
deleted rows is not found, its ``offset`` is null and every row is kept). Per row that is a
binary search whose branches repeat for a whole file, two array reads and a few shifts. The
bitmap's words are shipped with the plan, once per stage.

Beyond that, a sparse structure:

    NOT deleted.contains(_metadata.file_size << 32 | _metadata.row_index)

``deleted`` is a 64-bit RoaringBitmap (``org.roaringbitmap.longlong.Roaring64NavigableMap``:
Spark ships RoaringBitmap; Paimon's vectors are RoaringBitmaps too) of every deleted row's key,
its file's size in the high 32 bits and its position in the low. It is a Spark broadcast
variable, named by an object literal in the plan: it reaches each executor once, and the
driver makes it with a few dozen py4j calls whatever the number of files (``jvm``). Per row
it costs about twice the dense test (docs/spark-datasource.md): a lookup in a ``TreeMap`` of
files and a search in a container.

``_metadata.file_size`` and ``_metadata.row_index`` are constant or generated per batch by
Spark's Parquet reader: no string is built per row.

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
# the dense bitmap's rows at most (its words ride in the plan: 8 MiB)
DENSE_MAX_ROWS = 1 << 26
_CATALYST = "org.apache.spark.sql.catalyst.expressions."


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
        if dense_rows(files, positions) <= DENSE_MAX_ROWS:
            return _dense(spark, files, positions)
        return _build(spark, files, positions)
    except Exception:
        return None


def dense_rows(files: Sequence[RawFile], positions: Mapping[str, np.ndarray]) -> int:
    """The dense bitmap's length: the rows of the files with deleted rows."""
    return sum(f.row_count for f in files if len(positions.get(f.file_name, ())))


def dense_words(files: Sequence[RawFile], positions: Mapping[str, np.ndarray]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The dense bitmap of ``files``' deleted rows: the sorted sizes of the files with deleted
    rows, each one's first bit (``offsets``) and the bitmap's 64-bit ``words`` (bit ``i`` of
    the bitmap is bit ``i % 64`` of word ``i // 64``). A position past its file's rows names
    no row and is left out (it would mark the next file's)."""
    deleted = sorted((f for f in files if len(positions.get(f.file_name, ()))),
                     key=lambda f: f.file_size)
    counts = np.array([f.row_count for f in deleted], dtype=np.int64)
    offsets = np.zeros(len(deleted), dtype=np.int64)
    np.cumsum(counts[:-1], out=offsets[1:])
    bits = np.zeros(-(-int(counts.sum()) // 64) * 64, dtype=np.bool_)
    for f, first in zip(deleted, offsets.tolist(), strict=True):
        p = np.asarray(positions[f.file_name], dtype=np.int64)
        bits[first + p[(p >= 0) & (p < f.row_count)]] = True
    words = np.packbits(bits, bitorder="little").view("<i8")
    sizes = np.array([f.file_size for f in deleted], dtype=np.int64)
    return sizes, offsets, words


def _dense(spark: SparkSession, files: Sequence[RawFile],
           positions: Mapping[str, np.ndarray]) -> Column:
    """The dense filter (module docstring) from Catalyst's expressions, in about thirty py4j
    calls; each array crosses as one byte string."""
    sizes, offsets, words = dense_words(files, positions)
    x = _CATALYST
    long_type = jvm.scala_object(spark, "org.apache.spark.sql.types.LongType")
    int_type = jvm.scala_object(spark, "org.apache.spark.sql.types.IntegerType")
    nil = jvm.scala_object(spark, "scala.collection.immutable.Nil")
    none = jvm.scala_object(spark, "scala.None")
    unsafe = jvm.java_class(spark, x + "UnsafeArrayData")
    start = jvm.java_class(spark, "org.apache.spark.unsafe.Platform").BYTE_ARRAY_OFFSET
    literal = jvm.java_class(spark, x + "Literal")
    constant = jvm.scala_object(spark, x + "Literal").apply  # an int's literal
    utils = jvm.java_class(spark, "org.apache.spark.sql.classic.ExpressionUtils")
    functions = jvm.handles(spark).functions

    def longs(values: np.ndarray) -> Any:  # an UnsafeArrayData of the values, in 1 call
        return unsafe.fromPrimitiveArray(bytearray(values.astype("=i8").tobytes()), start,
                                         len(values), 8)

    def array(values: np.ndarray) -> Any:
        return literal(longs(values), jvm.java_class(
            spark, "org.apache.spark.sql.types.ArrayType")(long_type, False))

    def metadata(field: str) -> Any:
        return utils.expression(functions.expr(f"_metadata.{field}"))

    found = jvm.java_class(spark, x + "objects.StaticInvoke")(
        jvm.java_class(spark, "java.lang.Class").forName("java.util.Arrays"), int_type,
        "binarySearch", _scala_list(
            spark, literal.create(longs(sizes).toLongArray(), _object_type(spark, "[J")),
            metadata("file_size")),
        nil, True, False, True, none)
    item = jvm.java_class(spark, x + "GetArrayItem")  # (array, index, failOnError)
    row = jvm.java_class(spark, x + "Add")(item(array(offsets), found, False),
                                           metadata("row_index"))
    cast = jvm.java_class(spark, x + "Cast")
    word = item(array(words), cast(jvm.java_class(spark, x + "ShiftRight")(
        row, constant(6)), int_type, none), False)
    one = cast(constant(1), long_type, none)  # folded into a bigint literal
    bit = jvm.java_class(spark, x + "BitwiseAnd")(
        jvm.java_class(spark, x + "ShiftRightUnsigned")(word, cast(row, int_type, none)), one)
    # a row of a file without deleted rows: its offset is null, and null <=> 1 is false
    gone = jvm.java_class(spark, x + "EqualNullSafe")(bit, one)
    return Column(utils.column(jvm.java_class(spark, x + "Not")(gone)))


def _scala_list(spark: SparkSession, *items: Any) -> Any:
    """``items`` as a Scala ``List`` (Catalyst's argument lists)."""
    out = jvm.scala_object(spark, "scala.collection.immutable.Nil")
    for item in reversed(items):
        out = getattr(out, "$colon$colon")(item)
    return out


def _object_type(spark: SparkSession, name: str) -> Any:
    """Catalyst's ``ObjectType`` of the JVM class ``name`` (``[J``: a ``long[]``)."""
    return jvm.java_class(spark, "org.apache.spark.sql.types.ObjectType")(
        jvm.java_class(spark, "java.lang.Class").forName(name))


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
    invoke = jvm.java_class(spark, _CATALYST + "objects.Invoke")
    utils = jvm.java_class(spark, "org.apache.spark.sql.classic.ExpressionUtils")
    nil = jvm.scala_object(spark, "scala.collection.immutable.Nil")
    handle = spark.sparkContext._jsc.broadcast(bitmap)
    target = jvm.java_class(spark, _CATALYST + "Literal").create(
        handle, _object_type(spark, "org.apache.spark.broadcast.Broadcast"))
    # Invoke(target, method, type, arguments, input types, propagateNull, returnNullable,
    #        isDeterministic)
    value = invoke(target, "value", _object_type(spark, bitmap_class), nil, nil, True, False,
                   True)
    boolean = jvm.scala_object(spark, "org.apache.spark.sql.types.BooleanType")
    argument = _scala_list(spark, utils.expression(key))
    return utils.column(invoke(value, "contains", boolean, argument, nil, True, False, True))
