"""Dataset names (OpenLineage naming, as the events carry them) -> DataHub dataset URNs, and schemas.

After DataHub's own Spark agent (acryl-spark-lineage): the platform comes from the namespace's scheme
(``s3``/``s3a``/``s3n`` -> s3, ``gs`` -> gcs, ``abfs``/``wasb`` -> abs, ``file``, ``hdfs``, ``dbfs``; JDBC
databases by their name: ``postgres://host:5432`` -> postgres, ``sqlserver`` -> mssql...; ``kafka://broker``
-> kafka); a catalog table (a TABLE symlink) is named by its table on ``table_platform`` (hive); an Iceberg
table (format ``iceberg`` with a TABLE symlink) as DataHub's Iceberg source names it: platform ``iceberg``,
name ``db.table``, and its Spark catalog (the ``catalog`` property) as platform instance, or what
``iceberg_platform_instances`` maps it to; partition folders (``key=value``) at the end of a path are stripped
to the table path; ``path_specs`` cut a path after its ``{table}`` segment; env and platform instance are
configurable. Unknown schemes are used as the platform name as they are, unless ``platform_aliases`` maps
them. Every namespace form gets a name, none fails an event: embedded databases (``derby:/path/db``,
``h2:mem:db``, ``sqlite:app.db``) are the scheme's platform with the database's location before the table,
paths without a scheme are ``file``, bare words and other text become a platform name (see ``_parse``); each
unusual form is logged once.
"""

from __future__ import annotations

import fnmatch
import functools
import logging
import re
from typing import Any

from datahub.emitter.mce_builder import make_data_platform_urn, make_dataset_urn_with_platform_instance
from datahub.metadata.schema_classes import (
    ArrayTypeClass,
    BooleanTypeClass,
    BytesTypeClass,
    DateTypeClass,
    MapTypeClass,
    NullTypeClass,
    NumberTypeClass,
    OtherSchemaClass,
    RecordTypeClass,
    SchemaFieldClass,
    SchemaFieldDataTypeClass,
    SchemaMetadataClass,
    StringTypeClass,
    TimeTypeClass,
)

from .config import DataHubConfig

log = logging.getLogger(__name__)

__all__ = ["SCHEME_PLATFORMS", "DatasetNamer", "field_paths", "schema_metadata"]

#: namespace scheme -> DataHub platform (DataHub's agent and OpenLineage's naming conventions)
SCHEME_PLATFORMS: dict[str, str] = {
    "file": "file", "hdfs": "hdfs", "viewfs": "hdfs", "dbfs": "dbfs",
    "s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gcs", "gcs": "gcs",
    "abfs": "abs", "abfss": "abs", "wasb": "abs", "wasbs": "abs",
    "postgres": "postgres", "postgresql": "postgres", "mysql": "mysql", "mariadb": "mariadb",
    "sqlserver": "mssql", "mssql": "mssql", "oracle": "oracle", "redshift": "redshift", "snowflake": "snowflake",
    "bigquery": "bigquery", "trino": "trino", "presto": "presto", "db2": "db2", "teradata": "teradata",
    "clickhouse": "clickhouse", "hive": "hive", "glue": "glue", "kafka": "kafka", "mongodb": "mongodb",
    "cassandra": "cassandra", "elasticsearch": "elasticsearch", "databricks": "databricks",
}
#: platforms whose dataset name is a path (partition folders and path specs apply)
_PATH_PLATFORMS = frozenset({"file", "hdfs", "dbfs", "s3", "gcs", "abs"})
#: platforms whose names carry the bucket / container (the namespace's authority) before the path
_BUCKET_PLATFORMS = frozenset({"s3", "gcs", "abs"})
_PARTITION = re.compile(r"[^=/]+=[^/]*")
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
_DRIVE = re.compile(r"[A-Za-z]:[\\/]")

_TYPES: list[tuple[str, type]] = [
    ("string", StringTypeClass), ("varchar", StringTypeClass), ("char", StringTypeClass),
    ("boolean", BooleanTypeClass), ("bool", BooleanTypeClass),
    ("tinyint", NumberTypeClass), ("smallint", NumberTypeClass), ("int", NumberTypeClass),
    ("bigint", NumberTypeClass), ("long", NumberTypeClass), ("short", NumberTypeClass), ("byte", NumberTypeClass),
    ("float", NumberTypeClass), ("double", NumberTypeClass), ("real", NumberTypeClass),
    ("decimal", NumberTypeClass), ("numeric", NumberTypeClass),
    ("date", DateTypeClass), ("timestamp", TimeTypeClass), ("time", TimeTypeClass),
    ("binary", BytesTypeClass), ("struct", RecordTypeClass), ("array", ArrayTypeClass), ("map", MapTypeClass),
]


