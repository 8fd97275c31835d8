"""Spark packages (``spark.jars.packages``) for the test session, when Maven Central serves them.

Connectors are released after Spark itself, so the newest PySpark can come before
its ``spark-sql-kafka`` build (4.3.0 did). Spark refuses to start when a package
does not resolve; the session fixture then asks Ivy (the one inside PySpark, with
the tests' ``ivysettings.xml``) about each package, starts without the ones that
do not resolve, and the tests that need them skip with Ivy's words.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import pytest

IVY_SETTINGS = pathlib.Path(__file__).with_name("ivysettings.xml")

#: Packages left out of the session: Maven coordinate -> why.
UNRESOLVED: dict[str, str] = {}


def scala_binary() -> str:
    """The Scala binary version of the installed PySpark's jars ("2.12" for 3.5, "2.13" for 4.x): connectors' suffix."""
    import pyspark

    jar = next((pathlib.Path(pyspark.__file__).parent / "jars").glob("scala-library-*.jar"))
    return ".".join(jar.stem.removeprefix("scala-library-").split(".")[:2])


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(pathlib.Path(home, "bin", "java"), os.X_OK):
        return str(pathlib.Path(home, "bin", "java"))
    return shutil.which("java") or "java"


def probe(coordinate: str, timeout: float = 300) -> str | None:
    """None when ``group:artifact:version`` resolves with its dependencies, else the reason Ivy gave."""
    import pyspark

    group, artifact, version = coordinate.split(":")
    ivy = sorted((pathlib.Path(pyspark.__file__).parent / "jars").glob("ivy-*.jar"))
    if not ivy:
        return f"no ivy-*.jar in PySpark {pyspark.__version__}'s jars to resolve {coordinate} with"
    done = subprocess.run([_java(), "-cp", str(ivy[-1]), "org.apache.ivy.Main", "-settings", str(IVY_SETTINGS),
                           "-dependency", group, artifact, version, "-confs", "default"],
                          capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode == 0:
        return None
    said = [line.strip() for line in (done.stdout + done.stderr).splitlines()
            if re.search(r"not found|unresolved dependency|FAILED|ERROR", line)]
    return "; ".join(dict.fromkeys(said)) or f"Ivy exited with status {done.returncode}"


def split_resolvable(coordinates: list[str]) -> list[str]:
    """The coordinates that resolve; the others go to ``UNRESOLVED`` with their reason."""
    kept = []
    for coordinate in coordinates:
        reason = probe(coordinate)
        if reason is None:
            kept.append(coordinate)
        else:
            UNRESOLVED[coordinate] = reason
    return kept


def require_package(artifact: str) -> None:
    """Skip the calling test when the session runs without the package ``artifact`` (e.g. spark-sql-kafka-0-10),
    named without its Scala suffix."""
    import pyspark

    for coordinate, reason in UNRESOLVED.items():
        if coordinate.split(":")[1] == f"{artifact}_{scala_binary()}":
            pytest.skip(f"{coordinate} does not resolve from Maven Central for PySpark {pyspark.__version__} "
                        f"({reason})")
