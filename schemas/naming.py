"""Names every part must agree on: a file or folder's dataset, as the emitter names it (so a path written by Spark,
read by a dbt model ingested from OpenLineage, promised fresh in a ``datasets:`` section or typed on the command
line is one dataset), and the job of a Spark action (so the same action is the same job in OpenLineage, DataHub
and the registry)."""

from __future__ import annotations

import functools
from urllib.parse import urlsplit

__all__ = ["action_job_name", "file_dataset_id", "normalize_uri"]

_OBJECT_STORES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gs"}
_AZURE = {"abfs", "abfss", "wasb", "wasbs"}


def normalize_uri(uri: str) -> str:
    """A path or URI as Spark prints it, with 'file' for scheme-less absolute paths."""
    if uri.startswith("/"):
        return "file:" + uri
    return uri


def file_dataset_id(uri: str) -> tuple[str, str]:
    """(namespace, name) of a file or folder given as a path or URI (Spark's Path string: ``file:/tmp/x`` is
    ``file`` + ``/tmp/x``, ``s3a://b/k`` is ``s3://b`` + ``k``), as OpenLineage names datasets."""
    parts = urlsplit(normalize_uri(uri))
    scheme = parts.scheme.lower()
    path = parts.path or "/"
    if len(path) > 1:
        path = path.rstrip("/")
    if scheme in ("", "file"):
        return "file", path
    if scheme in _OBJECT_STORES:
        return f"{_OBJECT_STORES[scheme]}://{parts.netloc}", path.lstrip("/")
    if scheme in _AZURE:
        return f"{scheme}://{parts.netloc}", path.lstrip("/")
    host = parts.netloc.rsplit("@", 1)[-1]
    return f"{scheme}://{host}", path


@functools.lru_cache(maxsize=4096)
def _snake(text: str) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch.isupper() and i and (text[i - 1].islower() or text[i - 1].isdigit()):
            out.append("_")
        out.append(ch.lower() if ch.isalnum() else "_")
    return "_".join(part for part in "".join(out).split("_") if part)


def action_job_name(job_name: str, action_name: str, plan_node: str | None = None,
                    output: str | None = None) -> str:
    """The job of a Spark action, as OpenLineage's Spark integration names it:
    ``<job>.<plan node or action, snake case>[.<last part of the first output's name>]``, so the same
    command writing the same table is the same job from run to run."""
    name = f"{job_name}.{_snake(plan_node or action_name) or 'action'}"
    if output:
        tail = _snake(output.rstrip("/").rsplit("/", 1)[-1])
        if tail:
            name = f"{name}.{tail}"
    return name
