"""Alerting on runs ingested from OpenLineage (issue 42): real events of the ingest corpus (openlineage-spark, dbt,
Airflow), translated by the real translator and read back through Avro as the service reads them, through the
engine and its facts (no broker; ``test_ingested_service.py`` is the end-to-end test)."""

from __future__ import annotations

import copy
import datetime as dt
import json
import pathlib
import uuid
from typing import Any

from lineagewire.consumers.alerting.config import parse_config
from lineagewire.consumers.alerting.engine import RuleEngine
from lineagewire.consumers.alerting.facts import MAX_EVENT_IDS, RUN_TTL, Facts
from lineagewire.consumers.alerting.model import Signal
from lineagewire.consumers.alerting.service import AlertingHandler
from lineagewire.producers.ingest.translate import OpenLineageTranslator
from lineagewire.schemas import Codec

from .events import RunBuilder, at
from .fakes import Clock, Recorder, record

CORPUS = pathlib.Path(__file__).resolve().parents[2] / "ingest" / "corpus"
TRANSLATOR = OpenLineageTranslator()
CODEC = Codec()
#: the real openlineage-spark SQL run of the corpus: its RUNNING and COMPLETE
SQL_RUNNING, SQL_COMPLETE = "spark_real_sql_running.json", "spark_real_sql_complete.json"


def ol(name: str, event_type: str | None = None, *, seconds: float = 0.0, run_id: str | None = None,
       job: str | None = None) -> dict[str, Any]:
    """Corpus event ``name``, as another event of its run (``event_type``, ``seconds`` after its own time), or of
    another run (``run_id``) or job (``job``)."""
    ev = copy.deepcopy(json.loads((CORPUS / name).read_text()))
    if event_type is not None:
        ev["eventType"] = event_type
    when = dt.datetime.fromisoformat(ev["eventTime"]) + dt.timedelta(seconds=seconds)
    ev["eventTime"] = when.isoformat()
    if run_id is not None:
        ev["run"]["runId"] = run_id
    if job is not None:
        ev["job"]["name"] = job
    return ev


def ingested(*events: dict[str, Any]) -> list[dict[str, Any]]:
    """The contract events of OpenLineage ``events``, as the alerting service decodes them from Kafka."""
    return [CODEC.decode(CODEC.encode(e)) for ev in events for e in TRANSLATOR.translate(ev)]


def engine(*rules: dict[str, Any]) -> RuleEngine:
    return RuleEngine(parse_config({"rules": list(rules)}).build_rules())


def feed(e: RuleEngine, events: list[dict[str, Any]]) -> list[Signal]:
    return [s for ev in events for s in e.process(ev)]


def firing(signals: list[Signal]) -> list[Signal]:
    return [s for s in signals if s.firing]


def dbt_run(start: float, seconds: float, end: str = "COMPLETE", *, job: str | None = None,
            with_start: bool = True) -> list[dict[str, Any]]:
    """A run of the corpus's dbt model (START ``start`` s after the corpus's START, its end ``seconds`` later)."""
    run_id = str(uuid.uuid4())
    events = [ol("dbt_model_start.json", seconds=start, run_id=run_id, job=job)] if with_start else []
    events.append(ol("dbt_model_start.json", end, seconds=start + seconds, run_id=run_id, job=job))
    return ingested(*events)


# -- illegal_transition ----------------------------------------------------------------------------------------------

def test_a_real_spark_sql_run_with_repeated_running_and_late_events_is_no_illegal_transition() -> None:
    e = engine({"name": "bad", "kind": "illegal_transition"})
    start = ol(SQL_RUNNING, "START", seconds=-2)
    running, again = ol(SQL_RUNNING), ol(SQL_RUNNING, seconds=1)
    # as openlineage-spark sends them: RUNNING repeated, the earlier RUNNING and the START late, the end last
    assert not firing(feed(e, ingested(again, running, start, ol(SQL_COMPLETE))))
    # a late RUNNING after the end changes nothing either (it is earlier by event time)
    assert not firing(feed(e, ingested(ol(SQL_RUNNING, seconds=0.5))))


