#!/usr/bin/env bash
# The emitter and lineage tests on another PySpark line than the main venv's (which has the oldest 4.x):
#
#   tests/spark_line.sh newest [pytest args...]   the newest PySpark 4.x, in .venv-spark-newest (issue 14, item 6)
#   tests/spark_line.sh 3.5 [pytest args...]      PySpark 3.5 (Scala 2.12), in .venv-spark35 (issue 29)
#   tests/spark_line.sh 3.5 --setup-only          only make the venv (`make demo PYSPARK=3.5` runs the demo from it)
#
# Without test paths: tests/producers/spark -m "spark and not slow" on newest; on 3.5 every Spark test of the
# emitter and its lineage (the lakehouse, Hive, Connect and streaming ones included) and of the refresh runner.
# (The services' end-to-end tests read the same events whatever Spark wrote them: they run in the main venv.)
# `make test` runs both.
#
# Each venv is made once, and again when pyproject.toml or this recipe changes: the `connect` extra (which holds
# `spark`) and the `dev` tools without the dev pins of PySpark and delta-spark, plus the line's PySpark (and, on
# 3.5, the delta-spark built for it). pip's own cache is reused, so a re-run downloads nothing (without a cache,
# on a clean clone: ~2.5 min, ~450 MB a venv, most of it PySpark).
# Tests whose connector jars Maven Central does not serve for that Spark skip with the reason.
# Overrides: PYTHON (the interpreter for the venvs), SPARK_LINE_VENV, SPARK_LINE_PYSPARK (a pip spec).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
LINE="${1:?usage: tests/spark_line.sh newest|3.5 [pytest args...]}"
shift
case "$LINE" in
  newest)
    VENV="${SPARK_LINE_VENV:-.venv-spark-newest}"
    # [sql]: pandas and pyarrow, which 4.3 uses for Python UDFs by default (Arrow-optimized).
    SPEC="${SPARK_LINE_PYSPARK:-pyspark[sql]>=4.0,<5}"
    # pandas<3: PySpark 4.3 warns (FutureWarning, an error under pytest here) that it does not fully support
    # pandas 3. No delta-spark: its 4.0 build is for Spark 4.0 only, so the Delta tests skip here.
    EXTRA="pandas<3"
    DEFAULT_TESTS=(tests/producers/spark -m "spark and not slow")
    ;;
  3.5)
    VENV="${SPARK_LINE_VENV:-.venv-spark35}"
    # The newest 3.5 whose spark-sql-kafka and spark-connect packages Maven Central serves here
    # (../shared/notes/spark35-and-clusters.md); delta-spark 3.3 is Delta's build for Spark 3.5.
    SPEC="${SPARK_LINE_PYSPARK:-pyspark[sql,connect]==3.5.7}"
    # pyarrow<21: PySpark 3.5's sql and connect extras hold numpy<2, and pyarrow 21 and newer import only with
    # numpy 2 (without saying so in their requirements).
    EXTRA="pandas<3 pyarrow<21 delta-spark>=3.3,<3.4"
    DEFAULT_TESTS=(tests/producers/spark tests/producers/refresh_runner -m spark)
    ;;
  *) echo "tests/spark_line.sh: unknown line '$LINE': expected newest or 3.5" >&2; exit 2 ;;
esac

# What the venv was made from: a venv made otherwise (or half made, by a run that stopped) is made anew.
STAMP="$SPEC $EXTRA"
if [ ! -f "$VENV/.installed" ] || [ pyproject.toml -nt "$VENV/.installed" ] || [ "$0" -nt "$VENV/.installed" ] \
   || [ "$(cat "$VENV/.installed")" != "$STAMP" ]; then
  # From scratch: pip only adds, so a package an older recipe installed would stay.
  rm -rf -- "${VENV:?}"
  "$PYTHON" -m venv "$VENV"
  # The dev extra pins the oldest PySpark and pulls every service's extras: take its tools only.
  mapfile -t tools < <("$VENV/bin/python" - <<'PY'
import re, tomllib
dev = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["dev"]
for req in dev:
    name = re.split(r"[\[<>=!~ ;]", req, maxsplit=1)[0].lower()
    if name not in ("lineagewire", "pyspark", "delta-spark"):
        print(req)
PY
  )
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # shellcheck disable=SC2086 # EXTRA is a list of requirement words
  # One build of the worktree at a time (tests/deploy/images.py takes the same lock): `make test` runs the
  # main tests beside this script, and setuptools builds in the worktree.
  mkdir -p build
  flock build/.source-build.lock "$VENV/bin/python" -m pip install -q -e '.[all]' "${tools[@]}" "$SPEC" $EXTRA
  # An editable install leaves out the wheel's start-up hook (setup.py): put it where the wheel puts it.
  "$VENV/bin/python" -c "import shutil, sysconfig; shutil.copy('producers/spark/_boot/lineagewire-activate.pth', sysconfig.get_paths()['purelib'])"
  echo "$STAMP" > "$VENV/.installed"
fi

echo "PySpark $("$VENV/bin/python" -c 'import pyspark; print(pyspark.__version__)') in $VENV"
if [ "${1:-}" = "--setup-only" ]; then exit 0; fi                # make demo PYSPARK=3.5
case " $* " in
  *" tests/"*) ;;                                       # the caller named what to run
  *) set -- "${DEFAULT_TESTS[@]}" "$@" ;;
esac
exec "$VENV/bin/python" -m pytest -p no:cacheprovider "$@"
