"""lake_airflow: the Airflow side of lakecore.

Turns the tables file (``dags/lakecore_tables.yaml``) and DAG Params into spark-submit
arguments for lakecore's Spark jobs, resolves the catalog lock's database from the
``lakecore_lock`` connection, and serves the table-health page. Importing it (as every DAG
file does) loads neither lakecore nor pyspark: those are imported inside task code only.
"""
