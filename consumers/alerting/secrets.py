"""Secrets in the rules file: ``{env: NAME}`` or ``{file: PATH}`` (or, for local receivers, a literal).

They become ``SecretStr`` when the file is loaded, print as ``**********``
and are revealed only where a channel builds its request; channels log the
receiver's host, never its URL (a Slack webhook URL is itself the secret).
"""

from __future__ import annotations

import os
import pathlib
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import BeforeValidator, SecretStr

__all__ = ["Secret", "redact_url", "resolve_secret"]


def resolve_secret(value: Any) -> SecretStr:
    """The secret named by ``value``: a string, ``{"env": NAME}`` or ``{"file": PATH}`` (trailing newline dropped)."""
    if isinstance(value, SecretStr):
        return value
    if isinstance(value, str):
        return SecretStr(value)
    if isinstance(value, dict) and set(value) == {"env"}:
        name = str(value["env"])
        if name not in os.environ:
            raise ValueError(f"environment variable {name} is not set; expected it to hold the secret")
        return SecretStr(os.environ[name])
    if isinstance(value, dict) and set(value) == {"file"}:
        path = pathlib.Path(str(value["file"])).expanduser()
        try:
            return SecretStr(path.read_text().rstrip("\r\n"))
        except OSError as exc:
            raise ValueError(f"secret file {str(path)!r} cannot be read: {exc.strerror}") from exc
    raise ValueError(f"expected a string, {{env: NAME}} or {{file: PATH}}, got {type(value).__name__}")


Secret = Annotated[SecretStr, BeforeValidator(resolve_secret)]


def redact_url(url: str) -> str:
    """``scheme://host:port`` of ``url``: what may be logged about a receiver."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}" if parts.netloc else "<url>"
