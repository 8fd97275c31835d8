"""What a command did to a table itself: created, altered, renamed, truncated, dropped or overwrote it.

The affected table is an output named as its other actions name it (its location, with a ``TABLE``
symlink), with ``lifecycle_change`` (OpenLineage's ``LifecycleStateChangeDatasetFacet``: CREATE, ALTER,
RENAME, TRUNCATE, DROP, OVERWRITE) and the columns it has after the change; a RENAME names the table by its
new name, and ``previous_identifier`` is the dataset it was before.

The listener hears of a command after it ran, and the emitter's worker reads the catalog later still: by then
the next statement may have changed the table again (ALTER then RENAME, RENAME then DROP). So the session
catalog's tables are read in the thread that runs the DDL: ``watch_catalog`` adds a listener to the session
catalog's external catalog, which Spark calls there, before a DROP (``DropTablePreEvent``: the table as it was)
and after an ALTER or a RENAME (``AlterTableEvent``, ``RenameTableEvent``: the table as the command left it).
Each command's extraction takes the oldest read of its table and kind; with none (a catalog without the
watcher) it reads the catalog as it is then, and a TRUNCATE of a table gone since is named as the watcher last
read it. Tables of other catalogs (Iceberg's) are named as this JVM last saw them (``remember``).

A DROP that dropped nothing (the table did not exist: a failed ``DROP TABLE``, or ``IF EXISTS``) is no
lifecycle change, and neither is a RENAME that did not happen (the new name was taken): the action names no
output.

Writes get their change from their operation (``settle``): a CTAS is a CREATE, an overwrite an OVERWRITE.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from lineagewire.schemas.events import Dataset, DatasetId, dataset

from ... import internals
from ..context import Extraction
from ..jvm import option
from ..naming import file_dataset_id
from ..plan import PlanNode
from ..schema import fields_of_struct_json
from .catalog import catalog_table_dataset, hive_format
from .delta import delta_table_v2
from .delta_log import add_write_version
from .iceberg import catalog_namespace, iceberg_datasets, is_iceberg_table
from .v2 import table_as_select

__all__ = ["alter_v1", "alter_v2", "create_v2", "drop_v1", "drop_v2", "remember", "rename_v1", "rename_v2",
           "settle", "table_as_select_named", "truncate_v1", "watch_catalog"]

log = logging.getLogger(__name__)

#: The change a write makes, by the operation its handler named (for outputs that did not say).
_BY_OPERATION = {
    "CreateTable": "CREATE", "CreateTableAsSelect": "CREATE",
    "ReplaceTable": "OVERWRITE", "ReplaceTableAsSelect": "OVERWRITE", "CreateOrReplaceTableAsSelect": "OVERWRITE",
    "CreateOrReplaceTable": "OVERWRITE",
    "Overwrite": "OVERWRITE", "OverwritePartitionsDynamic": "OVERWRITE",
}
#: Tables this JVM named last, by their TABLE symlink: how a dropped table of a catalog without a watcher is named.
_SEEN: OrderedDict[tuple[str, str], Dataset] = OrderedDict()
_SEEN_MAX = 512
_LOCK = threading.Lock()


# -- what writes did ---------------------------------------------------------------------------------------


def settle(ctx: Extraction) -> None:
    """After the outputs are named: the change each write made, and the tables seen, for later DROPs."""
    watch_catalog(ctx)
    for ds in ctx.result.outputs:
        if ds.get("lifecycle_change") is None and ds.get("dataset_type") != "VIEW":
            ds["lifecycle_change"] = _BY_OPERATION.get(ds.get("operation") or "")
    remember(ctx.result.inputs)
    remember(ctx.result.outputs)  # what was written last: its columns are the table's now


def remember(datasets: list[Dataset]) -> None:
    """Keep how each table in ``datasets`` (one with a TABLE symlink) is named, newest last."""
    with _LOCK:
        for ds in datasets:
            # A table dropped is no longer there to be named: a later DROP of its name drops nothing.
            if ds.get("dataset_type") == "VIEW" or ds.get("lifecycle_change") == "DROP":
                continue
            for link in ds.get("symlinks") or []:
                if link["type"] == "TABLE":
                    key = (link["namespace"], link["name"])
                    _SEEN.pop(key, None)
                    _SEEN[key] = ds
        while len(_SEEN) > _SEEN_MAX:
            _SEEN.popitem(last=False)


def _forget(namespace: str, name: str) -> Dataset | None:
    with _LOCK:
        return _SEEN.pop((namespace, name), None)


# -- the watcher of the session catalog --------------------------------------------------------------------


@dataclass(frozen=True)
class _Dropped:
    """A session catalog table as it was just before a DROP."""

    location: str | None
    provider: str | None
    input_format: str | None
    schema: str
    view: bool
    execution: str | None


#: per table, how many of its ALTER and RENAME reads the watcher keeps for extractions still to come
_CHANGES_PER_TABLE = 16


class _CatalogWatcher:
    """An ``ExternalCatalogEventListener``: Spark calls it in the thread that runs the DDL (before a DROP, after an
    ALTER or a RENAME), so the table is read as that command saw it, whatever runs after."""

    def __init__(self, external: Any, context: Any) -> None:
        self.external = external
        self.context = context
        self.dropped: OrderedDict[tuple[str, str], _Dropped] = OrderedDict()
        #: (database, table) -> [(ALTER or RENAME, JVM CatalogTable after it, old name for a RENAME)], oldest first
        self.changed: OrderedDict[tuple[str, str], list[tuple[str, Any, str | None]]] = OrderedDict()
        #: (database, table) -> the JVM CatalogTable as the watcher last read it (after a change, before a DROP)
        self.last: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self.lock = threading.Lock()

    def onEvent(self, event: Any) -> None:  # noqa: N802 - Java interface
        try:
            text = str(event.toString())
            if text.startswith("DropTablePreEvent("):
                self._before_drop(event)
            elif text.startswith("AlterTableEvent(") and not text.endswith(",stats)"):
                # statistics updates (an INSERT's, ANALYZE's) are no lifecycle change
                self._after_change("ALTER", str(event.database()), str(event.name()), None)
            elif text.startswith("RenameTableEvent("):
                self._after_change("RENAME", str(event.database()), str(event.newName()), str(event.name()))
        except Exception:  # noqa: BLE001 - never fail the user's DDL: the change is then read later, as it is then
            log.debug("reading a table changed failed", exc_info=True)

    def _after_change(self, change: str, database: str, name: str, old: str | None) -> None:
        table = self.external.getTable(database, name)
        with self.lock:
            queue = self.changed.setdefault((database, name), [])
            queue.append((change, table, old))
            del queue[:-_CHANGES_PER_TABLE]
            self._keep_last(database, name, table)
            while len(self.changed) > 64:
                self.changed.popitem(last=False)

    def _keep_last(self, database: str, name: str, table: Any) -> None:
        self.last.pop((database, name), None)
        self.last[(database, name)] = table
        while len(self.last) > 64:
            self.last.popitem(last=False)

    def take_change(self, change: str, database: str, name: str) -> tuple[Any, str | None] | None:
        """The oldest read of ``change`` (ALTER or RENAME) of the table not yet taken: (CatalogTable, old name)."""
        with self.lock:
            queue = self.changed.get((database, name)) or []
            for i, (kind, table, old) in enumerate(queue):
                if kind == change:
                    del queue[i]
                    return table, old
        return None

    def last_read(self, database: str, name: str) -> Any:
        with self.lock:
            return self.last.get((database, name))

    def _before_drop(self, event: Any) -> None:
        database, name = str(event.database()), str(event.name())
        table = self.external.getTable(database, name)
        location = option(table.storage().locationUri())
        provider, input_format = option(table.provider()), option(table.storage().inputFormat())
        facts = _Dropped(str(location.toString()) if location is not None else None,
                         provider and str(provider), input_format and str(input_format),
                         str(table.schema().json()), str(table.tableType().name()) == "VIEW",
                         self.context.getLocalProperty("spark.sql.execution.id"))
        with self.lock:
            self.dropped.pop((database, name), None)
            self.dropped[(database, name)] = facts
            while len(self.dropped) > 64:
                self.dropped.popitem(last=False)
            self._keep_last(database, name, table)

    def take(self, database: str, name: str) -> _Dropped | None:
        with self.lock:
            return self.dropped.pop((database, name), None)

    class Java:
        implements = ["org.apache.spark.sql.catalyst.catalog.ExternalCatalogEventListener"]


#: The watcher of each SparkContext's session catalog (every session of a context shares its catalog); weakly held,
#: so a stopped context's entry goes with it.
_WATCHERS: weakref.WeakKeyDictionary[Any, _CatalogWatcher] = weakref.WeakKeyDictionary()


def watch_catalog(ctx: Extraction) -> _CatalogWatcher | None:
    """The watcher of the session catalog of ``ctx``'s session, added the first time (``watch_session``)."""
    context = internals.active_context()
    if context is None:
        return None
    watcher = _WATCHERS.get(context)
    if watcher is not None:
        return watcher
    session = ctx.session()  # a round trip: only until the watcher is there
    return None if session is None else watch_session(session)


