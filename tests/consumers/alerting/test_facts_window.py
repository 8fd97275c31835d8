"""A run's seen sequence numbers are a bounded window (highest, lowest, recent gaps), not a set that grows with
every heartbeat of a streaming run; dedup and ordering stay as they were."""

from __future__ import annotations

import datetime as dt
import json
import threading
import uuid

import pytest
import sqlalchemy as sa

from lineagewire.consumers.alerting.config import parse_config
from lineagewire.consumers.alerting.facts import MAX_GAPS, SEQ_WINDOW, Facts, RunState
from lineagewire.consumers.alerting.service import AlertingHandler
from lineagewire.consumers.runtime import ConsumerRuntime
from lineagewire.kafka.publisher import Publisher
from tests.helpers import wait_for

from .events import RunBuilder, at


def _heartbeats(run: RunBuilder, n: int, start: int = 0) -> list[dict]:
    return [run.action(at(i), complete=True) for i in range(start, start + n)]


def test_30k_heartbeats_keep_a_small_row_and_redeliveries_are_still_skipped() -> None:
    facts, run = Facts(), RunBuilder("stream", job_type="STREAMING")
    events = [run.created(at(0)), run.status("RUNNING", "CREATED", at(0)), *_heartbeats(run, 30_000)]
    assert all(facts.observe(e) is not None for e in events)
    (_, _, row), *_ = [d for d in facts.dump_dirty() if d[0] == "run"]
    assert len(json.dumps(row)) < 600, len(json.dumps(row))
    assert row["max_seq"] == 30_001 and row["gaps"] == []
    again = Facts()
    again.load([("run", run.run_id, row)])
    assert [again.observe(e) for e in events[-50:]] == [None] * 50  # a redelivery after a restart
    assert again.observe(events[0]) is None  # the oldest number too: it is below the highest, not a gap


def test_gaps_are_processed_once_and_out_of_order_and_the_window_is_bounded() -> None:
    facts, run = Facts(), RunBuilder("j")
    first = run.status("RUNNING", "CREATED", at(0), seq=10)
    assert facts.observe(first) is not None
    late = run.status("RUNNING", "CREATED", at(1), seq=20)
    assert facts.observe(late) is not None
    state = facts.runs[run.run_id]
    assert state.gaps == set(range(11, 20))
    gap = run.action(at(2))  # seq 0 from the builder's own counter: below the lowest seen
    obs = facts.observe(gap)
    assert obs is not None and obs.out_of_order
    assert facts.observe(gap) is None  # and once only
    fill = run.status("RUNNING", "CREATED", at(3), seq=15)
    obs = facts.observe(fill)
    assert obs is not None and obs.out_of_order and 15 not in state.gaps
    assert facts.observe(fill) is None
    # A jump far ahead: the gaps kept are the most recent MAX_GAPS within SEQ_WINDOW of the highest.
    far = run.status("RUNNING", "CREATED", at(4), seq=20 + 5 * SEQ_WINDOW)
    assert facts.observe(far) is not None
    assert len(state.gaps) == MAX_GAPS and min(state.gaps) == 20 + 5 * SEQ_WINDOW - MAX_GAPS
    assert facts.observe(run.status("RUNNING", "CREATED", at(5), seq=20 + 5 * SEQ_WINDOW - 1)) is not None
    # an old row (every number in a list) loads into the window
    old = {**state.to_json(), "max_seq": 5, "seqs": [0, 1, 3, 5]}
    del old["gaps"], old["min_seq"]
    loaded = RunState.from_json(old)
    assert (loaded.min_seq, loaded.gaps) == (0, {2, 4})


@pytest.mark.integration
def test_a_streaming_runs_facts_row_stays_small_through_the_service(settings, tmp_path) -> None:  # noqa: ANN001
    run = RunBuilder("stream", namespace="prod", job_type="STREAMING")
    n = 3000
    with Publisher(settings) as pub:
        for e in [run.created(at(0)), run.status("RUNNING", "CREATED", at(0)), *_heartbeats(run, n)]:
            pub.publish(e)
        pub.flush(60)
    db = f"sqlite:///{tmp_path / 'a.db'}"
    cfg = parse_config({"channels": {"hook": {"type": "webhook", "url": "http://127.0.0.1:9/unused"}},
                        "route": {"channels": ["hook"]},
                        "rules": [{"name": "failed", "kind": "run_failed"}]})
    handler = AlertingHandler(cfg, database=db)
    runtime = ConsumerRuntime(settings, handler, group_id=f"g-{uuid.uuid4().hex[:8]}", dead_letters=False)
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    engine = sa.create_engine(db)

    def row() -> dict | None:
        if not sa.inspect(engine).has_table("alerting_facts"):
            return None  # the service has not opened the database yet
        with engine.connect() as c:
            got = c.execute(sa.text("SELECT value FROM alerting_facts WHERE kind='run' AND key=:k"),
                            {"k": run.run_id}).scalar()
        doc = json.loads(got) if got else None
        return doc if doc and doc["max_seq"] == n + 1 else None

    try:
        doc = wait_for(row, timeout=120)
    finally:
        runtime.stop()
        thread.join(60)
        engine.dispose()
    assert len(json.dumps(doc)) < 600, f"the run's row is {len(json.dumps(doc))} bytes"
    assert dt.datetime.fromisoformat(doc["last_seen"]) == at(n - 1)
