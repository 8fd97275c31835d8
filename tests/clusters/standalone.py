"""A Spark standalone cluster from the pip PySpark: a master and one worker (1 core, 1 GB), on 127.0.0.1."""

from __future__ import annotations

import os
import pathlib

from tests.clusters.process import ServerProcess


def spark_home() -> pathlib.Path:
    """The pip PySpark's package folder: it holds Spark's bin/ and jars/ (SPARK_HOME for bin/spark-submit)."""
    import pyspark

    return pathlib.Path(pyspark.__file__).parent


def spark_environment() -> dict[str, str]:
    """The environment of Spark's scripts and servers here: this PySpark, and every server on 127.0.0.1."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEAGEWIRE_", "PYSPARK_", "SPARK_"))}
    env.pop("PYTHONPATH", None)
    return {**env, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1"}


class SparkStandalone:
    """``bin/spark-class`` running a Master and a Worker in ``base``; ``master_url`` is ``spark://127.0.0.1:PORT``."""

    def __init__(self, base: pathlib.Path) -> None:
        self.base = base
        self.master_url = ""
        self._servers: list[ServerProcess] = []

    def _start(self, name: str, *args: str) -> ServerProcess:
        spark_class = str(spark_home() / "bin" / "spark-class")
        server = ServerProcess(name, [spark_class, *args], self.base / f"{name}.log", env=spark_environment(),
                               cwd=self.base)
        self._servers.append(server)
        return server

    def start(self, timeout: float = 120.0) -> SparkStandalone:
        try:
            master = self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                 "--port", "0", "--webui-port", "0")
            self.master_url = master.wait_for(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)", timeout).group(1)
            master.wait_for(r"I have been elected leader", timeout)
            worker = self._start("worker", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                 "--port", "0", "--webui-port", "0", "--cores", "1", "--memory", "1g",
                                 "--work-dir", str(self.base / "work"), self.master_url)
            worker.wait_for(r"Successfully registered with master", timeout)
        except AssertionError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for server in reversed(self._servers):
            server.stop()
