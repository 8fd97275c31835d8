"""Typed settings, and the one place that knows where they come from.

Precedence, highest first:

1. values passed in code or as command-line flags (``Settings(**overrides)``);
2. environment variables ``LINEAGEWIRE_KAFKA__<FIELD>``, nested with ``__``:
   ``LINEAGEWIRE_KAFKA__BOOTSTRAP_SERVERS``, ``LINEAGEWIRE_KAFKA__TOPICS__JOBS``,
   ``LINEAGEWIRE_KAFKA__SECURITY__SASL_PASSWORD``;
3. their names before they had a section (``LINEAGEWIRE_BOOTSTRAP_SERVERS``), with a warning;
4. the ``kafka:`` section of a YAML config file: ``--config PATH``, else ``$LINEAGEWIRE_CONFIG``, else
   ``./lineagewire.yaml`` if it exists; below it, Kafka keys at the top of the file, where they were before the
   section, with a warning;
5. the defaults below.

Secrets are ``SecretStr``: printed as ``**********``, revealed only in
``as_librdkafka_dict()`` at the boundary with librdkafka.

Every service's own settings follow the same rule under its section: flags, then
``LINEAGEWIRE_<SECTION>__<FIELD>`` (nested with ``__``, complex values read as YAML, so ``[a, b]`` and
``{k: v}`` have their types), then the old names, then the section of the YAML file, then defaults. Each
settings model subclasses ``SettingsBase``, whose one ``settings_customise_sources`` builds that order from
its ``env_prefix`` and ``config_section``, and whose ``load`` is the one builder: it turns a bad value into a
ConfigError naming the setting and where it came from. A service whose settings are a YAML document of their
own (DataHub's ``--config``, the alerting rules file) passes it as ``document``, in place of the section.

Variables renamed to follow the rule (``RENAMED_VARIABLES``, the emitter's flat
``LINEAGEWIRE_<KEY>``) are still read, below their new name, with a logged warning
naming the new one (``renamed``). A warning on the ``logging`` module, not a
``DeprecationWarning``: Python hides those outside ``__main__``, so neither a CLI user
nor a Spark job's author would see it, while a ``WARNING`` record reaches the
terminal even where nothing configured logging.

docs/settings.md is generated from these models (``python -m lineagewire.settings_doc``).
"""

from __future__ import annotations

import logging
import os
import pathlib
from collections.abc import Mapping
from typing import Any, ClassVar

import yaml
from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from lineagewire.exceptions import ConfigError

__all__ = ["ENV_PREFIX", "KAFKA_SECTION", "RENAMED_VARIABLES", "KafkaSecurity", "Settings", "SettingsBase",
           "TopicNames", "find_config_file", "load_settings", "read_section", "renamed"]

log = logging.getLogger(__name__)

ENV_PREFIX = "LINEAGEWIRE_"
#: the section of the Kafka settings (``Settings``), in the YAML file and in their variables' names
KAFKA_SECTION = "kafka"
CONFIG_ENV = "LINEAGEWIRE_CONFIG"
DEFAULT_CONFIG_FILE = "lineagewire.yaml"

#: Variables renamed to follow ``LINEAGEWIRE_<SECTION>__<KEY>``: old name -> new name. The old one is still
#: read, with a warning naming the new one, which wins when both are set (the emitter's flat names are
#: ``EmitterConfig.renamed_variables()``; ``LINEAGEWIRE_DB_URL`` became each store's own, lineagewire.db.cli).
RENAMED_VARIABLES: dict[str, str] = {
    "LINEAGEWIRE_ARCHIVE": "LINEAGEWIRE_AUDIT__ARCHIVE",
    "LINEAGEWIRE_ALERTS_DB": "LINEAGEWIRE_ALERTING__DATABASE",
    "LINEAGEWIRE_REGISTRY_DB_URL": "LINEAGEWIRE_REGISTRY__DB_URL",
    "LINEAGEWIRE_REGISTRY_TOKEN": "LINEAGEWIRE_REGISTRY__TOKEN",
    "LINEAGEWIRE_UI_TOKEN": "LINEAGEWIRE_UI__TOKEN",
    "LINEAGEWIRE_SCHEDULER_URL": "LINEAGEWIRE_SCHEDULER__URL",
    "LINEAGEWIRE_SCHEDULER_TOKEN": "LINEAGEWIRE_SCHEDULER__TOKEN",
    "DATAHUB_GMS_TOKEN": "LINEAGEWIRE_DATAHUB__SINKS__REST__TOKEN",
}
#: the Kafka settings' variables before they had the section ``kafka`` (``LINEAGEWIRE_<KEY>``): listed, not derived
#: from ``Settings``, so that a key added later gets no old name it never had
_KAFKA_KEYS_BEFORE_THE_SECTION = (
    "BOOTSTRAP_SERVERS", "CLIENT_ID", "SECURITY", "SCHEMA_REGISTRY_URL", "SCHEMA_REGISTRY_BASIC_AUTH", "TOPICS",
    "CONNECT_TIMEOUT", "TOPICS__JOBS", "TOPICS__REFRESH_COMMANDS",
    *(f"SECURITY__{key}" for key in ("SECURITY_PROTOCOL", "SASL_MECHANISM", "SASL_USERNAME", "SASL_PASSWORD",
                                     "SSL_CA_LOCATION", "SSL_CERTIFICATE_LOCATION", "SSL_KEY_LOCATION",
                                     "SSL_KEY_PASSWORD", "SSL_ENDPOINT_IDENTIFICATION_ALGORITHM", "EXTRA")))
