"""``breaking_change``: the classification of readers (a pure function), then the rule on hand-made events
through the engine and its facts (no database, no broker), and its facts across a save and a load."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lineagewire.consumers.alerting.breaking import WHOLE, Change, Reads, classify
from lineagewire.consumers.alerting.config import parse_config
from lineagewire.consumers.alerting.engine import RuleEngine
from lineagewire.consumers.alerting.exceptions import RulesError
from lineagewire.consumers.alerting.facts import Facts
from lineagewire.consumers.alerting.model import Signal
from lineagewire.schemas import dataset

from .events import T0, RunBuilder, at, table

T = "file//lake/t"


def change(**kw: Any) -> Change:
    return Change(T, "prod", "producer", "run-w", T0, **kw)


def reads(job: str, cols: set[str] | None, complete: bool = True, seen: dt.datetime = T0) -> Reads:
    return Reads("prod", job, f"run-{job}", frozenset(cols) if cols is not None else None, complete, seen)


# -- classification (pure) -------------------------------------------------------------------------------------------

def test_a_removed_column_breaks_only_the_readers_of_that_column() -> None:
    found = classify(change(removed=("c",), old_types={"c": "int"}),
                     [reads("c1", {"a", "b"}), reads("c2", {"c"}), reads("c3", {"a", "c"})])
    assert [(r.job, what) for r, what in found.breaking] == [("c2", ["c"]), ("c3", ["c"])]
    assert [r.job for r in found.safe] == ["c1"] and found.unknown == []


def test_a_retyped_column_breaks_its_readers_and_a_struct_reader_of_a_changed_member() -> None:
    found = classify(change(retyped=("s.x: int -> string",), old_types={"s.x": "int"}),
                     [reads("whole_struct", {"s"}), reads("member", {"s.x"}), reads("other", {"s.y"})])
    assert [(r.job, what) for r, what in found.breaking] == [("member", ["s.x"]), ("whole_struct", ["s.x"])]
    assert [r.job for r in found.safe] == ["other"]


def test_incomplete_lineage_that_names_none_of_the_columns_is_unknown_never_safe() -> None:
    found = classify(change(removed=("c",)), [reads("cut", {"a"}, complete=False), reads("cut_reads_c", {"c"},
                                                                                      complete=False)])
    assert [r.job for r in found.unknown] == ["cut"]
    assert [r.job for r, _ in found.breaking] == ["cut_reads_c"] and found.safe == []


@pytest.mark.parametrize("lifecycle", ["DROP", "RENAME", "TRUNCATE"])
def test_a_dropped_renamed_or_truncated_dataset_breaks_every_reader(lifecycle: str) -> None:
    found = classify(change(lifecycle=lifecycle), [reads("c1", {"a", "b"}), reads("c2", set()),
                                                   reads("c3", None), reads("cut", {"a"}, complete=False)])
    assert [(r.job, what) for r, what in found.breaking] == [
        ("c1", ["a", "b"]), ("c2", [WHOLE]), ("c3", [WHOLE]), ("cut", ["a"])]
    assert found.safe == [] and found.unknown == []


def test_a_reader_without_column_lineage_reads_the_whole_dataset_the_writer_and_old_readers_are_left_out() -> None:
    old = T0 - dt.timedelta(days=40)
    found = classify(change(removed=("c",)), [reads("count_only", None), reads("producer", {"c"}),
                                              reads("gone", {"c"}, seen=old)], since=T0 - dt.timedelta(days=30))
    assert [(r.job, what) for r, what in found.breaking] == [("count_only", ["c"])]
    assert found.safe == [] and found.unknown == []


def test_added_columns_alone_are_no_change_and_restoring_needs_the_old_types() -> None:
    c = change(removed=("c",), retyped=("a: int -> string",), old_types={"c": "int", "a": "int"})
    assert c.columns == ("c", "a")
    assert not c.restored_by({"a": "string", "c": "int"}, None)
    assert c.restored_by({"a": "int not null", "c": "int", "d": "double"}, None)
    assert not change(lifecycle="DROP").restored_by({"a": "int"}, "TRUNCATE")
    assert change(lifecycle="DROP").restored_by(None, "CREATE")


# -- the rule through the engine -------------------------------------------------------------------------------------

def engine(**params: Any) -> RuleEngine:
    return RuleEngine(parse_config({"rules": [{"name": "breaking", "kind": "breaking_change", **params}]})
                      .build_rules())


def feed(e: RuleEngine, events: list[dict[str, Any]]) -> list[Signal]:
    return [s for ev in events for s in e.process(ev)]


def _lineage(run: RunBuilder, when: dt.datetime, *, inputs: list[Any] | None = None, outputs: list[Any] | None = None,
             cols: dict[str, list[str]] | None = None, complete: bool = True) -> dict[str, Any]:
    """An action of ``run`` reading ``inputs`` whose output columns come from ``cols`` ({out: [t's columns]})."""
    lineage = [{"namespace": "file", "name": "/lake/out", "field": out,
                "inputs": [{"namespace": "file", "name": "/lake/t", "field": f, "transformations": []} for f in src]}
               for out, src in (cols or {}).items()]
    return {**run.action(when, outputs=outputs, complete=complete), "inputs": inputs or [], "column_lineage": lineage}


def _write(job: str, when: dt.datetime, cols: dict[str, str], **kw: Any) -> list[dict[str, Any]]:
    r = RunBuilder(job, tags=kw.pop("tags", None))
    return [r.created(when), r.status("RUNNING", "CREATED", when),
            _lineage(r, when, outputs=[kw.pop("out", None) or table("/lake/t", cols)]),
            r.status("FINISHED", "RUNNING", when + dt.timedelta(seconds=1))]


def _read(job: str, when: dt.datetime, cols: list[str] | None, *, end: str = "FINISHED", complete: bool = True,
          owner: str | None = None) -> list[dict[str, Any]]:
    r = RunBuilder(job, tags={"owner": owner} if owner else None)
    src = table("/lake/t", {"a": "int", "b": "int", "c": "int"})
    action = (_lineage(r, when, inputs=[src], outputs=[table("/lake/out", {})], cols={"x": cols}, complete=complete)
              if cols is not None else _lineage(r, when, inputs=[src], complete=complete))
    return [r.created(when), r.status("RUNNING", "CREATED", when), action,
            r.status(end, "RUNNING", when + dt.timedelta(seconds=1))]


ABC = {"a": "int", "b": "int", "c": "int"}


def test_dropping_a_column_fires_once_naming_the_broken_reader_its_owner_and_counting_the_safe_one() -> None:
    e = engine()
    feed(e, _write("producer", T0, ABC) + _read("consumer1", at(10), ["a", "b"], owner="ann")
         + _read("consumer2", at(20), ["c"], owner="bob") + _read("cut", at(25), ["a"], complete=False))
    fired = feed(e, _write("producer", at(30), {"a": "int", "b": "int"}))
    assert len(fired) == 1 and fired[0].firing
    s = fired[0]
    assert (s.labels["dataset"], s.labels["change"], s.labels["job"]) == (T, "removed c", "producer")
    ann = s.annotations
    assert ann["breaking"] == "prod/consumer2 reads c (owner bob)"
    assert (ann["breaking_count"], ann["safe_count"], ann["unknown"]) == ("1", "1", "prod/cut")
    assert ann["owners"] == "bob" and "removed c" in ann["summary"]
    # the same writer again: the same schema, no change, no second page
    assert not [x for x in feed(e, _write("producer", at(40), {"a": "int", "b": "int"})) if x.firing]


def test_an_added_column_or_only_safe_readers_fire_nothing() -> None:
    e = engine()
    feed(e, _write("producer", T0, ABC) + _read("consumer1", at(10), ["a", "b"]))
    assert feed(e, _write("producer", at(20), {**ABC, "d": "int"})) == []
    assert feed(e, _write("producer", at(30), {"a": "int", "b": "int", "d": "int"})) == []


def test_a_change_fires_when_the_writer_run_ends_and_a_drop_then_create_in_one_run_is_a_column_change() -> None:
    e = engine()
    feed(e, _write("producer", T0, ABC) + _read("consumer2", at(10), ["c"]))
    w = RunBuilder("producer")
    t_ab = table("/lake/t", {"a": "int", "b": "int"})
    dropped = dataset("file", "/lake/t", fields=table("/lake/t", ABC)["fields"], lifecycle_change="DROP")
    created = {**t_ab, "lifecycle_change": "CREATE"}
    during = feed(e, [w.created(at(20)), w.status("RUNNING", "CREATED", at(20)),
                      _lineage(w, at(21), outputs=[dropped]), _lineage(w, at(22), outputs=[created])])
    assert during == []  # not final until the run ends
    fired = feed(e, [w.status("FINISHED", "RUNNING", at(23))])
    assert [(s.firing, s.labels["change"]) for s in fired] == [(True, "removed c")]


def test_a_dropped_table_breaks_every_reader_and_writing_it_again_clears() -> None:
    e = engine()
    feed(e, _write("producer", T0, ABC) + _read("consumer1", at(10), ["a"]) + _read("consumer2", at(11), None))
    fired = feed(e, _write("dropper", at(20), {}, out=dataset("file", "/lake/t", lifecycle_change="DROP")))
    assert len(fired) == 1 and fired[0].labels["change"] == "DROP"
    assert fired[0].annotations["breaking"].splitlines() == [
        "prod/consumer1 reads a (no owner tag)", f"prod/consumer2 reads {WHOLE} (no owner tag)"]
    again = feed(e, _write("producer", at(30), ABC))
    assert [(s.firing, s.fingerprint) for s in again] == [(False, fired[0].fingerprint)]


def test_a_renamed_table_breaks_the_readers_of_its_old_name() -> None:
    e = engine()
    feed(e, _write("producer", T0, ABC) + _read("consumer1", at(10), ["a"]))
    renamed = dataset("file", "/lake/t2", lifecycle_change="RENAME",
                      previous_identifier={"namespace": "file", "name": "/lake/t"})
    fired = feed(e, _write("renamer", at(20), {}, out=renamed))
    assert [(s.labels["dataset"], s.labels["change"]) for s in fired] == [(T, "RENAME to file//lake/t2")]


def test_it_clears_when_the_schema_is_compatible_again() -> None:
    e = engine()
    feed(e, _write("producer", T0, ABC) + _read("consumer2", at(10), ["c"]))
    fired = feed(e, _write("producer", at(20), {"a": "int", "b": "int"}))
    back = feed(e, _write("producer", at(30), ABC))
    assert [(s.firing, s.fingerprint) for s in back] == [(False, fired[0].fingerprint)]


def test_it_clears_when_the_broken_readers_next_runs_no_longer_read_the_column_not_on_a_failure() -> None:
    e = engine()
    feed(e, _write("producer", T0, ABC) + _read("consumer2", at(10), ["c"]) + _read("consumer3", at(11), ["c"]))
    fp = feed(e, _write("producer", at(20), {"a": "int", "b": "int"}))[0].fingerprint
    assert not [s for s in feed(e, _read("consumer2", at(30), ["c"], end="FAILED")) if not s.firing]
    assert not [s for s in feed(e, _read("consumer2", at(40), ["a"])) if not s.firing]  # consumer3 still reads c
    r = RunBuilder("consumer3")  # its next run reads another table only: it no longer reads t at all
    other = dataset("file", "/lake/other")
    done = feed(e, [r.created(at(50)), r.status("RUNNING", "CREATED", at(50)),
                    _lineage(r, at(50), inputs=[other], outputs=[table("/lake/out", {})]),
                    r.status("FINISHED", "RUNNING", at(51))])
    assert [(s.firing, s.fingerprint) for s in done] == [(False, fp)]


def test_a_rule_window_leaves_out_readers_not_seen_lately_and_settings_are_checked() -> None:
    e = engine(window="1h")
    feed(e, _write("producer", T0, ABC) + _read("consumer2", at(10), ["c"]))
    assert feed(e, _write("producer", at(7200), {"a": "int", "b": "int"})) == []
    with pytest.raises(RulesError, match="window"):
        engine(window="soon")


def test_readers_and_changes_survive_a_save_and_a_load() -> None:
    e = engine()
    feed(e, _write("producer", T0, ABC) + _read("consumer2", at(10), ["c"]))
    w = RunBuilder("producer")
    feed(e, [w.created(at(20)), w.status("RUNNING", "CREATED", at(20)),
             _lineage(w, at(21), outputs=[table("/lake/t", {"a": "int", "b": "int"})])])
    rows = [(k, key, v) for k, key, v in e.facts.dump_dirty() if v is not None]
    assert {k for k, _, _ in rows} >= {"reader", "change"}
    facts = Facts()
    facts.load(rows)
    e2 = RuleEngine(e.rules, facts)
    fired = feed(e2, [w.status("FINISHED", "RUNNING", at(22))])  # the run ends after a restart
    assert [(s.firing, s.annotations["breaking"]) for s in fired] == [(True, "prod/consumer2 reads c (no owner tag)")]
    facts.prune(at(20) + dt.timedelta(days=31))
    assert facts.readers == {} and facts.changes == {}


def test_a_change_whose_lineage_comes_after_its_run_ended_is_final_at_once() -> None:
    e = engine()
    feed(e, _write("producer", T0, ABC) + _read("consumer2", at(10), ["c"]))
    w = RunBuilder("producer")
    feed(e, [w.created(at(20)), w.status("RUNNING", "CREATED", at(20)), w.status("FINISHED", "RUNNING", at(21))])
    late = feed(e, [_lineage(w, at(22), outputs=[table("/lake/t", {"a": "int", "b": "int"})])])
    assert [(s.firing, s.labels["change"]) for s in late] == [(True, "removed c")]


def test_a_long_dataset_name_keeps_its_readers_and_changes_in_rows_the_key_column_holds() -> None:
    name = "/lake/" + "deep/" * 120 + "t"
    e = engine()
    w, r = RunBuilder("producer"), RunBuilder("reader")
    feed(e, [w.created(T0), _lineage(w, T0, outputs=[table(name, ABC)]), w.status("FINISHED", "CREATED", at(1)),
             r.created(at(2)), {**_lineage(r, at(2), inputs=[table(name, ABC)]), "column_lineage": []},
             _lineage(w, at(3), outputs=[dataset("file", name, lifecycle_change="DROP")])])
    rows = [(k, key, v) for k, key, v in e.facts.dump_dirty() if v is not None and k in ("reader", "change")]
    assert sorted(k for k, _, _ in rows) == ["change", "reader"] and all(len(key) <= 500 for _, key, _ in rows)
    facts = Facts()
    facts.load(rows)
    assert [(c.dataset, c.lifecycle) for c in facts.changes[f"file/{name}"]] == [(f"file/{name}", "DROP")]
    assert [x.job for x in facts.readers_of(f"file/{name}")] == ["reader"]


def test_the_email_templates_show_who_breaks_and_who_is_safe() -> None:
    from lineagewire.consumers.alerting.model import AlertView, Notification
    from lineagewire.consumers.alerting.templates import Templates

    e = engine()
    feed(e, _write("producer", T0, ABC) + _read("consumer1", at(10), ["a"]) + _read("consumer2", at(11), ["c"],
                                                                                    owner="bob"))
    s = feed(e, _write("producer", at(20), {"a": "int", "b": "int"}))[0]
    n = Notification("g", {"alertname": "breaking"},
                     (AlertView(s.fingerprint, "firing", s.labels, s.annotations, s.at, None),), at(21))
    text = Templates().render("email.txt.j2", n, "mail")
    assert "      prod/consumer2 reads c (owner bob)" in text.splitlines() and "    safe: 1" in text.splitlines()
    assert "consumer2 reads c (owner bob)" in Templates().render("email.html.j2", n, "mail")


def test_an_instance_sees_the_readers_and_changes_another_instance_saved(tmp_path) -> None:  # noqa: ANN001
    """Readers' and writers' events come from different partitions, so with several instances the writer's
    instance reads the readers from the database (``shared_keys`` -> ``AlertStore.shared_facts`` ->
    ``take_shared``), and the reader's instance the changes."""
    from lineagewire.consumers.alerting.store import AlertStore

    store = AlertStore(f"sqlite:///{tmp_path / 'a.db'}")
    readers_side, writer_side = engine(), engine()

    def handle(e: RuleEngine, events: list[dict[str, Any]]) -> list[Signal]:
        out = []
        for ev in events:
            e.facts.take_shared(store.shared_facts(e.facts.shared_keys(ev)))
            out += e.process(ev)
            store.save([], [], [], e.facts.dump_dirty(), at(0))
        return out

    try:
        handle(writer_side, _write("producer", T0, ABC))
        handle(readers_side, _read("consumer1", at(10), ["a"]) + _read("consumer2", at(11), ["c"]))
        fired = handle(writer_side, _write("producer", at(20), {"a": "int", "b": "int"}))
        assert [(s.annotations["breaking"], s.annotations["safe_count"]) for s in fired] == [
            ("prod/consumer2 reads c (no owner tag)", "1")]
        fixed = handle(readers_side, _read("consumer2", at(30), ["a"]))
        assert [(s.firing, s.fingerprint) for s in fixed] == [(False, fired[0].fingerprint)]
    finally:
        store.close()
