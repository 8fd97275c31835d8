# The two commands of the README, and a few more. Everything runs from a
# virtual environment in .venv that `make setup` creates and keeps in step
# with pyproject.toml.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: setup kafka-jars test demo lint bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

# Apache Kafka's jars from Maven Central into ~/.lineagewire (once).
kafka-jars: setup
	$(BIN)/lineagewire kafka fetch

lint: setup
	$(BIN)/ruff check .

# Sets everything up, then runs every test (the session starts its own broker).
test: kafka-jars lint
	$(BIN)/pytest

# Sets everything up, then runs the main job: a real PySpark job whose events
# flow through Kafka into the consumers' outputs.
demo: kafka-jars
	$(BIN)/lineagewire demo

bench: kafka-jars
	for b in codec roundtrip emitter lineage consumers scheduler; do \
	  test -f bench/$$b.py && $(BIN)/python -m bench.$$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .mypy_cache
