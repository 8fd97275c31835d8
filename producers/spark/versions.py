"""Which Sparks the emitter runs on, and the few places where Spark 3.5 and 4.x differ.

One code path serves Spark 3.5 (Scala 2.12) and 4.x (Scala 2.13). Where the two differ, the
difference is named here or next to the one line that needs it, never a second copy of the
extractor:

- the JVM classes (``java/PlanJson.java``) read json4s values and Scala sequences by what both
  Scala versions share (json4s 3.7 keeps ``JValue`` in ``JsonAST``, json4s 4 at the top);
- the lineage reads plan nodes by class name; classes only one line has (4.x's row-level
  ``MergeRows``, for instance) are simply never met on the other;
- ANSI mode is off by default on 3.5 and on on 4.x: nothing here depends on it;
- Spark Connect is a package on 3.5 (``spark-connect_2.12``) and in ``jars/`` on 4.x
  (``connect_server.py`` adds the package where it is needed, ``connect_package``); its
  ``getOrCreateIsolatedSession`` takes a third argument on 4.x (``isolated_session_extra``).
  Its listener events (``SparkListenerConnect*``) have the same accessors on both.

``check`` runs when the emitter starts: a Spark outside the supported lines stops it with one
line naming the versions supported (the job runs on without it), and a Spark package built for
the other Scala version is named in a warning with the coordinate that fits.
"""

from __future__ import annotations

import logging
import os
import pathlib
import re
from typing import Any

from .exceptions import UnsupportedSparkError

__all__ = ["SUPPORTED", "check", "connect_package", "connector_mismatches", "isolated_session_extra",
           "package_mismatches", "scala_binary", "supported"]

log = logging.getLogger(__name__)

#: The Spark lines the emitter is tested on (docs/lineage-coverage.md, "Versions").
SUPPORTED = "3.5 and 4.x"

# group:artifact_<scala>:version, as spark.jars.packages lists them
_SCALA_SUFFIX = re.compile(r"^(?P<group>[^:]+):(?P<artifact>.+)_(?P<scala>2\.1[0-3])(?P<rest>(:.*)?)$")


def supported(spark_version: str) -> bool:
    """Whether a Spark version string (``3.5.7``, ``4.1.0-SNAPSHOT``) is on a supported line."""
    numbers = re.match(r"(\d+)\.(\d+)", spark_version)
    if numbers is None:
        return False
    major, minor = int(numbers.group(1)), int(numbers.group(2))
    return (major, minor) >= (3, 5) and major < 5


def package_mismatches(packages: str, scala: str) -> list[str]:
    """One sentence for each ``spark.jars.packages`` coordinate built for another Scala than ``scala``."""
    said = []
    for coordinate in (p.strip() for p in packages.split(",")):
        found = _SCALA_SUFFIX.match(coordinate)
        if found and found.group("scala") != scala:
            fitting = f"{found.group('group')}:{found.group('artifact')}_{scala}{found.group('rest')}"
            said.append(f"spark.jars.packages has {coordinate}, built for Scala {found.group('scala')}, but this "
                        f"Spark runs Scala {scala}: its classes will fail to load; use {fitting} (a version of it "
                        f"built for this Spark)")
    return said


def connector_mismatches(packages: str, spark_version: str) -> list[str]:
    """One sentence for each known connector in ``spark.jars.packages`` that is built for another Spark line."""
    line = ".".join(spark_version.split(".")[:2])
    said = []
    for coordinate in (p.strip() for p in packages.split(",")):
        parts = coordinate.split(":")
        if len(parts) < 3:
            continue
        group, artifact, version = parts[0], parts[1], parts[-1]
        wanted = None
        if group == "org.apache.spark" and version != spark_version:
            wanted = f"version {spark_version}, as Spark's own modules are released with Spark"
        elif (iceberg := re.match(r"iceberg-spark-runtime-(\d+\.\d+)_", artifact)) and iceberg.group(1) != line:
            wanted = f"iceberg-spark-runtime-{line}"
        elif group == "io.delta" and artifact.startswith("delta-spark_") and \
                (version.split(".")[0] == "4") != (spark_version.split(".")[0] == "4"):
            wanted = "delta-spark 3.x for Spark 3.5, 4.x for Spark 4"
        if wanted:
            said.append(f"spark.jars.packages has {coordinate}, which is not built for Spark {spark_version}: "
                        f"expected {wanted}")
    return said


def scala_binary(jvm: Any) -> str:
    """The driver's Scala binary version, ``2.12`` or ``2.13``, from the py4j JVM view (``internals.context_jvm``)."""
    full = str(jvm.scala.util.Properties.versionNumberString())
    return ".".join(full.split(".")[:2])


def connect_package(packages: str) -> str | None:
    """The Spark Connect server's package when the installed PySpark lacks it in ``jars/`` (3.5), else None.

    None too when ``packages`` already names one (the user's choice wins).
    """
    import pyspark

    jars = pathlib.Path(os.environ.get("SPARK_HOME") or pathlib.Path(pyspark.__file__).parent, "jars")
    if "spark-connect_" in packages or any(jars.glob("spark-connect_*.jar")):
        return None
    library = next(jars.glob("scala-library-*.jar"), None)
    if library is None:
        return None
    scala = ".".join(library.stem.removeprefix("scala-library-").split(".")[:2])
    return f"org.apache.spark:spark-connect_{scala}:{pyspark.__version__}"


def isolated_session_extra(spark_version: str, jvm: Any) -> tuple[Any, ...]:
    """The arguments after (user id, session id) of ``SparkConnectService.getOrCreateIsolatedSession``:
    Spark 4 added the previous session id (an ``Option``); 3.5 has none."""
    return () if spark_version.startswith("3.") else (jvm.scala.Option.empty(),)


def check(spark_version: str, packages: str, jvm: Any) -> None:
    """Raise ``UnsupportedSparkError`` for a Spark outside ``SUPPORTED``; warn about packages for another Scala."""
    if not supported(spark_version):
        raise UnsupportedSparkError(f"Spark {spark_version} is not supported: lineagewire's emitter runs on Spark "
                                    f"{SUPPORTED} (PySpark >=3.5,<5)")
    if packages:
        for sentence in (package_mismatches(packages, scala_binary(jvm))
                         + connector_mismatches(packages, spark_version)):
            log.warning("lineagewire: %s", sentence)
