"""Rule kinds, registered by name: each kind is one module of this package (see ``base`` for the contract).

A new kind is one new file here with a ``@register``-decorated ``Rule``
subclass; modules of this package are imported when a kind is first looked
up. Outside packages add kinds with the entry-point group
``lineagewire.alert_rules`` (``kind = "pkg.module:Class"``).
"""

from __future__ import annotations

from lineagewire.consumers.alerting.exceptions import RulesError
from lineagewire.plugins import KindRegistry

from .base import Match, Rule, RuleParams

__all__ = ["ENTRY_POINT_GROUP", "RULE_KINDS", "Match", "Rule", "RuleParams", "known_kinds", "register", "rule_class"]

ENTRY_POINT_GROUP = "lineagewire.alert_rules"

_REGISTRY: KindRegistry[Rule] = KindRegistry("rule kind", Rule, "kind", __name__, __path__, ENTRY_POINT_GROUP,
                                             RulesError)
#: kind -> class, filled by ``@register`` as the kind modules are imported
RULE_KINDS = _REGISTRY.kinds
register = _REGISTRY.register
known_kinds = _REGISTRY.known


def rule_class(kind: str) -> type[Rule]:
    """The class of rule kind ``kind`` (built in or from an entry point); RulesError listing the kinds otherwise."""
    return _REGISTRY.get(kind)