def watch_session(jsession: Any) -> _CatalogWatcher | None:
    """Watch the session catalog of the JVM SparkSession ``jsession`` (once per SparkContext), so that a DROP is
    read before the table is gone. The emitter calls it at install, so a job whose first statement is a DROP is
    seen; an extraction calls it too (through ``watch_catalog``) for sessions the emitter did not install on."""
    context = internals.active_context()
    if context is None:
        return None
    watcher = _WATCHERS.get(context)
    if watcher is None:
        try:
            internals.start_callback_server(internals.gateway(context))
            external = jsession.sharedState().externalCatalog()
            watcher = _CatalogWatcher(external, jsession.sparkContext())
            external.addListener(watcher)
        except Exception:  # noqa: BLE001 - no watcher: DROPs are named as tables were seen
            log.debug("cannot watch the session catalog", exc_info=True)
            return None
        _WATCHERS.clear()  # an earlier context's watcher is gone with its JVM catalog
        _WATCHERS[context] = watcher
    return watcher


# -- naming a table --------------------------------------------------------------------------------------


def _session_table(ctx: Extraction, jident: Any, change: str | None = None) -> Dataset | None:
    """A session catalog table (JVM ``TableIdentifier``) as ``change`` (ALTER) left it, read by the watcher when the
    command ran; else as it is now, or as the watcher last read it if it is gone. None for a view or no table."""
    ctx.deadline.check_essential("looking up the table changed")
    catalog = ctx.session().sessionState().catalog()
    jtable = _watched(ctx, catalog, jident, change)
    if jtable is None:
        if not bool(catalog.tableExists(jident)):
            return None
        jtable = catalog.getTableMetadata(jident)
    if str(jtable.tableType().name()) == "VIEW":
        return None
    return catalog_table_dataset(ctx, jtable)


