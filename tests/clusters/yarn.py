"""Hadoop's MiniYARNCluster on this machine, a real YARN for the cluster tests.

The jars (``org.apache.hadoop:hadoop-minicluster`` and the tests jar of ``hadoop-yarn-server-tests``, which holds
``MiniYARNCluster``) are fetched once with Maven into ``$LINEAGEWIRE_HOME/hadoop-<version>/libs``. ``MiniYarn.java``
(next to this file) starts the cluster; it is compiled with javac into the same cache. The cluster's
``yarn-site.xml`` goes into a folder of its own: point ``HADOOP_CONF_DIR``/``YARN_CONF_DIR`` at it.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

from lineagewire.kafka.local import home
from tests.clusters.process import ServerProcess

HADOOP_VERSION = "3.4.1"
LAUNCHER = pathlib.Path(__file__).with_name("MiniYarn.java")
#: What Maven says when it cannot reach Maven Central or Central has not the artifact: the tests skip then.
# (with -q an unreachable Central shows only as Maven's own dependency plugin not found)
_UNSERVED = re.compile(r"Could not (?:resolve|transfer|find artifact)|UnknownHost|Network is unreachable|"
                       r"Connect(?:ion)? (?:refused|timed out)|was not found in|"
                       r"No plugin found for prefix 'dependency'")
# Hadoop 3.4's Guice and reflection need these on Java 17 (Spark passes the same for its own JVMs).
JAVA_OPENS = [f"--add-opens=java.base/{p}=ALL-UNNAMED"
              for p in ("java.lang", "java.lang.reflect", "java.io", "java.net", "java.util", "java.util.concurrent")]

#: The cluster's settings. Small containers: the machine has 2 cores and a few GB to spare.
YARN_SETTINGS = {
    "yarn.resourcemanager.bind-host": "127.0.0.1",
    "yarn.nodemanager.bind-host": "127.0.0.1",
    "yarn.scheduler.minimum-allocation-mb": "256",
    "yarn.scheduler.maximum-allocation-mb": "2048",
    "yarn.nodemanager.resource.memory-mb": "4096",
    "yarn.nodemanager.resource.cpu-vcores": "4",
    # a container's JVM is sized by Spark; YARN's memory checks would kill JVMs for their virtual memory
    "yarn.nodemanager.vmem-check-enabled": "false",
    "yarn.nodemanager.pmem-check-enabled": "false",
    # a full disk on a developer machine must not mark the NodeManager unhealthy (YarnClusterSuite does the same)
    "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": "100.0",
    # the capacity scheduler's queue, as YarnClusterSuite sets it (no capacity-scheduler.xml in the jars)
    "yarn.scheduler.capacity.root.queues": "default",
    "yarn.scheduler.capacity.root.default.capacity": "100",
    "yarn.scheduler.capacity.root.default.maximum-capacity": "100",
    "yarn.scheduler.capacity.root.default.user-limit-factor": "1",
    "yarn.scheduler.capacity.root.default.state": "RUNNING",
    "yarn.scheduler.capacity.root.default.acl_submit_applications": "*",
    "yarn.scheduler.capacity.root.default.acl_administer_queue": "*",
    "yarn.scheduler.capacity.node-locality-delay": "-1",
}


class HadoopJarsUnavailable(Exception):
    """Maven Central did not serve Hadoop's jars (the message is Maven's): the YARN tests skip."""


def java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(pathlib.Path(java_home, "bin", "java"), os.X_OK):
        return str(pathlib.Path(java_home, "bin", "java"))
    return shutil.which("java") or "java"


def javac() -> str:
    found = shutil.which("javac", path=str(pathlib.Path(java()).parent)) or shutil.which("javac")
    if found is None:
        raise AssertionError("the YARN tests compile their launcher with javac: install a JDK (not a JRE)")
    return found


def cache_dir() -> pathlib.Path:
    return home() / f"hadoop-{HADOOP_VERSION}"


def hadoop_jars() -> pathlib.Path:
    """The folder of Hadoop's jars (MiniYARNCluster and what it needs), fetched with Maven on first use."""
    libs = cache_dir() / "libs"
    if (libs / ".complete").is_file():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise AssertionError("fetching Hadoop's jars needs Maven ('mvn' on PATH), as `make kafka-jars` does")
    dependencies = [
        ("org.apache.hadoop", "hadoop-minicluster", HADOOP_VERSION, ""),
        ("org.apache.hadoop", "hadoop-yarn-server-tests", HADOOP_VERSION, "<type>test-jar</type>"),
        # MiniYARNCluster's code uses JUnit's Assert, a test-scope dependency of its artifact
        ("junit", "junit", "4.13.2", ""),
    ]
    deps = "".join(f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>{extra}"
                   "</dependency>" for g, a, v, extra in dependencies)
    pom = ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
           "<groupId>io.lineagewire</groupId><artifactId>mini-yarn</artifactId><version>1</version>"
           f"<dependencies>{deps}</dependencies></project>")
    libs.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(prefix="libs-", dir=libs.parent))
    try:
        (staging / "pom.xml").write_text(pom)
        run = subprocess.run([mvn, "-B", "-q", "-f", str(staging / "pom.xml"), "dependency:copy-dependencies",
                              "-DincludeScope=runtime", f"-DoutputDirectory={staging / 'libs'}"],
                             capture_output=True, text=True, timeout=900, check=False)
        if run.returncode != 0:
            said = "\n".join((run.stdout + run.stderr).strip().splitlines()[-15:])
            if _UNSERVED.search(said):
                raise HadoopJarsUnavailable(f"Maven Central did not serve Hadoop {HADOOP_VERSION}'s jars:\n{said}")
            raise AssertionError(f"mvn dependency:copy-dependencies failed for Hadoop's jars:\n{said}")
        (staging / "libs" / ".complete").write_text(HADOOP_VERSION + "\n")
        shutil.rmtree(libs, ignore_errors=True)
        (staging / "libs").rename(libs)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return libs