class DatasetNamer:
    """Maps an event's dataset (namespace, name, symlinks) to its DataHub URN, with the configured rules."""

    def __init__(self, config: DataHubConfig) -> None:
        self.config = config
        self._urn = functools.lru_cache(maxsize=8192)(self._compute)
        self._logged: set[str] = set()  # unusual namespace forms already logged

    def urn(self, d: dict[str, Any]) -> str:
        """The dataset URN of an event's dataset dict (``namespace``, ``name``, ``symlinks``; for Iceberg ``format``
        and ``properties.catalog``)."""
        table = self._table(d.get("symlinks") or ())
        if table is not None and (d.get("format") or "").lower() == "iceberg":
            return self._urn(d["namespace"], d["name"], table, (d.get("properties") or {}).get("catalog") or "")
        return self._urn(d["namespace"], d["name"], table)

    def urn_of(self, namespace: str, name: str) -> str:
        """The URN of a dataset known only by namespace and name (column lineage inputs)."""
        return self._urn(namespace, name, None)

    def platform(self, urn: str) -> str:
        return urn.split(",", 1)[0].rsplit(":", 1)[-1]

    def _table(self, symlinks: Any) -> str | None:
        if self.config.table_platform is None:
            return None
        for s in symlinks:
            if (s.get("type") or "TABLE").upper() == "TABLE" and s.get("name"):
                return str(s["name"])
        return None

    def _compute(self, namespace: str, name: str, table: str | None, iceberg_catalog: str | None = None) -> str:
        if iceberg_catalog is not None and table is not None:
            return self._iceberg(table, iceberg_catalog)
        if table is not None:
            platform, path = self.config.table_platform or "hive", table
        else:
            platform, path = self._platform_and_name(namespace, name)
        instance = self.config.platform_instances.get(platform, self.config.platform_instance)
        return make_dataset_urn_with_platform_instance(platform, path, instance, self.config.env)

    def _iceberg(self, table: str, catalog: str) -> str:
        """An Iceberg table as DataHub's Iceberg source names it: platform ``iceberg``, ``namespace.table``, and the
        catalog as platform instance (its documentation: "an Iceberg instance represents the catalog name where
        the table is stored"). The Spark catalog's name is the default instance; an event without it (before the
        emitter sent it) gets the configured instance of the platform, if any."""
        if catalog:
            instance: str | None = self.config.iceberg_platform_instances.get(catalog, catalog)
        else:
            instance = self.config.platform_instances.get("iceberg", self.config.platform_instance)
        return make_dataset_urn_with_platform_instance("iceberg", table, instance, self.config.env)

    def _platform_and_name(self, namespace: str, name: str) -> tuple[str, str]:
        """(platform, dataset name) of a namespace and name. Never raises: a namespace of an unusual form (see
        ``_parse``) is named the best way it can be, and logged once per form."""
        scheme, authority, location, kind = _parse(namespace)
        platform = self._platform_of(scheme)
        if not name:
            kind = kind or "an empty dataset name"
            name = location or authority or namespace.strip() or "unnamed"
            location = ""
        if kind is not None:
            self._log_unusual(namespace, kind, platform, f"{location.rstrip('/')}/{name}" if location else name)
        if platform not in _PATH_PLATFORMS:
            # An embedded database's tables are named after its location (two databases may have the same tables).
            return platform, f"{location.rstrip('/')}/{name}" if location else name
        return platform, self._path(platform, authority, location, name)

    def _platform_of(self, scheme: str) -> str:
        """The platform of a namespace's scheme: the configured alias, else DataHub's name for it, else itself."""
        return self.config.platform_aliases.get(scheme) or SCHEME_PLATFORMS.get(scheme) or scheme

    def _log_unusual(self, namespace: str, kind: str, platform: str, example: str) -> None:
        """One warning per unusual namespace form, naming where its datasets go."""
        if kind in self._logged:
            return
        self._logged.add(kind)
        log.warning("dataset namespace %r is %s: its datasets go to platform %r (e.g. %r); other namespaces of "
                    "this form are named the same way without a log line", namespace, kind, platform, example)

    def _path(self, platform: str, authority: str, location: str, name: str) -> str:
        """The dataset name on a platform of paths: a relative name under the location, one slash between
        folders, the bucket in front, no trailing slash, the path specs applied and (if configured) the
        partition folders dropped."""
        if location and not name.startswith("/"):
            name = f"{location.rstrip('/')}/{name}"
        path = re.sub(r"/{2,}", "/", name)
        if platform in _BUCKET_PLATFORMS and authority:
            path = f"{authority.rstrip('/')}/{path.lstrip('/')}"
        if len(path) > 1:
            path = path.rstrip("/")
        path = self._apply_specs(platform, path)
        if self.config.strip_partitions:
            parts = path.split("/")
            while len(parts) > 2 and _PARTITION.fullmatch(parts[-1]):
                parts.pop()
            path = "/".join(parts)
        return path

    def _apply_specs(self, platform: str, path: str) -> str:
        for spec in self.config.path_specs.get(platform, ()):
            pattern = spec.strip("/").split("/")
            parts = path.strip("/").split("/")
            cut = pattern.index("{table}")
            if len(parts) <= cut:
                continue
            if all(p == "{table}" or fnmatch.fnmatchcase(seg, p) for p, seg in zip(pattern[:cut + 1], parts,
                                                                                     strict=False)):
                kept = "/".join(parts[:cut + 1])
                return f"/{kept}" if path.startswith("/") else kept
        return path


