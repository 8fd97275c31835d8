"""The rules file: routing, channels, rules and inhibitions, validated when it is loaded.

```yaml
database: sqlite:///alerting.db          # optional; --database overrides
templates: ./alert-templates              # optional folder overriding the built-in message templates
route:
  group_by: [alertname, job]
  group_wait: 30s
  group_interval: 5m
  repeat_interval: 4h
  channels: [oncall]                      # for rules that name none
channels:
  oncall: {type: pagerduty, routing_key: {env: PAGERDUTY_ROUTING_KEY}}
rules:
  - name: nightly-failed
    kind: run_failed
    match: {namespace: prod, job: "nightly_*", tags: {team: data}}
    severity: critical
    labels: {team: data}
inhibit_rules:                            # the default: a missed refresh mutes its run's failure
  - {source: {kind: refresh_missed}, target: {kind: run_failed}, equal: [table]}
datasets:                                 # freshness promises (lineagewire.freshness), checked by dataset_stale
  - {dataset: sales.orders, freshness: 1h, business_hours: "* 8-18 * * MON-FRI", owner: sales-data}
```

Errors name the rule or channel, the field, the value and what was expected.
"""

from __future__ import annotations

import pathlib
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import SettingsConfigDict

from lineagewire.config import SettingsBase
from lineagewire.exceptions import ConfigError
from lineagewire.freshness import Promise, Promises, parse_promises

from .channels import Channel, channel_class
from .exceptions import RulesError
from .model import SEVERITIES, parse_duration
from .rules import Match, Rule, rule_class
from .templates import Templates

__all__ = ["AlertingConfig", "Incidents", "InhibitRule", "Route", "load_config"]


class Route(BaseModel):
    """How alerts are grouped into notifications and how often they are repeated (Alertmanager's route)."""

    model_config = ConfigDict(extra="forbid")

    group_by: list[str] = ["alertname", "job"]
    group_wait: float = 30.0
    group_interval: float = 300.0
    repeat_interval: float = 4 * 3600.0
    channels: list[str] = []

    @field_validator("group_wait", "group_interval", "repeat_interval", mode="before")
    @classmethod
    def _seconds(cls, v: object) -> float:
        return parse_duration(v)


class InhibitRule(BaseModel):
    """While an alert matching ``source`` fires, alerts matching ``target`` with the same ``equal`` labels are muted."""

    model_config = ConfigDict(extra="forbid")

    source: dict[str, str]
    target: dict[str, str]
    equal: list[str] = []


