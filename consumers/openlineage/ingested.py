"""Events that came in as OpenLineage (``lineagewire ingest openlineage``) go out as the OpenLineage event they were.

``header.openlineage`` (``lineagewire.schemas.openlineage``) marks them: the event that stands for an OpenLineage
event gives it back (``restore``: rebuilt from the event's fields and the patch of what they do not carry), the
events derived from the same OpenLineage event give nothing. The event is rebuilt as openlineage-python's
``event_v2`` model, so transports, client enrichment and the ``Renderer`` treat it as any other: keys absent from
the original stay absent (None, which ``Serde`` leaves out), the original ``schemaURL`` is kept, and facets stay
the JSON they came as (``JSONFacet``: a dict that also reads as attributes, as openlineage-python's transports
read facets, e.g. the Kafka transport's ``parent.job.namespace``).

What differs from the event that came in (openlineage-python's serialisation, for every event it sends):
``null`` values are left out, and so are empty objects inside lists.
"""

from __future__ import annotations

from typing import Any

from lineagewire.schemas.openlineage import restore

from .exceptions import TranslationError

try:
    from openlineage.client.event_v2 import (
        DatasetEvent,
        InputDataset,
        Job,
        JobEvent,
        OutputDataset,
        Run,
        RunEvent,
        RunState,
        StaticDataset,
    )
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    from lineagewire.exceptions import MissingExtraError

    raise MissingExtraError("openlineage-python", "openlineage", "The OpenLineage service") from exc

__all__ = ["JSONFacet", "ingested_events"]


class JSONFacet(dict[str, Any]):
    """A facet as the JSON it came as, whose members also read (None when absent) and are set as attributes, as
    openlineage-python reads and changes its facet objects (the Kafka transport's key, the client's tags)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self.get(name)

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


def _facet(value: Any) -> Any:
    if type(value) is dict:
        return JSONFacet({k: _facet(v) for k, v in value.items()})
    if type(value) is list:
        return [_facet(v) for v in value]
    return value


def _facets(owner: dict[str, Any], key: str = "facets") -> dict[str, Any] | None:
    facets = owner.get(key)
    if facets is None:
        return None
    return {name: _facet(value) for name, value in facets.items()}


def _dataset(cls: Any, d: dict[str, Any], extra: str | None) -> Any:
    more = {extra: _facets(d, extra)} if extra else {}
    return cls(namespace=d["namespace"], name=d["name"], facets=_facets(d), **more)


def _job(j: dict[str, Any]) -> Any:
    return Job(namespace=j["namespace"], name=j["name"], facets=_facets(j))


def _datasets(ev: dict[str, Any]) -> dict[str, Any]:
    inputs, outputs = ev.get("inputs"), ev.get("outputs")
    return {"inputs": None if inputs is None else [_dataset(InputDataset, d, "inputFacets") for d in inputs],
            "outputs": None if outputs is None else [_dataset(OutputDataset, d, "outputFacets") for d in outputs]}


def _build(ev: dict[str, Any]) -> Any:
    common = {"eventTime": ev["eventTime"], "producer": ev["producer"]}
    if "run" in ev:
        kind = ev.get("eventType")
        return RunEvent(eventType=None if kind is None else RunState(kind), run=Run(
            runId=ev["run"]["runId"], facets=_facets(ev["run"])), job=_job(ev["job"]), **_datasets(ev), **common)
    if "dataset" in ev:
        return DatasetEvent(dataset=_dataset(StaticDataset, ev["dataset"], None), **common)
    return JobEvent(job=_job(ev["job"]), **_datasets(ev), **common)


def ingested_events(event: dict[str, Any]) -> list[Any]:
    """The OpenLineage event an ingested contract event stands for (one), or none for a derived one."""
    try:
        original = restore(event)
        if original is None:
            return []
        out = _build(original)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise TranslationError(f"header.openlineage of {event['header'].get('event_id')}: cannot give the "
                               f"OpenLineage event back ({type(exc).__name__}: {exc}); expected what "
                               "lineagewire ingest openlineage writes") from exc
    if "schemaURL" in original:
        out.schemaURL = original["schemaURL"]
    return [out]
