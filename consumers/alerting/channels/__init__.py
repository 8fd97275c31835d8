"""Channel kinds, registered by name: each is one module of this package (see ``base`` for the contract)."""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points

from lineagewire.consumers.alerting.exceptions import RulesError

from .base import Channel, ChannelConfig, HttpChannel

__all__ = ["CHANNEL_KINDS", "ENTRY_POINT_GROUP", "Channel", "ChannelConfig", "HttpChannel", "channel_class",
           "register"]

ENTRY_POINT_GROUP = "lineagewire.alert_channels"

#: type -> class, filled by ``@register`` as the kind modules are imported
CHANNEL_KINDS: dict[str, type[Channel]] = {}
_loaded = False


def register(cls: type[Channel]) -> type[Channel]:
    """Class decorator: make ``cls`` available under ``cls.type``."""
    if not cls.type:
        raise TypeError(f"{cls.__name__} has no 'type'")
    CHANNEL_KINDS[cls.type] = cls
    return cls


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        for mod in pkgutil.iter_modules(__path__):
            if mod.name != "base":
                importlib.import_module(f"{__name__}.{mod.name}")
        _loaded = True


def channel_class(kind: str) -> type[Channel]:
    """The class of channel type ``kind``; RulesError listing the known types otherwise."""
    _load_builtin()
    cls = CHANNEL_KINDS.get(kind)
    if cls is not None:
        return cls
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == kind:
            loaded = ep.load()
            if not (isinstance(loaded, type) and issubclass(loaded, Channel)):
                raise RulesError(f"channel type {kind!r}: entry point {ep.value!r} is not a Channel subclass")
            return loaded
    known = sorted({*CHANNEL_KINDS, *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))})
    raise RulesError(f"channel type {kind!r} is unknown; expected one of {', '.join(known)}")
