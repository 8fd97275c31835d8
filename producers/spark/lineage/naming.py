"""Dataset namespaces and names after the OpenLineage naming conventions.

=============  ===========================================  ==========================
source         namespace                                    name
=============  ===========================================  ==========================
local file     ``file``                                     absolute path
HDFS           ``hdfs://{namenode}:{port}``                 absolute path
S3             ``s3://{bucket}``                            object key (no leading /)
GCS            ``gs://{bucket}``                            object key
Azure          ``abfss://{container}@{account host}``       path (no leading /)
JDBC           ``{scheme}://{host}:{port}`` (credentials    ``{database}.{table}``
               and parameters removed), Derby               (``{table}`` when the URL
               ``derby:{subsubprotocol}:{database}``        names no database)
Kafka          ``kafka://{first bootstrap server}``         topic
catalog table  warehouse URI or ``hive://{host}:{port}``    ``{database}.{table}``
=============  ===========================================  ==========================
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# Files and folders are named as every part names them (the contract's naming: the ingested OpenLineage events,
# the freshness promises and the registry's look-ups agree with the emitter by importing the same function).
from lineagewire.schemas.naming import file_dataset_id, normalize_uri

__all__ = ["file_dataset_id", "jdbc_dataset_id", "kafka_namespace", "normalize_uri"]

_JDBC_SCHEMES = {"postgresql": "postgres", "mariadb": "mysql"}


def jdbc_dataset_id(url: str, table: str) -> tuple[str, str]:
    """(namespace, name) of a JDBC table; credentials and connection parameters never appear."""
    rest = url[5:] if url.lower().startswith("jdbc:") else url
    scheme, _, tail = rest.partition(":")
    scheme = scheme.lower()
    # Connection parameters (';create=true', '?user=..&password=..') are not part of a dataset's identity.
    tail = re.split(r"[;?]", tail, maxsplit=1)[0]
    if not tail.startswith("//"):
        # derby:memory:db, derby:/path/db, h2:mem:db, sqlite:/path.db: the database is in the namespace.
        return f"{scheme}:{tail}", table
    parts = urlsplit("x:" + tail)
    host = parts.netloc.rsplit("@", 1)[-1]
    database = parts.path.strip("/").split("/")[0] if parts.path else ""
    name = f"{database}.{table}" if database and not table.startswith(database + ".") else table
    return f"{_JDBC_SCHEMES.get(scheme, scheme)}://{host}", name


def kafka_namespace(bootstrap_servers: str) -> str:
    """``kafka://host:port`` of the first server in a bootstrap list."""
    first = bootstrap_servers.split(",")[0].strip()
    first = re.sub(r"^[A-Za-z_]+://", "", first)  # 'PLAINTEXT://host:9092' listener prefixes
    return f"kafka://{first}"
