"""``LakecoreDataSource``: a lakecore table as a PySpark Python data source named
``lakecore``.

Spark instantiates the data source in Python planner workers, which have no SparkSession:
the ``spark.lakecore.*`` conf fallbacks, whether filter pushdown is on and Spark's file-split
sizing are captured when
``lakecore.spark.register(spark)`` registers a subclass carrying them (``registered_class``).
Schema, reader and writer each parse the options once (``SourceOptions``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from lakecore.spark.datasource.batch_read import SplitSizing
from lakecore.spark.datasource.options import SourceOptions, open_table

if TYPE_CHECKING:
    from lakecore.table import FileStoreTable

NAME = "lakecore"


def table_spark_schema(table: FileStoreTable, opts: SourceOptions) -> StructType:
    """The DataFrame schema of a read: the ``columns`` projection, and for an incremental read
    (``incremental-between``) the row kind first, as Paimon's ``rowkind``."""
    from lakecore.spark.datasource.batch_read import read_spark_schema

    return read_spark_schema(table, opts)


class LakecoreDataSource(DataSource):
    """``spark.read.format("lakecore").load("db.t")`` / ``df.write.format("lakecore")
    .save("db.t")`` / ``readStream`` / ``writeStream`` over a lakecore table."""

    # Set on the class ``register`` builds (picklable by value): the session's
    # ``spark.lakecore.*`` conf and whether ``spark.sql.python.filterPushdown.enabled`` was on.
    conf: ClassVar[Mapping[str, str]] = {}
    filter_pushdown: ClassVar[bool] = False
    sizing: ClassVar[SplitSizing] = SplitSizing()

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options)  # type: ignore[arg-type]
        self._opts: SourceOptions | None = None

    @classmethod
    def name(cls) -> str:
        return NAME

    @property
    def opts(self) -> SourceOptions:
        if self._opts is None:
            self._opts = SourceOptions.parse(self.options, self.conf)
        return self._opts

    def schema(self) -> StructType:
        catalog, table = open_table(self.opts)
        try:
            return table_spark_schema(table, self.opts)
        finally:
            catalog.close()

    def reader(self, schema: StructType) -> DataSourceReader:
        from lakecore.spark.datasource.batch_read import make_reader

        return make_reader(self.opts, schema, self.filter_pushdown, self.sizing)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from lakecore.spark.datasource.batch_write import LakecoreWriter

        return LakecoreWriter(self.opts, schema, overwrite)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        from lakecore.spark.datasource.stream_read import make_stream_reader

        return make_stream_reader(self.opts, schema)

    def streamWriter(  # noqa: N802
        self, schema: StructType, overwrite: bool
    ) -> DataSourceStreamWriter:
        from lakecore.spark.datasource.stream_write import make_stream_writer

        return make_stream_writer(self.opts, schema, overwrite)


def registered_class(conf: Mapping[str, str], filter_pushdown: bool,
                     sizing: SplitSizing | None = None) -> type[Any]:
    """A subclass of ``LakecoreDataSource`` carrying the session's conf (Spark pickles the
    class by value when it registers it, class attributes included)."""
    attrs = {"conf": dict(conf), "filter_pushdown": filter_pushdown,
             "sizing": sizing or SplitSizing(),
             "__module__": __name__, "__doc__": LakecoreDataSource.__doc__,
             "__qualname__": "registered_class.<locals>.LakecoreDataSource"}
    return type("LakecoreDataSource", (LakecoreDataSource,), attrs)
