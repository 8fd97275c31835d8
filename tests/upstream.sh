#!/usr/bin/env bash
# make test-upstream: the comparison tests of our OpenLineage and DataHub fast paths (pytest -m upstream: our
# output against openlineage-python's and acryl-datahub's own) on the newest releases of both on the package
# index, in a venv of their own, .venv-upstream (issue 43, item 5). The main venv tests the versions installed
# today; this says whether the next release still writes what our fast paths write, before users install it.
#
#   tests/upstream.sh [pytest args...]
#
# The newest is the newest release on the index, whatever our ranges in pyproject.toml allow: one outside them
# is installed all the same (pip warns about the conflict) and the run says so. The README ("Upstream drift")
# says how to bump the ranges.
#
# When the index cannot be reached (no answer, a refused connection, no DNS, a gateway error), it prints one
# line saying so and succeeds: CI without network still passes, and the main run's comparison tests still
# check the installed versions. Any other answer (a 404 for a package, a refusal, a certificate the machine
# does not trust) fails: that is not a network outage.
#
# The venv is made once, and again when pyproject.toml or this script changes: the project editable with the
# openlineage and datahub extras and the test tools of the dev extra these tests use. Each run asks the index
# for the newest versions (well under a second each) and installs them only when they changed.
# Overrides: PYTHON (the interpreter for the venv), UPSTREAM_VENV.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${UPSTREAM_VENV:-.venv-upstream}"
LIBS=(openlineage-python acryl-datahub)

# Reachable? One GET of each package's page on pip's index, 10 s per socket operation, 30 s in all (DNS
# included). Exit 0: answered; 75: unreachable (the reason printed); 1: the index said no.
set +e
reason="$(timeout 30 "$PYTHON" - "${LIBS[@]}" <<'PY'
import os, re, ssl, subprocess, sys, urllib.error, urllib.request

def pip_setting(key):
    # pip's own view (environment, then its config files; a command's section wins over global).
    env = os.environ.get(f"PIP_{key.upper().replace('-', '_')}")
    if env:
        return env
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = dict(re.findall(rf"^(global|install|download)\.{key}='(.*)'$", out, re.M))
    return found.get("install") or found.get("download") or found.get("global")

index = (pip_setting("index-url") or "https://pypi.org/simple").rstrip("/")
cafile = pip_setting("cert")
context = ssl.create_default_context(cafile=cafile) if cafile else ssl.create_default_context()
for name in sys.argv[1:]:
    url = f"{index}/{name}/"
    try:
        urllib.request.urlopen(urllib.request.Request(url), timeout=10, context=context).close()
    except urllib.error.HTTPError as exc:
        if exc.code in (502, 503, 504):  # a proxy or gateway that could not reach the index itself
            print(f"{url} answered {exc.code} {exc.reason} (a gateway without the index behind it)")
            sys.exit(75)
        print(f"{url} answered {exc.code} {exc.reason}: expected the page of {name} (200)")
        sys.exit(1)
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ssl.SSLError):
            print(f"{url}: TLS failed ({exc.reason}): expected a certificate this machine trusts (PIP_CERT)")
            sys.exit(1)
        print(f"{url}: {exc.reason}")
        sys.exit(75)
    except (TimeoutError, ConnectionError) as exc:
        print(f"{url}: {exc or type(exc).__name__}")
        sys.exit(75)
PY
)"
status=$?
set -e
case $status in
  0) ;;
  75|124)
    [ $status = 124 ] && reason="no answer within 30 s"
    echo "make test-upstream: skipped: the package index is unreachable ($reason); the main run's comparison tests still check the installed versions"
    exit 0 ;;
  *) echo "make test-upstream: the package index answered, but not as expected: $reason" >&2; exit 1 ;;
esac

