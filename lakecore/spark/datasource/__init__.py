"""lakecore as a PySpark Python data source named ``lakecore``: batch read and write
(``source``, ``batch_read``, ``batch_write``), Structured Streaming (``stream_read``,
``stream_write``) and temporary views for ``spark.sql`` (``sql``). ``options`` parses the
options they share. docs/spark-datasource.md describes the design and Spark's limits."""