def classpath(*extra: pathlib.Path) -> str:
    return os.pathsep.join([*(str(p) for p in extra), str(hadoop_jars() / "*")])


def launcher_classes() -> pathlib.Path:
    """MiniYarn.java compiled against Hadoop's jars, kept per version of its source."""
    digest = hashlib.sha256(LAUNCHER.read_bytes()).hexdigest()[:16]
    classes = cache_dir() / f"launcher-{digest}"
    if not (classes / "MiniYarn.class").is_file():
        staging = pathlib.Path(tempfile.mkdtemp(prefix="launcher-", dir=cache_dir()))
        try:
            run = subprocess.run([javac(), "-cp", classpath(), "-d", str(staging), str(LAUNCHER)],
                                 capture_output=True, text=True, timeout=300, check=False)
            if run.returncode != 0:
                raise AssertionError(f"javac {LAUNCHER.name} failed:\n{run.stderr[-3000:]}")
            shutil.rmtree(classes, ignore_errors=True)
            staging.rename(classes)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return classes


class MiniYarn:
    """A MiniYARNCluster started in ``base``: ``conf_dir`` holds its yarn-site.xml."""

    def __init__(self, base: pathlib.Path) -> None:
        self.base = base
        self.conf_dir = base / "conf"
        self.rm_address = ""
        self._server: ServerProcess | None = None

    def start(self, timeout: float = 180.0) -> MiniYarn:
        jars = hadoop_jars()  # before the launcher: a skip must not wait for javac
        classes = launcher_classes()
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        log4j = self.base / "log4j.properties"
        log4j.write_text("log4j.rootLogger=INFO, file\nlog4j.appender.file=org.apache.log4j.FileAppender\n"
                         f"log4j.appender.file.File={self.base / 'yarn.log'}\n"
                         "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
                         "log4j.appender.file.layout.ConversionPattern=%d{HH:mm:ss} %p %c{1}: %m%n\n")
        command = [java(), "-Xmx768m", *JAVA_OPENS, f"-Dlog4j.configuration={log4j.as_uri()}",
                   "-cp", os.pathsep.join([str(classes), str(jars / "*")]), "MiniYarn", str(self.conf_dir),
                   *(f"{k}={v}" for k, v in YARN_SETTINGS.items())]
        # MiniYARNCluster works in ./target/<name>: the NodeManager's local and log folders (container logs)
        self._server = ServerProcess("MiniYARNCluster", command, self.base / "launcher.log", cwd=self.base,
                                     env=dict(os.environ), stdin=True)
        try:
            self.rm_address = self._server.wait_for(r"^READY (\S+) ", timeout).group(1)
        except AssertionError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(timeout=60)

    def environment(self) -> dict[str, str]:
        """What a YARN client (spark-submit) needs in its environment to find this cluster."""
        return {"HADOOP_CONF_DIR": str(self.conf_dir), "YARN_CONF_DIR": str(self.conf_dir)}

    def kill(self, application_id: str) -> str:
        """``yarn application -kill <id>``: Hadoop's own ApplicationCLI (what the yarn script runs), from its jars."""
        cli = "org.apache.hadoop.yarn.client.cli.ApplicationCLI"
        run = subprocess.run([java(), "-cp", classpath(self.conf_dir), cli, "application", "-kill", application_id],
                             capture_output=True, text=True, timeout=120, check=False)
        said = run.stdout + run.stderr
        if run.returncode != 0 or f"Killed application {application_id}" not in said:
            raise AssertionError(f"yarn application -kill {application_id} failed ({run.returncode}):\n{said[-3000:]}")
        return said

    def container_logs(self, application_id: str) -> str:
        """Every container's stdout and stderr of the application (the NodeManager's log folder), for failures."""
        parts = []
        for path in sorted((self.base / "target").rglob(f"{application_id}/*/std*")):
            parts.append(f"--- {path.parent.name}/{path.name}\n{path.read_text(errors='replace')[-4000:]}")
        return "\n".join(parts) or f"no container logs of {application_id} under {self.base / 'target'}"
