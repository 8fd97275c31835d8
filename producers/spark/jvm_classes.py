"""The emitter's Java classes: shipped as source, compiled once per machine, loaded into the driver JVM.

Why Java at all: a SparkListener written in Python is a py4j proxy, and Spark calls
it for every task, stage and block event; filtering those in the JVM is what keeps
the emitter's cost on short actions low (see ``java/JobEventsListener.java``).

The same compile gives ``java/PlanJson.java``, which writes a plan's JSON straight from
the tree (what ``TreeNode.toJSON()`` returns, several times faster on wide plans): the
lineage extraction uses it once compiled (``lineage/jvm.py: plan_json``). ``java/RddJobs.java`` is the
listener's reading of jobs that run no SQL query (RDD actions: ``lineage/rdd_jobs.py``).

Why compile here rather than ship a jar: the class must match the driver's Spark,
and the package stays free of binaries. The compiler is, in order:

1. ``spark.lineagewire.javac`` / ``LINEAGEWIRE_EMITTER__JAVAC`` when set;
2. ``bin/javac`` of the JDK that runs the driver (its ``java.home``);
3. ``javac`` on ``PATH``.

It compiles against the driver JVM's own class path. The classes are cached in
``$LINEAGEWIRE_HOME/jvm/<spark version>-<hash of sources, Spark and Java version>/``,
written to a temporary folder first and renamed into place, so two drivers starting
at once on a new machine both end with the same complete folder. Compiling takes
2 to 3 seconds, once; loading from the cache about 50 ms.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pathlib
import shutil
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from importlib import resources
from typing import Any

from . import internals
from .exceptions import JvmClassesError

__all__ = ["JOB_EVENTS_LISTENER", "PLAN_JSON", "JvmInfo", "cached", "compile_classes", "find_javac", "new_instance"]

#: The Java sources in ``java/``, compiled together.
SOURCES = ("JobEventsListener.java", "PlanJson.java", "RddJobs.java")
#: The listener that counts jobs and reports application end (``java/JobEventsListener.java``).
JOB_EVENTS_LISTENER = "lineagewire.spark.JobEventsListener"
#: The plan JSON writer (``java/PlanJson.java``).
PLAN_JSON = "lineagewire.spark.PlanJson"

_JAVA_RELEASE = "17"  # Spark 4 needs Java 17 or newer; classes built for 17 load on any of them
_STALE_TMP_S = 600  # a temporary folder this old belongs to a compile that died


@dataclass(frozen=True)
class JvmInfo:
    """What the compile needs to know about the driver JVM."""

    spark_version: str
    java_version: str  # java.specification.version, e.g. "17"
    java_home: str
    class_path: str

    @classmethod
    def of(cls, spark: Any) -> JvmInfo:
        """The driver JVM's facts, from a SparkSession or a SparkContext."""
        sc = getattr(spark, "sparkContext", spark)
        system = internals.gateway(sc).jvm.java.lang.System
        return cls(spark_version=str(sc.version),
                   java_version=str(system.getProperty("java.specification.version")),
                   java_home=str(system.getProperty("java.home") or ""),
                   class_path=str(system.getProperty("java.class.path") or ""))


@functools.cache
def _sources() -> tuple[tuple[str, bytes], ...]:
    # Package data: read once per process (every install() looks the cache folder up by their hash).
    folder = resources.files(__package__) / "java"
    return tuple((name, (folder / name).read_bytes()) for name in SOURCES)


def cache_dir(info: JvmInfo) -> pathlib.Path:
    """The folder the classes for this Spark and Java version live in (whether compiled yet or not)."""
    from lineagewire.kafka.local import home

    digest = hashlib.sha256()
    for name, text in _sources():
        digest.update(name.encode() + b"\0" + text + b"\0")
    digest.update(f"{info.spark_version}\0{info.java_version}\0{_JAVA_RELEASE}".encode())
    safe_version = "".join(c if c.isalnum() or c in ".-" else "_" for c in info.spark_version)
    return home() / "jvm" / f"spark-{safe_version}-{digest.hexdigest()[:16]}"


def _class_file(directory: pathlib.Path, name: str) -> pathlib.Path:
    return directory.joinpath(*name.split(".")).with_suffix(".class")


def cached(info: JvmInfo, class_name: str = JOB_EVENTS_LISTENER) -> pathlib.Path | None:
    """The compiled classes' folder if an earlier run compiled them (``class_name`` among them), else None."""
    directory = cache_dir(info)
    return directory if _class_file(directory, class_name).is_file() else None


def find_javac(info: JvmInfo, configured: str | None = None) -> str | None:
    """The javac to use (see the module docstring for the order), or None when there is none."""
    if configured:
        return configured
    own = pathlib.Path(info.java_home, "bin", "javac") if info.java_home else None
    if own is not None and os.access(own, os.X_OK):
        return str(own)
    return shutil.which("javac")


