"""Kinds registered by name: the built-in ones are the modules of a package, others come from an entry-point group.

Alert rule kinds and channel types are looked up this way: a new kind is one new module with a
``@registry.register``-decorated class, or an outside package's entry point (``kind = "pkg.module:Class"``).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from importlib.metadata import entry_points
from typing import Generic, TypeVar

__all__ = ["KindRegistry"]

T = TypeVar("T")


class KindRegistry(Generic[T]):
    """Subclasses of ``base`` by their ``key`` attribute; ``error`` is raised for an unknown or wrong kind."""

    def __init__(self, what: str, base: type[T], key: str, package: str, path: Iterable[str],
                 entry_point_group: str, error: type[Exception], skip: frozenset[str] = frozenset({"base"})) -> None:
        self.what, self.base, self.key = what, base, key
        self.package, self.path, self.skip = package, list(path), skip
        self.entry_point_group, self.error = entry_point_group, error
        self.kinds: dict[str, type[T]] = {}  # filled by ``register`` as the kind modules are imported
        self._loaded = False

    def register(self, cls: type[T]) -> type[T]:
        """Class decorator: make ``cls`` available under its ``key`` attribute."""
        name = getattr(cls, self.key, None)
        if not name:
            raise TypeError(f"{cls.__name__} has no {self.key!r}")
        self.kinds[name] = cls
        return cls

    def _load_builtin(self) -> None:
        if not self._loaded:
            for mod in pkgutil.iter_modules(self.path):
                if mod.name not in self.skip:
                    importlib.import_module(f"{self.package}.{mod.name}")
            self._loaded = True

    def get(self, kind: str) -> type[T]:
        """The class of ``kind`` (built in, else from an entry point); ``error`` listing the known kinds otherwise."""
        self._load_builtin()
        cls = self.kinds.get(kind)
        if cls is not None:
            return cls
        for ep in entry_points(group=self.entry_point_group):
            if ep.name == kind:
                loaded = ep.load()
                if not (isinstance(loaded, type) and issubclass(loaded, self.base)):
                    raise self.error(f"{self.what} {kind!r}: entry point {ep.value!r} is not a "
                                     f"{self.base.__name__} subclass")
                return loaded
        known = sorted({*self.kinds, *(ep.name for ep in entry_points(group=self.entry_point_group))})
        raise self.error(f"{self.what} {kind!r} is unknown; expected one of {', '.join(known)}")

    def known(self) -> list[str]:
        """The built-in kinds."""
        self._load_builtin()
        return sorted(self.kinds)
