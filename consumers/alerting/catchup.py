"""A fresh deployment reads history silently: what was already on the topic is not news.

Every service starts a new consumer group at the earliest offset, so a new
``consume alerting`` would page every failure still on the topic (up to the
topic's retention) and then resolve most of them. Instead, the first time a
group handles an event, if the group has no committed offset on any of its
partitions, the service records in the alert database (``alerting_facts``,
kind ``catchup``, key = the group):

* ``since``: the service's start, or ``--notify-since``;
* ``ends``: each partition's high-water mark at that moment (the end of the
  topic as of the start).

While some partition of that record is behind its end (``catchup_pos`` rows,
written with the facts by whichever instance of the group handles it, so a
rebalance or a restart carries on where it was), alerts that began before
``since`` are held back, and the clock's rules (stuck runs, deadlines) wait:
history builds state, and an alert that opened and resolved in history is
dropped unsent. Once every partition reached its end, the record is marked
done and each alert still open is notified once, through the normal
group_wait / grouping. An alert newer than ``since`` is notified at once.

A group that has committed offsets already (a restart, or a deployment from
before this) keeps notifying as it always did: its record is written done.

``CatchUp`` asks Kafka for a new plan; ``CatchUpPlan`` is the record;
``CatchUpProgress`` is the service's side: the plan as the database holds it,
the positions this instance saves, and the check that history was read.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .store import CATCHUP_POS

if TYPE_CHECKING:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    from lineagewire.config import Settings

    from .store import AlertStore

log = logging.getLogger(__name__)

__all__ = ["CatchUp", "CatchUpPlan", "CatchUpProgress", "partition_key"]


def partition_key(topic: str, partition: int) -> str:
    return f"{topic}[{partition}]"


@dataclass
class CatchUpPlan:
    """The catch-up record of a group: notify alerts older than ``since`` only once every partition in ``ends``
    was handled up to its end; ``done`` once that happened (or when there was nothing to catch up)."""

    since: dt.datetime | None
    ends: dict[str, int]
    done: bool

    def to_json(self) -> dict[str, Any]:
        return {"since": self.since.isoformat() if self.since else None, "ends": self.ends, "done": self.done}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CatchUpPlan:
        return cls(dt.datetime.fromisoformat(d["since"]) if d.get("since") else None, dict(d["ends"]),
                   bool(d["done"]))


class CatchUp:
    """Where group ``group`` stands on ``topics`` in Kafka, asked once, on a fresh deployment's first event.

    ``notify_since``: alerts that began before this are history (default: the service's start).
    """

    def __init__(self, settings: Settings, group: str, topics: list[str], *,
                 notify_since: dt.datetime | None = None, timeout: float = 10.0) -> None:
        self.settings = settings
        self.group = group
        self.topics = list(topics)
        self.notify_since = notify_since
        self.timeout = timeout

    def plan(self, started: dt.datetime) -> CatchUpPlan:
        """A new plan: done if the group has committed offsets, else every non-empty partition's end now.

        Kafka errors propagate (the runtime retries the event with backoff)."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        from lineagewire.kafka.cluster import admin

        # The admin API reads the group's offsets and the partitions' ends without joining the group.
        client = admin(self.settings)
        md = client.list_topics(timeout=self.timeout)
        tps = [TopicPartition(t, p) for t in self.topics if t in md.topics and md.topics[t].error is None
               for p in sorted(md.topics[t].partitions)]
        committed: list[TopicPartition] = []
        if tps:
            committed = self._committed(client, ConsumerGroupTopicPartitions(self.group, tps))
        if any(tp.offset >= 0 for tp in committed):
            log.log(logging.WARNING if self.notify_since else logging.INFO, "alerting: group %s has committed "
                    "offsets: notifying as before, no catch-up%s", self.group,
                    " (--notify-since is for a new group only)" if self.notify_since else "")
            return CatchUpPlan(None, {}, done=True)

        def offsets(spec: OffsetSpec) -> dict[tuple[str, int], int]:
            asked = client.list_offsets({tp: spec for tp in tps}, request_timeout=self.timeout) if tps else {}
            return {(tp.topic, tp.partition): int(f.result().offset) for tp, f in asked.items()}

        lows, highs = offsets(OffsetSpec.earliest()), offsets(OffsetSpec.latest())
        ends = {partition_key(*key): highs[key] for key in sorted(highs) if highs[key] > lows[key]}
        since = self.notify_since or started
        log.info("alerting: new group %s: reading the history of %d partition(s) silently (alerts before %s), "
                 "then notifying the alerts still open", self.group, len(ends), since.isoformat())
        return CatchUpPlan(since, ends, done=not ends)

    def _committed(self, client: AdminClient, request: ConsumerGroupTopicPartitions) -> list[TopicPartition]:
        """The group's committed offsets. A coordinator still loading (a fresh broker, a moved coordinator)
        answers with an error that the admin API hands back, where a consumer waits it out: ask again until
        ``timeout``, as the consumer did."""
        from confluent_kafka import KafkaError, KafkaException

        moving = {KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
                  KafkaError.NOT_COORDINATOR}
        deadline, pause = time.monotonic() + self.timeout, 0.05
        while True:
            try:
                answer = client.list_consumer_group_offsets([request], request_timeout=self.timeout)
                return answer[self.group].result().topic_partitions or []
            except KafkaException as exc:
                err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                passing = err is not None and (err.retriable() or err.code() in moving)
                if not passing or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)  # the coordinator gives no signal to wait on
            pause = min(pause * 2, 1.0)


