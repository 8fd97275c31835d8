"""Redaction of secrets from text and key-value maps, before anything leaves the process.

Secrets travel in two shapes, and both are caught:

* **by key name**: an entry of a map (Spark conf, tags, dataset properties)
  whose key looks like a secret (``password``, ``secret``, ``token``,
  ``credential``, ``auth``, ``key``...) has its value replaced by ``***``;
* **by value pattern**, inside any string, whatever the key it sits under:

  - URL userinfo: ``jdbc:postgresql://user:hunter2@db/x`` → ``//user:***@db/x``;
  - ``password=...`` / ``secret=...`` / ``token=...`` pairs, as in JDBC URLs
    (``;password=x``, ``?password=x&``) and properties text;
  - quoted values after a secret-looking name: JAAS ``password="x"``, SQL
    ``OPTIONS (password 'x')`` and ``WITH ('password' = 'x')``, JSON
    ``"token": "x"``;
  - ``Bearer <token>``.

The key names and patterns are extensible (``Redactor(extra_patterns=...,
extra_keys=...)``; the emitter reads them from its ``redact_patterns`` and
``redact_keys`` settings). An extra pattern with a group named ``secret``
replaces that group only, otherwise its whole match.

Redaction is one-way and idempotent: redacting redacted text changes nothing.
It is a safety net for secrets that reached text by accident, not a reason to
put them there; prefer secrets in ``SecretStr`` settings and credential files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from lineagewire.exceptions import ConfigError

__all__ = ["REDACTED", "Redactor", "redact_text"]

#: what a secret is replaced with
REDACTED = "***"

# Key names whose value is a secret when they name a map entry. Broad on purpose (as the conf filter always was):
# a masked innocent value costs little, a leaked password a lot.
_SECRET_KEY_WORDS = ("pass", "pwd", "secret", "token", "credential", "auth", "key")

# Names that, followed by a value in text, mark that value as a secret. Narrower than the key words: in free text
# "key" and "auth" are too common ("PARTITION (key = 'a')") to mask every value after them.
_SECRET_NAME_WORDS = ("password", "passwd", "pwd", "secret", "token", "credential", "api[_.-]?key",
                      "access[_.-]?key", "private[_.-]?key", "client[_.-]?secret")

# A cheap test run before the patterns: most strings of an event (column names, paths) contain none of these.
_TRIGGER_WORDS = ("pass", "pwd", "secret", "token", "credential", "key", "bearer", "://")


_CACHE_SIZE = 8192
_CACHED_LENGTH = 256


def _name(words: Iterable[str]) -> str:
    # A secret-looking name, with whatever prefix or suffix a property name carries (sasl_password, secret.key).
    return r"[\w.\-]*(?:" + "|".join(words) + r")[\w.\-]*"


class Redactor:
    """Replaces secrets in text and maps with ``***``; see the module docstring for what counts as one."""

    def __init__(self, extra_patterns: Iterable[str] = (), extra_keys: Iterable[str] = ()) -> None:
        keys = [k.strip() for k in extra_keys if k and k.strip()]
        escaped = [re.escape(k) for k in keys]
        self._secret_key = re.compile("|".join([*_SECRET_KEY_WORDS, *escaped]), re.IGNORECASE)
        name = _name([*_SECRET_NAME_WORDS, *escaped])
        self._trigger = re.compile("|".join([*(re.escape(w) for w in _TRIGGER_WORDS), *escaped]), re.IGNORECASE)
        self._patterns: list[re.Pattern[str]] = [
            # scheme://user:SECRET@host
            re.compile(r"(?P<pre>[a-z][a-z0-9+.\-]*://[^/\s:@'\"]*:)(?P<secret>[^@\s/'\"]+)(?=@)", re.IGNORECASE),
            # name = 'SECRET' / name "SECRET" / 'name' = 'SECRET' / "name": "SECRET"
            re.compile(r"(?P<pre>(?P<q>['\"`]?)\b" + name + r"(?P=q)\s*(?:=>|=|:)?\s*)"
                       r"(?P<quote>['\"])(?P<secret>(?:\\.|(?!(?P=quote)).)*)(?P=quote)", re.IGNORECASE),
            # name=SECRET up to the next separator (JDBC ;password=x, URL ?token=x&, properties text)
            re.compile(r"(?P<pre>\b" + name + r"\s*[=:]\s*)(?P<secret>[^\s;&,)'\"]+)", re.IGNORECASE),
            re.compile(r"(?P<pre>\bbearer\s+)(?P<secret>[A-Za-z0-9\-._~+/]+=*)", re.IGNORECASE),
        ]
        self._cache: dict[str, str] = {}
        self._keys: dict[str, bool] = {}
        self._extra: list[re.Pattern[str]] = []
        for pattern in extra_patterns:
            if not pattern:
                continue
            try:
                self._extra.append(re.compile(pattern))
            except re.error as exc:
                raise ConfigError(f"redaction pattern {pattern!r} is not a valid regular expression ({exc}); "
                                  "expected a Python regex, optionally with a group named 'secret'") from exc

    # -- text ----------------------------------------------------------------------------------------------------

    def text(self, text: str) -> str:
        """``text`` with every secret the patterns find replaced by ``***``."""
        # Column and dataset names repeat across an event and across events: remember short strings' answers.
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        out = self._redact(text)
        if len(text) <= _CACHED_LENGTH:
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()
            self._cache[text] = out
        return out

    def _redact(self, text: str) -> str:
        if self._trigger.search(text):
            for pattern in self._patterns:
                text = pattern.sub(_keep_pre, text)
        for pattern in self._extra:
            text = pattern.sub(_replace_secret, text)
        return text

    # -- maps and nested values ----------------------------------------------------------------------------------

    def is_secret_key(self, name: str) -> bool:
        """True when a map entry named ``name`` holds a secret (its value is masked)."""
        known = self._keys.get(name)
        if known is None:
            known = bool(self._secret_key.search(name))
            if len(self._keys) >= _CACHE_SIZE:
                self._keys.clear()
            self._keys[name] = known
        return known

    def mapping(self, entries: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``entries``: values of secret-named keys masked, every other value redacted."""
        return {k: (REDACTED if isinstance(v, str) and self.is_secret_key(str(k)) else self.value(v))
                for k, v in entries.items()}

    def value(self, value: Any) -> Any:
        """``value`` with secrets redacted at any depth (dicts, lists and tuples are copied; other types kept)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return self.mapping(value)
        if isinstance(value, list | tuple):
            return type(value)(self.value(v) for v in value)
        return value


def _keep_pre(match: re.Match[str]) -> str:
    groups = match.groupdict()
    quote = groups.get("quote") or ""
    return f"{groups['pre']}{quote}{REDACTED}{quote}"


def _replace_secret(match: re.Match[str]) -> str:
    if "secret" not in match.re.groupindex or match.group("secret") is None:
        return REDACTED
    start, end = match.span("secret")
    base = match.start()
    whole = match.group(0)
    return whole[:start - base] + REDACTED + whole[end - base:]


_DEFAULT = Redactor()


def redact_text(text: str) -> str:
    """``text`` redacted with the built-in patterns (no extra ones)."""
    return _DEFAULT.text(text)
