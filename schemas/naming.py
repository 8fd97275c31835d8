"""Names derived from events that every output must agree on, so the same Spark action is the same job in
OpenLineage, DataHub and the registry."""

from __future__ import annotations

import functools

__all__ = ["action_job_name"]


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