def test_an_ingested_run_still_fires_on_what_openlineage_forbids_and_our_own_runs_are_unchanged() -> None:
    e = engine({"name": "bad", "kind": "illegal_transition"})
    # a RUNNING later in event time than the run's COMPLETE: an ended run changes no more
    after_end = firing(feed(e, ingested(ol(SQL_RUNNING), ol(SQL_COMPLETE), ol(SQL_COMPLETE, "RUNNING", seconds=5))))
    assert len(after_end) == 1 and "FINISHED -> RUNNING" in after_end[0].annotations["reason"]
    # the emitter's own events: a repeated RUNNING and a late event still fire, as before
    own = RunBuilder()
    feed(e, [own.created(), own.status("RUNNING", "CREATED", at(0), seq=5)])
    assert len(firing(feed(e, [own.status("RUNNING", "RUNNING", at(1), seq=6)]))) == 1
    late = firing(feed(e, [own.status("RUNNING", "CREATED", at(2), seq=2)]))
    assert len(late) == 1 and "out of order" in late[0].annotations["reason"]


# -- facts: deduplicated by id, ordered by event time ----------------------------------------------------------------

def test_a_late_ingested_event_is_folded_in_as_late_and_a_duplicate_is_dropped() -> None:
    facts = Facts()
    start, running, complete = (ingested(ev) for ev in (ol(SQL_RUNNING, "START", seconds=-2), ol(SQL_RUNNING),
                                                        ol(SQL_COMPLETE)))
    assert all(facts.observe(ev) is not None for ev in [*start, *complete])
    run = facts.runs[start[0]["header"]["run_id"]]
    assert run.status == "FINISHED"
    # millions of sequence numbers below the highest: late, not taken as seen; its lineage counts, its status
    # does not undo the end
    late = [facts.observe(ev) for ev in running]
    assert late and all(o is not None and o.out_of_order for o in late)
    assert run.status == "FINISHED"
    read = {f"{d['namespace']}/{d['name']}" for d in running[-1]["inputs"]}
    assert read and read <= facts.reads_of((run.namespace, run.job))
    # every event again (a producer's retry, a replay): nothing is folded in twice
    assert [facts.observe(ev) for ev in [*start, *running, *complete]] == [None] * (len(start) + len(running)
                                                                                    + len(complete))


def test_the_ids_kept_are_bounded_and_survive_a_save_and_load() -> None:
    facts = Facts()
    events = ingested(*(ol(SQL_RUNNING, seconds=i / 10) for i in range(MAX_EVENT_IDS)))
    assert all(facts.observe(ev) is not None for ev in events)
    (run,) = facts.runs.values()
    assert len(run.event_ids) == MAX_EVENT_IDS and run.gaps == set()
    loaded = Facts()
    loaded.load([(kind, key, doc) for kind, key, doc in facts.dump_dirty() if doc is not None])
    again = loaded.runs[run.run_id]
    assert (again.ingested, again.ol_seq, list(again.event_ids)) == (True, run.ol_seq, list(run.event_ids))
    # the latest ones are dropped by id after the load; a copy older than the window is folded in as late (its
    # status changes nothing)
    assert [loaded.observe(ev) for ev in events[-3:]] == [None] * 3
    old = loaded.observe(events[0])
    assert old is not None and old.out_of_order
    assert loaded.observe(ingested(ol(SQL_RUNNING, seconds=MAX_EVENT_IDS / 10))[0]) is not None


# -- run_failed, run_stuck, duration_anomaly -------------------------------------------------------------------------

def test_a_failing_dbt_model_without_start_pages_once_and_its_next_good_run_clears_it() -> None:
    e = engine({"name": "failed", "kind": "run_failed"})
    fail = ingested(ol("dbt_model_fail.json"))
    fired = firing(feed(e, fail + fail + ingested(ol("dbt_model_fail.json", "RUNNING", seconds=-1))))
    assert len(fired) == 1
    s = fired[0]
    assert (s.labels["namespace"], s.labels["job"]) == ("dbt", "jaffle_shop.main.broken_model")
    assert s.annotations["error_class"] == "SQL" and 'column "nope" not found' in s.annotations["error_message"]
    good = feed(e, dbt_run(60, 1, job="jaffle_shop.main.broken_model"))
    assert [c.fingerprint for c in good if not c.firing] == [s.fingerprint] and not firing(good)


