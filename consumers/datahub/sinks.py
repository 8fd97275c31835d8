"""Where proposals go: a JSON file, DataHub GMS over REST, or DataHub's Kafka MCP topic.

Contract of a ``Sink``
----------------------
* ``check()`` may run before ``open()`` to refuse a wrong setting at once (a server that is not GMS).
* ``open()`` once before the first event, ``close()`` once at shutdown (flush everything).
* ``write(event_id, proposals, scope)`` delivers the proposals of one event **synchronously**:
  when it returns they are accepted by the output (or, for the file, written to the OS
  and made durable by the next ``sync()``). Failures raise ``EmitError`` naming the
  output; the runtime retries the event with backoff.
* ``written(event_id)``: True when the sink already holds this event's proposals
  (the file after a restart); the handler then skips the event.
* ``sync()`` makes what was written durable and returns True when the sink buffers
  (the file); sinks that deliver synchronously return False.
* ``emit(event_id, proposals, scope)`` is what the handler calls (``scope``: the event's job): ``write`` of
  the proposals whose aspect differs from the one this sink last took for the same URN in the same job
  (``unchanged``, when set), then
  remembers them. A sink whose output survives a restart (the file) fills ``unchanged`` from it
  on ``open()``, so a restart gives the same output as one uninterrupted run.

Sinks are registered by name in ``SINKS``; the order there is the order they are written.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, ClassVar

from lineagewire.exceptions import ConfigError

from .config import FileSinkConfig, KafkaSinkConfig, RestSinkConfig
from .exceptions import EmitError
from .render import Renderer, Unchanged, render
from .translate import Proposal

log = logging.getLogger(__name__)

__all__ = ["SINKS", "FileSink", "KafkaSink", "Renderer", "RestSink", "Sink", "render"]

#: systemMetadata properties the file sink adds, so a restart knows which events are complete in the file
EVENT_ID_PROPERTY = "lineagewire.eventId"
RECORD_PROPERTY = "lineagewire.record"
#: ... and the job (``namespace/name``) of that event, the scope of what ``unchanged`` remembers
JOB_PROPERTY = "lineagewire.job"
_EMPTY = "[\n]\n"
_TAIL = "\n]\n"


class Sink:
    """Base class of outputs; see the module docstring for the contract."""

    name: ClassVar[str] = "sink"
    #: skips aspects identical to the last one this sink took for their URN; None: write everything
    unchanged: Unchanged | None = None

    def emit(self, event_id: str, proposals: list[Proposal], scope: str = "") -> int:
        """Write what changed (see the module docstring); the number of proposals written."""
        if self.unchanged is None:
            self.write(event_id, proposals, scope)
            return len(proposals)
        fresh, marks = self.unchanged.select(proposals, scope)
        self.write(event_id, fresh, scope)
        self.unchanged.commit(marks)
        return len(fresh)

    def check(self) -> None:
        """Refuse settings that can never work (``ConfigError``); an output that is merely down passes."""

    def open(self) -> None:
        """Acquire the output."""

    def written(self, event_id: str) -> bool:
        return False

    def write(self, event_id: str, proposals: list[Proposal], scope: str = "") -> None:
        raise NotImplementedError

    def sync(self) -> bool:
        return False

    def close(self) -> None:
        """Flush and release the output."""


class FileSink(Sink):
    """A JSON array of proposals that ``datahub ingest`` (source ``file``) and ``datahub check metadata-file`` read.

    The file stays a valid JSON array after every event: one record per line, the closing ``]``
    rewritten after each append. Each record carries its event id and its place in the event's
    records (``systemMetadata.properties``), so after a restart the sink knows which events are
    complete in the file and skips them when Kafka redelivers them (no duplicates), and a file cut
    by a crash mid-write is repaired on open: the incomplete last event is dropped (its offset was
    never committed, so it comes again).
    """

    name: ClassVar[str] = "file"

    def __init__(self, config: FileSinkConfig) -> None:
        self.path = config.path
        self._fd: int | None = None
        self._end = 0  # the file's size in bytes: it ends with _TAIL
        self._count = 0
        self._seen: set[str] = set()
        self.renderer = Renderer()

    def open(self) -> None:
        records = self._load() if self.path.exists() else []
        self._seen = {r[0] for r in records}
        self._count = len(records)
        if self.unchanged is not None:
            for _, line in records:
                record = json.loads(line)
                self.unchanged.seed(record, record["systemMetadata"]["properties"].get(JOB_PROPERTY, ""))
        text = self._layout([line for _, line in records])
        try:
            if not self.path.exists() or self.path.read_text() != text:
                tmp = self.path.with_name(self.path.name + ".tmp")
                tmp.write_text(text)
                os.replace(tmp, self.path)
            self._fd = os.open(self.path, os.O_RDWR)
            self._end = os.fstat(self._fd).st_size
        except OSError as exc:
            raise ConfigError(f"--file {str(self.path)!r}: cannot write it ({exc}); expected a writable path") from exc
        log.info("DataHub file sink %s: %d proposals of %d events already there", self.path, self._count,
                 len(self._seen))

    @staticmethod
    def _layout(lines: list[str]) -> str:
        return "[\n" + ",\n".join(lines) + _TAIL if lines else _EMPTY

    def _load(self) -> list[tuple[str, str]]:
        """(event id, JSON line) of every record of a complete event in the existing file."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--file {str(self.path)!r}: cannot read it ({exc})") from exc
        damaged = False
        try:
            objs = json.loads(text) if text.strip() else []
            if not isinstance(objs, list):
                raise ConfigError(f"--file {str(self.path)!r} holds a JSON {type(objs).__name__}; expected the JSON "
                                  "array of proposals this service writes (or a new path)")
        except json.JSONDecodeError:
            # Cut by a crash mid-write: keep the records written in full, line by line.
            damaged, objs = True, []
            for line in text.splitlines()[1:]:
                try:
                    objs.append(json.loads(line.rstrip().rstrip(",")))
                except json.JSONDecodeError:
                    break
        out: list[tuple[str, str]] = []
        for obj in objs:
            props = ((obj.get("systemMetadata") or {}).get("properties") or {}) if isinstance(obj, dict) else {}
            if EVENT_ID_PROPERTY not in props:
                raise ConfigError(f"--file {str(self.path)!r} has a record without systemMetadata.properties"
                                  f"[{EVENT_ID_PROPERTY!r}]; expected a file this service wrote (or a new path)")
            out.append((props[EVENT_ID_PROPERTY], json.dumps(obj)))
        if out:
            last_id = out[-1][0]
            last = json.loads(out[-1][1])["systemMetadata"]["properties"][RECORD_PROPERTY]
            index, _, total = last.partition("/")
            if index != total:
                out = [r for r in out if r[0] != last_id]
                damaged = True
        if damaged:
            log.warning("DataHub file sink %s was cut mid-write; kept %d complete records, the rest comes again "
                        "from Kafka", self.path, len(out))
        return out

    def written(self, event_id: str) -> bool:
        return event_id in self._seen

    def write(self, event_id: str, proposals: list[Proposal], scope: str = "") -> None:
        if not proposals:
            return
        n = len(proposals)
        line = self.renderer.line
        job = {JOB_PROPERTY: scope} if scope else {}
        # The properties' JSON as json.dumps writes it, around the one part that changes from line to line.
        head = f'{{{json.dumps(EVENT_ID_PROPERTY)}: {json.dumps(event_id)}, {json.dumps(RECORD_PROPERTY)}: "'
        tail = f'", {json.dumps(JOB_PROPERTY)}: {json.dumps(scope)}}}' if scope else '"}'
        lines = [line(p, {EVENT_ID_PROPERTY: event_id, RECORD_PROPERTY: f"{i}/{n}", **job}, f"{head}{i}/{n}{tail}")
                 for i, p in enumerate(proposals, 1)]
        body = ",\n".join(lines)
        # One positioned write over the closing tail, straight to the OS (a crash of this process loses nothing);
        # fsync'ed by sync() before a commit.
        if self._count:
            data, at = (",\n" + body + _TAIL).encode(), self._end - len(_TAIL)
        else:
            data, at = ("[\n" + body + _TAIL).encode(), 0
        try:
            done = 0
            while done < len(data):
                done += os.pwrite(self._fd, data[done:], at + done)  # type: ignore[arg-type]
            if at + done < self._end:
                os.ftruncate(self._fd, at + done)  # type: ignore[arg-type]
        except OSError as exc:
            raise EmitError(f"DataHub file sink {self.path}: cannot write {n} proposals of event {event_id}: "
                            f"{exc}") from exc
        self._end = at + done
        self._count += n
        self._seen.add(event_id)

    def sync(self) -> bool:
        if self._fd is not None:
            try:
                os.fsync(self._fd)
            except OSError as exc:
                raise EmitError(f"DataHub file sink {self.path}: fsync failed: {exc}") from exc
        return True

    def close(self) -> None:
        if self._fd is not None:
            self.sync()
            os.close(self._fd)
            self._fd = None


