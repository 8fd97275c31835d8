#!/usr/bin/env bash
# The emitter and lineage tests on the newest PySpark 4.x, next to the main venv's pinned oldest (issue 14, item 6).
#
#   tests/spark_newest.sh [pytest args...]     (default: tests/producers/spark -m "spark and not slow"; make test runs it)
#
# Creates (once, and again when pyproject.toml changes) a second virtualenv, .venv-spark-newest, from
# pyproject.toml: the `connect` extra (which holds `spark`) and the `dev` tools without the dev pin of PySpark, plus the newest
# PySpark that `pyspark>=4.0,<5` admits. pip's own cache is reused, so a re-run downloads nothing
# (without a cache, on a clean clone: ~2.5 min, ~450 MB, most of it PySpark).
# Tests whose connector jars Maven Central does not serve for that Spark skip with the reason.
# Overrides: PYTHON (the interpreter for the venv), SPARK_NEWEST_VENV, SPARK_NEWEST_PYSPARK (a pip spec).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${SPARK_NEWEST_VENV:-.venv-spark-newest}"
# [sql]: pandas and pyarrow, which 4.3 uses for Python UDFs by default (Arrow-optimized).
SPEC="${SPARK_NEWEST_PYSPARK:-pyspark[sql]>=4.0,<5}"
# pandas<3: PySpark 4.3 warns (FutureWarning, an error under pytest here) that it does not fully support pandas 3.
PINS="pandas<3"

# What the venv was made from: a venv made otherwise (or half made, by a run that stopped) is made anew.
STAMP="$SPEC $PINS; no delta-spark"

if [ ! -f "$VENV/.installed" ] || [ pyproject.toml -nt "$VENV/.installed" ] \
   || [ "$(cat "$VENV/.installed")" != "$STAMP" ]; then
  # From scratch: pip only adds, so a package an older recipe installed would stay.
  rm -rf -- "${VENV:?}"
  "$PYTHON" -m venv "$VENV"
  # The dev extra pins the oldest PySpark and pulls every service's extras: take its tools only.
  # delta-spark is left out: its 4.0 build is for Spark 4.0 only, so the Delta tests skip here.
  mapfile -t tools < <("$VENV/bin/python" - <<'EOF'
import re, tomllib
dev = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["dev"]
for req in dev:
    name = re.split(r"[\[<>=!~ ;]", req, maxsplit=1)[0].lower()
    if name not in ("lineagewire", "pyspark", "delta-spark"):
        print(req)
EOF
  )
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e '.[connect]' "${tools[@]}" "$SPEC" $PINS
  echo "$STAMP" > "$VENV/.installed"
fi

echo "PySpark $("$VENV/bin/python" -c 'import pyspark; print(pyspark.__version__)') in $VENV"
case " $* " in
  *" tests/"*) ;;                                       # the caller named what to run
  *) set -- tests/producers/spark -m "spark and not slow" "$@" ;;
esac
exec "$VENV/bin/python" -m pytest -p no:cacheprovider "$@"