def test_an_ingested_run_is_stuck_only_when_it_has_a_status_to_end_with() -> None:
    e = engine({"name": "stuck", "kind": "run_stuck", "max_duration": "1h"})
    corpus_start = dt.datetime(2026, 11, 20, 9, 5, tzinfo=dt.UTC)
    # a COMPLETE without START, then its START late: ended, not stuck
    complete_only = ingested(ol("dbt_model_complete.json"))
    late_start = ingested(ol("dbt_model_start.json"))
    # only OTHER events, and a JobEvent's static lineage: no status to wait for
    other = ingested(ol("no_event_type.json"), ol("job_event_static.json"))
    # a START whose end never comes: stuck (the rule still sees ingested runs)
    open_run = ingested(ol("dbt_model_start.json", run_id=str(uuid.uuid4()), job="jaffle_shop.main.orders"))
    feed(e, complete_only + late_start + other + open_run)
    stuck = firing(e.check(corpus_start + dt.timedelta(hours=3)))
    assert [s.labels["job"] for s in stuck] == ["jaffle_shop.main.orders"]
    # the runs with no status are forgotten like ended ones (a producer of OTHER events does not grow the facts)
    e.facts.prune(corpus_start + RUN_TTL + dt.timedelta(hours=3))
    assert [r.job for r in e.facts.runs.values()] == ["jaffle_shop.main.orders"]


def test_duration_anomaly_baselines_ingested_runs_from_their_start_and_skips_a_run_without_one() -> None:
    e = engine({"name": "slow", "kind": "duration_anomaly", "runs": 3})
    for i in range(3):
        assert not firing(feed(e, dbt_run(100 * i, 10)))
    # no START: when it began is unknown; no verdict and no baseline entry (not a 0 s run)
    assert not feed(e, dbt_run(400, 500, with_start=False))
    js = e.facts.jobs[("dbt", "jaffle_shop.main.customers")]
    assert [ms for _, ms in js.durations] == [10_000] * 3
    # a slow run whose START arrives after its RUNNING (out of order): timed from the START's event time
    run_id = str(uuid.uuid4())
    slow = firing(feed(e, ingested(ol("dbt_model_start.json", "RUNNING", seconds=730, run_id=run_id),
                                   ol("dbt_model_start.json", seconds=700, run_id=run_id),
                                   ol("dbt_model_start.json", "COMPLETE", seconds=760, run_id=run_id))))
    assert len(slow) == 1 and slow[0].annotations["duration_ms"] == "60000"


# -- breaking_change and incidents -----------------------------------------------------------------------------------

def without_column(events: list[dict[str, Any]], column: str) -> list[dict[str, Any]]:
    """OpenLineage events whose outputs no longer have ``column`` (nor its column lineage)."""
    for ev in events:
        for out in ev.get("outputs") or []:
            facets = out["facets"]
            facets["schema"]["fields"] = [f for f in facets["schema"]["fields"] if f["name"] != column]
            facets["columnLineage"]["fields"].pop(column, None)
    return events


def reader_of_customers(job: str, column: str, seconds: float) -> list[dict[str, Any]]:
    """A dbt model's run that reads ``column`` of the corpus model's output (customers)."""
    run_id = str(uuid.uuid4())
    out = []
    for event_type, later in (("START", 0.0), ("COMPLETE", 1.0)):
        ev = ol("dbt_model_start.json", event_type, seconds=seconds + later, run_id=run_id, job=job)
        customers = ev["outputs"][0]
        ev["inputs"] = [{"namespace": customers["namespace"], "name": customers["name"]}]
        ev["outputs"] = [{"namespace": customers["namespace"], "name": job, "facets": {"columnLineage": {"fields": {
            column: {"inputFields": [{"namespace": customers["namespace"], "name": customers["name"],
                                      "field": column}]}}}}}]
        out.append(ev)
    return out


def test_an_ingested_run_that_drops_a_column_breaks_its_readers_once() -> None:
    e = engine({"name": "breaking", "kind": "breaking_change"})
    feed(e, dbt_run(0, 1) + ingested(*reader_of_customers("report", "orders", 10),
                                     *reader_of_customers("names", "id", 10)))
    run_id = str(uuid.uuid4())
    change = ingested(*without_column([ol("dbt_model_start.json", seconds=100, run_id=run_id),
                                       ol("dbt_model_complete.json", seconds=100, run_id=run_id)], "orders"))
    fired = firing(feed(e, change + change))  # and each event again
    assert len(fired) == 1
    assert fired[0].annotations["breaking"].startswith("dbt/report reads orders")
    assert fired[0].annotations["safe_count"] == "1"


