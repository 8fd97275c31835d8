"""Views as DataHub's own SQL sources describe them: subtype ``View`` and ``viewProperties``.

acryl-datahub's SQL sources (``sql_common``) give a view ``subTypes`` ``[View]`` and ``viewProperties``
(not materialized, language ``SQL``, the view's definition as its logic). Here a dataset the event marks as a
view (``dataset_type`` ``VIEW``) gets the subtype wherever it appears; the view an action creates or alters
(an output) also gets ``viewProperties``, with the SQL text the event carries (empty when it carries none:
``viewLogic`` is required). Its ``upstreamLineage`` is every output's (``lineage``).
"""

from __future__ import annotations

from typing import Any

from datahub.ingestion.source.common.subtypes import DatasetSubTypes
from datahub.metadata.schema_classes import SubTypesClass, ViewPropertiesClass

from .proposals import Aspect, serialise

__all__ = ["is_view", "view_aspects"]

_SUBTYPE = serialise(SubTypesClass(typeNames=[DatasetSubTypes.VIEW]))


def is_view(d: dict[str, Any]) -> bool:
    """Whether an event's dataset is a view (events before contract version 2 say nothing: not a view)."""
    return (d.get("dataset_type") or "").upper() == "VIEW"


def view_aspects(d: dict[str, Any], output: bool) -> list[Aspect]:
    """A view's ``subTypes`` and, when it is the action's output, its ``viewProperties``."""
    if not is_view(d):
        return []
    if not output:
        return [_SUBTYPE]
    return [_SUBTYPE, serialise(ViewPropertiesClass(materialized=False, viewLogic=d.get("view_sql") or "",
                                                    viewLanguage="SQL"))]
