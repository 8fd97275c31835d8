"""The public callback protocol between Spark's listeners (``hooks.py``) and whatever turns them into events.

``SparkHooks`` registers the listeners on a SparkSession and calls these
methods; ``Emitter`` implements them. The hooks know nothing else of the
emitter, so either side can change (or be replaced in a test) alone.

Rules for an implementation:

* Every method is called on one of Spark's listener-bus threads (or the
  py4j callback server's), never on the job's thread. It must return at once:
  hand the references on to a worker and return, or the bus backs up and
  Spark drops events.
* A method must not raise: an exception would reach Spark's bus (and its
  log) without helping anyone.
* The arguments are py4j objects (``QueryExecution``, Java throwables) or
  PySpark's streaming event objects. They stay valid while the SparkContext
  lives; read what you need on the worker, within its time budget.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["RddJobCallbacks", "SparkCallbacks"]


@runtime_checkable
class SparkCallbacks(Protocol):
    """What ``SparkHooks`` calls; see the module docstring for the threading rules."""

    def on_action(self, func_name: str, qe: Any, duration_ns: int | None, exception: Any) -> None:
        """One Spark action (SQL execution) ended: ``exception`` is None on success, a Java throwable on failure.

        ``func_name`` is Spark's name of the action (``count``, ``save``, ``command``...), ``qe`` the
        ``org.apache.spark.sql.execution.QueryExecution``, ``duration_ns`` None when it failed.
        """

    def on_application_end(self) -> None:
        """The SparkContext stopped (from the JVM side too): end what is open."""

    def on_stream_started(self, event: Any) -> None:
        """A streaming query started (PySpark's ``QueryStartedEvent``: ``id``, ``runId``, ``name``)."""

    def on_stream_progress(self, event: Any) -> None:
        """A micro-batch of a streaming query ended (``QueryProgressEvent``: ``progress``)."""

    def on_stream_terminated(self, event: Any) -> None:
        """A streaming query stopped (``QueryTerminatedEvent``: ``id``, ``exception``, ``errorClassOnException``)."""

    def on_connect_event(self, kind: str, fields: dict[str, Any]) -> None:
        """A Spark Connect server event: ``kind`` is its class name without ``SparkListenerConnect``.

        ``OperationStarted`` (``session_id``, ``user_id``, ``user_name``, ``operation_id``, ``job_tag``,
        ``statement_text``, ``session_tags``: the client's ``spark.addTag`` tags, and ``conf``: the client
        session's ``spark.app.name`` and ``spark.lineagewire.*`` settings), ``OperationFinished`` /
        ``OperationFailed`` (``error_message``) / ``OperationCanceled`` / ``OperationClosed``
        (``operation_id``, ``job_tag``), ``SessionStarted`` / ``SessionClosed`` (``session_id``, ``user_id``).
        Plain Python values: the hooks read the Java event before calling.
        """

    def on_connect_action(self, session_id: str, func_name: str, qe: Any, duration_ns: int | None,
                          exception: Any) -> None:
        """A Spark action of the Connect client session ``session_id`` ended (arguments as ``on_action``)."""


@runtime_checkable
class RddJobCallbacks(Protocol):
    """Optional, next to ``SparkCallbacks``: an implementation that has it is also given RDD-only jobs.

    Separate so that an implementation written before it keeps working (and gets no RDD-only jobs).
    """

    def on_rdd_job(self, job: str, exception: Any) -> None:
        """A Spark job started by an RDD action (no SQL execution) ended.

        ``job`` is the JVM listener's JSON of what its RDDs read and wrote (``lineage/rdd_jobs.py`` reads it),
        ``exception`` the Java exception of a failed job, else None. Called once per such job, never for jobs of
        a SQL execution (``on_action`` reports those).
        """