def _watched(ctx: Extraction, catalog: Any, jident: Any, change: str | None) -> Any:
    """The watcher's read of the table for ``change`` (the oldest not yet taken); for no change (a TRUNCATE, which
    the catalog does not announce), its last read if the table is gone since."""
    watcher = watch_catalog(ctx)
    if watcher is None:
        return None
    database = option(jident.database()) or catalog.getCurrentDatabase()
    name = str(jident.table())
    if change is not None:
        taken = watcher.take_change(change, str(database), name)
        return None if taken is None else taken[0]
    return None if bool(catalog.tableExists(jident)) else watcher.last_read(str(database), name)


def _v2_table(ctx: Extraction, node: PlanNode, catalog: Any, ident: Any) -> Dataset:
    """A table of a V2 catalog (Delta's, Iceberg's, the session catalog's V1 tables) as it is now."""
    ctx.deadline.check_essential("looking up the table changed")
    table = catalog.loadTable(ident)
    cls = str(table.getClass().getName())
    fields = fields_of_struct_json(str(table.schema().json()))
    if is_iceberg_table(cls):
        return iceberg_datasets(ctx, None, table, fields, catalog=catalog, ident=ident, write=True)[0]
    if cls.endswith("DeltaTableV2"):
        ds = delta_table_v2(ctx, node, table)[0]
        ds["fields"] = fields
        add_write_version(ctx, ds)
        return ds
    if cls.endswith("V1Table"):
        return catalog_table_dataset(ctx, table.v1Table())
    return dataset(str(catalog.name()), str(ident.toString()), fields=fields)


