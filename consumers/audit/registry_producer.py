"""Which producer a run came from, in a word: ``lineagewire``, ``openlineage-spark``, ``dbt``, ``Airflow``...

The registry keeps ``header.producer.name`` of each run: ``lineagewire`` for our own emitter and services, and for a
run ingested from OpenLineage (``lineagewire ingest openlineage``) the OpenLineage event's ``producer`` URI, such as
``https://github.com/OpenLineage/OpenLineage/tree/1.40.0/integration/spark``. People read the short name; the URI
stays in the JSON and in the UI's hover text.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

__all__ = ["producer_info", "producer_label"]

#: the part of an OpenLineage repository URI after ``tree/<version>/`` that names the integration
_OPENLINEAGE = {("integration", "spark"): "openlineage-spark", ("integration", "flink"): "openlineage-flink",
                ("integration", "dbt"): "dbt", ("integration", "airflow"): "Airflow",
                ("client", "python"): "openlineage-python", ("client", "java"): "openlineage-java"}
#: other repositories that produce OpenLineage, by their GitHub owner/name
_REPOSITORIES = {("apache", "airflow"): "Airflow", ("dbt-labs", "dbt-core"): "dbt", ("apache", "flink"): "Flink",
                 ("apache", "spark"): "Spark", ("openlineage", "openlineage"): "OpenLineage"}
#: words that name a producer anywhere in a URI of no known shape (Airflow providers, dbt adapters, ...)
_WORDS = {"airflow": "Airflow", "dbt": "dbt"}


def producer_label(name: str | None) -> str | None:
    """The short name of the producer called ``name`` (``header.producer.name``), None when not known.

    A plain name (``lineagewire``, ``lineagewire-scheduler``) is itself; an OpenLineage repository URI is its
    integration (``.../integration/spark`` -> ``openlineage-spark``, ``.../integration/dbt`` -> ``dbt``);
    Airflow's provider (``https://github.com/apache/airflow/tree/providers-openlineage/2.3.0``) is ``Airflow``;
    another GitHub URI is its repository's name, and any other URI its host.
    """
    if not name:
        return None
    if "://" not in name:
        return name
    return _uri_label(name)


def _uri_label(name: str) -> str:
    """The label of a producer named by a URI (``producer_label``)."""
    parts = urlsplit(name)
    path = [p for p in parts.path.split("/") if p]
    repo = _github_repo(parts.hostname, path)
    if repo == ("openlineage", "openlineage"):
        return _openlineage_integration(path[2:])
    if repo in _REPOSITORIES:
        return _REPOSITORIES[repo]
    said = [label for word, label in _WORDS.items() if word in name.lower()]
    if said:
        return said[0]
    return path[1] if repo else (parts.hostname or name)


def _github_repo(host: str | None, path: list[str]) -> tuple[str, str] | None:
    """(owner, name) of a GitHub URI's repository, lower case; None for any other URI."""
    if host != "github.com" or len(path) < 2:
        return None
    return path[0].lower(), path[1].lower()


def _openlineage_integration(rest: list[str]) -> str:
    """The label of a path under the OpenLineage repository (``tree/1.40.0/integration/spark/...``)."""
    for i in range(len(rest) - 1):
        key = (rest[i].lower(), rest[i + 1].lower())
        if key in _OPENLINEAGE:
            return _OPENLINEAGE[key]
        if key[0] in ("integration", "client"):
            return f"openlineage-{key[1]}"
    return "OpenLineage"


def producer_info(name: str | None, version: str | None) -> dict[str, Any] | None:
    """A run's producer as the registry's answers give it: ``{"label", "name", "version"}`` (``name``: as the events
    give it, an OpenLineage producer's URI); None when the run was applied before the registry kept producers."""
    if not name:
        return None
    return {"label": producer_label(name), "name": name, "version": version}
