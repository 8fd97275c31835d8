"""The hooks call the public SparkCallbacks protocol, and nothing else: any implementation works."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from lineagewire.producers.spark import Emitter, SparkCallbacks, internals
from lineagewire.producers.spark.hooks import SparkHooks
from tests.helpers import wait_for

pytestmark = [pytest.mark.spark]


class Recorder:
    """A SparkCallbacks that is not an Emitter: records what Spark's listeners call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.lock = threading.Lock()

    def on_action(self, func_name: str, qe: Any, duration_ns: int | None, exception: Any) -> None:
        with self.lock:
            self.calls.append(("action", (func_name, duration_ns is not None, exception is None)))

    def on_application_end(self) -> None:
        self.calls.append(("application_end", None))

    def on_stream_started(self, event: Any) -> None:
        self.calls.append(("stream_started", event.name))

    def on_stream_progress(self, event: Any) -> None:
        self.calls.append(("stream_progress", event.progress.name))

    def on_stream_terminated(self, event: Any) -> None:
        self.calls.append(("stream_terminated", event.exception))

    def on_connect_event(self, kind: str, fields: dict[str, Any]) -> None:
        self.calls.append(("connect_event", kind))

    def on_connect_action(self, session_id: str, func_name: str, qe: Any, duration_ns: int | None,
                          exception: Any) -> None:
        self.calls.append(("connect_action", (session_id, func_name)))


def test_emitter_implements_the_protocol() -> None:
    assert issubclass(Emitter, SparkCallbacks)
    assert isinstance(Recorder(), SparkCallbacks)


def test_hooks_drive_any_callbacks_implementation(spark) -> None:  # noqa: ANN001
    recorder = Recorder()
    hooks = SparkHooks(recorder, spark, spark_listener=False, streaming_listener=True)
    try:
        hooks.install()
        spark.range(7).count()
        with pytest.raises(Exception, match="boom"):
            spark.range(1).selectExpr("raise_error('boom')").collect()
        query = (spark.readStream.format("rate").option("rowsPerSecond", 5).load()
                 .writeStream.format("noop").queryName("recorded").trigger(processingTime="200 milliseconds").start())
        try:
            wait_for(lambda: ("stream_progress", "recorded") in recorder.calls, timeout=120)
        finally:
            query.stop()
        hooks.wait_for_bus(30)
        wait_for(lambda: ("stream_terminated", None) in recorder.calls, timeout=60)
    finally:
        hooks.remove()
    actions = [args for what, args in recorder.calls if what == "action"]
    assert ("count", True, True) in actions
    assert ("collectToPython", False, False) in actions  # the failed collect(), with its Java exception
    assert ("stream_started", "recorded") in recorder.calls
    # removed: later actions reach nobody
    before = len(recorder.calls)
    spark.range(3).count()
    hooks.wait_for_bus(30)
    assert len(recorder.calls) == before


def _bus_listeners(spark: Any) -> int:
    """How many SparkListeners Spark's listener bus holds (the JVM's own list)."""
    return int(internals.java_spark_context(spark).listenerBus().listeners().size())


def _actions_heard(spark: Any, hooks: SparkHooks, recorder: Recorder) -> int:
    """Run one action; how many query listener calls it made (each on_action is a registered listener)."""
    before = len(recorder.calls)
    spark.range(2).count()
    assert hooks.wait_for_bus(30), "Spark's listener bus did not drain within 30 s"
    return len(recorder.calls) - before


def test_a_failure_halfway_through_install_leaves_nothing_registered(spark, monkeypatch) -> None:  # noqa: ANN001
    from pyspark.sql.streaming import StreamingQueryManager

    recorder = Recorder()
    hooks = SparkHooks(recorder, spark, spark_listener=True, streaming_listener=True)
    spark.streams.active  # noqa: B018 - the session's streaming bus joins the listener bus at first use: before counting
    listeners_before = _bus_listeners(spark)
    seen: dict[str, int] = {}

    def refuse(manager: Any, listener: Any) -> None:
        # By now the query listener (and the SparkListener, unless its classes are still compiling) is in.
        seen["ready"] = hooks.spark_listener_ready.is_set()  # set once the SparkListener is on the bus
        seen["heard"] = _actions_heard(spark, hooks, recorder)
        seen["listeners"] = _bus_listeners(spark)
        raise RuntimeError("no streaming listener today")

    monkeypatch.setattr(StreamingQueryManager, "addListener", refuse)
    with pytest.raises(RuntimeError, match="no streaming listener today"):
        hooks.install()
    assert seen["heard"] == 1, f"the query listener was not registered before the failure: {seen}"
    assert hooks.spark_listener_ready.wait(120), "the SparkListener's compile did not finish"
    if seen["ready"] and hooks.spark_listener_kind is not None:
        # Its classes compiled in time (on a busy machine they may not: then it is registered after the failure,
        # and the check below says that one is undone too).
        assert seen["listeners"] == listeners_before + 1
    assert _bus_listeners(spark) == listeners_before, "a SparkListener of ours is left on Spark's listener bus"
    assert _actions_heard(spark, hooks, recorder) == 0, "the query listener is still registered"
    hooks.remove()  # what the emitter's close() does after a failed install: nothing left, nothing raised


def test_install_and_remove_make_no_jvm_call_while_holding_the_lock(spark, monkeypatch) -> None:  # noqa: ANN001
    # A JVM call under the lock can deadlock: removing a listener can wait for the listener bus, whose
    # thread may be in a callback (a Spark Connect event) waiting for the same lock.
    from py4j.java_gateway import GatewayClient

    hooks = SparkHooks(Recorder(), spark, spark_listener=True, streaming_listener=True)
    calls = {"total": 0, "locked": 0}
    send = GatewayClient.send_command

    def watched(client: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is threading.main_thread():
            calls["total"] += 1
            calls["locked"] += hooks._lock.locked()
        return send(client, command, *args, **kwargs)

    monkeypatch.setattr(GatewayClient, "send_command", watched)
    try:
        hooks.install()
        assert hooks.spark_listener_ready.wait(120), "the SparkListener's compile did not finish"
        hooks.job_counts()
    finally:
        hooks.remove()
    assert calls["total"] > 0, "no py4j call was seen: the check watched nothing"
    assert calls["locked"] == 0, f"{calls['locked']} of {calls['total']} py4j calls were made holding the lock"
