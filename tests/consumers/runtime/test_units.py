"""Runtime pieces without a broker: the dedup window, the handler registry, the decode hook and GC settings."""

from __future__ import annotations

import gc

import pytest

from lineagewire.consumers.openlineage.handler import OpenLineageHandler
from lineagewire.consumers.runtime import DedupWindow, Handler, load_handler_class, tune_gc
from lineagewire.exceptions import ConfigError
from lineagewire.schemas import Codec
from tests.helpers import status_event


def test_dedup_window_forgets_the_oldest() -> None:
    w = DedupWindow(3)
    for i in range(5):
        w.add(str(i))
    assert len(w) == 3
    assert "0" not in w and "1" not in w and "4" in w
    w.add("2")  # seen again: becomes the newest
    w.add("5")
    assert "2" in w and "3" not in w


def test_dedup_window_of_zero_remembers_nothing() -> None:
    w = DedupWindow(0)
    w.add("a")
    assert "a" not in w
    with pytest.raises(ValueError, match="size=-1"):
        DedupWindow(-1)


def test_handlers_resolve_by_name_or_path() -> None:
    assert load_handler_class("openlineage") is OpenLineageHandler
    assert load_handler_class("lineagewire.consumers.runtime:Handler") is Handler
    with pytest.raises(ConfigError, match="'nope' is not registered"):
        load_handler_class("nope")
    with pytest.raises(ConfigError, match="expected a subclass"):
        load_handler_class("lineagewire.consumers.runtime:DedupWindow")


def test_consume_plugin_names_an_unknown_handler() -> None:
    from click.testing import CliRunner

    from lineagewire.cli import main_group

    r = CliRunner().invoke(main_group, ["consume", "plugin", "no-such-service"])
    assert r.exit_code != 0
    assert "'no-such-service' is not registered" in str(r.exception)
    r = CliRunner().invoke(main_group, ["consume", "--help"])
    assert "openlineage" in r.output and "plugin" in r.output


def test_consumer_property_must_be_key_value() -> None:
    from click.testing import CliRunner

    from lineagewire.cli import main_group

    r = CliRunner().invoke(main_group, ["consume", "openlineage", "--consumer-property", "nonsense"])
    assert r.exit_code == 2 and "expected KEY=VALUE" in r.output


def test_health_server_answers_503_when_unhealthy_and_404_elsewhere() -> None:
    import json
    import urllib.error
    import urllib.request

    from lineagewire.consumers.runtime import HealthServer, Metrics

    state = {"ok": True}
    server = HealthServer(Metrics("svc"), lambda: (state["ok"], {"service": "svc"})).start()
    base = f"http://{server.host}:{server.port}"
    try:
        assert server.host == "127.0.0.1"
        with urllib.request.urlopen(base + "/healthz", timeout=10) as r:
            assert json.loads(r.read()) == {"status": "ok", "service": "svc"}
        state["ok"] = False
        with pytest.raises(urllib.error.HTTPError) as bad:
            urllib.request.urlopen(base + "/healthz", timeout=10)
        assert bad.value.code == 503 and json.loads(bad.value.read())["status"] == "unhealthy"
        bad.value.close()
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(base + "/nope", timeout=10)
        assert missing.value.code == 404
        missing.value.close()
    finally:
        server.stop()


def test_retry_options_are_checked() -> None:
    from click.testing import CliRunner

    from lineagewire.cli import main_group
    from lineagewire.consumers.runtime import RetryPolicy

    r = CliRunner().invoke(main_group, ["consume", "openlineage", "--max-handler-retries", "-1"])
    assert r.exit_code == 2 and "--max-handler-retries" in r.output
    with pytest.raises(ValueError, match="max_handler_retries=-1; expected 0 or more"):
        RetryPolicy(max_handler_retries=-1)
    assert RetryPolicy().max_handler_retries == 5


def test_outage_errors_and_handler_bugs_are_told_apart() -> None:
    from confluent_kafka import KafkaException

    from lineagewire.consumers.openlineage import EmitError
    from lineagewire.consumers.runtime import is_outage

    for exc in (EmitError("down"), ConnectionRefusedError(), TimeoutError(), KafkaException()):
        assert is_outage(exc), exc
    for exc in (KeyError("x"), TypeError("y"), ValueError("z")):
        assert not is_outage(exc), exc
    assert is_outage(ValueError("client"), (ValueError,))


def test_client_library_connection_errors_are_outages() -> None:
    import httpx
    import sqlalchemy.exc

    from lineagewire.consumers.runtime import is_outage

    assert is_outage(sqlalchemy.exc.OperationalError("UPDATE x", {}, Exception("database is locked")))
    assert is_outage(httpx.ConnectError("refused"))
    assert not is_outage(sqlalchemy.exc.IntegrityError("INSERT x", {}, Exception("duplicate key")))
    assert not is_outage(httpx.InvalidURL("bad"))


def test_the_decoder_is_the_whole_decode_unless_decode_fields_names_fields() -> None:
    class Some(Handler):
        decode_fields = {"JobStatusChangedEvent": ["header.run_id", "old_status"]}

    codec, event = Codec(), status_event()
    data = codec.encode(event)
    assert Handler.decoder(codec)(data) == event
    h = event["header"]
    assert Some.decoder(codec)(data) == {"header": {"event_id": h["event_id"], "run_id": h["run_id"],
                                                    "schema_name": h["schema_name"]},
                                         "old_status": event["old_status"]}


def test_tune_gc_freezes_startup_objects_and_raises_the_young_threshold() -> None:
    before = gc.get_threshold()
    try:
        tune_gc(12_345)
        assert gc.get_threshold() == (12_345, *before[1:])
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


class _Holding(Handler):
    """Hands nothing to an output yet: everything it was given is held back."""

    name = "holding"

    def handle(self, record) -> int:  # noqa: ANN001
        return 0

    def durable_offsets(self) -> dict[tuple[str, int], int]:
        return {("t", 0): 0}


def test_a_revoke_forgets_the_ids_a_delivering_handler_had_not_made_durable() -> None:
    """Events handed to a concurrent or buffering handler but not confirmed are redelivered after a revoke;
    if the partition comes back to this process they must be handled again, not skipped as seen."""
    from confluent_kafka import TopicPartition

    from lineagewire.config import Settings
    from lineagewire.consumers.runtime import ConsumerRuntime

    holding = ConsumerRuntime(Settings(), _Holding(), dead_letters=False)
    holding.dedup.add("e1")
    holding._on_revoke(None, [TopicPartition("t", 0)])  # noqa: SLF001 - the consumer's rebalance callback
    assert "e1" not in holding.dedup

    class Synchronous(_Holding):
        def durable_offsets(self) -> None:
            return None

    plain = ConsumerRuntime(Settings(), Synchronous(), dead_letters=False)
    plain.dedup.add("e1")
    plain._on_revoke(None, [TopicPartition("t", 0)])  # noqa: SLF001
    assert "e1" in plain.dedup  # handled means durable there: a redelivery is skipped, as before


def test_only_a_4xx_that_no_retry_changes_is_refused_for_good() -> None:
    from lineagewire.consumers.runtime.retry import refused_for_good

    assert [s for s in (400, 409, 413, 415, 422, 499) if not refused_for_good(s)] == []
    # time-outs, rate limits, the service's own credentials and a wrong endpoint are retried; so is anything not 4xx
    assert [s for s in (200, 301, 401, 403, 404, 405, 407, 408, 410, 421, 429, 500, 502, 503, 504)
            if refused_for_good(s)] == []