class RestSink(Sink):
    """DataHub GMS through acryl-datahub's ``DatahubRestEmitter`` (Rest.li ``ingestProposalBatch``, synchronous)."""

    name: ClassVar[str] = "rest"

    def __init__(self, config: RestSinkConfig, emitter: Any = None) -> None:
        self.config = config
        self._emitter = emitter
        self._checked = False

    @property
    def emitter(self) -> Any:
        if self._emitter is None:
            from datahub.emitter.rest_emitter import DatahubRestEmitter

            token = self.config.token.get_secret_value() if self.config.token else None
            # No retries inside the emitter: the runtime retries the whole event with backoff, pausing the
            # partition, and counts it in its metrics.
            self._emitter = DatahubRestEmitter(self.config.gms_url, token=token, timeout_sec=self.config.timeout_sec,
                                               retry_max_times=0, openapi_ingestion=False)
        return self._emitter

    def open(self) -> None:
        if not self._checked:
            self.check()

    def check(self) -> None:
        from datahub.configuration.common import ConfigurationError

        try:
            self.emitter.test_connection()
        except ConfigurationError as exc:
            # Not GMS at all, or a token GMS refuses: no retry helps. Anything else (5xx, no answer) may pass.
            if "connected to the frontend service" in str(exc) or "authentication error" in str(exc):
                raise ConfigError(f"--gms-url {self.config.gms_url}: {str(exc).splitlines()[0]}") from exc
            log.warning("DataHub GMS %s does not answer yet (%s); retrying with each event", self.config.gms_url,
                        str(exc).splitlines()[0])
            return
        except Exception as exc:  # noqa: BLE001 - any transport error: GMS is down, retried on the first event
            log.warning("DataHub GMS %s does not answer yet (%s); retrying with each event", self.config.gms_url, exc)
            return
        self._checked = True

    def write(self, event_id: str, proposals: list[Proposal], scope: str = "") -> None:
        if not proposals:
            return
        from datahub.emitter.rest_emitter import EmitMode

        try:
            if not self._checked:
                self.emitter.test_connection()
                self._checked = True
            # The emitter stamps systemMetadata (client id and version) in place: send copies, so the proposals
            # the other sinks write stay exactly what the translator built.
            self.emitter.emit_mcps([_copy(p) for p in proposals], emit_mode=EmitMode.SYNC_PRIMARY)
        except Exception as exc:  # noqa: BLE001 - any emitter failure means GMS did not take the batch
            raise EmitError(f"DataHub GMS {self.config.gms_url}: {len(proposals)} proposals of event {event_id} "
                            f"not accepted: {type(exc).__name__}: {str(exc)[:500]}") from exc

    def close(self) -> None:
        if self._emitter is not None:
            self._emitter.close()


