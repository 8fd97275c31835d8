"""Channel kinds, registered by name: each is one module of this package (see ``base`` for the contract)."""

from __future__ import annotations

from lineagewire.consumers.alerting.exceptions import RulesError
from lineagewire.plugins import KindRegistry

from .base import Channel, ChannelConfig, HttpChannel

__all__ = ["CHANNEL_KINDS", "ENTRY_POINT_GROUP", "Channel", "ChannelConfig", "HttpChannel", "channel_class",
           "register"]

ENTRY_POINT_GROUP = "lineagewire.alert_channels"

_REGISTRY: KindRegistry[Channel] = KindRegistry("channel type", Channel, "type", __name__, __path__,
                                                ENTRY_POINT_GROUP, RulesError)
#: type -> class, filled by ``@register`` as the kind modules are imported
CHANNEL_KINDS = _REGISTRY.kinds
register = _REGISTRY.register


def channel_class(kind: str) -> type[Channel]:
    """The class of channel type ``kind``; RulesError listing the known types otherwise."""
    return _REGISTRY.get(kind)