def compile_classes(info: JvmInfo, javac: str, *, timeout: float = 120) -> pathlib.Path:
    """Compile the sources with ``javac`` into the cache; the folder. Raises JvmClassesError with javac's words."""
    target = cache_dir(info)
    if _class_file(target, JOB_EVENTS_LISTENER).is_file():
        return target
    work = target.parent / f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    sources = work / "src"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale(target.parent)
        sources.mkdir(parents=True)
    except OSError as exc:
        raise JvmClassesError(f"cannot write the compiled classes under {target.parent}: {exc}; expected a "
                              "writable folder (set LINEAGEWIRE_HOME)") from exc
    try:
        classes = _run_javac(info, javac, work, timeout)
        try:
            classes.rename(target)
        except OSError:
            if cached(info) is None:  # not another driver's finished compile: a real failure
                raise
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_javac(info: JvmInfo, javac: str, work: pathlib.Path, timeout: float) -> pathlib.Path:
    """Compile the sources into ``work``/classes, that folder; raises JvmClassesError with javac's words."""
    sources = work / "src"
    for name, text in _sources():
        (sources / name).write_bytes(text)
    classes = work / "classes"
    # The class path goes through an argument file: a driver's class path can be tens of kilobytes.
    (work / "args").write_text("\n".join(_quote(a) for a in (
        "-classpath", _expand_wildcards(info.class_path), "-d", str(classes), "--release", _JAVA_RELEASE, "-nowarn",
        "-encoding", "UTF-8", *(str(sources / n) for n in SOURCES))))
    try:
        done = subprocess.run([javac, f"@{work / 'args'}"], capture_output=True, text=True, timeout=timeout,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JvmClassesError(f"javac {javac!r} could not run: {exc}; expected a JDK's javac "
                              "(set spark.lineagewire.javac or LINEAGEWIRE_EMITTER__JAVAC)") from exc
    if done.returncode != 0 or not _class_file(classes, JOB_EVENTS_LISTENER).is_file():
        said = (done.stderr or done.stdout or "").strip()
        raise JvmClassesError(
            f"javac {javac!r} exited with status {done.returncode} compiling {', '.join(SOURCES)} against "
            f"Spark {info.spark_version}: {said[-2000:] or '(no output)'}")
    return classes


def _expand_wildcards(class_path: str) -> str:
    # "dir/*" means every jar in dir; javac does not expand it when it comes from an argument file.
    entries: list[str] = []
    for entry in class_path.split(os.pathsep):
        if entry.endswith("*") and pathlib.Path(entry[:-1] or ".").is_dir():
            entries.extend(sorted(str(p) for p in pathlib.Path(entry[:-1] or ".").iterdir()
                                  if p.suffix.lower() == ".jar"))
        elif entry:
            entries.append(entry)
    return os.pathsep.join(entries)


def _quote(arg: str) -> str:
    # javac's @file: arguments separated by white space, double quotes group, backslash escapes.
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _remove_stale(parent: pathlib.Path) -> None:
    now = time.time()
    for entry in parent.glob(".tmp-*"):
        try:
            if now - entry.stat().st_mtime > _STALE_TMP_S:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            continue


# One class loader per JVM and folder: py4j caches reflected methods by class *name*, so a second
# load of the same class through another loader would have its methods called on the first one's.
_LOADED: dict[tuple[int, str, str], Any] = {}
_LOADED_LOCK = threading.Lock()


def new_instance(spark: Any, directory: pathlib.Path, class_name: str) -> Any:
    """A new instance (no-argument constructor) of ``class_name`` from ``directory``, in the driver JVM.

    The class is loaded once per JVM, by a class loader whose parent is the one
    that loaded Spark, so it sees the same ``SparkListener`` the listener bus knows.
    ``spark`` is a SparkSession or a SparkContext.
    """
    gateway = internals.gateway(spark)
    jvm = gateway.jvm
    key = (id(gateway), str(directory), class_name)
    with _LOADED_LOCK:
        cls = _LOADED.get(key)
        if cls is None:
            urls = gateway.new_array(jvm.java.net.URL, 1)
            urls[0] = jvm.java.io.File(str(directory) + os.sep).toURI().toURL()
            loader = jvm.java.net.URLClassLoader(urls, internals.java_spark_context(spark).getClass().getClassLoader())
            cls = _LOADED[key] = loader.loadClass(class_name)
    constructor = cls.getDeclaredConstructor(gateway.new_array(jvm.java.lang.Class, 0))
    return constructor.newInstance(gateway.new_array(jvm.java.lang.Object, 0))
