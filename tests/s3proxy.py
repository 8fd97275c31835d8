"""A real S3-compatible server for tests: s3proxy (Maven Central) on 127.0.0.1, storing in a temporary folder.

The jar (``org.gaul:s3proxy:<version>:jar-with-dependencies``, one file) is fetched once with Maven into
``~/.lineagewire/s3proxy/`` (``LINEAGEWIRE_HOME`` moves it, as for the Kafka jars) and checked against
the SHA-1 pinned here, which is Maven Central's own checksum. It serves S3 over HTTP with AWS
signatures, keeping each bucket as a folder (``jclouds.provider=filesystem-nio2``).

botocore's default request checksums are not understood by s3proxy: clients need
``AWS_REQUEST_CHECKSUM_CALCULATION=when_required`` (``LocalS3.client_env``).
"""

from __future__ import annotations

import hashlib
import pathlib
import shutil
import socket
import subprocess
import tempfile
from typing import Any

from lineagewire.kafka.local import free_port, home
from lineagewire.processes import stop_process
from tests.helpers import wait_for

__all__ = ["LocalS3", "S3ProxyUnavailable", "fetch_jar"]

VERSION = "2.6.0"
SHA1 = "cada399d8a8155d40f82f6a3d22f0288c96046d0"
JAR = f"s3proxy-{VERSION}-jar-with-dependencies.jar"
KEY, SECRET = "lineagewire-test", "lineagewire-test-secret"


class S3ProxyUnavailable(RuntimeError):
    """The jar cannot be had here (no Maven, no Java, or Maven Central unreachable); the message says which."""


def _sha1(path: pathlib.Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()  # noqa: S324 - Maven Central's own checksum


def fetch_jar() -> pathlib.Path:
    """The s3proxy jar in the cache, fetched with Maven on first use."""
    folder = home() / "s3proxy"
    jar = folder / JAR
    if jar.is_file() and _sha1(jar) == SHA1:
        return jar
    mvn = shutil.which("mvn")
    if mvn is None:
        raise S3ProxyUnavailable("fetching s3proxy needs Maven ('mvn' on PATH; apt-get install maven)")
    folder.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(prefix="s3proxy-", dir=folder))
    try:
        cmd = [mvn, "-B", "-q", "dependency:copy", f"-Dartifact=org.gaul:s3proxy:{VERSION}:jar:jar-with-dependencies",
               f"-DoutputDirectory={staging}"]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
        got = staging / JAR
        if run.returncode != 0 or not got.is_file():
            tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-5:])
            raise S3ProxyUnavailable(f"Maven could not fetch org.gaul:s3proxy:{VERSION}: {tail}")
        if _sha1(got) != SHA1:
            raise S3ProxyUnavailable(f"{JAR}: SHA-1 {_sha1(got)}, expected {SHA1}")
        got.replace(jar)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return jar


class LocalS3:
    """s3proxy on a free port of 127.0.0.1 over a temporary folder; ``with LocalS3() as s3: s3.endpoint``.

    ``buckets`` exist from the start (a bucket is a folder of the filesystem provider).
    """

    def __init__(self, buckets: tuple[str, ...] = ("lineagewire",)) -> None:
        self.buckets = buckets
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    #: environment a botocore client needs for this server
    client_env = {"AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
                  "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required"}

    @property
    def storage_options(self) -> dict[str, Any]:
        """fsspec/s3fs options for this server (what ``--storage-option KEY=VALUE`` would pass)."""
        return {"endpoint_url": self.endpoint, "key": KEY, "secret": SECRET}

    def start(self, timeout: float = 120.0) -> LocalS3:
        java = shutil.which("java")
        if java is None:
            raise S3ProxyUnavailable("s3proxy needs Java ('java' on PATH)")
        jar = fetch_jar()
        self._dir = tempfile.TemporaryDirectory(prefix="lw-s3proxy-")
        root = pathlib.Path(self._dir.name)
        (root / "data").mkdir()
        for bucket in self.buckets:
            (root / "data" / bucket).mkdir()
        conf = root / "s3proxy.conf"
        conf.write_text("\n".join([
            f"s3proxy.endpoint={self.endpoint}", "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={KEY}", f"s3proxy.credential={SECRET}",
            "jclouds.provider=filesystem-nio2", f"jclouds.filesystem.basedir={root / 'data'}",
            f"jclouds.identity={KEY}", f"jclouds.credential={SECRET}", ""]))
        self._log = open(root / "s3proxy.log", "wb")  # noqa: SIM115 - lives as long as the process
        self._proc = subprocess.Popen([java, "-Xmx256m", "-jar", str(jar), "--properties", str(conf)],
                                      stdout=self._log, stderr=subprocess.STDOUT)
        def listening() -> bool:
            if self._proc.poll() is not None:
                raise S3ProxyUnavailable(f"s3proxy exited with {self._proc.returncode}: {self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return True
            except OSError:
                return False

        try:
            wait_for(listening, timeout)
        except AssertionError:
            self.stop()
            raise S3ProxyUnavailable(f"s3proxy did not listen on {self.port} within {timeout:.0f} s") from None
        return self

    def log_tail(self, lines: int = 15) -> str:
        if self._dir is None:
            return ""
        path = pathlib.Path(self._dir.name) / "s3proxy.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def stop(self) -> None:
        if self._proc is not None:
            stop_process(self._proc, 20)
        self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> LocalS3:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
