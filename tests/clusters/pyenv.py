"""What a PySpark job ships to a YARN cluster, as PySpark's "Python Package Management" page describes.

- The job's Python environment: a virtualenv with lineagewire installed from this worktree (not editable:
  venv-pack refuses editable installs) with its ``spark`` and ``consumers`` extras, but *without* PySpark,
  packed by venv-pack. It travels with ``--archives env.tar.gz#environment`` and runs as
  ``spark.pyspark.python=./environment/bin/python``.
- PySpark itself comes from the cluster's Spark, as on a real cluster: for a Python application on YARN,
  spark-submit puts ``$SPARK_HOME/python/lib/pyspark.zip`` and the py4j zip on the driver's and executors'
  PYTHONPATH, or what ``PYSPARK_ARCHIVES_PATH`` names instead. The pip PySpark has no ``python/lib``, so
  ``pyspark_archives()`` builds the two zips from the installed packages; ``local:`` paths name files every node
  has (here, one machine), so they are not uploaded. A second PySpark in the environment would only be
  shadowed by those zips (and would make the archive 450 MB bigger).

Both are cached under build/ (git ignores it), keyed by what they are made from.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

from tests.deploy.images import ROOT, source_digest, uv, uv_install, without_cargo

CACHE = ROOT / "build" / "cluster-env"
#: The extras the shipped environment is installed with.
EXTRAS = "spark,consumers"
#: uv's way of leaving a requirement out: an override whose marker never holds.
_NO_PYSPARK = "pyspark ; sys_platform == 'never'\n"
#: Parts of the pip PySpark that a Spark distribution's pyspark.zip does not hold (jars/ alone is 440 MB).
_NOT_IN_ZIP = {"jars", "examples", "data", "licenses", "bin", "sbin", "benchmarks"}


def python_tag() -> str:
    return f"python{sys.version_info.major}.{sys.version_info.minor}"


def _install(venv: pathlib.Path, requirement: str, override: pathlib.Path) -> None:
    env = without_cargo({**os.environ, "UV_PYTHON_DOWNLOADS": "never"})
    env.pop("VIRTUAL_ENV", None)
    uv_install(venv, ["--override", str(override), requirement], env, "the cluster job's environment")


def packed_environment() -> pathlib.Path:
    """``env.tar.gz``: the job's environment, made once per state of the worktree."""
    venv_pack = shutil.which("venv-pack", path=str(pathlib.Path(sys.executable).parent))
    if venv_pack is None:
        raise AssertionError("venv-pack is not installed; it is a dev dependency: run make setup")
    key = hashlib.sha256(f"{sys.version}\0{EXTRAS}\0{_NO_PYSPARK}\0{source_digest()}".encode()).hexdigest()[:16]
    CACHE.mkdir(parents=True, exist_ok=True)
    tarball = CACHE / f"env-{key}.tar.gz"
    with open(CACHE / ".env.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two sessions in one worktree take turns
        if tarball.is_file():
            return tarball
        for old in CACHE.glob("env-*.tar.gz"):
            old.unlink()
        venv = CACHE / "venv"
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([uv(), "venv", "-q", "--python", sys.executable, str(venv)], check=True, capture_output=True,
                       env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"})
        override = CACHE / "no-pyspark.txt"
        override.write_text(_NO_PYSPARK)
        _install(venv, f"{ROOT}[{EXTRAS}]", override)
        partial = CACHE / f".partial-{tarball.name}"  # venv-pack names the format by the extension
        run = subprocess.run([venv_pack, "-q", "-p", str(venv), "-o", str(partial), "--force"],
                             capture_output=True, text=True, check=False)
        if run.returncode != 0:
            raise AssertionError(f"venv-pack failed:\n{run.stderr[-3000:]}")
        partial.rename(tarball)
    return tarball


def pyspark_archives() -> list[pathlib.Path]:
    """pyspark.zip and py4j-<version>-src.zip, as a Spark distribution has them in ``python/lib``, made from the
    PySpark and py4j installed here."""
    import py4j
    import pyspark

    site = pathlib.Path(pyspark.__file__).parent.parent
    py4j_version = next(site.glob("py4j-*.dist-info")).name.removeprefix("py4j-").removesuffix(".dist-info")
    folder = CACHE / f"pyspark-{pyspark.__version__}-{hashlib.sha256(str(site).encode()).hexdigest()[:8]}"
    made = [folder / "pyspark.zip", folder / f"py4j-{py4j_version}-src.zip"]
    if all(p.is_file() for p in made):
        return made
    folder.mkdir(parents=True, exist_ok=True)
    for target, package in zip(made, (pathlib.Path(pyspark.__file__).parent, pathlib.Path(py4j.__file__).parent),
                               strict=True):
        partial = target.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(package.rglob("*")):
                inside = path.relative_to(package)
                if path.is_dir() or "__pycache__" in inside.parts or (
                        package.name == "pyspark" and inside.parts[0] in _NOT_IN_ZIP):
                    continue
                archive.write(path, path.relative_to(site))
        partial.rename(target)
    return made
