"""openlineage-python's ``OpenLineageClient``, minus work it repeats on every event.

``OpenLineageClient.emit`` does two things per event whose result only depends
on the client's configuration:

* it adds the ``environmentVariables`` run facet from the variables named in
  its config (``facets.environment_variables``); to find them it walks all of
  ``os.environ`` on every event, even when that list is empty (the default),
  which then always gives nothing. ``LineagewireClient`` skips the walk in that
  case only.
* it adds the ``tags`` run facet (the user's ``tags.run`` and its own
  ``openlineage_client_version`` tag), building the tag objects and a new
  facet, with its URL validators, twice per event. When the event brings no
  tags of its own and no job tags are configured, that facet is the same for
  every event: ``LineagewireClient`` builds it once, the same way, and shares
  it (frozen, so nothing can change it and its JSON is rendered once).

Everything else (configuration, transports, filters, the facets themselves,
events that carry tags, job tags) is openlineage-python's; the tests compare
the files both clients write.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from lineagewire.exceptions import MissingExtraError

from . import serde

try:
    from openlineage.client import OpenLineageClient
    from openlineage.client.event_v2 import RunEvent
    from openlineage.client.generated import tags_run
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("openlineage-python", "openlineage", "The OpenLineage service") from exc

__all__ = ["LineagewireClient"]


class LineagewireClient(OpenLineageClient):
    """An ``OpenLineageClient`` (same constructor, same behaviour) that emits with less work per event."""

    def _collect_environment_variables(self) -> dict[str, str]:
        if not self.config.facets.environment_variables:
            return {}
        return super()._collect_environment_variables()

    @cached_property
    def _shared_run_tags(self) -> Any:
        """The tags facet openlineage-python adds to an event without tags; None when job tags need its path."""
        if self._job_tags:
            return None
        return serde.freeze(self._update_tag_facet(tags_run.TagsRunFacet(), self._run_tags))

    def update_event_tags_facets(self, event: Any) -> Any:
        shared = self._shared_run_tags
        if not isinstance(event, RunEvent) or shared is None:
            return super().update_event_tags_facets(event)
        facets = event.run.facets
        if facets and facets.get("tags", shared) is not shared:  # tags of its own: openlineage-python merges them
            return super().update_event_tags_facets(event)
        if not facets:
            event.run.facets = facets = {}
        facets["tags"] = shared
        return event
