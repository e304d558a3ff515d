"""Lake tables in ``spark.sql``: ``register_tables`` creates one temporary view per table of a
warehouse, named ``db.t`` as one part (Spark's temporary views are single-part names), so a
query quotes it: ``SELECT * FROM `shop.orders```.

By default a view is ``read_table``'s DataFrame: the files that need no merge are Spark's own
Parquet scans, the rest lakecore's read. Like a view of ``spark.read.parquet``, it holds the
files listed when it was made: the snapshot latest at registration; call ``register_tables``
again to see later commits. With ``native=False`` a view is a ``lakecore`` data source read,
which plans the table's latest snapshot again in every query (the schema is the one at
registration), at the Python data source's speed.
A single table can also be mapped in SQL alone (a data source view):
``CREATE TEMPORARY VIEW orders USING lakecore OPTIONS (path 'shop.orders', warehouse '...')``.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from lakecore.spark.datasource.source import NAME
from lakecore.spark.table_ref import normalize_warehouse, open_catalog


def view_name(identifier: str) -> str:
    """The temporary view of table ``db.t``: ``db.t`` as a single (backquoted) name part."""
    return f"`{identifier.replace('`', '``')}`"


def register_tables(
    spark: SparkSession, warehouse: str, native: bool = True, **catalog_options: str
) -> list[str]:
    """A temporary view per table of ``warehouse`` (registering the data source first);
    returns the table identifiers, each queryable as ``SELECT ... FROM `db.t```. ``native``:
    module docstring."""
    from lakecore.spark import register
    from lakecore.spark.read import read_table

    register(spark)
    warehouse = normalize_warehouse(warehouse)
    catalog = open_catalog(warehouse, catalog_options)
    try:
        identifiers = [f"{db}.{t}" for db in catalog.list_databases()
                       for t in catalog.list_tables(db)]
    finally:
        catalog.close()
    for identifier in identifiers:
        if native:
            read_table(spark, warehouse, identifier, catalog_options=catalog_options
                       ).createOrReplaceTempView(view_name(identifier))
            continue
        (spark.read.format(NAME).option("warehouse", warehouse).options(**catalog_options)
         .load(identifier).createOrReplaceTempView(view_name(identifier)))
    return identifiers
