"""Listener plugins: the contract (``base``), the registry, the per-listener executor, the built-ins."""

from .base import JobStatusListener, JobStatusListenerFactory, ListenerContext
from .registry import ENTRY_POINT_GROUP, available_listeners, load_factory

__all__ = ["ENTRY_POINT_GROUP", "JobStatusListener", "JobStatusListenerFactory", "ListenerContext",
           "available_listeners", "load_factory"]