def _changed(ctx: Extraction, ds: Dataset | None, change: str, operation: str) -> None:
    if ds is None:
        return
    ds["operation"] = operation
    ds["lifecycle_change"] = change
    ctx.add_output(ds, None, None)


def _operation(node: PlanNode) -> str:
    return node.simple.removesuffix("Command")


# -- session catalog (V1) commands -------------------------------------------------------------------------


def alter_v1(ctx: Extraction, node: PlanNode) -> None:
    """``AlterTable{AddColumns,ChangeColumn,SetProperties,UnsetProperties,SetLocation}Command``: the table as
    altered (an ALTER VIEW of the same commands names no table)."""
    if node.fields.get("isView") is True:
        return
    jnode = ctx.j(node)
    jident = jnode.table() if "table" in node.fields else jnode.tableName()
    _changed(ctx, _session_table(ctx, jident, "ALTER"), "ALTER", _operation(node))


def truncate_v1(ctx: Extraction, node: PlanNode) -> None:
    """``TruncateTableCommand``: the table, emptied."""
    _changed(ctx, _session_table(ctx, ctx.j(node).tableName()), "TRUNCATE", _operation(node))


def rename_v1(ctx: Extraction, node: PlanNode) -> None:
    """``AlterTableRenameCommand``: the table by its new name, ``previous_identifier`` the dataset it was.

    A managed table's folder moves with its name: its old one is the catalog's default path for the old name.
    """
    if node.fields.get("isView") is True:
        return
    ctx.deadline.check_essential("looking up the table renamed")
    jnode = ctx.j(node)
    old, new = jnode.oldName(), jnode.newName()
    catalog = ctx.session().sessionState().catalog()
    database = option(new.database()) or option(old.database()) or catalog.getCurrentDatabase()
    jvm = internals.active_jvm()
    new = jvm.org.apache.spark.sql.catalyst.TableIdentifier(str(new.table()), jvm.scala.Option.apply(database))
    renamed = _renamed(ctx, catalog, old, new, str(database))
    if renamed is None:
        return
    ds, jtable = renamed
    if str(jtable.tableType().name()) == "MANAGED":
        namespace, name = file_dataset_id(str(catalog.defaultTablePath(old).toString()))
    else:
        namespace, name = ds["namespace"], ds["name"]
    previous: DatasetId = {"namespace": namespace, "name": name}
    ds["previous_identifier"] = previous
    _changed(ctx, ds, "RENAME", _operation(node))


def _renamed(ctx: Extraction, catalog: Any, old: Any, new: Any, database: str) -> tuple[Dataset, Any] | None:
    """The table a RENAME made and its JVM ``CatalogTable``, as the watcher read it when it happened (whatever ran
    since does not matter), else as the catalog has it now; None for a view or a rename that did not happen."""
    watcher = watch_catalog(ctx)
    taken = watcher.take_change("RENAME", database, str(new.table())) if watcher is not None else None
    if taken is not None:
        jtable = taken[0]
        return None if str(jtable.tableType().name()) == "VIEW" else (catalog_table_dataset(ctx, jtable), jtable)
    if bool(catalog.tableExists(old)):
        return None  # the rename did not happen (the new name was taken): the action failed
    ds = _session_table(ctx, new)
    return None if ds is None else (ds, catalog.getTableMetadata(new))


def drop_v1(ctx: Extraction, node: PlanNode) -> None:
    """``DropTableCommand`` (Spark 3.5's DROP TABLE of a session catalog table)."""
    if node.fields.get("isView") is True:
        return
    ident = node.fields.get("tableName") or {}
    _dropped(ctx, node, "spark_catalog", str(ident.get("database") or "default"), str(ident.get("table", "")))


