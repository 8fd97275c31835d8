"""A job that fails, listeners that fail or block, a listener name that does not exist."""

from __future__ import annotations

import json
import signal
import threading

import pytest

from lineagewire.producers.spark import (
    JobStatusListener,
    JobStatusListenerFactory,
    UnknownListenerError,
    install,
    job_run,
)
from tests.helpers import wait_for

pytestmark = [pytest.mark.spark]


def _kind(e: dict) -> str:
    return e["header"]["schema_name"].rsplit(".", 1)[1]


def _read_jsonl(path) -> list[dict]:  # noqa: ANN001
    return [json.loads(line) for line in path.read_text().splitlines()]


class RaisingListener(JobStatusListener):
    calls = 0

    def on_event(self, event: dict) -> None:
        type(self).calls += 1
        raise RuntimeError("this listener always fails")


class RaisingListenerFactory(JobStatusListenerFactory):
    def create_listener(self, context):  # noqa: ANN001, ANN201
        return RaisingListener()


RELEASE = threading.Event()


class BlockingListener(JobStatusListener):
    def on_event(self, event: dict) -> None:
        RELEASE.wait(60)


def blocking_listener(context):  # noqa: ANN001, ANN201 - a plain callable works as a factory too
    return BlockingListener()


def test_failing_udf_ends_the_run_failed_with_the_error(spark, make_emitter, tmp_path) -> None:  # noqa: ANN001
    from pyspark.sql import functions as F

    path = tmp_path / "events.jsonl"
    emitter = make_emitter(listeners=["file"], config={"file_path": str(path)})

    @F.udf("double")
    def explode(x):  # noqa: ANN001, ANN202
        raise ValueError(f"bad amount {x}")

    with pytest.raises(Exception, match="bad amount"), job_run(spark, "failing job") as run:
        spark.range(3).select(explode("id")).collect()
    emitter.close(20)

    mine = sorted((e for e in _read_jsonl(path) if e["header"]["run_id"] == run.run_id),
                  key=lambda e: e["header"]["sequence"])
    statuses = [(e["old_status"], e["new_status"]) for e in mine if _kind(e) == "JobStatusChangedEvent"]
    assert statuses == [("CREATED", "RUNNING"), ("RUNNING", "FAILED")]
    final = mine[-1]
    assert final["lifecycle_state"] == "FAILED"
    assert "PythonException" in final["error"]["error_class"]
    assert "bad amount" in final["error"]["message"] and "explode" in final["error"]["stack_trace"]
    failed_actions = [e for e in mine if _kind(e) == "ActionLineageEvent"]
    assert [a["action_status"] for a in failed_actions] == ["FAILED"]
    assert "bad amount" in failed_actions[0]["error"]["message"]
    # the application run itself went on and finished
    app = [e for e in _read_jsonl(path) if e["header"]["run_id"] == emitter.app_run.run_id]
    assert app[-1]["new_status"] == "FINISHED"


