"""spark-submit entry points: ``spark-submit lakecore/spark/jobs/ingest.py ...`` or
``python -m lakecore.spark.jobs.ingest ...`` (likewise ``compact`` and ``maintain``)."""
