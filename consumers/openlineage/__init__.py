"""The OpenLineage service: lineagewire events -> OpenLineage RunEvents through openlineage-python transports.

``translate.Translator`` is the mapping (pure, deterministic); ``handler.OpenLineageHandler``
plugs it into the consumer runtime; ``lineagewire consume openlineage`` runs it.
"""

from .exceptions import EmitError, TranslationError
from .translate import EVENT_TYPE_OF_ACTION, EVENT_TYPE_OF_STATUS, Translator, action_run_id, ol_run_id

__all__ = ["EVENT_TYPE_OF_ACTION", "EVENT_TYPE_OF_STATUS", "EmitError", "TranslationError", "Translator",
           "action_run_id", "ol_run_id"]