def _parse(namespace: str) -> tuple[str, str, str, str | None]:
    """(scheme as a platform key, authority, location, the unusual form or None) of a dataset namespace.

    ``scheme://authority`` is the usual form (``jdbc:`` in front is dropped). The others:
    ``derby:/path/db``, ``h2:mem:db``, ``sqlite:app.db`` (an embedded database: scheme, then its location);
    ``/data`` or ``C:\\data`` (a path: platform ``file``, the path before the name); a bare word such as
    ``warehouse`` (the platform as it is); anything else is made a platform name (lower case, other
    characters as ``-``; ``unknown`` if nothing is left).
    """
    ns = namespace.strip()
    if ns.lower().startswith("jdbc:"):
        ns = ns[5:]
    scheme, sep, authority = ns.partition("://")
    location, kind = "", None
    if not sep:
        head, colon, tail = ns.partition(":")
        authority = ""
        if colon and len(head) > 1 and _SCHEME.fullmatch(head.lower()):
            scheme, location, kind = head, tail, "scheme:location without // (an embedded database)"
        elif ns.startswith(("/", "\\")) or _DRIVE.match(ns):
            scheme, location, kind = "file", ns, "a path without a scheme"
        else:
            scheme = ns
    key = scheme.lower()
    if not _SCHEME.fullmatch(key):
        kind = kind or "not a scheme"
        key = re.sub(r"[^a-z0-9_.-]+", "-", key).strip("-") or "unknown"
    return key, authority, location, kind


def _type_class(native: str) -> Any:
    t = native.strip().lower()
    for prefix, cls in _TYPES:
        if t == prefix or t.startswith((prefix + "(", prefix + "<")):
            return cls()
    return NullTypeClass()


def field_paths(fields: list[dict[str, Any]], prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every field and nested field as (DataHub v1 field path ``a.b``, field dict), depth first."""
    out: list[tuple[str, dict[str, Any]]] = []
    for f in fields:
        path = f"{prefix}{f['name']}"
        out.append((path, f))
        if f.get("fields"):
            out.extend(field_paths(f["fields"], path + "."))
    return out


def schema_metadata(urn: str, platform: str, name: str, fields: list[dict[str, Any]]) -> SchemaMetadataClass:
    """``schemaMetadata`` from the event's schema fields (Spark type names kept as the native type)."""
    return SchemaMetadataClass(
        schemaName=name, platform=make_data_platform_urn(platform), version=0, hash="",
        platformSchema=OtherSchemaClass(rawSchema=""),
        fields=[SchemaFieldClass(fieldPath=path, type=SchemaFieldDataTypeClass(type=_type_class(f["type"])),
                                 nativeDataType=f["type"], nullable=bool(f.get("nullable", True)),
                                 description=f.get("description"))
                for path, f in field_paths(fields)])
