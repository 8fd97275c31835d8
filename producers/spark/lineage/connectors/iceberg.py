"""Apache Iceberg (``iceberg-spark-runtime``): tables of Iceberg's ``SparkCatalog`` / ``SparkSessionCatalog``.

Iceberg tables are DataSource V2 tables (``org.apache.iceberg.spark.source.SparkTable``); the plan nodes
that read and write them are Spark's own (``DataSourceV2Relation``, ``AppendData``, ``ReplaceData``, ...,
handled in ``v2``), which call ``iceberg_datasets`` once they find an Iceberg table.

Naming follows the OpenLineage spec and openlineage-spark's ``IcebergHandler``: the dataset is the
table's location (``file`` + folder for a Hadoop catalog in a local folder); a ``TABLE`` symlink names
it in its catalog, ``{namespace}.{table}`` in the catalog's own namespace (the warehouse URI for a
Hadoop catalog, ``hive://host:port`` for a Hive one, the catalog's URI for a REST one). The Spark-side
catalog name (``spark.sql.catalog.<name>``) is not part of it: it is a per-session alias, and two jobs
may call one warehouse differently. It goes into ``properties["catalog"]``, as openlineage-spark's catalog
facet names it: DataHub names Iceberg tables by catalog (its platform instance).

The snapshot id goes into ``properties["version"]`` (as openlineage-spark's dataset version): for a
read, the snapshot the scan planned (time travel included); for a write, the table's snapshot once the
write committed.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from lineagewire.schemas.events import Dataset, SchemaField, Symlink, dataset

from ... import internals
from ..context import Extraction
from ..naming import file_dataset_id, normalize_uri
from ..plan import PlanNode

__all__ = ["catalog_namespace", "iceberg_datasets", "is_iceberg_table", "version_read", "version_written"]

log = logging.getLogger(__name__)

#: JVM classes resolved once per JVM (each package level of a lookup is a round trip).
_CLASSES: dict[int, Any] = {}


def is_iceberg_table(cls: str) -> bool:
    """Whether a V2 table's JVM class is Iceberg's (``SparkTable``, ``StagedSparkTable``, ...)."""
    return cls.startswith("org.apache.iceberg.spark.")


def catalog_namespace(ctx: Extraction, catalog: str) -> str:
    """The namespace of a TABLE symlink into Iceberg catalog ``catalog`` (from its Spark conf)."""
    key = ("iceberg-catalog", catalog)
    if key not in ctx.memo:
        ctx.memo[key] = _catalog_namespace(ctx, catalog)
    return str(ctx.memo[key])


def _catalog_namespace(ctx: Extraction, catalog: str) -> str:
    if catalog == "spark_catalog":
        return ctx.catalog_namespace()  # SparkSessionCatalog: Spark's own catalog, named as for Spark tables
    conf = ctx.session().conf()
    prefix = f"spark.sql.catalog.{catalog}."
    kind = str(conf.get(prefix + "type", "") or "").lower()
    uri = str(conf.get(prefix + "uri", "") or "")
    warehouse = str(conf.get(prefix + "warehouse", "") or "")
    if kind == "hive" and uri:
        return "hive://" + re.sub(r"^[a-z]+://", "", uri.split(",")[0].strip())
    if kind == "rest" and uri:
        return uri.rstrip("/")
    if warehouse:
        return normalize_uri(warehouse).rstrip("/")
    return uri.rstrip("/") or catalog


def _snapshot_id(snapshot: Any) -> str | None:
    return str(snapshot.snapshotId()) if snapshot is not None else None


def _scan_report_snapshot(scan: Any) -> str | None:
    """The snapshot an Iceberg scan planned, from its ScanReport (held in a private field of SparkScan).

    The table object of a read is shared with the catalog's cache (and with a write to the same table in
    the same action), so its current snapshot may already be a later one; the ScanReport is what was read.
    openlineage-spark reads the same field, the same way, for its Iceberg scan report facet.
    """
    jvm = internals.active_jvm()
    if jvm is None:
        return None
    # One call that walks the class hierarchy: a missing field tried class by class would cost a Java
    # exception each, which py4j turns into ~140 round trips.
    field_utils = _CLASSES.get(id(jvm))
    if field_utils is None:
        field_utils = _CLASSES[id(jvm)] = jvm.org.apache.commons.lang3.reflect.FieldUtils
    supplier = field_utils.readField(scan, "scanReportSupplier", True)
    report = supplier.get() if supplier is not None else None
    return str(report.snapshotId()) if report is not None else None


def version_read(ctx: Extraction, node: PlanNode, table: Any) -> str | None:
    """The snapshot a ``DataSourceV2Relation`` of an Iceberg table read."""
    if ctx.jvm is not None and node.path and node.path[-1] == ("f", "relation"):
        parent = ctx.jvm.node(node.path[:-1])  # the DataSourceV2ScanRelation, already looked up
        try:
            found = _scan_report_snapshot(parent.scan())
            if found is not None:
                return found
        except Exception:  # noqa: BLE001 - not a scan, or not planned: the pinned or current snapshot
            log.debug("no Iceberg scan report", exc_info=True)
    pinned = table.snapshotId()  # VERSION AS OF, or an identifier naming a snapshot
    if pinned is not None:
        return str(pinned)
    option = ctx.j(node).options().get("snapshot-id")
    if option is not None:
        return str(option)
    return _snapshot_id(table.table().currentSnapshot())


def version_written(table: Any) -> str | None:
    """The snapshot an Iceberg write committed: the table object committed through knows it."""
    return _snapshot_id(table.table().currentSnapshot())


def iceberg_datasets(ctx: Extraction, node: PlanNode | None, table: Any, fields: list[SchemaField], *,
                     catalog: Any, ident: Any, write: bool) -> list[Dataset]:
    """An Iceberg table (``SparkTable``) by its location, with a TABLE symlink when it came from a catalog."""
    ctx.deadline.check_essential("looking up the Iceberg table's location")
    location = str(table.table().location())
    symlinks: list[Symlink] = []
    properties: dict[str, str] = {}
    if catalog is not None and ident is not None:
        name = ".".join([*(str(n) for n in ident.namespace()), str(ident.name())])
        properties["catalog"] = str(catalog.name())
        symlinks = [{"namespace": catalog_namespace(ctx, properties["catalog"]), "name": name, "type": "TABLE"}]
    if not write:
        # A scan that needs Iceberg's metadata columns (a MERGE's ``_file``, ``_pos``) adds them to the
        # relation's output: the dataset's schema is the table's.
        columns = {f.get("name") for f in json.loads(str(table.schema().json())).get("fields", [])}
        fields = [f for f in fields if f["name"] in columns]
    try:
        if write:
            version = version_written(table)
        else:
            version = version_read(ctx, node, table) if node is not None else None
        if version is not None:
            properties["version"] = version
    except Exception:  # noqa: BLE001 - the snapshot is extra information: leave it out
        log.debug("no Iceberg snapshot for %s", location, exc_info=True)
    bounded = ctx.boundedness(node) if node is not None else "BOUNDED"
    return [dataset(*file_dataset_id(location), format="iceberg", fields=fields, symlinks=symlinks,
                    boundedness=bounded, properties=properties)]