class KafkaSink(Sink):
    """DataHub's ``MetadataChangeProposal_v1`` topic through acryl-datahub's ``DatahubKafkaEmitter``.

    The emitter serialises with Confluent's Avro serializer, so it needs a schema registry
    (``schema_registry_url``). Each event's proposals are flushed and their delivery reports
    checked before ``write`` returns.
    """

    name: ClassVar[str] = "kafka"

    def __init__(self, config: KafkaSinkConfig, default_bootstrap: str, producer_defaults: dict[str, Any] | None = None,
                 emitter: Any = None) -> None:
        self.config = config
        self.bootstrap = config.bootstrap or default_bootstrap
        self._defaults = producer_defaults or {}
        self._emitter = emitter

    def open(self) -> None:
        if self._emitter is None:
            from datahub.emitter.kafka_emitter import MCP_KEY, DatahubKafkaEmitter, KafkaEmitterConfig

            try:
                cfg = KafkaEmitterConfig.model_validate({"connection": {
                    "bootstrap": self.bootstrap, "schema_registry_url": self.config.schema_registry_url,
                    "schema_registry_config": self.config.schema_registry_config,
                    "producer_config": {**self._defaults, **self.config.producer_config}},
                    "topic_routes": {MCP_KEY: self.config.topic}})
                self._emitter = DatahubKafkaEmitter(cfg)
            except Exception as exc:  # noqa: BLE001 - pydantic or librdkafka refusing the settings
                raise ConfigError(f"DataHub Kafka sink settings are invalid: {exc}; expected bootstrap servers, a "
                                  "schema registry URL and librdkafka producer properties") from exc

    def write(self, event_id: str, proposals: list[Proposal], scope: str = "") -> None:
        errors: list[str] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                where = f"{msg.topic()}[{msg.partition()}]" if msg is not None and hasattr(msg, "topic") else \
                    self.config.topic
                errors.append(f"{where}: {err}")

        try:
            for p in proposals:
                self._emitter.emit(_copy(p), callback=delivered)
            left = sum(producer.flush(self.config.flush_timeout) for producer in self._emitter.producers.values())
        except Exception as exc:  # noqa: BLE001 - serializer, registry or producer failure: retried
            raise EmitError(f"DataHub Kafka topic {self.config.topic}: proposals of event {event_id} not produced: "
                            f"{type(exc).__name__}: {exc}") from exc
        if errors or left:
            raise EmitError(f"DataHub Kafka topic {self.config.topic}: proposals of event {event_id} not delivered: "
                            f"{'; '.join(errors[:3]) or f'{left} still queued after {self.config.flush_timeout}s'}")

    def close(self) -> None:
        if self._emitter is not None:
            self._emitter.flush()


def _copy(p: Proposal) -> Proposal:
    import copy

    c = copy.copy(p)
    if p.systemMetadata is not None:
        c.systemMetadata = copy.deepcopy(p.systemMetadata)
    return c


#: sink name -> class, in the order they are written
SINKS: dict[str, type[Sink]] = {"file": FileSink, "rest": RestSink, "kafka": KafkaSink}
