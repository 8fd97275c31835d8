"""Unit tests of the emitter's parts that need neither Spark nor a broker."""

from __future__ import annotations

import pathlib
import threading

import pytest

from lineagewire.producers.spark.config import conf_snapshot, resolve_config
from lineagewire.producers.spark.exceptions import EmitterConfigError, UnknownListenerError
from lineagewire.producers.spark.listeners.executor import BoundedExecutor
from lineagewire.producers.spark.listeners.registry import available_listeners, load_factory
from lineagewire.producers.spark.runs import Run, error_info, is_cancellation
from lineagewire.producers.spark.split import split_action_lineage
from lineagewire.schemas import Codec, action_lineage, header


def test_config_precedence_arguments_then_conf_then_env_then_file(clean_env: pytest.MonkeyPatch,
                                                                   tmp_path: pathlib.Path) -> None:
    (tmp_path / "lineagewire.yaml").write_text(
        "kafka:\n  bootstrap_servers: file-host:9092\n"  # the Kafka settings' part of the same file
        "emitter:\n  namespace: file-ns\n  queue_size: 17\n  flush_timeout: 1\n  listeners: [file]\n")
    clean_env.setenv("LINEAGEWIRE_EMITTER__LISTENERS", "log")
    clean_env.setenv("LINEAGEWIRE_EMITTER__NAMESPACE", "env-ns")
    clean_env.setenv("LINEAGEWIRE_EMITTER__FLUSH_TIMEOUT", "7")
    clean_env.setenv("LINEAGEWIRE_KAFKA__TOPICS__JOBS", "someone-else's")  # a Settings variable: not the emitter's
    conf = {"spark.lineagewire.namespace": "conf-ns", "spark.lineagewire.heartbeat": "3",
            "spark.lineagewire.myplugin.url": "http://x"}  # a plugin's own key: not ours to check
    cfg = resolve_config(spark_conf=conf, config={"heartbeat": "4"}, job_name="arg-job")
    assert cfg.listeners == ["log"] and cfg.namespace == "conf-ns" and cfg.flush_timeout == 7
    assert cfg.heartbeat == 4 and cfg.job_name == "arg-job" and cfg.queue_size == 17
    assert resolve_config(listeners=[]).listeners == []
    clean_env.setenv("LINEAGEWIRE_EMITTER__LISTENERS", "")
    assert resolve_config().listeners == []
    clean_env.delenv("LINEAGEWIRE_EMITTER__LISTENERS")
    clean_env.delenv("LINEAGEWIRE_EMITTER__NAMESPACE")
    assert resolve_config().listeners == ["file"] and resolve_config().namespace == "file-ns"
    (tmp_path / "lineagewire.yaml").unlink()
    assert resolve_config().listeners == ["kafka"] and resolve_config().namespace == "spark"


