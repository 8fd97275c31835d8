"""Spark configuration alone turns the emitter on (issue 30, item 1): ``spark.lineagewire.enabled=true`` in
``spark-submit``, the ``pyspark`` shell and a session a notebook builds, with no wrapper and no code change.

The driver's Python is this venv's, where lineagewire is installed with its start-up hook
(``lineagewire-activate.pth``: the wheel's, or the copy ``make setup`` puts beside an editable install).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import sysconfig
import textwrap

import pytest

from lineagewire.config import Settings
from lineagewire.kafka.reader import TopicReader
from lineagewire.schemas import Codec, kind_of
from tests.helpers import wait_for

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "daily_orders.py"

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

JOB = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession

    out = sys.argv[1]
    spark = SparkSession.builder.getOrCreate()
    spark.range(4).selectExpr("id", "id * 2 AS twice").write.mode("overwrite").parquet(out + "/a")
    spark.read.parquet(out + "/a").selectExpr("twice + 1 AS odd").write.mode("overwrite").parquet(out + "/b")
    print("job: done", flush=True)
""")


@pytest.fixture(autouse=True)
def _hook_installed() -> None:
    pth = pathlib.Path(sysconfig.get_paths()["purelib"], "lineagewire-activate.pth")
    assert pth.is_file(), f"{pth} is missing: run make setup (the wheel installs it; setup.py)"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEAGEWIRE_", "SPARK_REMOTE", "PYSPARK_"))}
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def _spark_bin(name: str) -> str:
    import pyspark

    return str(pathlib.Path(pyspark.__file__).parent / "bin" / name)


def _confs(settings: Settings, tmp_path: pathlib.Path, enabled: str = "true") -> list[str]:
    pairs = {"spark.lineagewire.enabled": enabled, "spark.lineagewire.bootstrap_servers": settings.bootstrap_servers,
             "spark.lineagewire.topic": settings.topics.jobs, "spark.lineagewire.namespace": "activation",
             "spark.lineagewire.outbox_dir": str(tmp_path / "outbox"), "spark.lineagewire.time_budget_ms": "10000",
             "spark.ui.enabled": "false"}
    return [arg for k, v in pairs.items() for arg in ("--conf", f"{k}={v}")]


def _events(settings: Settings) -> list[dict]:
    codec = Codec()
    with TopicReader(settings, settings.topics.jobs, start="beginning", end="end") as reader:
        return sorted((codec.decode(m.value()) for m in reader), key=lambda e: e["header"]["sequence"])


def _check_run(events: list[dict], job_name: str, out: pathlib.Path) -> None:
    assert {(e["header"]["job_namespace"], e["header"]["job_name"]) for e in events} == {("activation", job_name)}
    assert kind_of(events[0]) == "JobCreatedEvent"
    assert [(e["old_status"], e["new_status"]) for e in events if kind_of(e) == "JobStatusChangedEvent"] == \
        [("CREATED", "RUNNING"), ("RUNNING", "FINISHED")]
    writes = {d["name"]: a for a in events if kind_of(a) == "ActionLineageEvent" for d in a["outputs"]}
    assert set(writes) == {str(out / "a"), str(out / "b")}
    assert {d["name"] for d in writes[str(out / "b")]["inputs"]} == {str(out / "a")}
    edges = {(c["field"], f["field"]) for c in writes[str(out / "b")]["column_lineage"] for f in c["inputs"]}
    assert ("odd", "twice") in edges


