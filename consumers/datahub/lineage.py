"""Column lineage -> DataHub fine-grained lineage, and an output dataset's ``upstreamLineage``."""

from __future__ import annotations

from typing import Any

from datahub.emitter.mce_builder import make_schema_field_urn
from datahub.metadata.schema_classes import (
    AuditStampClass,
    DatasetLineageTypeClass,
    FineGrainedLineageClass,
    FineGrainedLineageDownstreamTypeClass,
    FineGrainedLineageUpstreamTypeClass,
    UpstreamClass,
    UpstreamLineageClass,
)

from .datasets import DatasetNamer
from .ids import ACTOR
from .proposals import Aspect, from_json, to_json

__all__ = ["at_time", "fine_grained", "known_urns", "of_output", "upstream_lineage"]


def known_urns(names: DatasetNamer, *datasets: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """The URNs of an event's datasets by (namespace, name): column lineage names a dataset by those only,
    and a dataset with a catalog table (symlink) is known by its table."""
    return {(d["namespace"], d["name"]): names.urn(d) for ds in datasets for d in ds}


def fine_grained(names: DatasetNamer, column_lineage: list[dict[str, Any]], known: dict[tuple[str, str], str],
                 include_indirect: bool) -> list[FineGrainedLineageClass]:
    """One fine-grained lineage per output column and transformation kind (DIRECT, INDIRECT, UNKNOWN)."""
    out: list[FineGrainedLineageClass] = []

    def urn(namespace: str, name: str) -> str:
        return known.get((namespace, name)) or names.urn_of(namespace, name)

    for cl in column_lineage:
        target = urn(cl["namespace"], cl["name"])
        by_kind: dict[str, tuple[set[str], set[str]]] = {}
        for i in cl["inputs"]:
            field = make_schema_field_urn(urn(i["namespace"], i["name"]), i["field"])
            for t in i["transformations"] or [{"type": "UNKNOWN", "subtype": ""}]:
                kind = t["type"] if t["type"] in ("DIRECT", "INDIRECT") else "UNKNOWN"
                if kind == "INDIRECT" and not include_indirect:
                    continue
                fields, subtypes = by_kind.setdefault(kind, (set(), set()))
                fields.add(field)
                if t.get("subtype"):
                    subtypes.add(t["subtype"])
        downstream = make_schema_field_urn(target, cl["field"])
        for kind in sorted(by_kind):
            fields, subtypes = by_kind[kind]
            out.append(FineGrainedLineageClass(
                upstreamType=FineGrainedLineageUpstreamTypeClass.FIELD_SET, upstreams=sorted(fields),
                downstreamType=FineGrainedLineageDownstreamTypeClass.FIELD, downstreams=[downstream],
                transformOperation=f"{kind}:{','.join(sorted(subtypes))}" if subtypes else kind))
    return out


def of_output(lineages: list[FineGrainedLineageClass], urn: str) -> list[FineGrainedLineageClass]:
    """The fine-grained lineages whose downstream is a column of the dataset ``urn``."""
    prefix = f"urn:li:schemaField:({urn},"
    return [fgl for fgl in lineages if fgl.downstreams and fgl.downstreams[0].startswith(prefix)]


def upstream_lineage(feeding: list[str], mine: list[FineGrainedLineageClass]) -> dict[str, Any] | None:
    """The JSON of an output's upstreamLineage (the datasets feeding it, its columns' fine-grained lineage) with
    each upstream's audit stamp at time 0 (``at_time`` sets it); None when there is nothing to say."""
    if not (feeding or mine):
        return None
    return to_json(UpstreamLineageClass(fineGrainedLineages=mine or None, upstreams=[
        UpstreamClass(dataset=u, type=DatasetLineageTypeClass.TRANSFORMED,
                      auditStamp=AuditStampClass(time=0, actor=ACTOR)) for u in feeding]))


def at_time(upstream: dict[str, Any], when: int) -> Aspect:
    """``upstream_lineage``'s JSON with each upstream's ``auditStamp.time`` set to ``when`` (epoch ms), serialised."""
    return from_json(UpstreamLineageClass.ASPECT_NAME, {**upstream, "upstreams": [
        {**u, "auditStamp": {**u["auditStamp"], "time": when}} for u in upstream["upstreams"]]})
