# The two commands of the README, and a few more. Everything runs from a
# virtual environment in .venv that `make setup` creates and keeps in step
# with pyproject.toml.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: setup system-deps kafka-jars test test-main test-services test-producers test-spark-lines test-upstream test-ingest-producers test-fast test-spark-newest test-spark-35 demo lint layers installed-layout bench settings-doc clean

setup: $(VENV)/.installed

# The main venv tests the oldest PySpark 4.x (its spark-sql-kafka resolves from Maven Central) with the
# delta-spark built for it; tests/spark_line.sh tests the newest 4.x and 3.5 in venvs of their own.
OLDEST_SPARK := 'pyspark==4.0.0' 'delta-spark>=4.0,<4.1'

# The compiled Avro reader (native/) is built by the same install: a change to its source rebuilds it.
$(VENV)/.installed: Makefile pyproject.toml native/Cargo.toml native/Cargo.lock $(wildcard native/src/*.rs)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]' $(OLDEST_SPARK)
	# An editable install leaves out the wheel's start-up hook (setup.py): put it where the wheel puts it.
	$(BIN)/python -c "import shutil, sysconfig; shutil.copy('producers/spark/_boot/lineagewire-activate.pth', sysconfig.get_paths()['purelib'])"
	touch $@

# Debian's PostgreSQL, Prometheus Alertmanager and Chromium (the UI's browser tests), which the tests start in temporary folders on
# 127.0.0.1. Installed only where missing and where apt-get can run (root); elsewhere those tests
# skip and say why.
system-deps:
	@missing=""; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v prometheus-alertmanager >/dev/null 2>&1 || missing="$$missing prometheus-alertmanager"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing$$missing from Debian's packages"; \
	  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else \
	  echo "not installing$$missing (needs root and apt-get); their tests will skip"; \
	fi

# Apache Kafka's jars from Maven Central into ~/.lineagewire (once).
kafka-jars: setup
	$(BIN)/lineagewire kafka fetch

# ruff, then mypy (pyproject.toml's [tool.mypy]) on the package laid out as installed (see layers).
lint: setup installed-layout
	$(BIN)/ruff check .
	cd build/layers && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml --cache-dir $(CURDIR)/.mypy_cache -p lineagewire

# The import-linter contracts (pyproject.toml).
layers: setup installed-layout
	cd build/layers && PYTHONPATH=$$PWD $(CURDIR)/$(BIN)/lint-imports --config $(CURDIR)/pyproject.toml --no-cache

# import-linter and mypy walk folders, and the package maps schemas/, producers/ and consumers/ under
# lineagewire, so they check a copy laid out as installed.
installed-layout:
	rm -rf build/layers && mkdir -p build/layers
	cp -r lineagewire build/layers/ && for d in schemas producers consumers; do cp -r $$d build/layers/lineagewire/$$d; done

# Sets everything up, then runs every test (each pytest session starts its own broker) in five runs side by side:
# the services' tests, the producers' (emitter, lineage, scheduler, refresh runner), the Spark tests again on
# PySpark 3.5 and on the newest PySpark 4.x (the main venv has the oldest), the comparison tests on the
# newest openlineage-python and acryl-datahub (test-upstream: about a minute, mostly pip), and the OpenLineage
# receiver with the real producers (test-ingest-producers). A failure of any fails.
# The cluster tests (YARN, standalone: four minutes) run once, on 3.5, the Spark of EMR, Dataproc and Glue.
# The runs mostly wait (on brokers, JVMs, servers): one after another they took 35 minutes here, 14 of them CPU.
# Each run's output is printed whole when it ends.
test: system-deps kafka-jars lint layers
	@echo "make test: five runs side by side (services, producers, the other Spark lines, upstream drift,"
	@echo "the real OpenLineage producers); each prints its output when it ends"
	$(MAKE) --no-print-directory -j5 --output-sync=target test-services test-producers test-spark-lines test-upstream \
	  test-ingest-producers

# The main venv's tests, in two sessions (`make -j2 test-main` runs them side by side).
test-main: test-services test-producers

# The real OpenLineage producers' tests (marker producers) run in test-ingest-producers, where their venvs are.
test-services: kafka-jars
	$(BIN)/pytest -p no:cacheprovider -m "not cluster and not producers" --ignore=tests/producers

test-producers: kafka-jars
	$(BIN)/pytest -p no:cacheprovider -m "not cluster" tests/producers

# Both venvs first (their installs build the worktree, which the main run's deploy tests also do), then the tests.
test-spark-lines: kafka-jars
	PYTHON=$(PYTHON) bash tests/spark_line.sh 3.5 --setup-only
	PYTHON=$(PYTHON) bash tests/spark_line.sh newest --setup-only
	$(MAKE) --no-print-directory test-spark-35
	$(MAKE) --no-print-directory test-spark-newest

# The comparison tests of the OpenLineage and DataHub fast paths (pytest -m upstream) on the newest
# openlineage-python and acryl-datahub on the index, in .venv-upstream (see the script); it says which versions
# it tested, and skips in one line, succeeding, when the index cannot be reached. It needs no main venv (whose
# versions it names as those installed today when there is one).
test-upstream:
	PYTHON=$(PYTHON) bash tests/upstream.sh

# The OpenLineage receiver (issue 42) end to end with the real producers: openlineage-python (HTTP and its Kafka
# transport) and the openlineage-spark jar from the main venv, dbt-ol and Airflow 3 from venvs of their own, made
# once and kept outside the work tree (~/.cache/lineagewire/venvs; see the script), so a fresh clone reuses them.
test-ingest-producers: kafka-jars
	PYTHON=$(PYTHON) bash tests/ingest_producers.sh

# The edit loop: every test that needs no SparkSession, browser or PostgreSQL and is not marked slow (the
# session still starts its own broker). `make test` is what CI runs.
test-fast: kafka-jars lint layers
	$(BIN)/pytest -m "not spark and not slow and not browser and not postgres"

# The emitter and lineage tests on the newest PySpark 4.x, in a second
# virtualenv, .venv-spark-newest (made once, again when pyproject.toml changes; see the script).
test-spark-newest: kafka-jars
	PYTHON=$(PYTHON) bash tests/spark_line.sh newest

# Every Spark test of the emitter, its lineage, the refresh runner and the services' Spark end-to-end tests on
# PySpark 3.5 (Scala 2.12), in .venv-spark35, with the 3.5 builds of Delta, Iceberg, Kafka and Connect.
test-spark-35: kafka-jars
	PYTHON=$(PYTHON) bash tests/spark_line.sh 3.5

# Sets everything up, then runs the main job: a real PySpark job whose events
# flow through Kafka into the consumers' outputs.
# `make demo PYSPARK=3.5` runs the same demo on PySpark 3.5, from .venv-spark35 (made as the 3.5 tests make it).
PYSPARK ?=
demo: kafka-jars
ifeq ($(PYSPARK),3.5)
	PYTHON=$(PYTHON) bash tests/spark_line.sh 3.5 --setup-only
	.venv-spark35/bin/lineagewire demo
else ifeq ($(PYSPARK),)
	$(BIN)/lineagewire demo
else
	@echo "PYSPARK=$(PYSPARK): expected 3.5 (or nothing, for the main venv's PySpark 4)" >&2; exit 2
endif

bench: kafka-jars
	for b in codec roundtrip activation emitter lineage delivery consumers scheduler scheduler_ha datahub alerting archive registry impact ui ingest; do \
	  test -f bench/$$b.py && $(BIN)/python -m bench.$$b || exit 1; done

# docs/settings.md from the settings models and the commands' options (tests/core/test_settings_doc.py checks it).
settings-doc: setup
	$(BIN)/python -m lineagewire.settings_doc docs/settings.md

clean:
	rm -rf $(VENV) .venv-spark-newest .venv-spark35 .venv-upstream build *.egg-info .pytest_cache .ruff_cache .mypy_cache native/target schemas/*.so