def test_spark_submit_with_the_conf_alone_publishes_the_run(settings, tmp_path) -> None:  # noqa: ANN001
    script, out = tmp_path / "job.py", tmp_path / "out"
    script.write_text(JOB)
    proc = subprocess.run([_spark_bin("spark-submit"), "--master", "local[1]", "--name", "submitted",
                           *_confs(settings, tmp_path), str(script), str(out)],
                          env=_env(), cwd=tmp_path, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "job: done" in proc.stdout and "lineagewire:" not in proc.stdout + proc.stderr
    _check_run(_events(settings), "submitted", out)


@pytest.mark.parametrize("prefix", ["LINEAGEWIRE_EMITTER__", "LINEAGEWIRE_"])
def test_the_drivers_environment_alone_publishes_the_run(settings, tmp_path, prefix: str) -> None:  # noqa: ANN001
    """``LINEAGEWIRE_EMITTER__ENABLED`` and the other ``LINEAGEWIRE_EMITTER__*`` variables (issue 32, item 3), or
    their flat names of before (``LINEAGEWIRE_ENABLED``...), which still work and say their new names."""
    script, out = tmp_path / "job.py", tmp_path / "out"
    script.write_text(JOB)
    variables = {"ENABLED": "true", "BOOTSTRAP_SERVERS": settings.bootstrap_servers, "TOPIC": settings.topics.jobs,
                 "NAMESPACE": "activation", "OUTBOX_DIR": str(tmp_path / "outbox"), "TIME_BUDGET_MS": "10000"}
    env = {**_env(), **{prefix + k: v for k, v in variables.items()}}
    proc = subprocess.run([_spark_bin("spark-submit"), "--master", "local[1]", "--name", "submitted",
                           "--conf", "spark.ui.enabled=false", str(script), str(out)],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check_run(_events(settings), "submitted", out)
    warned = "LINEAGEWIRE_NAMESPACE is deprecated; use LINEAGEWIRE_EMITTER__NAMESPACE"
    # spark-submit hands the Python driver's stderr to its own stdout
    assert (warned in proc.stdout + proc.stderr) == (prefix == "LINEAGEWIRE_"), proc.stdout[-3000:]


def test_the_pyspark_shell_with_the_conf_publishes_its_session(settings, tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "out"
    statements = (f"spark.range(4).selectExpr('id', 'id * 2 AS twice').write.parquet({str(out / 'a')!r})\n"
                  f"spark.read.parquet({str(out / 'a')!r}).selectExpr('twice + 1 AS odd')"
                  f".write.parquet({str(out / 'b')!r})\n"
                  "print('shell: done')\n")
    # -i: the shell's start-up file (PYTHONSTARTUP, pyspark/shell.py) runs with statements on a pipe too
    env = {**_env(), "PYSPARK_DRIVER_PYTHON_OPTS": "-i"}
    proc = subprocess.run([_spark_bin("pyspark"), "--master", "local[1]", "--name", "shell",
                           "--conf", "spark.sql.catalogImplementation=in-memory", *_confs(settings, tmp_path)],
                          input=statements, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "shell: done" in proc.stdout
    _check_run(_events(settings), "shell", out)


def test_a_session_built_in_a_notebook_kernel_with_the_key_publishes(settings, tmp_path) -> None:  # noqa: ANN001
    """A kernel is a plain Python process that builds its own session: the key goes in the builder's config."""
    out = tmp_path / "out"
    confs = _confs(settings, tmp_path)
    builder = "".join(f".config({k!r}, {v!r})" for k, v in (c.split("=", 1) for c in confs[1::2]))
    code = JOB.replace("SparkSession.builder.getOrCreate()",
                       f"SparkSession.builder.master('local[1]').appName('notebook'){builder}.getOrCreate()")
    proc = subprocess.run([sys.executable, "-c", code, str(out)], env=_env(), cwd=tmp_path, capture_output=True,
                          text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check_run(_events(settings), "notebook", out)


@pytest.mark.parametrize(("value", "said"), [
    ("false", None),
    ("maybe", "lineagewire: spark.lineagewire.enabled='maybe' is not a boolean; expected true or false; "
              "the job runs without the emitter"),
])
def test_without_the_key_set_to_true_the_job_runs_untouched(settings, tmp_path, value, said) -> None:  # noqa: ANN001
    script, out = tmp_path / "job.py", tmp_path / "out"
    script.write_text(JOB)
    proc = subprocess.run([_spark_bin("spark-submit"), "--master", "local[1]", *_confs(settings, tmp_path, value),
                           str(script), str(out)], env=_env(), cwd=tmp_path, capture_output=True, text=True,
                          timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "job: done" in proc.stdout and (out / "b").is_dir()
    # spark-submit's PythonRunner hands the driver's stderr to its own stdout
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("lineagewire")]
    assert lines == ([said] if said else []), proc.stdout[-3000:]
    assert _events(settings) == []


@pytest.fixture(scope="session")
def jre(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A Java runtime without a compiler, as a cluster's driver container often has: jlink of this JDK's modules
    less the compiler's (no bin/javac, no javax.tools compiler)."""
    java_home = pathlib.Path(os.environ.get("JAVA_HOME") or pathlib.Path(shutil.which("java") or "java").resolve()
                             .parent.parent)
    jlink = java_home / "bin" / "jlink"
    assert jlink.is_file(), f"no jlink in {java_home}: the test needs a JDK to make a JRE from"
    listed = subprocess.run([str(java_home / "bin" / "java"), "--list-modules"], capture_output=True, text=True,
                            check=True).stdout
    tools = {"jdk.compiler", "jdk.javadoc", "jdk.jshell", "jdk.jdeps", "jdk.jlink", "jdk.jpackage", "jdk.jartool",
             "jdk.jconsole", "jdk.hotspot.agent", "jdk.internal.ed", "jdk.internal.le", "jdk.internal.opt",
             "jdk.editpad", "jdk.jstatd", "jdk.random"}
    modules = [m.split("@")[0] for m in listed.split()]
    out = tmp_path_factory.mktemp("jre") / "jre"
    subprocess.run([str(jlink), "--add-modules", ",".join(m for m in modules if m not in tools), "--output", str(out),
                    "--no-header-files", "--no-man-pages"], capture_output=True, text=True, check=True, timeout=300)
    assert not (out / "bin" / "javac").exists()
    return out


def test_a_driver_without_a_jdk_reports_through_the_python_listener(settings, tmp_path, jre) -> None:  # noqa: ANN001
    """No javac anywhere (JAVA_HOME a JRE, PATH without javac, an empty LINEAGEWIRE_HOME so no compiled classes are
    cached): the emitter says so once and the run's statuses and lineage come through the fallback listener."""
    path = tmp_path / "path"
    path.mkdir()
    for folder in dict.fromkeys(os.environ["PATH"].split(os.pathsep)):
        for tool in pathlib.Path(folder).glob("*") if pathlib.Path(folder).is_dir() else ():
            link = path / tool.name
            if not tool.name.startswith("javac") and not link.exists():
                link.symlink_to(tool)
    script, out = tmp_path / "job.py", tmp_path / "out"
    script.write_text(JOB)
    env = {**_env(), "JAVA_HOME": str(jre), "PATH": str(path), "LINEAGEWIRE_HOME": str(tmp_path / "home")}
    proc = subprocess.run([_spark_bin("spark-submit"), "--master", "local[1]", "--name", "no-jdk",
                           *_confs(settings, tmp_path), str(script), str(out)],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=400)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said[-3000:]
    assert said.count("lineagewire's JVM SparkListener is unavailable (no javac in the driver's JDK") == 1, said[-3000:]
    assert not (tmp_path / "home" / "jvm").exists() or not any((tmp_path / "home" / "jvm").rglob("*.class"))
    _check_run(_events(settings), "no-jdk", out)


def test_a_broker_the_driver_cannot_resolve_is_one_line_and_the_events_wait(settings, tmp_path) -> None:  # noqa: ANN001
    script, out = tmp_path / "job.py", tmp_path / "out"
    script.write_text(JOB)
    unresolvable = Settings(bootstrap_servers="nonexistent.invalid:9092")
    proc = subprocess.run([_spark_bin("spark-submit"), "--master", "local[1]", *_confs(unresolvable, tmp_path),
                           str(script), str(out)], env=_env(), cwd=tmp_path, capture_output=True, text=True,
                          timeout=400)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "job: done" in proc.stdout, said[-3000:]
    # One line says the name does not resolve, however often librdkafka retries. The exit may add one more that
    # names the broker: how many events it did not acknowledge, waiting in the outbox (when the process lives
    # long enough after the flush timeout to say it).
    resolve = [line for line in said.splitlines() if "Failed to resolve" in line]
    assert len(resolve) == 1 and "Failed to resolve 'nonexistent.invalid:9092'" in resolve[0], resolve
    others = [line for line in said.splitlines() if "nonexistent.invalid" in line and line not in resolve]
    assert all("not acknowledged by nonexistent.invalid:9092" in line for line in others), others
    # created, RUNNING, FINISHED and the two writes: kept for the next start (or `lineagewire` outbox re-send)
    assert len(list((tmp_path / "outbox").rglob("*.evt"))) >= 5


HELD_JOB = textwrap.dedent("""
    import signal
    import sys
    import threading

    import lineagewire.producers.spark.lineage as lineage
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    extracting = threading.Event()

    def busy_driver(qe, func_name, *, budget_s, stop):
        extracting.set()
        threading.Event().wait()  # a driver too busy to extract the first write before it is stopped

    def held(value):
        signal.pause()  # until the test stops the driver
        return value

    lineage.extract_action_lineage = busy_driver
    out = sys.argv[1]
    spark = SparkSession.builder.getOrCreate()
    spark.range(4).write.mode("overwrite").parquet(out + "/a")
    assert extracting.wait(120)
    print("job: holding", flush=True)
    spark.read.parquet(out + "/a").select(F.udf(held, "long")("id").alias("id")).write.parquet(out + "/b")
""")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop_as_yarn_does(proc: subprocess.Popen) -> None:
    """SIGTERM to the driver's process group, and SIGKILL to what still lives of it 250 ms later, as YARN's node
    manager stops a container (``yarn.nodemanager.sleep-delay-before-sigkill.ms``)."""
    os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(AssertionError):  # the grace ran out: what lives is killed, as YARN does
        wait_for(lambda: proc.poll() is not None and not _group_alive(proc.pid), timeout=0.25, every=0.01)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def test_a_driver_stopped_as_yarn_stops_it_ends_its_run_canceled_within_the_grace(settings, tmp_path) -> None:  # noqa: ANN001
    """A cluster manager stops a driver with SIGTERM to its process group and SIGKILL shortly after: 250 ms on YARN
    (``yarn.nodemanager.sleep-delay-before-sigkill.ms``). The run must end CANCELED within that grace, while a
    write is still running and an earlier write's lineage is still being extracted, on every Spark line
    (test_clusters.py's YARN kill runs in the 3.5 stage only)."""
    script, out, log = tmp_path / "job.py", tmp_path / "out", tmp_path / "driver.log"
    script.write_text(HELD_JOB)
    with log.open("w") as sink:
        proc = subprocess.Popen([_spark_bin("spark-submit"), "--master", "local[2]", "--name", "stopped",
                                 *_confs(settings, tmp_path), str(script), str(out)],
                                env=_env(), cwd=tmp_path, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: "job: holding" in log.read_text() or proc.poll() is not None, timeout=300)
        assert proc.poll() is None, log.read_text()[-3000:]
        wait_for(lambda: any(e.get("new_status") == "RUNNING" for e in _events(settings)), timeout=60)
        _stop_as_yarn_does(proc)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(60)
    events = _events(settings)
    changes = [e for e in events if kind_of(e) == "JobStatusChangedEvent"]
    assert [(e["old_status"], e["new_status"]) for e in changes] == [("CREATED", "RUNNING"), ("RUNNING", "CANCELED")], \
        log.read_text()[-5000:]
    assert "terminated by signal 15" in changes[-1]["error"]["message"]
    assert not any(d["name"] == str(out / "b") for e in events if kind_of(e) == "ActionLineageEvent"
                   and e["action_status"] == "SUCCEEDED" for d in e["outputs"])
