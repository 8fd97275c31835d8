"""Rule kinds, registered by name: each kind is one module of this package (see ``base`` for the contract).

A new kind is one new file here with a ``@register``-decorated ``Rule``
subclass; modules of this package are imported when a kind is first looked
up. Outside packages add kinds with the entry-point group
``lineagewire.alert_rules`` (``kind = "pkg.module:Class"``).
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points

from lineagewire.consumers.alerting.exceptions import RulesError

from .base import Match, Rule, RuleParams

__all__ = ["ENTRY_POINT_GROUP", "RULE_KINDS", "Match", "Rule", "RuleParams", "register", "rule_class"]

ENTRY_POINT_GROUP = "lineagewire.alert_rules"

#: kind -> class, filled by ``@register`` as the kind modules are imported
RULE_KINDS: dict[str, type[Rule]] = {}
_loaded = False


def register(cls: type[Rule]) -> type[Rule]:
    """Class decorator: make ``cls`` available under ``cls.kind``."""
    if not cls.kind:
        raise TypeError(f"{cls.__name__} has no 'kind'")
    RULE_KINDS[cls.kind] = cls
    return cls


def _load_builtin() -> None:
    global _loaded
    if not _loaded:
        for mod in pkgutil.iter_modules(__path__):
            if mod.name != "base":
                importlib.import_module(f"{__name__}.{mod.name}")
        _loaded = True


def rule_class(kind: str) -> type[Rule]:
    """The class of rule kind ``kind`` (built in or from an entry point); RulesError listing the kinds otherwise."""
    _load_builtin()
    cls = RULE_KINDS.get(kind)
    if cls is not None:
        return cls
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == kind:
            loaded = ep.load()
            if not (isinstance(loaded, type) and issubclass(loaded, Rule)):
                raise RulesError(f"rule kind {kind!r}: entry point {ep.value!r} is not a Rule subclass")
            return loaded
    known = sorted({*RULE_KINDS, *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))})
    raise RulesError(f"rule kind {kind!r} is unknown; expected one of {', '.join(known)}")


def known_kinds() -> list[str]:
    _load_builtin()
    return sorted(RULE_KINDS)
