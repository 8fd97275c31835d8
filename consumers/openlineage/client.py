"""openlineage-python's ``OpenLineageClient``, minus a per-event scan of the whole environment.

``OpenLineageClient.emit`` adds the ``environmentVariables`` run facet from the
variables named in its config (``facets.environment_variables``); to find them
it walks all of ``os.environ`` on every event, even when that list is empty
(the default), which then always gives nothing. ``LineagewireClient`` skips the
walk in that case only; everything else (configuration, transports, tags,
filters, the facet itself when variables are configured) is openlineage-python's.
"""

from __future__ import annotations

from lineagewire.exceptions import MissingExtraError

try:
    from openlineage.client import OpenLineageClient
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingExtraError("openlineage-python", "openlineage", "The OpenLineage service") from exc

__all__ = ["LineagewireClient"]


class LineagewireClient(OpenLineageClient):
    """An ``OpenLineageClient`` (same constructor, same behaviour) that emits with less work per event."""

    def _collect_environment_variables(self) -> dict[str, str]:
        if not self.config.facets.environment_variables:
            return {}
        return super()._collect_environment_variables()