if [ ! -f "$VENV/.installed" ] || [ pyproject.toml -nt "$VENV/.installed" ] || [ "$0" -nt "$VENV/.installed" ]; then
  # From scratch: pip only adds, so a package an older recipe installed would stay.
  rm -rf -- "${VENV:?}"
  "$PYTHON" -m venv "$VENV"
  # The test tools the comparison tests use, with the dev extra's ranges (not the dev extra: it pulls every
  # service's extras and the oldest PySpark).
  mapfile -t tools < <("$VENV/bin/python" - <<'PY'
import re, tomllib
dev = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["dev"]
for req in dev:
    if re.split(r"[\[<>=!~ ;]", req, maxsplit=1)[0].lower() in ("pytest", "pytest-timeout", "hypothesis",
                                                               "jsonschema", "rfc3339-validator"):
        print(req)
PY
  )
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # One build of the worktree at a time (tests/spark_line.sh and tests/deploy/images.py take the same lock):
  # `make test` runs this beside the other runs, and setuptools builds in the worktree.
  mkdir -p build
  flock build/.source-build.lock "$VENV/bin/python" -m pip install -q -e '.[openlineage,datahub]' "${tools[@]}"
  touch "$VENV/.installed"
fi

# Per library: its requirement in pyproject.toml (name[extras], range), the version the main venv has, the
# version this venv has.
mapfile -t rows < <("$VENV/bin/python" - "${LIBS[@]}" <<'PY'
import importlib.metadata, os, subprocess, sys, tomllib
from packaging.requirements import Requirement
names = sys.argv[1:]
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
reqs = {Requirement(r).name: Requirement(r) for reqs in extras.values() for r in reqs}
main = ["(none:no-.venv)"] * len(names)
if os.path.exists(".venv/bin/python"):
    main = subprocess.run([".venv/bin/python", "-c", "import importlib.metadata as m, sys\n"
                           "for n in sys.argv[1:]: print(m.version(n))", *names],
                          capture_output=True, text=True, check=True).stdout.split()
for name, today in zip(names, main, strict=True):
    r = reqs[name]
    spec = f"{r.name}[{','.join(sorted(r.extras))}]" if r.extras else r.name
    print(name, spec, str(r.specifier), today, importlib.metadata.version(name))
PY
)

install=()
declare -A NEWEST TODAY RANGE
for row in "${rows[@]}"; do
  read -r name spec range today here <<<"$row"
  # The newest release (pre-releases left out) as pip sees the index.
  if ! answer="$("$VENV/bin/python" -m pip index versions --retries 1 --timeout 20 "$name" 2>&1)"; then
    echo "make test-upstream: 'pip index versions $name' failed after the index answered: $answer" >&2
    exit 1
  fi
  newest="$(sed -n "s/^$name (\(.*\))$/\1/p" <<<"$answer" | head -1)"
  if [ -z "$newest" ]; then
    echo "make test-upstream: no version of $name in the answer of 'pip index versions': $answer" >&2
    exit 1
  fi
  NEWEST[$name]=$newest
  TODAY[$name]=$today
  RANGE[$name]=$range
  [ "$here" = "$newest" ] || install+=("$spec==$newest")
done
if [ ${#install[@]} -gt 0 ]; then
  # Not the project (no build): only the libraries, past our ranges if the newest is; pip then names the conflict.
  "$VENV/bin/python" -m pip install -q "${install[@]}"
fi

for name in "${LIBS[@]}"; do
  outside="$("$VENV/bin/python" -c 'import sys; from packaging.specifiers import SpecifierSet as S
print("" if sys.argv[2] in S(sys.argv[1]) else " (outside the range: widen it once these tests pass; README, Upstream drift)")' \
    "${RANGE[$name]}" "${NEWEST[$name]}")"
  echo "upstream: $name ${NEWEST[$name]} (newest on the index; installed today: ${TODAY[$name]}; pyproject.toml: ${RANGE[$name]})$outside"
done

# The marker says which tests compare: every test module that uses it, and in those only the marked tests.
mapfile -t files < <(grep -rlE --include='test_*.py' 'pytest\.mark\.upstream' tests | sort)
exec "$VENV/bin/python" -m pytest -p no:cacheprovider -m upstream "${files[@]}" "$@"
