"""The table-health view: a FastAPI app in the Airflow UI's Browse menu."""
