#!/usr/bin/env bash
# make test-ingest-producers: the OpenLineage receiver (`lineagewire ingest openlineage`, issue 42) end to end
# with the real producers, each where it runs in real life:
#
#   openlineage-python's client (HTTP and its Kafka transport)  the main venv (it is one of our dependencies)
#   the openlineage-spark jar on a PySpark job                    the main venv's PySpark (jar from Maven Central)
#   dbt-ol (openlineage-dbt) with dbt-duckdb                      a venv of its own: dbt pins clash with ours
#   Airflow 3 with its OpenLineage provider                       a venv of its own: Airflow's constraints do
#
#   tests/ingest_producers.sh [--setup-only] [pytest args...]
#
# The dbt and Airflow venvs are made once and kept OUTSIDE the work tree, in
# ${XDG_CACHE_HOME:-~/.cache}/lineagewire/venvs/<name>-<hash>, the hash being that of the venv's requirements
# (tests/ingest/producers/requirements/<name>.txt), this script and the interpreter's version: CI's fresh clone
# on this machine reuses them, and a change to any of those makes a new one (venvs unused for 14 days are
# removed). uv (the main venv's, from its cache) installs them when it is there, else pip. From an empty cache
# a fresh machine takes about a minute for dbt and two for Airflow (uv's cache warm: seconds each).
# Airflow is installed with Airflow's constraints for its newest 3.x when they can be fetched, else plain.
#
# The tests run in the main venv (pytest -m producers tests/ingest/producers), which is given the venvs'
# paths in LINEAGEWIRE_TEST_DBT_VENV and LINEAGEWIRE_TEST_AIRFLOW_VENV; a test whose venv is not given skips
# and says so. Overrides: PYTHON (the venvs' interpreter).
set -euo pipefail
shopt -s inherit_errexit  # a failed install inside $(venv ...) stops the script
cd "$(dirname "$0")/.."
MAIN=.venv/bin/python
if [ ! -x "$MAIN" ]; then
  echo "tests/ingest_producers.sh: no main venv ($MAIN); expected one made by 'make setup'" >&2
  exit 2
fi
PYTHON="${PYTHON:-python3}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/lineagewire/venvs"
REQS=tests/ingest/producers/requirements
UV=""
[ -x .venv/bin/uv ] && UV=.venv/bin/uv
mkdir -p "$CACHE"
# Venvs of an older recipe nobody used for 14 days (the marker is touched on each use).
find "$CACHE" -mindepth 2 -maxdepth 2 -name .used -mtime +14 -printf '%h\n' 2>/dev/null | while read -r old; do
  rm -rf -- "$old"
done

# Airflow's constraints for its newest 3.x on this Python, as its install guide gives them; nothing when the
# index or the constraints cannot be had (the plain install then resolves on its own).
airflow_constraints() {
  local version py url out
  version="$("$MAIN" -m pip index versions apache-airflow --retries 1 --timeout 20 2>/dev/null \
    | sed -n 's/^Available versions: //p' | tr ',' '\n' | tr -d ' ' | grep -m1 '^3\.')" || return 0
  py="$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
  url="https://raw.githubusercontent.com/apache/airflow/constraints-$version/constraints-$py.txt"
  out="$1/constraints.txt"
  if curl -fsS --max-time 20 -o "$out" "$url" 2>/dev/null; then
    echo "apache-airflow==$version" > "$1/airflow-version.txt"
    echo "$out"
  fi
}

# venv NAME: the path of the venv of requirements/NAME.txt, made if not there. One maker at a time per venv
# (flock): make test runs this beside other lines, and a second clone may run it too.
venv() {
  local name="$1" hash dir start constraints=() wanted=()
  hash="$(cat "$REQS/$name.txt" "$0" <("$PYTHON" -VV) | sha256sum | cut -c1-16)"
  dir="$CACHE/$name-$hash"
  exec 9>"$dir.lock"
  flock 9
  if [ ! -f "$dir/.installed" ]; then
    start=$(date +%s)
    # From scratch: a venv half made by a run that stopped is not trusted.
    rm -rf -- "$dir"
    mkdir -p "$dir.work"
    mapfile -t wanted < <(grep -vE '^\s*(#|$)' "$REQS/$name.txt")
    if [ "$name" = airflow ]; then
      c="$(airflow_constraints "$dir.work")"
      if [ -n "$c" ]; then
        constraints=(-c "$c")
        wanted+=("$(cat "$dir.work/airflow-version.txt")")
        echo "ingest producers: $name with Airflow's constraints ($(cat "$dir.work/airflow-version.txt"))" >&2
      else
        echo "ingest producers: $name without Airflow's constraints (not reachable): a plain install" >&2
      fi
    fi
    if [ -n "$UV" ]; then
      "$UV" venv -q --python "$PYTHON" "$dir"
      "$UV" pip install -q --python "$dir/bin/python" "${constraints[@]}" "${wanted[@]}"
    else
      "$PYTHON" -m venv "$dir"
      "$dir/bin/python" -m pip install -q --upgrade pip
      "$dir/bin/python" -m pip install -q "${constraints[@]}" "${wanted[@]}"
    fi
    rm -rf -- "$dir.work"
    echo "$(( $(date +%s) - start ))" > "$dir/.installed"
    echo "ingest producers: made the $name venv in $(cat "$dir/.installed") s: $dir" >&2
  fi
  touch "$dir/.used"
  flock -u 9
  echo "$dir"
}

DBT_VENV="$(venv dbt)"
AIRFLOW_VENV="$(venv airflow)"
echo "ingest producers: dbt $("$DBT_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("dbt-core"), "dbt-duckdb", m.version("dbt-duckdb"), "openlineage-dbt", m.version("openlineage-dbt"))') in $DBT_VENV"
echo "ingest producers: Airflow $("$AIRFLOW_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("apache-airflow"), "provider", m.version("apache-airflow-providers-openlineage"))') in $AIRFLOW_VENV"
if [ "${1:-}" = "--setup-only" ]; then exit 0; fi
export LINEAGEWIRE_TEST_DBT_VENV="$DBT_VENV" LINEAGEWIRE_TEST_AIRFLOW_VENV="$AIRFLOW_VENV"
exec "$MAIN" -m pytest -p no:cacheprovider -m producers tests/ingest/producers "$@"
