"""``lineagewire demo``: the main job, end to end, on this machine.

``command.py`` runs it: the local Kafka, the consumer services as separate
processes, an unchanged PySpark job under ``lineagewire instrument``, and what
each service made of its events. ``receiver.py`` is the local HTTP endpoint
that stands in for the backends (an OpenLineage server, an alert webhook);
``show.py`` prints what arrived.
"""

from .command import demo

__all__ = ["demo"]
