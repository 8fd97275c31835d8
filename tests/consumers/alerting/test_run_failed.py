"""What a ``run_failed`` alert says: the line of the error a person needs, not a Python worker's preamble."""

from __future__ import annotations

from lineagewire.consumers.alerting.config import parse_config
from lineagewire.consumers.alerting.engine import RuleEngine

from .events import T0, RunBuilder

UDF_ERROR = {
    "error_class": "pyspark.errors.exceptions.captured.PythonException",
    "message": ("\n  An exception was thrown from the Python worker. Please see the stack trace below.\n"
                "Traceback (most recent call last):\n  File \"job.py\", line 52, in explode\n"
                "ValueError: bad amount 25.0\n"),
    "stack_trace": "org.apache.spark.api.python.PythonException: ...",
}


def _summary(error: dict) -> str:
    e = RuleEngine(parse_config({"rules": [{"name": "f", "kind": "run_failed"}]}).build_rules())
    fired = [s for ev in RunBuilder().life(T0, 10, end="FAILED", error=error) for s in e.process(ev) if s.firing]
    assert len(fired) == 1
    return fired[0].annotations["summary"]


def test_a_python_udf_failure_is_summarised_by_the_traceback_s_last_line() -> None:
    summary = _summary(UDF_ERROR)
    assert summary.endswith("PythonException: ValueError: bad amount 25.0"), summary
    assert "Python worker" not in summary


def test_a_one_line_error_is_kept_whole_and_a_multi_line_one_by_its_first_line() -> None:
    assert _summary({"error_class": "E", "message": "Job aborted: boom", "stack_trace": None}).endswith(
        "failed: E: Job aborted: boom")
    assert _summary({"error_class": "E", "message": "Job aborted: boom\ncaused by x", "stack_trace": None}).endswith(
        "failed: E: Job aborted: boom")
