# The two commands of the README, and a few more. Everything runs from a
# virtual environment in .venv that `make setup` creates and keeps in step
# with pyproject.toml.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: setup system-deps kafka-jars test test-spark-newest demo lint layers bench clean

setup: $(VENV)/.installed

# The compiled Avro reader (native/) is built by the same install: a change to its source rebuilds it.
$(VENV)/.installed: pyproject.toml native/Cargo.toml native/Cargo.lock $(wildcard native/src/*.rs)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
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

lint: setup
	$(BIN)/ruff check .

# The import-linter contracts (pyproject.toml). import-linter walks folders, and the package maps
# schemas/, producers/ and consumers/ under lineagewire, so the check runs on a copy laid out as installed.
layers: setup
	rm -rf build/layers && mkdir -p build/layers
	cp -r lineagewire build/layers/ && for d in schemas producers consumers; do cp -r $$d build/layers/lineagewire/$$d; done
	cd build/layers && PYTHONPATH=$$PWD $(CURDIR)/$(BIN)/lint-imports --config $(CURDIR)/pyproject.toml --no-cache

# Sets everything up, then runs every test (the session starts its own broker), then the Spark
# tests again on the newest PySpark 4.x (the main venv has the oldest): a failure of either fails.
test: system-deps kafka-jars lint layers
	$(BIN)/pytest
	$(MAKE) --no-print-directory test-spark-newest

# The emitter and lineage tests on the newest PySpark that `pyspark>=4.0,<5` admits, in a second
# virtualenv, .venv-spark-newest (made once, again when pyproject.toml changes; see the script).
test-spark-newest: kafka-jars
	PYTHON=$(PYTHON) bash tests/spark_newest.sh

# Sets everything up, then runs the main job: a real PySpark job whose events
# flow through Kafka into the consumers' outputs.
demo: kafka-jars
	$(BIN)/lineagewire demo

bench: kafka-jars
	for b in codec roundtrip emitter lineage consumers scheduler scheduler_ha datahub alerting archive registry ui; do \
	  test -f bench/$$b.py && $(BIN)/python -m bench.$$b || exit 1; done

clean:
	rm -rf $(VENV) .venv-spark-newest build *.egg-info .pytest_cache .ruff_cache .mypy_cache native/target schemas/*.so
