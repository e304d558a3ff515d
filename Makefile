# The README's two commands: `make demo` and `make test`. Both bootstrap .venv from scratch.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3.11
VENV := .venv
PAIMON_VENV := .venv-paimon
MOTO_VENV := .venv-moto
PY := $(VENV)/bin/python
# pip on this machine kind warns about unusable extra index locations; keep the log readable.
QUIET_PIP := grep -v '^WARNING: Location' || true
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo airflow test lint unit bench clean venv paimon-venv moto-venv browser soak services java-oracle

venv: $(VENV)/.installed
paimon-venv: $(PAIMON_VENV)/.installed
moto-venv: $(MOTO_VENV)/.installed

$(VENV)/.installed: requirements.txt constraints.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -c constraints.txt -r requirements.txt 2>&1 | $(QUIET_PIP)
	@# the spark provider's pyspark-client overwrites pyspark's Python files: put 4.3.0 back
	$(VENV)/bin/pip install -q --no-deps --force-reinstall pyspark==4.3.0 2>&1 | $(QUIET_PIP)
	$(VENV)/bin/pip install -q --no-deps -e . 2>&1 | $(QUIET_PIP)
	$(PY) -c "import pyspark, pyarrow, lakecore; assert pyspark.__version__ == '4.3.0', pyspark.__version__"
	touch $@

# pypaimon pins pyarrow<20, so it gets its own venv; tests drive it through a subprocess.
# pypaimon-rust is its optional native core: the benchmarks' second pypaimon baseline.
$(PAIMON_VENV)/.installed:
	$(PYTHON) -m venv $(PAIMON_VENV)
	$(PAIMON_VENV)/bin/pip install -q pypaimon==2.1.0 pypaimon-rust==0.4.0 2>&1 | $(QUIET_PIP)
	$(PAIMON_VENV)/bin/python -c "import pypaimon"
	touch $@

# The S3 server of tests/s3 and `bench --s3`: moto (5.2.5: earlier ones break pyarrow's multipart
# writes), started by the tests themselves on 127.0.0.1 (tests/s3/moto_launcher.py). Its own
# venv: moto needs python-dateutil<3, Airflow's constraints pin 4.0.
$(MOTO_VENV)/.installed:
	$(PYTHON) -m venv $(MOTO_VENV)
	$(MOTO_VENV)/bin/pip install -q "moto[server]==5.2.5" 2>&1 | $(QUIET_PIP)
	$(MOTO_VENV)/bin/python -c "import moto.server; assert moto.__version__ == '5.2.5'"
	touch $@

# ruff; the layer contracts of docs/architecture.md (import-linter); the type checker over lakecore/
lint: venv
	$(VENV)/bin/ruff check lakecore tests bench dags plugins
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/mypy

# The Airflow UI test drives Debian's chromium through Playwright (no browser download).
# Idempotent: installs only when missing, and only as root (elsewhere the test skips).
browser:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null; \
	  else echo "chromium missing: sudo apt-get install -y chromium (the UI test skips)"; fi; \
	fi

# PostgreSQL and MariaDB for the database tests (lock, Airflow on PostgreSQL, concurrent
# commits): installed from Debian packages when missing, started on 127.0.0.1, idempotent.
# Without them those tests skip, naming this target; .ci/run runs it and lets none skip.
services:
	@bash .ci/services >/dev/null

# Java Paimon, the reference implementation, as a test-only JVM driver (tests/javapaimon): one
# runnable jar built by Maven (Java 17); the first build resolves Paimon and Hadoop's client
# jars into ~/.m2 (~130 MB), later ones are offline. Rebuilt only when its sources change.
JAVA_ORACLE := tests/javapaimon/target/paimon-oracle.jar
java-oracle: $(JAVA_ORACLE)

$(JAVA_ORACLE): tests/javapaimon/pom.xml $(shell find tests/javapaimon/src -name '*.java')
	mvn -q -B -f tests/javapaimon/pom.xml package -DskipTests
	@test -f $@

test: venv paimon-venv moto-venv lint browser dist/lakecore.zip $(JAVA_ORACLE)
	$(PY) -m pytest -q --durations=25

# The real pipeline through Airflow (lake_airflow.localrun) on its embedded default: SQLite metadata DB,
# local[2] Spark, everything under .demo/ (recreated on every run).
demo: venv dist/lakecore.zip
	PYTHONPATH=plugins $(PY) -m lake_airflow.demo --root .demo

# The demo's Airflow to stay in (after `make demo`): api-server, scheduler, dag-processor and
# triggerer on .demo's SQLite DB and warehouse, on 127.0.0.1:$(AIRFLOW_PORT); Ctrl-C stops it.
AIRFLOW_PORT ?= 8080
airflow: venv dist/lakecore.zip
	PYTHONPATH=plugins $(PY) -m lake_airflow.local_airflow --root .demo --port $(AIRFLOW_PORT)

# The randomized model tests with the long profile: 13x the fast (CI) profile's examples,
# freshly random each run (a failure prints its seed / reproduce blob), plus the crash matrix
# at every occurrence of every step (LAKECORE_CRASH_MATRIX=full, 178 kill points), plus Java
# Paimon and lakecore on one table: 10 random seeds x 120 steps per table kind (one history;
# a failure names LAKECORE_ONE_HISTORY_SEED) and 40 commits per writer on one lock.
soak: venv paimon-venv $(JAVA_ORACLE)
	LAKECORE_MODEL_PROFILE=soak LAKECORE_CRASH_MATRIX=full \
	  $(PY) -m pytest -q --timeout=7200 tests/model tests/faults \
	  tests/javapaimon/test_one_history.py tests/javapaimon/test_one_lock.py

# Every benchmark, then the summary at the top of bench/RESULTS.md (bench/run_all.py).
# `make bench BENCH_ARGS=--quick`: a smoke test at small sizes (RESULTS.md is left alone);
# BENCH_ARGS="--only scaling": one benchmark. pypaimon's optional Rust core (pypaimon-rust) is
# the second pypaimon baseline; a .venv-paimon made before it was in its recipe gets it here.
bench: venv paimon-venv moto-venv $(JAVA_ORACLE)
	@# (if that install fails, the benchmarks run without pypaimon+rust and say why)
	@$(PAIMON_VENV)/bin/python -c "import pypaimon_rust" 2>/dev/null \
	  || $(PAIMON_VENV)/bin/pip install -q pypaimon-rust==0.4.0 2>&1 | $(QUIET_PIP)
	$(PY) bench/run_all.py $(BENCH_ARGS)

clean:
	rm -rf .demo .pytest_cache .ruff_cache

# --- Spark jobs: the --py-files artifact ---------------------------------------------------
# dist/lakecore.zip is the lakecore package alone, for
#   spark-submit --py-files dist/lakecore.zip lakecore/spark/jobs/ingest.py ...
# (the executors' Python needs lakecore's dependencies from requirements.txt installed).
LAKECORE_SOURCES := $(shell find lakecore -name '*.py' -not -path '*/__pycache__/*')

.PHONY: spark-zip
spark-zip: dist/lakecore.zip

dist/lakecore.zip: $(LAKECORE_SOURCES)
	$(PYTHON) -m lakecore.spark.package $@