class CatchUpProgress:
    """The service's side of a new group's catch-up through ``catch_up``: the plan (None: not known yet, no event
    handled and no record in the database), and which partition positions this instance saved."""

    def __init__(self, catch_up: CatchUp, started: dt.datetime) -> None:
        self.catch_up = catch_up
        self.group = catch_up.group
        #: the service's start: the plan's ``since`` unless --notify-since says otherwise
        self.started = started
        self.plan: CatchUpPlan | None = None
        #: partition key -> the position last handed to a save (not written again while it has not moved)
        self._saved: dict[str, int] = {}

    @property
    def active(self) -> bool:
        """History is still being read: old alerts wait, and so do the clock's rules."""
        return self.plan is not None and not self.plan.done

    @property
    def held_before(self) -> dt.datetime | None:
        """Alerts that began before this wait (while ``active``)."""
        return self.plan.since if self.plan is not None and not self.plan.done else None

    def load(self, store: AlertStore) -> None:
        """Take the plan the database holds, if any (a restart carries on where the group was)."""
        if (held := store.catchup(self.group)) is not None:
            self.plan = CatchUpPlan.from_json(held)

    def ensure_plan(self, store: AlertStore) -> None:
        """Before the first event: the plan in the database, or a new one stored (the first instance's wins)."""
        if self.plan is not None:
            return
        held = store.catchup(self.group)
        if held is None:
            held = store.start_catchup(self.group, self.catch_up.plan(self.started).to_json())
        self.plan = CatchUpPlan.from_json(held)

    def finish_if_read(self, store: AlertStore, durable: dict[tuple[str, int], int]) -> bool:
        """Mark the plan done when every partition of it was saved up to its end, by this instance (``durable``:
        its saved positions) or another; whether this call marked it."""
        plan = self.plan
        if plan is None or plan.done:
            return False
        held = store.catchup(self.group)
        if held is None or not held["done"]:  # else another instance saw the end (and cleared the positions)
            saved = store.catchup_positions(self.group)
            for (topic, partition), pos in durable.items():
                key = partition_key(topic, partition)
                saved[key] = max(saved.get(key, 0), pos)
            if any(saved.get(key, 0) < end for key, end in plan.ends.items()):
                return False
            store.finish_catchup(self.group, plan.to_json())
        plan.done = True
        return True

    def positions(self, handled: dict[tuple[str, int], int]) -> list[tuple[str, str, dict[str, Any] | None]]:
        """Rows saving how far this instance read each partition of the plan (other instances read them), for the
        positions that moved since the last call."""
        plan = self.plan
        if plan is None or plan.done:
            return []
        out: list[tuple[str, str, dict[str, Any] | None]] = []
        for (topic, partition), pos in handled.items():
            key = partition_key(topic, partition)
            if key in plan.ends and self._saved.get(key) != pos:
                self._saved[key] = pos
                out.append((CATCHUP_POS, f"{self.group}\x1f{key}", {"pos": pos}))
        return out

    def save_failed(self) -> None:
        """The save that carried ``positions`` failed: the next one writes them all again."""
        self._saved.clear()