# -- V2 commands (Delta, Iceberg, the session catalog on Spark 4) ------------------------------------------


def alter_v2(ctx: Extraction, node: PlanNode) -> None:
    """``AddColumns``, ``ReplaceColumns``, ``RenameColumn``, ``AlterColumn(s)``, ``DropColumns``,
    ``SetTableProperties``, ``UnsetTableProperties``, ``SetTableLocation``, ``TruncateTable``: the table as the
    command left it (the plan's ``ResolvedTable`` holds it as it was)."""
    resolved = ctx.j(node).table()
    change = "TRUNCATE" if node.simple == "TruncateTable" else "ALTER"
    catalog, ident = resolved.catalog(), resolved.identifier()
    ds = _watched_v2(ctx, catalog, ident, change)
    _changed(ctx, ds or _v2_table(ctx, node, catalog, ident), change, node.simple)


def _watched_v2(ctx: Extraction, catalog: Any, ident: Any, change: str) -> Dataset | None:
    """A session catalog table of a V2 command (Spark 4) as the watcher read it (``_watched``); None for another
    catalog's, a Delta table's (its columns are in its log, not the catalog) or none read."""
    if str(catalog.name()) != "spark_catalog":
        return None
    namespace = [str(n) for n in ident.namespace()]
    jvm = internals.active_jvm()
    jident = jvm.org.apache.spark.sql.catalyst.TableIdentifier(
        str(ident.name()), jvm.scala.Option.apply(namespace[-1] if namespace else None))
    session_catalog = ctx.session().sessionState().catalog()
    jtable = _watched(ctx, session_catalog, jident, None if change == "TRUNCATE" else change)
    if jtable is None or str(jtable.tableType().name()) == "VIEW" or hive_format(
            option(jtable.provider()), option(jtable.storage().inputFormat())) == "delta":
        return None
    return catalog_table_dataset(ctx, jtable)


def create_v2(ctx: Extraction, node: PlanNode) -> None:
    """``CreateTable`` / ``ReplaceTable`` (a table without data) in a V2 catalog."""
    resolved = ctx.j(node).name()
    if node.simple == "CreateTable":
        change, operation = "CREATE", "CreateTable"
    else:
        change = "OVERWRITE"
        operation = "CreateOrReplaceTable" if node.fields.get("orCreate") is True else "ReplaceTable"
    _changed(ctx, _v2_table(ctx, node, resolved.catalog(), resolved.identifier()), change, operation)


def table_as_select_named(ctx: Extraction, node: PlanNode) -> None:
    """``CreateTableAsSelect`` / ``ReplaceTableAsSelect`` of any V2 catalog: ``v2.table_as_select`` names
    Iceberg's; the others' (Delta's) are named here, so that the CTAS itself says it created the table."""
    before = len(ctx.result.outputs)
    table_as_select(ctx, node)
    if len(ctx.result.outputs) > before:
        return
    query = node.nested.get("query")
    resolved = ctx.j(node).name()
    ds = _v2_table(ctx, node, resolved.catalog(), resolved.identifier())
    if node.simple == "CreateTableAsSelect":
        ds["operation"] = "CreateTableAsSelect"
    else:
        ds["operation"] = "CreateOrReplaceTableAsSelect" if node.fields.get("orCreate") is True \
            else "ReplaceTableAsSelect"
    ctx.add_output(ds, query, None)


def rename_v2(ctx: Extraction, node: PlanNode) -> None:
    """``RenameTable`` of a V2 catalog's table: named by its new name once the old one is gone."""
    ctx.deadline.check_essential("looking up the table renamed")
    jnode = ctx.j(node)
    resolved = jnode.child()
    catalog, old = resolved.catalog(), resolved.identifier()
    parts = _seq(jnode.newName())
    namespace = parts[:-1] or [str(n) for n in old.namespace()]
    jvm = internals.active_jvm()
    new = jvm.org.apache.spark.sql.connector.catalog.Identifier.of(_string_array(namespace), parts[-1])
    ds = _watched_v2(ctx, catalog, new, "RENAME")  # read when it happened: what ran since does not matter
    if ds is None:
        if bool(catalog.tableExists(old)) or not bool(catalog.tableExists(new)):
            return  # the rename did not happen
        ds = _v2_table(ctx, node, catalog, new)
    before = _SEEN.get(_symlink_key(ctx, catalog, old))
    if before is not None:
        previous: DatasetId = {"namespace": before["namespace"], "name": before["name"]}
    else:
        previous = {"namespace": ds["namespace"], "name": ds["name"]}
    ds["previous_identifier"] = previous
    _changed(ctx, ds, "RENAME", "RenameTable")


