"""A single-node Apache Kafka (KRaft, combined broker and controller) on 127.0.0.1.

The broker runs from Apache Kafka's own jars, pinned in ``kafka-<version>.lock``
with their SHA-1. ``fetch()`` gets them from Maven Central with the Maven
client (``mvn``; one generated pom, every artifact listed with its transitive
dependencies excluded, so the set is exactly the lock) into a cache outside
git; later starts need no network. ``LINEAGEWIRE_KAFKA_LIBS`` may point at
the ``libs/`` folder of any Kafka 4.x distribution instead.

Folders (``LINEAGEWIRE_HOME``, default ``~/.lineagewire``)::

    kafka/libs-<version>/   the jars (cache; reused by every broker)
    kafka/<name>/data/      KRaft metadata and topic logs
    kafka/<name>/logs/      server.log and the JVM's stdout/stderr
    kafka/<name>/server.properties, log4j2.properties, broker.pid

``<name>`` is ``default`` for ``lineagewire kafka start``; the tests use their
own, on free ports, so they never touch the user's broker.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass

from lineagewire.exceptions import LocalKafkaError

log = logging.getLogger(__name__)

KAFKA_VERSION = "4.3.1"
LOCK_FILE = pathlib.Path(__file__).with_name(f"kafka-{KAFKA_VERSION}.lock")
HOME_ENV = "LINEAGEWIRE_HOME"
LIBS_ENV = "LINEAGEWIRE_KAFKA_LIBS"


def home() -> pathlib.Path:
    return pathlib.Path(os.environ.get(HOME_ENV) or pathlib.Path.home() / ".lineagewire")


@dataclass(frozen=True)
class Artifact:
    group: str
    artifact: str
    version: str
    sha1: str

    @property
    def jar_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"


def locked_artifacts() -> list[Artifact]:
    out = []
    for line in LOCK_FILE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        coords, sha1 = line.split()
        g, a, v = coords.split(":")
        out.append(Artifact(g, a, v, sha1))
    return out


def _sha1(path: pathlib.Path) -> str:
    h = hashlib.sha1()  # noqa: S324 - Maven Central's own checksum
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def libs_dir() -> pathlib.Path:
    override = os.environ.get(LIBS_ENV)
    if override:
        return pathlib.Path(override)
    return home() / "kafka" / f"libs-{KAFKA_VERSION}"


def libs_ready(folder: pathlib.Path | None = None) -> bool:
    folder = folder or libs_dir()
    if os.environ.get(LIBS_ENV):
        return any(folder.glob("kafka_2.13-*.jar"))
    return (folder / ".complete").is_file()


def fetch(progress=print) -> pathlib.Path:  # noqa: ANN001 - a print-like callable
    """Make sure the broker's jars are in the cache; download them with Maven if not."""
    folder = libs_dir()
    if libs_ready(folder):
        return folder
    if os.environ.get(LIBS_ENV):
        raise LocalKafkaError(f"{LIBS_ENV}={folder}: no kafka_2.13-*.jar there; expected the libs/ folder of a "
                              "Kafka 4.x distribution")
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalKafkaError("fetching Kafka's jars needs Maven ('mvn' on PATH; e.g. apt-get install maven), or "
                              f"set {LIBS_ENV} to the libs/ folder of an Apache Kafka {KAFKA_VERSION} download")
    artifacts = locked_artifacts()
    progress(f"fetching Apache Kafka {KAFKA_VERSION} ({len(artifacts)} jars) from Maven Central into {folder} ...")
    deps = "\n".join(
        f"<dependency><groupId>{a.group}</groupId><artifactId>{a.artifact}</artifactId><version>{a.version}"
        "</version><exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>"
        "</dependency>"
        for a in artifacts
    )
    pom = (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>io.lineagewire</groupId><artifactId>local-kafka</artifactId><version>1</version>"
        f"<dependencies>{deps}</dependencies></project>"
    )
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(prefix="libs-", dir=folder.parent))
    try:
        (staging / "pom.xml").write_text(pom)
        cmd = [mvn, "-B", "-q", "-f", str(staging / "pom.xml"), "dependency:copy-dependencies",
               f"-DoutputDirectory={staging / 'libs'}"]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
        if run.returncode != 0:
            tail = (run.stdout + run.stderr).strip().splitlines()[-15:]
            raise LocalKafkaError("Maven could not fetch Kafka's jars (is Maven Central reachable?):\n"
                                  + "\n".join(tail))
        for a in artifacts:
            jar = staging / "libs" / a.jar_name
            if not jar.is_file():
                raise LocalKafkaError(f"Maven did not deliver {a.jar_name}")
            if _sha1(jar) != a.sha1:
                raise LocalKafkaError(f"{a.jar_name}: SHA-1 {_sha1(jar)} but the lock file expects {a.sha1}")
        (staging / "libs" / ".complete").write_text(KAFKA_VERSION + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        (staging / "libs").rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    progress(f"Kafka jars ready in {folder}")
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


_LOG4J = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {logs}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
"""


class LocalKafka:
    """One local broker: ``start()``, ``stop()``, ``status()``; a context manager too."""

    def __init__(self, name: str = "default", port: int = 9092, controller_port: int | None = None,
                 base: pathlib.Path | None = None, heap: str = "512m") -> None:
        if not 0 < port < 65536:
            raise LocalKafkaError(f"port={port}: expected 1..65535")
        self.name = name
        self.port = port
        self.controller_port = controller_port or (port + 1)
        self.dir = (base or home() / "kafka") / name
        self.data_dir = self.dir / "data"
        self.logs_dir = self.dir / "logs"
        self.pid_file = self.dir / "broker.pid"
        self.heap = heap
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _write_config(self) -> pathlib.Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(exist_ok=True)
        props = self.dir / "server.properties"
        props.write_text(
            "\n".join([
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.bootstrap.servers=127.0.0.1:{self.controller_port}",
                f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                f"log.dirs={self.data_dir}",
                "num.partitions=1",
                "offsets.topic.replication.factor=1",
                "offsets.topic.num.partitions=4",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "share.coordinator.state.topic.replication.factor=1",
                "share.coordinator.state.topic.min.isr=1",
                "group.initial.rebalance.delay.ms=0",
                "log.retention.hours=168",
                "",
            ])
        )
        (self.dir / "log4j2.properties").write_text(_LOG4J.format(logs=self.logs_dir))
        return props

    def _java(self) -> str:
        java = shutil.which("java")
        if java is None:
            raise LocalKafkaError("the local broker needs Java 17+ ('java' on PATH)")
        return java

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return pid
        return pid

    def status(self) -> dict[str, object]:
        pid = self.pid()
        return {"name": self.name, "running": pid is not None, "pid": pid, "bootstrap_servers": self.bootstrap_servers,
                "answering": pid is not None and _port_open(self.port), "data_dir": str(self.data_dir),
                "logs_dir": str(self.logs_dir)}

    def start(self, timeout: float = 90.0, progress=lambda msg: None) -> LocalKafka:  # noqa: ANN001
        if self.pid() is not None:
            if not _port_open(self.port):
                self._wait_ready(timeout)
            return self
        if _port_open(self.port):
            raise LocalKafkaError(f"port {self.port} on 127.0.0.1 is taken by another process; choose another "
                                  "with --port")
        libs = fetch(progress)
        props = self._write_config()
        java = self._java()
        cp = f"{libs}/*"
        if not (self.data_dir / "meta.properties").exists():
            fmt = subprocess.run(
                [java, "-cp", cp, f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
                 "kafka.tools.StorageTool", "format",
                 # --cluster-id=... form: a random id may start with '-', which argparse takes for a flag
                 f"--cluster-id={_new_cluster_id()}", "-c", str(props), "--standalone",
                 "--ignore-formatted"],
                capture_output=True, text=True, timeout=120, check=False,
            )
            if fmt.returncode != 0:
                raise LocalKafkaError(f"formatting KRaft storage in {self.data_dir} failed:\n{fmt.stdout}{fmt.stderr}")
        out = (self.logs_dir / "kafka.out").open("ab")
        proc = subprocess.Popen(
            [java, f"-Xmx{self.heap}", "-Xms128m", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1",
             "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
             "-cp", cp, "kafka.Kafka", str(props)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
        out.close()
        self._proc = proc  # kept so stop() reaps it; the broker outlives this process otherwise
        self.pid_file.write_text(f"{proc.pid}\n")
        progress(f"started Kafka {KAFKA_VERSION} (pid {proc.pid}) on {self.bootstrap_servers}; logs in {self.logs_dir}")
        try:
            self._wait_ready(timeout, proc)
        except LocalKafkaError:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise LocalKafkaError(f"the broker exited with code {proc.returncode}:\n{self._log_tail()}")
            if _port_open(self.port):
                try:
                    md = AdminClient({"bootstrap.servers": self.bootstrap_servers}).list_topics(timeout=5)
                    if md.brokers:
                        return
                except Exception:  # noqa: BLE001,S110 - not ready yet
                    pass
            time.sleep(0.3)
        raise LocalKafkaError(f"the broker did not answer on {self.bootstrap_servers} within {timeout:.0f}s:\n"
                              f"{self._log_tail()}")

    def _log_tail(self, lines: int = 20) -> str:
        text = ""
        for name in ("kafka.out", "server.log"):
            path = self.logs_dir / name
            if path.exists():
                text += "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) + "\n"
        return text or "(no log output)"

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop the broker: SIGTERM, then SIGKILL after ``timeout``. False if it was not running."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.pid() is not None:
            _reap(pid)
            time.sleep(0.2)
        if self.pid() is not None:
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)
            _reap(pid)
        if self._proc is not None:
            self._proc.wait(timeout=10)
            self._proc = None
        self.pid_file.unlink(missing_ok=True)
        return True

    def wipe(self) -> None:
        """Stop and delete this broker's data and logs (not the jar cache)."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> LocalKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _new_cluster_id() -> str:
    # KRaft cluster ids are 16 random bytes, base64url without padding (22 characters).
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