def test_a_query_that_fails_analysis_is_a_failed_action_without_a_plan(spark, make_emitter, tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "events.jsonl"
    emitter = make_emitter(listeners=["file"], config={"file_path": str(path)})
    with pytest.raises(Exception, match="nocol"), job_run(spark, "misspelt column") as run:
        spark.sql("SELECT nocol FROM range(3)").collect()
    emitter.close(20)
    actions = [e for e in _read_jsonl(path) if e["header"]["run_id"] == run.run_id and _kind(e) == "ActionLineageEvent"]
    if int(spark.version.split(".")[0]) < 4:
        assert actions == []  # Spark 3.5 tells query listeners nothing of a query it could not analyze
        return
    assert [(a["action_name"], a["action_status"], a["lineage_complete"]) for a in actions] == [
        ("analyze", "FAILED", False)]
    assert actions[0]["incomplete_reason"] == "the query failed analysis: it has no plan to read"
    assert "nocol" in actions[0]["error"]["message"] and actions[0]["inputs"] == []


def test_a_raising_and_a_blocking_listener_hurt_neither_the_job_nor_the_others(spark, make_emitter,  # noqa: ANN001
                                                                                tmp_path) -> None:
    path = tmp_path / "events.jsonl"
    RELEASE.clear()
    emitter = make_emitter(
        listeners=["tests.producers.spark.test_failures:RaisingListenerFactory", "file",
                   "tests.producers.spark.test_failures.blocking_listener"],
        config={"file_path": str(path), "queue_size": "2", "flush_timeout": "3"})
    try:
        with job_run(spark, "survivor"):
            for i in range(4):
                assert spark.range(10 + i).count() == 10 + i
        emitter.close(3)
        stats = emitter.stats()["listeners"]
    finally:
        RELEASE.set()

    events = _read_jsonl(path)
    # The file listener got everything: 3 app-run + 3 + 4 actions of the job run.
    assert len(events) == emitter.events == 10
    assert stats["tests.producers.spark.test_failures:RaisingListenerFactory"]["failed"] == 10
    assert stats["tests.producers.spark.test_failures.blocking_listener"]["dropped"] > 0
    assert stats["file"] == {"handled": 11, "failed": 0, "dropped": 0}  # 10 events and its close()


def test_unknown_listener_name_fails_at_start_listing_the_available_ones(spark, emitter_config) -> None:  # noqa: ANN001
    with pytest.raises(UnknownListenerError) as info:
        install(spark, listeners=["log", "kafak"], config=emitter_config)
    message = str(info.value)
    assert "'kafak'" in message and all(name in message for name in ("kafka", "log", "file"))
    assert getattr(spark, "_lineagewire_emitter", None) is None


def test_an_empty_listener_list_starts_none(spark, make_emitter) -> None:  # noqa: ANN001
    emitter = make_emitter(listeners=[])
    spark.range(2).count()
    emitter.close(5)
    assert emitter.stats()["listeners"] == {}
    assert emitter.events >= 4  # made, but handed to nobody


def test_interrupted_job_run_ends_canceled(spark, make_emitter, tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "events.jsonl"
    emitter = make_emitter(listeners=["file"], config={"file_path": str(path)})
    with pytest.raises(KeyboardInterrupt), job_run(spark, "interrupted") as run:
        spark.range(3).count()
        raise KeyboardInterrupt
    emitter.close(20)
    mine = [e for e in _read_jsonl(path) if e["header"]["run_id"] == run.run_id]
    final = max(mine, key=lambda e: e["header"]["sequence"])
    assert (final["new_status"], final["lifecycle_state"]) == ("CANCELED", "TERMINATED")
    assert final["error"]["error_class"] == "KeyboardInterrupt"


def _write_held_in_extraction(spark, make_emitter, tmp_path, monkeypatch, flush_timeout: str,  # noqa: ANN001
                               until: threading.Event | None = None):  # noqa: ANN202
    """An emitter writing to a file, and a Parquet write whose extraction is held (a driver too busy to extract)
    until ``until`` is set, else until the emitter's cut. Returns the emitter, the events' file and the output."""
    import lineagewire.producers.spark.lineage as lineage

    real = lineage.extract_action_lineage
    entered = threading.Event()

    def busy_driver(qe, func_name, *, budget_s, stop):  # noqa: ANN001, ANN202
        entered.set()
        (until or stop).wait(60)
        return real(qe, func_name, budget_s=budget_s, stop=stop)

    monkeypatch.setattr(lineage, "extract_action_lineage", busy_driver)
    path = tmp_path / "events.jsonl"
    emitter = make_emitter(listeners=["file"], config={"file_path": str(path), "flush_timeout": flush_timeout})
    out = tmp_path / "out"
    spark.createDataFrame([(1, "a")], "id INT, name STRING").write.parquet(str(out))
    assert entered.wait(30)
    return emitter, path, out


def test_an_action_still_being_extracted_at_close_is_sent_with_its_datasets_and_why(  # noqa: ANN001
        spark, make_emitter, tmp_path, monkeypatch) -> None:
    """A driver too busy to extract before ``spark.stop()`` (a YARN job's only write, on a loaded node): the
    action's event still goes out, cut at half the flush timeout, with the datasets the extraction names."""
    emitter, path, out = _write_held_in_extraction(spark, make_emitter, tmp_path, monkeypatch, "4")
    emitter.close()

    events = _read_jsonl(path)
    writes = [e for e in events if _kind(e) == "ActionLineageEvent" and [d["name"] for d in e["outputs"]] == [str(out)]]
    assert len(writes) == 1, [(_kind(e), e.get("outputs")) for e in events]
    (write,) = writes
    assert write["lineage_complete"] is False and write["column_lineage"] == []
    assert "the emitter closed" in write["incomplete_reason"], write["incomplete_reason"]
    assert events.index(write) < len(events) - 1 and events[-1]["new_status"] == "FINISHED"


def test_a_stopped_process_ends_its_run_before_it_waits_for_its_actions(  # noqa: ANN001
        spark, make_emitter, tmp_path, monkeypatch) -> None:
    """A driver stopped by its cluster manager (SIGTERM, then SIGKILL 250 ms later on YARN) closes CANCELED: the
    run's end goes out first, while an action's extraction still runs; the action follows it."""
    release = threading.Event()
    emitter, path, out = _write_held_in_extraction(spark, make_emitter, tmp_path, monkeypatch, "60", release)
    closing = threading.Thread(target=emitter.close, kwargs={
        "status": "CANCELED", "error": {"error_class": "KeyboardInterrupt", "message": "terminated by signal 15",
                                        "stack_trace": None}})
    closing.start()
    try:
        wait_for(lambda: any(e.get("new_status") == "CANCELED" for e in _read_jsonl(path)), timeout=20)
        assert closing.is_alive() and not any(_kind(e) == "ActionLineageEvent" for e in _read_jsonl(path))
    finally:
        release.set()
        closing.join(60)
    assert not closing.is_alive()
    events = _read_jsonl(path)
    (write,) = [e for e in events if _kind(e) == "ActionLineageEvent"]
    assert [d["name"] for d in write["outputs"]] == [str(out)]
    assert events.index(write) > [e.get("new_status") for e in events].index("CANCELED")


def test_a_stopping_process_ends_its_runs_canceled_when_the_jvm_reports_the_end_first(  # noqa: ANN001
        spark, make_emitter, tmp_path, monkeypatch) -> None:
    """SIGTERM reaches the driver's JVM and its Python together: the JVM's application-end callback can come
    before the KeyboardInterrupt that the SIGTERM handler raises reaches ``sys.excepthook``. The runs, the
    application's and an open ``job_run()``, end CANCELED either way, not FINISHED."""
    from lineagewire.producers.spark import instrument, process_hooks

    monkeypatch.setattr(process_hooks, "_uncaught", None)  # what the handler records; restored after the test
    path = tmp_path / "events.jsonl"
    emitter = make_emitter(listeners=["file"], config={"file_path": str(path)})
    run = emitter.start_run("nested")
    previous = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(KeyboardInterrupt, match="terminated by signal 15"):
            instrument.on_term(signal.SIGTERM, None)
    finally:
        signal.signal(signal.SIGTERM, previous)
    emitter.on_application_end()
    emitter.close()
    ends = {e["header"]["run_id"]: (e["new_status"], (e["error"] or {}).get("message"))
            for e in _read_jsonl(path) if e.get("new_status") in ("FINISHED", "FAILED", "CANCELED")}
    assert ends == {emitter.app_run.run_id: ("CANCELED", "terminated by signal 15"),
                    run.run_id: ("CANCELED", "terminated by signal 15")}