def drop_v2(ctx: Extraction, node: PlanNode) -> None:
    """``DropTable``: a V2 catalog's DROP TABLE (the session catalog's too, on Spark 4)."""
    ctx.deadline.check_essential("looking up the table dropped")
    resolved = ctx.j(node).child()
    catalog, ident = resolved.catalog(), resolved.identifier()
    namespace = [str(n) for n in ident.namespace()]
    _dropped(ctx, node, str(catalog.name()), namespace[-1] if namespace else "default", str(ident.name()),
             catalog=catalog, ident=ident)


def _dropped(ctx: Extraction, node: PlanNode, catalog_name: str, database: str, table: str,
             catalog: Any = None, ident: Any = None) -> None:
    """The table a DROP dropped, as it was before; none when it dropped nothing."""
    if catalog_name == "spark_catalog":
        watcher = watch_catalog(ctx)
        facts = watcher.take(database, table) if watcher is not None else None
        seen = _forget(ctx.catalog_namespace(), f"{database}.{table}")
        if facts is None:
            # No DropTablePreEvent: the catalog dropped nothing (the table did not exist).
            if watcher is None and seen is not None:
                _changed(ctx, _as_dropped(seen), "DROP", "DropTable")
            return
        if facts.view:
            return
        fmt = hive_format(facts.provider, facts.input_format)
        fields = fields_of_struct_json(facts.schema)
        if fmt == "delta" and seen is not None:
            fields = list(seen["fields"])  # Delta keeps its columns in its log: the catalog's may be the first ones
        location = facts.location or (seen["namespace"] + ":" + seen["name"] if seen else None)
        # A table without a location (none in this catalog) is named by its catalog name, as a view is.
        namespace, name = file_dataset_id(location) if location else (ctx.catalog_namespace(), f"{database}.{table}")
        ds = dataset(namespace, name, format=fmt, fields=fields,
                     symlinks=[ctx.table_symlink(f"{database}.{table}")])
        _changed(ctx, ds, "DROP", "DropTable")
        return
    if catalog is None or ident is None:
        return
    seen = _forget(*_symlink_key(ctx, catalog, ident))
    if seen is None:
        ctx.mark_incomplete(f"DROP TABLE {catalog_name}.{database}.{table}: the table was not seen before it was "
                            "dropped, and its catalog has no watcher: no lifecycle change is reported")
        return
    _changed(ctx, _as_dropped(seen), "DROP", "DropTable")


def _as_dropped(seen: Dataset) -> Dataset:
    """A table as last seen, for its DROP: its name, format, columns and symlinks (no version: it is gone)."""
    props = {k: v for k, v in seen["properties"].items() if k == "catalog"}
    return dataset(seen["namespace"], seen["name"], format=seen["format"], fields=list(seen["fields"]),
                   symlinks=list(seen["symlinks"]), properties=props)


def _symlink_key(ctx: Extraction, catalog: Any, ident: Any) -> tuple[str, str]:
    name = ".".join([*(str(n) for n in ident.namespace()), str(ident.name())])
    catalog_name = str(catalog.name())
    if catalog_name == "spark_catalog":
        return ctx.catalog_namespace(), name
    return catalog_namespace(ctx, catalog_name), name


def _seq(value: Any) -> list[str]:
    return [str(p) for p in str(value.mkString("\u0001")).split("\u0001")]


def _string_array(items: list[str]) -> Any:
    gateway = internals.gateway(internals.active_context())
    out = gateway.new_array(gateway.jvm.java.lang.String, len(items))
    for i, item in enumerate(items):
        out[i] = item
    return out
