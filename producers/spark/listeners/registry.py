"""Finding listener factories: built-in names, the ``lineagewire.listeners`` entry points, dotted paths.

A name resolves, in order, to an entry point of the group ``lineagewire.listeners``
(outside packages register theirs there; the built-ins are registered there
too), to a built-in (so a checkout that was not ``pip install``-ed still works),
or to a dotted path ``package.module:Factory`` / ``package.module.Factory``.
The target may be a ``JobStatusListenerFactory`` subclass, an instance, or any
callable taking a ``ListenerContext`` and returning a listener.
"""

from __future__ import annotations

import importlib
import inspect
from importlib.metadata import entry_points
from typing import Any

from ..exceptions import UnknownListenerError
from .base import JobStatusListener, JobStatusListenerFactory, ListenerContext

__all__ = ["ENTRY_POINT_GROUP", "available_listeners", "load_factory"]

ENTRY_POINT_GROUP = "lineagewire.listeners"

BUILTINS: dict[str, str] = {
    "kafka": "lineagewire.producers.spark.listeners.kafka:KafkaListenerFactory",
    "log": "lineagewire.producers.spark.listeners.log:LogListenerFactory",
    "file": "lineagewire.producers.spark.listeners.file:FileListenerFactory",
}


def available_listeners() -> dict[str, str]:
    """Registered name -> target ('module:attr'), built-ins included."""
    found = dict(BUILTINS)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found[ep.name] = ep.value
    return found


def _import(target: str) -> Any:
    if ":" in target:
        module, _, attr = target.partition(":")
    else:
        module, _, attr = target.rpartition(".")
    if not module or not attr:
        raise ImportError(f"{target!r} is not a dotted path")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


class _CallableFactory(JobStatusListenerFactory):
    def __init__(self, fn: Any) -> None:
        self._fn = fn

    def create_listener(self, context: ListenerContext) -> JobStatusListener:
        return self._fn(context)


def load_factory(name: str) -> JobStatusListenerFactory:
    """The factory for ``name``; UnknownListenerError listing the available names if there is none."""
    registered = available_listeners()
    target = registered.get(name)
    if target is None and not any(sep in name for sep in ".:"):
        raise UnknownListenerError(name, list(registered))
    try:
        obj = _import(target or name)
    except (ImportError, AttributeError) as exc:
        raise UnknownListenerError(name, list(registered), f"cannot import {target or name!r}: {exc}") from exc
    if inspect.isclass(obj) and issubclass(obj, JobStatusListenerFactory):
        return obj()
    if isinstance(obj, JobStatusListenerFactory):
        return obj
    if callable(obj):
        return _CallableFactory(obj)
    raise UnknownListenerError(name, list(registered), f"{target or name!r} is not a listener factory")