class Incidents(BaseModel):
    """One page per root cause (incidents.py): alerts that follow from an upstream failure through lineage are
    attached to its incident instead of paging."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="group downstream alerts into the incident of their upstream failure")
    window: float = Field(2 * 3600.0, description="a downstream alert is attached when it starts this long after "
                          "the upstream failure at most (`2h`)")
    depth: int = Field(5, ge=1, description="how many hops of lineage (job writes a dataset another job reads) "
                       "count as downstream")

    @field_validator("window", mode="before")
    @classmethod
    def _seconds(cls, v: object) -> float:
        return parse_duration(v, "incidents.window")


DEFAULT_INHIBIT = [InhibitRule(source={"kind": "refresh_missed"}, target={"kind": "run_failed"}, equal=["table"])]


class RuleSpec(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str = Field(..., min_length=1)
    kind: str
    match: Match = Match()
    severity: str = "warning"
    labels: dict[str, str] = {}
    channels: list[str] | None = None
    copy_tags: list[str] = ["table"]
    #: its alerts take part in incidents: a failure may open one, a downstream alert is attached instead of paging
    incident: bool = True

    @field_validator("severity")
    @classmethod
    def _severity(cls, v: str) -> str:
        if v not in SEVERITIES:
            raise ValueError(f"severity={v!r}; expected one of {', '.join(SEVERITIES)}")
        return v


class AlertingConfig(SettingsBase):
    """The validated rules file; ``rules()`` and ``channels()`` build the objects. Its settings follow lineagewire's
    one rule (``SettingsBase``): flags, ``LINEAGEWIRE_ALERTING__<KEY>``, the rules file (else the ``alerting:``
    section of lineagewire's YAML file), the defaults."""

    model_config = SettingsConfigDict(env_prefix="LINEAGEWIRE_ALERTING__", env_nested_delimiter="__", extra="forbid",
                                      arbitrary_types_allowed=True)
    config_section = "alerting"
    title = "alerting settings"

    database: str | None = Field(None, description="SQLAlchemy URL of the alert database, which `alerts` and `ui` "
                                 "read too (default sqlite:///lineagewire-alerting.db)")
    templates: str | None = None
    route: Route = Route()
    channels: dict[str, dict[str, Any]] = {}
    rules: list[RuleSpec] = []
    inhibit_rules: list[InhibitRule] = Field(default_factory=lambda: list(DEFAULT_INHIBIT))
    incidents: Incidents = Incidents()
    claim_lease: float = Field(30.0, description="how long an instance's claim of an outbox row lasts (`30s`); a "
                               "dead instance's claim is taken over after it (docs/alerting.md, \"Several instances\")")
    datasets: list[Promise] = Field([], description="freshness promises: `[{dataset: sales.orders, freshness: 1h}]`, "
                                    "checked by `dataset_stale` rules (docs/alerting.md, \"Freshness promises\")")

    @field_validator("datasets", mode="before")
    @classmethod
    def _promises(cls, v: object) -> list[Promise]:
        try:
            return list(parse_promises(v, "datasets").promises)
        except ConfigError as exc:
            raise ValueError(str(exc).removeprefix("datasets: ")) from None

    def promises(self) -> Promises:
        return Promises(promises=tuple(self.datasets))

    @field_validator("claim_lease", mode="before")
    @classmethod
    def _lease(cls, v: object) -> float:
        return parse_duration(v, "claim_lease")

    def build_rules(self) -> list[Rule]:
        out: list[Rule] = []
        seen: set[str] = set()
        for i, spec in enumerate(self.rules):
            where = f"rules[{i}] ({spec.name})"
            if spec.name in seen:
                raise RulesError(f"{where}: name {spec.name!r} is used twice; expected unique rule names")
            seen.add(spec.name)
            cls = rule_class(spec.kind)
            try:
                params = cls.Params(**(spec.model_extra or {}))
            except ValidationError as exc:
                raise RulesError(f"{where}: invalid {spec.kind} settings: {_errors(exc)}") from exc
            channels = spec.channels if spec.channels is not None else self.route.channels
            unknown = [c for c in channels if c not in self.channels]
            if unknown:
                raise RulesError(f"{where}: channel(s) {', '.join(unknown)} not defined; expected one of "
                                 f"{', '.join(sorted(self.channels)) or '(no channels defined)'}")
            out.append(cls(spec.name, match=spec.match, severity=spec.severity, labels=spec.labels,
                           channels=tuple(channels), copy_tags=tuple(spec.copy_tags), params=params,
                           promises=self.promises()))
        return out

    def incident_rules(self) -> frozenset[str]:
        """The names of the rules whose alerts take part in incidents (none when incidents are off)."""
        if not self.incidents.enabled:
            return frozenset()
        return frozenset(spec.name for spec in self.rules if spec.incident)

    def channel_settings(self) -> dict[str, tuple[type[Channel], Any]]:
        """Each channel's class and validated settings (secrets resolved); RulesError naming the channel."""
        out: dict[str, tuple[type[Channel], Any]] = {}
        for name, raw in self.channels.items():
            if not isinstance(raw, dict) or "type" not in raw:
                raise RulesError(f"channels.{name}: expected a mapping with a 'type' (slack, pagerduty, webhook, "
                                 "email, alertmanager)")
            try:
                cls = channel_class(str(raw["type"]))
            except RulesError as exc:
                raise RulesError(f"channels.{name}: {exc}") from None
            try:
                out[name] = (cls, cls.Config(**raw))
            except ValidationError as exc:
                raise RulesError(f"channels.{name}: invalid {raw['type']} settings: {_errors(exc)}") from None
        return out

    def require_channels(self) -> None:
        """RulesError unless there is a channel and every rule sends to one (else its alerts would go nowhere)."""
        if not self.channels:
            raise RulesError("no channels defined; expected at least one under 'channels:' (slack, pagerduty, "
                             "webhook, email, alertmanager)")
        for i, spec in enumerate(self.rules):
            if not (spec.channels if spec.channels is not None else self.route.channels):
                raise RulesError(f"rules[{i}] ({spec.name}): sends to no channel; expected 'channels: [...]' on "
                                 f"the rule or under 'route:' (one of {', '.join(sorted(self.channels))})")

    def build_channels(self, transport: Any = None) -> dict[str, Channel]:
        """The channels; ``transport``: an httpx transport for the HTTP ones (tests)."""
        from .channels import HttpChannel

        templates = Templates(self.templates)
        out: dict[str, Channel] = {}
        for name, (cls, cfg) in self.channel_settings().items():
            if transport is not None and issubclass(cls, HttpChannel):
                out[name] = cls(name, cfg, templates=templates, transport=transport)
            else:
                out[name] = cls(name, cfg, templates=templates)
        return out


def _errors(exc: ValidationError) -> str:
    # Never echo input values: a channel's settings may hold secrets.
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors())


def parse_config(doc: Any, source: str = "rules", **flags: Any) -> AlertingConfig:
    """The configuration from a rules document, with ``LINEAGEWIRE_ALERTING__*`` variables over it
    (``LINEAGEWIRE_ALERTING__DATABASE``, ``LINEAGEWIRE_ALERTING__ROUTE__GROUP_WAIT=1m``) and ``flags`` over those."""
    if not isinstance(doc, dict):
        raise RulesError(f"{source}: expected a mapping with 'rules' (and 'channels', 'route'), "
                         f"got {type(doc).__name__}")
    try:
        config: AlertingConfig = AlertingConfig.load(document=doc, source=source, **flags)
    except ConfigError as exc:
        raise RulesError(f"{source}: {exc}") from exc
    # Kind, params and channel errors (unknown type, missing field, unset secret) surface at load time, in one
    # line, not as a traceback when the service opens its channels.
    try:
        config.build_rules()
        for name, (_, settings) in config.channel_settings().items():
            # A claim must outlast a delivery attempt, or a live instance's slow send is taken over and sent twice.
            timeout = getattr(settings, "timeout", None)
            if timeout is not None and timeout >= config.claim_lease:
                raise RulesError(f"claim_lease={config.claim_lease:g}s: expected more than the {timeout:g}s "
                                 f"timeout of channels.{name}")
    except RulesError as exc:
        raise RulesError(f"{source}: {exc}") from None
    return config


def load_config(path: str | pathlib.Path, **flags: Any) -> AlertingConfig:
    """Read and validate a rules file (``flags`` over it); RulesError naming the file, the place and what was
    expected."""
    p = pathlib.Path(path)
    try:
        doc = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise RulesError(f"rules file {str(p)!r}: cannot read it: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise RulesError(f"rules file {str(p)!r}: not valid YAML: {exc}") from exc
    config = parse_config(doc, f"rules file {str(p)!r}", **flags)
    try:
        config.require_channels()
    except RulesError as exc:
        raise RulesError(f"rules file {str(p)!r}: {exc}") from None
    return config
