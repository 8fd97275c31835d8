"""The hooks call the public SparkCallbacks protocol, and nothing else: any implementation works."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from lineagewire.producers.spark import Emitter, SparkCallbacks
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