RENAMED_VARIABLES.update({f"{ENV_PREFIX}{key}": f"{ENV_PREFIX}{KAFKA_SECTION.upper()}__{key}"
                          for key in _KAFKA_KEYS_BEFORE_THE_SECTION})


def renamed(old: str, new: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value of ``old``, the deprecated name of the variable ``new``, when only ``old`` is set (else None),
    with a warning naming ``new`` whenever ``old`` is set."""
    env = os.environ if environ is None else environ
    if old not in env:
        return None
    if new in env:
        log.warning("%s is deprecated and ignored: %s is set, and wins", old, new)
        return None
    log.warning("%s is deprecated; use %s", old, new)
    return env[old]


class _RenamedVariables(PydanticBaseSettingsSource):
    """A model's fields from their deprecated variable names (``SettingsBase.renamed_variables``)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ reads the variables by name

    def __call__(self) -> dict[str, Any]:
        cls = self.settings_cls
        prefix = str(cls.model_config.get("env_prefix") or "")
        out: dict[str, Any] = {}
        renames = cls.renamed_variables() if issubclass(cls, SettingsBase) else {}
        for old, new in renames.items():
            value = renamed(old, new)
            if value is not None:
                path = [p.lower() for p in new[len(prefix):].split("__")]
                _put(out, path, self._decoded(path, value, old), old)
        return out

    def _decoded(self, path: list[str], value: str, old: str) -> Any:
        """``value`` read as YAML when it sets a mapping or list (``LINEAGEWIRE_SECURITY='{sasl_username: u}'``),
        as the variables of the new names are (``_YamlEnv``); text otherwise."""
        model: Any = self.settings_cls
        field = None
        for name in path:
            field = model.model_fields.get(name) if isinstance(model, type) and issubclass(model, BaseModel) else None
            if field is None:
                return value
            model = field.annotation
        if field is None or not self.field_is_complex(field) or NoDecode in field.metadata:
            return value
        try:
            return yaml.safe_load(value)
        except yaml.YAMLError:
            raise ConfigError(f"{old}: not a YAML value; expected e.g. [a, b] or {{key: value}}") from None


class _YamlEnv(EnvSettingsSource):
    """The variables, with complex values read as YAML (a superset of JSON): ``[a, b]``, ``{k: v}``."""

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        if field is not None and NoDecode in field.metadata:
            return value  # the field's own validator reads the text ('' is an empty list, not unset)
        try:
            return yaml.safe_load(value)
        except yaml.YAMLError:
            raise ConfigError(f"{self._variable_of(field_name, value)}: not a YAML value; expected e.g. [a, b] or "
                              "{key: value}") from None

    def _variable_of(self, field_name: str, value: Any) -> str:
        """The variable that holds ``value`` for ``field_name``, a nested key's too
        (``LINEAGEWIRE_ALERTING__ROUTE__GROUP_BY``), not only the model's own prefix and the last key."""
        wanted = f"__{field_name}".lower()
        for name, text in self.env_vars.items():
            if text == value and (name.endswith(wanted) or name == f"{self.env_prefix}{field_name}".lower()):
                return name.upper()
        return f"{self.env_prefix}{field_name.upper()}"


class SettingsBase(BaseSettings):
    """Base of every settings model of lineagewire: the one source order, highest first:

    1. values passed in code or as flags;
    2. the variables ``<env_prefix><FIELD>`` (the model's own ``env_prefix``, e.g. ``LINEAGEWIRE_SCHEDULER__``);
    3. their deprecated names (``renamed_variables``), each with a warning naming the new one;
    4. the ``config_section`` of the YAML config file (``config_file`` when passed, else ``find_config_file()``),
       or the ``config_document`` passed in its place;
    5. the defaults.
    """

    #: the section of the YAML config file with this model's settings; None: its top level
    config_section: ClassVar[str | None] = None
    #: keys of ``config_section`` that another model sharing the section reads: left to it, not refused here
    shared_section_keys: ClassVar[frozenset[str]] = frozenset()
    #: what ``load``'s errors call these settings
    title: ClassVar[str] = "settings"

    @classmethod
    def renamed_variables(cls) -> dict[str, str]:
        """Deprecated variable -> the variable of this model that replaces it (``RENAMED_VARIABLES``' share)."""
        prefix = str(cls.model_config.get("env_prefix") or "")
        return {old: new for old, new in RENAMED_VARIABLES.items()
                if new.startswith(prefix) and new[len(prefix):].split("__")[0].lower() in cls.model_fields}

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        given = dict(getattr(init_settings, "init_kwargs", {}))
        document = given.pop("config_document", None)
        if "config_file" not in cls.model_fields:
            given.pop("config_file", None)
        if document is None:
            path = getattr(init_settings, "init_kwargs", {}).get("config_file") or find_config_file()
            documents = cls.yaml_layers(path)
        else:
            documents = [document]
        return (InitSettingsSource(settings_cls, init_kwargs=given), _YamlEnv(settings_cls),
                _RenamedVariables(settings_cls),
                *(InitSettingsSource(settings_cls, init_kwargs=layer) for layer in documents))

    @classmethod
    def yaml_layers(cls, path: pathlib.Path | None) -> list[dict[str, Any]]:
        """This model's settings in the YAML config file ``path``, highest first (merged key by key): its
        ``config_section``."""
        return [read_section(path, cls.config_section, cls)]

    @classmethod
    def load(cls, config_file: str | os.PathLike[str] | None = None, *, document: dict[str, Any] | None = None,
             source: str | None = None, **flags: Any) -> Any:
        """The one builder: these settings from ``flags`` (None values ignored), the environment, and the YAML
        ``document`` (else the ``config_section`` of ``config_file``, else of ``find_config_file()``).

        Raises ConfigError naming each bad setting and where it came from (never a secret's value).
        """
        flags = {k: v for k, v in flags.items() if v is not None}
        path = find_config_file(config_file) if document is None else None
        cls.refuse_unknown_variables()
        try:
            # config_file and config_document are read by settings_customise_sources, not fields
            return cls(config_file=path, config_document=document, **flags)  # type: ignore[call-arg]
        except ValidationError as exc:
            where = source or (f"config file {str(path)!r}" if path else None)
            problems = "; ".join(f"{_where(cls, err['loc'], flags, where)}: {err['msg']}{_shown(err)}"
                                 for err in exc.errors())
            raise ConfigError(f"invalid {cls.title}: {problems}") from None


    @classmethod
    def refuse_unknown_variables(cls, environ: Mapping[str, str] | None = None) -> None:
        """A model that refuses unknown keys refuses a variable under its prefix that names none of its settings
        (a misspelt ``LINEAGEWIRE_DATAHUB__GMS_ULR``), as its YAML section does, instead of ignoring it."""
        prefix = str(cls.model_config.get("env_prefix") or "").upper()
        if cls.model_config.get("extra") != "forbid" or not prefix.endswith("__"):
            return
        known = set(cls.model_fields) | set(cls.shared_section_keys)
        unknown = sorted(name for name in (os.environ if environ is None else environ)
                         if name.upper().startswith(prefix)
                         and name.upper()[len(prefix):].split("__")[0].lower() not in known)
        if unknown:
            raise ConfigError(f"unknown {cls.title} variable(s) {', '.join(unknown)}; expected {prefix}<KEY> with "
                              f"a key among {', '.join(sorted(k for k in cls.model_fields if k != 'config_file'))}")


def _where(cls: type[SettingsBase], loc: tuple[Any, ...], flags: dict[str, Any], file: str | None) -> str:
    """``loc`` as a dotted key, with the source that set it: a flag, a variable (new or old name) or the file."""
    key = ".".join(str(p) for p in loc) or cls.title
    names = [str(p) for p in loc[:next((i for i, p in enumerate(loc) if isinstance(p, int)), len(loc))]]
    node: Any = flags
    for name in names:
        if not isinstance(node, dict):
            break  # a flag set the value this key is part of
        if name not in node:
            node = None
            break
        node = node[name]
    if names and node is not None:
        return f"{key} (from a command-line flag)"
    prefix = str(cls.model_config.get("env_prefix") or "")
    olds = {new: old for old, new in cls.renamed_variables().items()}
    for n in range(len(names), 0, -1):
        var = (prefix + "__".join(names[:n])).upper()
        if var in {k.upper() for k in os.environ}:
            return f"{key} (from environment {var})"
        if var in olds and olds[var] in os.environ:
            return f"{key} (from environment {olds[var]})"
    return f"{key} (from {file})" if file else key


class KafkaSecurity(BaseModel):
    """SASL and TLS settings, passed through to librdkafka under their librdkafka names."""

    model_config = {"extra": "forbid"}

    security_protocol: str | None = Field(None, description="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
    sasl_mechanism: str | None = Field(None, description="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, GSSAPI")
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: SecretStr | None = None
    ssl_endpoint_identification_algorithm: str | None = None
    extra: dict[str, str] = Field(default_factory=dict, description="Any other librdkafka property, e.g. "
                                  "{'sasl.oauthbearer.config': '...'}")

    @field_validator("security_protocol")
    @classmethod
    def _protocol(cls, v: str | None) -> str | None:
        allowed = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
        if v is not None and v.upper() not in allowed:
            raise ValueError(f"security_protocol={v!r}; expected one of {', '.join(sorted(allowed))}")
        return v.upper() if v else v

    def as_librdkafka_dict(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name in type(self).model_fields:
            if name == "extra":
                continue
            value = getattr(self, name)
            if value is None:
                continue
            out[name.replace("_", ".")] = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
        out.update(self.extra)
        return out


class TopicNames(BaseModel):
    """Topic names; change them to share one cluster between environments."""

    model_config = {"extra": "forbid"}

    jobs: str = "lineage.jobs"
    refresh_commands: str = "lineage.refresh-commands"

    def dlq(self, topic: str, service: str) -> str:
        """Dead-letter topic of ``service`` for ``topic``: ``<topic>.dlq.<service>``."""
        return f"{topic}.dlq.{service}"


class Settings(SettingsBase):
    """Everything lineagewire needs to talk to Kafka and the schema registry: the section ``kafka``."""

    model_config = SettingsConfigDict(
        env_prefix=f"{ENV_PREFIX}{KAFKA_SECTION.upper()}__",
        env_nested_delimiter="__",
        extra="ignore",
        validate_default=True,
    )
    config_section: ClassVar[str | None] = KAFKA_SECTION
    title: ClassVar[str] = "Kafka settings"

    config_file: pathlib.Path | None = Field(None, exclude=True, description="the YAML file these settings read "
                                             "(default: find_config_file())")
    bootstrap_servers: str = Field("127.0.0.1:9092", description="Kafka bootstrap servers, host:port[,host:port]")
    client_id: str = "lineagewire"
    security: KafkaSecurity = Field(default_factory=KafkaSecurity)
    schema_registry_url: str | None = Field(None, description="Confluent-compatible schema registry; when set, "
                                            "events use the Confluent wire format")
    schema_registry_basic_auth: SecretStr | None = Field(None, description="user:password for the registry")
    topics: TopicNames = Field(default_factory=TopicNames)
    connect_timeout: float = Field(10.0, gt=0, description="seconds a command that ends by itself (subscribe, "
                                   "replay, topics) waits for a broker to answer before it exits with "
                                   "librdkafka's reason; services keep retrying")

    @field_validator("bootstrap_servers")
    @classmethod
    def _servers(cls, v: str) -> str:
        for part in (p.strip() for p in v.split(",")):
            host, sep, port = part.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ValueError(f"bootstrap_servers entry {part!r}; expected host:port[,host:port]")
        return v

    @classmethod
    def yaml_layers(cls, path: pathlib.Path | None) -> list[dict[str, Any]]:
        """The ``kafka:`` section, then the Kafka keys at the top of the file, where they were before the section
        (other sections are no keys of this model, so never taken for one), with one warning naming the section."""
        top = read_section(path, None, cls)
        before = {k: v for k, v in top.items() if k in cls.model_fields and not cls.model_fields[k].exclude}
        if before:
            moved = ", ".join(f"{k} -> {KAFKA_SECTION}.{k}" for k in before)
            log.warning("config file %r: Kafka settings at the top level are deprecated; move them under '%s:' "
                        "(%s), which wins where both set a key", str(path), KAFKA_SECTION, moved)
        return [*super().yaml_layers(path), before]

    def as_librdkafka_dict(self) -> dict[str, str]:
        """The librdkafka properties for a producer, consumer or admin client."""
        return {"bootstrap.servers": self.bootstrap_servers, "client.id": self.client_id,
                **self.security.as_librdkafka_dict()}

    def registry_config(self) -> dict[str, Any]:
        if self.schema_registry_basic_auth is None:
            return {}
        return {"basic.auth.user.info": self.schema_registry_basic_auth.get_secret_value()}


def find_config_file(explicit: str | os.PathLike[str] | None = None) -> pathlib.Path | None:
    """The YAML config file every part of lineagewire reads: ``explicit`` (a ``--config`` flag), else
    ``$LINEAGEWIRE_CONFIG``, else ``./lineagewire.yaml`` when it exists.
    A named file that does not exist is a ConfigError; the default one is optional."""
    if explicit:
        path = pathlib.Path(explicit)
        if not path.is_file():
            raise ConfigError(f"config file {str(explicit)!r} does not exist; expected a YAML file")
        return path
    env = os.environ.get(CONFIG_ENV)
    if env:
        path = pathlib.Path(env)
        if not path.is_file():
            raise ConfigError(f"{CONFIG_ENV}={env!r}: no such file; expected a YAML config file")
        return path
    path = pathlib.Path(DEFAULT_CONFIG_FILE)
    return path if path.is_file() else None


def load_settings(config_file: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Settings from flags (``overrides``, None values ignored), environment and config file.

    Raises ConfigError naming the setting, where it came from and what was expected.
    """
    settings: Settings = Settings.load(config_file, **overrides)
    return settings


def read_section(path: pathlib.Path | None, section: str | None, model: type[BaseModel]) -> dict[str, Any]:
    """The mapping at ``section`` of the YAML config file ``path`` (its top level when None; {} without a file or
    section). ConfigError naming the file when it is not a YAML mapping, and, for a model that forbids unknown
    keys, the keys it does not know."""
    if path is None:
        return {}
    found: Any = _read_yaml(path)
    where = f"config file {str(path)!r}"
    if section is not None:
        found = found.get(section)
        if found is None:
            return {}
        if not isinstance(found, dict):
            raise ConfigError(f"{where}: '{section}' holds a YAML {type(found).__name__}; expected a mapping of "
                              f"{section} settings")
        where += f", section '{section}'"
    return _model_keys(found, model, f"{where}: unknown {section or 'top-level'} setting(s)")


def _model_keys(found: dict[str, Any], model: type[BaseModel], unknown_keys: str) -> dict[str, Any]:
    """``found`` without the keys another model sharing the section reads (``SettingsBase.shared_section_keys``);
    for a model that forbids unknown keys, ConfigError (starting with ``unknown_keys``) naming those it does not
    know."""
    shared: frozenset[str] = getattr(model, "shared_section_keys", frozenset())
    found = {k: v for k, v in found.items() if k not in shared}
    if model.model_config.get("extra") == "forbid":
        known = [k for k, f in model.model_fields.items() if not f.exclude]
        unknown = sorted(str(k) for k in found if k not in known)
        if unknown:
            raise ConfigError(f"{unknown_keys} {', '.join(unknown)}; expected some of {', '.join(known)}")
    return found


def _read_yaml(path: pathlib.Path) -> dict[str, Any]:
    """A config file must be a YAML mapping (or empty); say where it is not."""
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"config file {str(path)!r} is not valid YAML{at}: {problem}; expected a YAML mapping "
                          "of settings") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {exc}; expected a UTF-8 YAML file") from None
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"config file {str(path)!r} holds a YAML {type(loaded).__name__}; expected a mapping of "
                          "settings such as 'kafka: {bootstrap_servers: host:9092}'")
    return loaded or {}


def _put(data: dict[str, Any], path: list[str], value: Any, what: str) -> None:
    node = data
    for i, part in enumerate(path[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise ConfigError(f"{what}: sets {'.'.join(path)}, but {'.'.join(path[:i + 1])} is a "
                              f"{type(child).__name__}; expected a mapping there")
        else:
            child = node[part] = dict(child)  # the document's own mapping stays as it was read
        node = child
    node[path[-1]] = value


def _shown(err: Any) -> str:
    """`` (got <value>)`` for a scalar input; never a secret's value, nor a whole mapping (it may hold one)."""
    if "input" not in err or isinstance(err["input"], dict | list):
        return ""
    loc = [str(p) for p in err.get("loc", ())]
    if any(word in p for p in loc for word in ("password", "auth", "token", "secret")):
        return " (got <secret>)"
    return f" (got {repr(err['input'])[:80]})"