def test_a_failing_ingested_model_opens_an_incident_and_its_downstream_model_is_attached(tmp_path) -> None:  # noqa: ANN001
    clock, rec = Clock(dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.UTC).timestamp()), Recorder()
    cfg = parse_config({
        "route": {"group_by": ["alertname", "job"], "group_wait": "0s", "group_interval": "0s", "channels": ["rec"]},
        "channels": {"rec": {"type": "webhook", "url": "http://127.0.0.1:9/unused"}},
        "rules": [{"name": "failed", "kind": "run_failed"}]})
    h = AlertingHandler(cfg, database=f"sqlite:///{tmp_path / 'alerts.db'}", channels={"rec": rec}, clock=clock)
    h.open()
    offsets = iter(range(1000))

    def deliver(events: list[dict[str, Any]]) -> None:
        for ev in events:
            h.handle(record(ev, next(offsets)))
        h.batch_done()
        h.tick(clock())
        assert h.settle(), "the outbox worker did not finish a delivery round"

    try:
        # the lineage: customers reads stg_orders; a run of the model that writes stg_orders
        upstream = "jaffle_shop.main.stg_orders"
        deliver(dbt_run(-600, 1) + ingested(*_writing(upstream, -300)))
        clock.advance(60)
        deliver(ingested(ol("dbt_model_fail.json", job=upstream, run_id=str(uuid.uuid4()))))
        assert [(a.labels["job"], a.status) for n in rec.sent for a in n.alerts] == [(upstream, "firing")]
        assert rec.sent[0].alerts[0].annotations["affects"] == "dbt/jaffle_shop.main.customers"
        clock.advance(60)
        deliver(dbt_run(60, 1, "FAIL"))  # the downstream model fails after it: attached, not paged
        assert len(rec.sent) == 1
        (inc,) = h.store.incidents()
        assert [m.job for m in inc.members.values()] == [("dbt", "jaffle_shop.main.customers")]
    finally:
        h.close()


def _writing(job: str, seconds: float) -> list[dict[str, Any]]:
    """A good run of dbt model ``job`` that writes the dataset of its name (as the corpus model writes its own)."""
    run_id = str(uuid.uuid4())
    out = []
    for event_type, later in (("START", 0.0), ("COMPLETE", 1.0)):
        ev = ol("dbt_model_start.json", event_type, seconds=seconds + later, run_id=run_id, job=job)
        ev["outputs"][0]["name"] = job
        out.append(ev)
    return out


def test_a_drop_that_every_event_of_an_ingested_run_repeats_breaks_its_readers_once() -> None:
    e = engine({"name": "breaking", "kind": "breaking_change"})
    feed(e, dbt_run(0, 1) + ingested(*reader_of_customers("report", "orders", 10)))
    run_id = str(uuid.uuid4())
    events = [ol("dbt_model_start.json", seconds=100, run_id=run_id),
              ol("dbt_model_start.json", "RUNNING", seconds=100.5, run_id=run_id),
              ol("dbt_model_complete.json", seconds=101, run_id=run_id)]
    for ev in events:  # as openlineage-spark reports a DROP TABLE: on each event of the run
        ev["outputs"][0]["facets"]["lifecycleStateChange"] = {
            "_producer": ev["producer"], "lifecycleStateChange": "DROP",
            "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/LifecycleStateChangeDatasetFacet.json"}
    # the RUNNING arrives after the end too
    fired = firing(feed(e, ingested(events[0], events[2], events[1])))
    assert [(s.labels["change"], s.annotations["breaking_count"]) for s in fired] == [("DROP", "1")]


def test_a_start_read_after_its_runs_failure_leaves_the_job_failed() -> None:
    facts = Facts()
    run_id = str(uuid.uuid4())
    for ev in ingested(ol("dbt_model_fail.json", run_id=run_id), ol("dbt_model_fail.json", "START", run_id=run_id,
                                                                      seconds=-1)):
        facts.observe(ev)
    js = facts.jobs[("dbt", "jaffle_shop.main.broken_model")]
    # what dataset_stale says of the writer of a stale input: it failed, and why (not "CREATED")
    assert (js.last_run, js.last_status) == (run_id, "FAILED")
    assert js.last_error is not None and 'column "nope" not found' in js.last_error
    assert facts.runs[run_id].created == dt.datetime(2026, 11, 20, 9, 5, 0, 500000, tzinfo=dt.UTC)
