"""OpenLineage in: ``lineagewire ingest openlineage``, a producer service.

Events from any OpenLineage producer (Airflow's provider, ``dbt-ol``, the
openlineage-spark jar, Flink, openlineage-python) become contract events on
``lineage.jobs``, keyed and ordered as the emitter's, so every consumer treats
them as its own. Where the parts live:

* ``receiver.py``: ``POST /api/v1/lineage`` as Marquez serves it (ASGI);
* ``server.py``: running it, ``run`` for the command and ``serve`` in-process;
* ``topic.py``: ``--from-topic``, a handler of the shared consumer runtime;
* ``intake.py``: parse, validate, translate, encode, shared by both inputs;
* ``validation.py``: the OpenLineage spec's JSON schemas (``spec/``);
* ``sink.py``: durable acknowledgement, on Kafka or in the outbox;
* ``translate.py``: OpenLineage events to contract events;
* ``settings.py``: ``IngestSettings`` (``LINEAGEWIRE_INGEST__*``, ``ingest:``).

Nothing heavy is imported here: the command imports what it runs.
"""
