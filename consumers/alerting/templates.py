"""Message templates (jinja2): the built-in ones in ``templates/``, overridable per file by a user folder.

The rules file's ``templates: DIR`` puts DIR first on the search path, so a
user copies one of ``email_subject.txt.j2``, ``email.txt.j2``,
``email.html.j2`` or ``slack.txt.j2`` there and edits it. Templates get
``n`` (the ``Notification``), ``firing`` and ``resolved`` (lists of
``AlertView``) and ``receiver`` (the channel's name).
"""

from __future__ import annotations

import pathlib
from typing import Any

from lineagewire.exceptions import require

from .exceptions import RulesError
from .model import Notification

__all__ = ["Templates"]

_BUILTIN = pathlib.Path(__file__).resolve().parent / "templates"


class Templates:
    """Renders the message templates; ``directory`` overrides the built-in files of the same name."""

    def __init__(self, directory: str | pathlib.Path | None = None) -> None:
        jinja2 = require("jinja2", "alerting", "Alert message templates")
        paths = [str(_BUILTIN)]
        if directory is not None:
            d = pathlib.Path(directory).expanduser()
            if not d.is_dir():
                raise RulesError(f"templates={str(d)!r}: not a folder; expected a folder of *.j2 templates")
            paths.insert(0, str(d))
        self._env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(paths), undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
            autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default_for_string=False))
        self._jinja2 = jinja2

    def render(self, name: str, n: Notification, receiver: str, **extra: Any) -> str:
        try:
            return self._env.get_template(name).render(n=n, firing=n.firing, resolved=n.resolved,
                                                       receiver=receiver, **extra)
        except self._jinja2.TemplateError as exc:
            raise RulesError(f"template {name!r}: {exc}") from exc