def test_config_errors_name_key_and_value(clean_env: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    with pytest.raises(EmitterConfigError, match=r"spark\.lineagewire\.flush_timeout='soon'"):
        resolve_config(config={"flush_timeout": "soon"})
    with pytest.raises(EmitterConfigError, match=r"spark\.lineagewire\.flush_timout"):
        resolve_config(spark_conf={"spark.lineagewire.flush_timout": "1"})
    clean_env.setenv("LINEAGEWIRE_EMITTER__QUEUE_SIZE", "0")
    with pytest.raises(EmitterConfigError, match=r"spark\.lineagewire\.queue_size='0'.*greater than or equal to 1"):
        resolve_config()
    clean_env.delenv("LINEAGEWIRE_EMITTER__QUEUE_SIZE")
    bad = tmp_path / "bad.yaml"
    bad.write_text("emitter:\n  flush_timout: 1\n")
    clean_env.setenv("LINEAGEWIRE_CONFIG", str(bad))
    with pytest.raises(EmitterConfigError, match=r"bad\.yaml', section 'emitter': unknown emitter setting\(s\) "
                                                 r"flush_timout; expected some of listeners"):
        resolve_config()
    bad.write_text("emitter: [1, 2\n")
    with pytest.raises(EmitterConfigError, match=r"bad\.yaml' is not valid YAML"):
        resolve_config()
    clean_env.setenv("LINEAGEWIRE_CONFIG", str(tmp_path / "missing.yaml"))
    with pytest.raises(EmitterConfigError, match=r"LINEAGEWIRE_CONFIG='.*missing\.yaml': no such file"):
        resolve_config()


def test_conf_snapshot_keeps_the_whitelist_and_no_secrets() -> None:
    conf = {"spark.app.name": "a", "spark.master": "local[2]", "spark.hadoop.fs.s3a.secret.key": "s3cr3t",
            "spark.lineagewire.namespace": "n", "spark.lineagewire.sasl_password": "pw", "spark.driver.host": "h",
            "spark.executor.memory": "2g"}
    assert conf_snapshot(conf) == {"spark.app.name": "a", "spark.executor.memory": "2g", "spark.master": "local[2]",
                                   "spark.lineagewire.namespace": "n"}


def test_conf_snapshot_redacts_secrets_in_values_under_innocent_keys() -> None:
    conf = {"spark.lineagewire.kafka.sasl.jaas.config": 'PlainLoginModule required username="u" password="pw1";',
            "spark.lineagewire.catalog.url": "https://bob:pw2@catalog.example/api"}
    assert conf_snapshot(conf) == {
        "spark.lineagewire.catalog.url": "https://bob:***@catalog.example/api",
        "spark.lineagewire.kafka.sasl.jaas.config": 'PlainLoginModule required username="u" password="***";'}


def test_redaction_settings_parse_and_errors_name_the_key(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("LINEAGEWIRE_EMITTER__REDACT_PATTERNS", r'["ghp_[A-Za-z0-9]{4,}", "pin (?P<secret>\\d+)"]')
    cfg = resolve_config(spark_conf={"spark.lineagewire.redact_keys": "signature, sig"})
    assert cfg.redact_patterns == ["ghp_[A-Za-z0-9]{4,}", r"pin (?P<secret>\d+)"]
    assert cfg.redact_keys == ["signature", "sig"]
    assert cfg.redactor().text("ghp_abcd pin 12 x?signature=1") == "*** pin *** x?signature=***"
    assert resolve_config(config={"redact_patterns": "a,b{1,2}\nc"}).redact_patterns == ["a,b{1,2}", "c"]
    with pytest.raises(EmitterConfigError, match=r"spark\.lineagewire\.redact_patterns.*'ghp_\[' is not a valid"):
        resolve_config(config={"redact_patterns": "ghp_["})


def test_registry_builtins_entry_points_dotted_paths_and_unknown_names() -> None:
    assert {"kafka", "log", "file"} <= set(available_listeners())
    assert type(load_factory("log")).__name__ == "LogListenerFactory"
    assert type(load_factory("lineagewire.producers.spark.listeners.file:FileListenerFactory")).__name__ == \
        "FileListenerFactory"
    with pytest.raises(UnknownListenerError, match="expected one of file, kafka, log"):
        load_factory("nope")
    with pytest.raises(UnknownListenerError, match=r"cannot import 'no\.such\.module:Factory'"):
        load_factory("no.such.module:Factory")


def test_executor_drops_when_full_and_survives_failures() -> None:
    gate = threading.Event()
    seen: list[int] = []
    ex = BoundedExecutor("t", maxsize=2)
    try:
        ex.submit(gate.wait)  # occupies the worker
        assert ex.drain(0.05) is False
        results = [ex.submit(seen.append, i) for i in range(5)]
        assert results.count(True) == 2 and ex.dropped == 3
        gate.set()
        assert ex.drain(5)
        assert seen == [0, 1]
        assert ex.submit(lambda: 1 / 0)
        assert ex.submit(seen.append, 9)
        assert ex.drain(5) and ex.failed == 1 and seen == [0, 1, 9]
    finally:
        gate.set()
        assert ex.shutdown(5)
    assert ex.submit(seen.append, 10) is False


def test_run_sequence_and_state_machine() -> None:
    run = Run("ns", "job", "r1")
    created = run.created({})  # type: ignore[arg-type]
    running = run.transition("RUNNING")
    done = run.transition("FINISHED")
    assert [e["header"]["sequence"] for e in (created, running, done)] == [0, 1, 2]
    assert (running["old_status"], running["lifecycle_state"]) == ("CREATED", "STARTED")
    assert done["duration_ms"] is not None and run.transition("FAILED") is None  # ended runs stay ended
    assert run.draft_header("ActionLineageEvent")["sequence"] == 0  # a draft takes no number
    assert run.header("ActionLineageEvent")["sequence"] == 3


def test_error_info_and_cancellation() -> None:
    try:
        raise ValueError("bad amount 3")
    except ValueError as exc:
        info = error_info(exc)
    assert info["error_class"] == "ValueError" and info["message"] == "bad amount 3"
    assert "raise ValueError" in info["stack_trace"]
    assert is_cancellation(KeyboardInterrupt())
    assert is_cancellation(RuntimeError("Job 3 cancelled because SparkContext was shut down"))
    assert not is_cancellation(RuntimeError("bad amount"))

    class Stopped(Exception):
        cancels_run = True

    assert is_cancellation(Stopped("refresh superseded"))


def _lineage_event(columns: int, inputs_per_column: int) -> dict:
    hdr = header("ActionLineageEvent", job_namespace="n", job_name="j", run_id="r")
    cols = [{"namespace": "file", "name": "/out", "field": f"c{i}",
             "inputs": [{"namespace": "file", "name": "/in", "field": f"c{i}_{j}" + "x" * 40,
                         "transformations": [{"type": "DIRECT", "subtype": "IDENTITY", "description": "",
                                              "masking": False}]} for j in range(inputs_per_column)]}
            for i in range(columns)]
    return dict(action_lineage(hdr, "a1", "save", column_lineage=cols))


def test_split_keeps_every_column_and_marks_what_cannot_fit() -> None:
    codec = Codec()

    def size(e: dict) -> int:
        return len(codec.encode(e))

    small = _lineage_event(3, 1)
    assert split_action_lineage(small, size, 100_000) == [small]
    big = _lineage_event(300, 20)
    limit = 50_000
    parts = split_action_lineage(big, size, limit)
    assert len(parts) > 1 and all(size(p) <= limit for p in parts)
    assert [(p["part"], p["parts"]) for p in parts] == [(i, len(parts)) for i in range(len(parts))]
    assert [c["field"] for p in parts for c in p["column_lineage"]] == [f"c{i}" for i in range(300)]
    assert all(p["lineage_complete"] for p in parts)
    huge = _lineage_event(2, 1)
    huge["column_lineage"][1]["inputs"] *= 2000  # one column alone over the limit
    parts = split_action_lineage(huge, size, limit)
    assert [c["field"] for p in parts for c in p["column_lineage"]] == ["c0"]
    assert not parts[0]["lineage_complete"] and "/out.c1" in parts[0]["incomplete_reason"]


class _CountingCodec(Codec):
    def __init__(self) -> None:
        super().__init__()
        self.encodes = 0

    def encode(self, event: dict, topic: str | None = None) -> bytes:  # type: ignore[override]
        self.encodes += 1
        return super().encode(event, topic=topic)


def test_an_action_event_is_encoded_once_and_its_bytes_are_what_kafka_gets(clean_env: pytest.MonkeyPatch,
                                                                         tmp_path: pathlib.Path) -> None:
    """The size check's encoding travels with the event; the Kafka listener sends it instead of encoding again."""
    from lineagewire.config import Settings
    from lineagewire.kafka.local import free_port
    from lineagewire.kafka.outbox import Outbox
    from lineagewire.producers.spark.actions import ActionLineage
    from lineagewire.producers.spark.listeners.base import EncodedEvent
    from lineagewire.producers.spark.listeners.kafka import KafkaListener

    config = resolve_config()
    codec = _CountingCodec()
    run = Run("ns", "job")
    sent: list[dict] = []
    actions = ActionLineage(config, config.redactor(), lambda r, e: sent.extend(actions.numbered_parts(r, e)),
                            codec=codec, topic="t.jobs")
    actions.publish(run, "collect", None, 1_000_000, None, None)
    assert codec.encodes == 1 and len(sent) == 1 and isinstance(sent[0], EncodedEvent)
    assert Codec().decode(sent[0].encoded) == Codec().decode(Codec().encode(dict(sent[0])))

    listener_codec = _CountingCodec()
    listener = KafkaListener(Settings(bootstrap_servers=f"127.0.0.1:{free_port()}"), Outbox(tmp_path / "box"),
                             topic="t.jobs", codec=listener_codec, delivery_timeout=1)
    try:
        listener.on_event(sent[0])
        assert listener_codec.encodes == 0
        (entry,) = listener.outbox.pending()
        assert listener.outbox.read(entry) == ("t.jobs", b"ns/job", sent[0].encoded)
    finally:
        listener.close(0)


def test_a_split_action_keeps_its_first_number_and_numbers_the_rest_in_order(clean_env: pytest.MonkeyPatch) -> None:
    from lineagewire.producers.spark.actions import ActionLineage

    config = resolve_config(config={"max_event_bytes": 20_000})
    run = Run("ns", "job")
    event = _lineage_event(300, 20)
    before = run.header("JobStatusChangedEvent")["sequence"]
    parts = ActionLineage(config, config.redactor(), lambda r, e: None).numbered_parts(run, event)
    assert len(parts) > 1
    assert [p["header"]["sequence"] for p in parts] == list(range(before + 1, before + 1 + len(parts)))
    assert len({p["header"]["event_id"] for p in parts}) == len(parts)
    assert [c["field"] for p in parts for c in p["column_lineage"]] == [f"c{i}" for i in range(300)]


class _HeldExtractor:
    """An extraction held in a JVM call until released; ``honours_stop``: it returns at the emitter's cut,
    with what a real extraction has by then (the datasets, no column lineage)."""

    def __init__(self, *, honours_stop: bool) -> None:
        self.honours_stop = honours_stop
        self.entered, self.release, self.returned = threading.Event(), threading.Event(), threading.Event()

    def __call__(self, qe: object, func_name: str, *, budget_s: float, stop: threading.Event) -> object:
        from lineagewire.producers.spark.lineage import ActionLineage as Result

        self.entered.set()
        while not self.release.wait(0.01):
            if self.honours_stop and stop.is_set():
                break
        result = Result(outputs=[{"namespace": "file", "name": f"/out/{qe}"}])
        if stop.is_set():
            result.mark_incomplete("the emitter closed 10 ms into the extraction, while naming the datasets")
        self.returned.set()
        return result


def _held_actions(monkeypatch: pytest.MonkeyPatch, extractor: _HeldExtractor) -> tuple[object, Run, list[dict]]:
    from lineagewire.producers.spark import actions as actions_module

    monkeypatch.setattr(actions_module, "_extractor", lambda: extractor)
    config = resolve_config()
    sent: list[dict] = []
    worker = actions_module.ActionLineage(config, config.redactor(), lambda r, e: sent.append(e))
    return worker, Run("ns", "job"), sent


def test_at_the_cut_the_extraction_under_way_is_sent_with_what_it_found_and_queued_ones_without_lineage(
        clean_env: pytest.MonkeyPatch) -> None:
    extractor = _HeldExtractor(honours_stop=True)
    worker, run, sent = _held_actions(clean_env, extractor)
    worker.submit(run, "save", "first", 5_000_000, None)
    worker.submit(run, "save", "second", 6_000_000, None)
    assert extractor.entered.wait(10)

    assert worker.shutdown(0.2, 10)
    assert [(e["action_name"], [d["name"] for d in e["outputs"]], e["lineage_complete"]) for e in sent] == [
        ("save", ["/out/first"], False), ("save", [], False)]
    assert "the emitter closed 10 ms into the extraction" in sent[0]["incomplete_reason"]
    assert sent[1]["incomplete_reason"] == "the emitter closed before this action's lineage was extracted"
    assert [e["duration_ms"] for e in sent] == [5, 6]


def test_an_extraction_stuck_past_the_end_of_shutdown_is_sent_without_lineage_once(
        clean_env: pytest.MonkeyPatch) -> None:
    extractor = _HeldExtractor(honours_stop=False)
    worker, run, sent = _held_actions(clean_env, extractor)
    worker.submit(run, "save", "stuck", 1_000_000, None)
    assert extractor.entered.wait(10)

    assert not worker.shutdown(0.1, 0.3)
    (stand_in,) = sent
    assert stand_in["outputs"] == [] and stand_in["lineage_complete"] is False
    assert "before this action's lineage was extracted" in stand_in["incomplete_reason"]

    extractor.release.set()  # the JVM call returns after all: its result must not be a second event
    assert extractor.returned.wait(10)
    assert worker.shutdown(0, 10)
    assert sent == [stand_in]
