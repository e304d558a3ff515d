# One image for every service of docker-compose.yaml: Airflow 3 (api-server, scheduler,
# dag-processor, triggerer, init) and the Spark master and worker. One image, so the Spark
# executors run the same Python, pyarrow and lakecore as the Airflow worker that submits.
FROM python:3.11-slim-bookworm

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    AIRFLOW_HOME=/opt/airflow \
    JAVA_HOME=/usr/lib/jvm/default-java

# Java 17 (Debian bookworm's default JRE) for Spark; tini reaps spark-submit's children.
RUN apt-get update \
 && apt-get install -y --no-install-recommends default-jre-headless procps curl tini \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/lakecore
COPY requirements.txt constraints.txt pyproject.toml ./
# The spark provider's pyspark-client overwrites pyspark's Python files: put 4.3.0 back.
RUN pip install --no-cache-dir -c constraints.txt -r requirements.txt \
 && pip install --no-cache-dir --no-deps --force-reinstall pyspark==4.3.0 \
 && python -c "import pyspark; assert pyspark.__version__ == '4.3.0', pyspark.__version__"

# lakecore: installed for the Airflow worker and the Spark driver/executors, and zipped for
# spark-submit --py-files (LAKECORE_PY_FILES) as the Makefile's dist/lakecore.zip target does.
COPY lakecore ./lakecore
RUN pip install --no-cache-dir --no-deps . \
 && python -m lakecore.spark.package /opt/lakecore/dist/lakecore.zip

ENV LAKECORE_PY_FILES=/opt/lakecore/dist/lakecore.zip \
    LAKECORE_PYSPARK_PYTHON=/usr/local/bin/python \
    PYSPARK_PYTHON=/usr/local/bin/python

RUN useradd --uid 50000 --create-home airflow \
 && mkdir -p /opt/airflow/dags /opt/airflow/plugins /opt/airflow/logs /opt/airflow/auth \
             /opt/lakecore/warehouse /opt/lakecore/landing \
 && chown -R airflow /opt/airflow /opt/lakecore
USER airflow
WORKDIR /opt/airflow
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["airflow", "version"]
