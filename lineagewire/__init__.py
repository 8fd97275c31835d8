"""lineagewire: Spark job status and lineage as an event stream on Kafka."""

__version__ = "0.1.0"
