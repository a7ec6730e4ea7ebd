"""New empty Parquet tables written straight to Spark's session catalog, as copies of one that CREATE TABLE made."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.spark.catalog_handles import CatalogHandles, catalog_handles, copy_defaults, field_names, scala_object

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# CREATE TABLE makes ~15 metastore calls (the analyzer and the command each ask whether the schema
# and the table exist, the data source is resolved, the entry is written and read back); the entry
# it hands to the session catalog is a managed Parquet table with no properties, its schema (partition
# columns last) and its partition columns. So after one table made by CREATE TABLE, the next ones
# pass the same entry with their own name, schema and partitions to the session catalog's
# createTable: ~8 metastore calls, and the catalog still checks the schema exists, the table does
# not, and its directory is empty. tests/test_table_copies.py compares a copy with the entry CREATE
# TABLE makes, field by field, so a Spark release that changes the entry fails there.
#
# The analyzer checks a copy skips (column types, names, partition columns) are kept by copying only
# what cannot fail them: distinct plain column names, scalar types Parquet stores as they are, and
# partition columns that are among the columns and leave at least one column out (Spark refuses a
# table of partition columns only); anything else goes through CREATE TABLE.

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SCALAR_TYPE = re.compile(
    r"(boolean|tinyint|smallint|int|integer|bigint|float|double|string|binary|date|timestamp|timestamp_ntz"
    r"|decimal(\(\s*\d+\s*(,\s*\d+\s*)?\))?)", re.IGNORECASE)
_HIVE_OWN_PROPERTIES = frozenset({"transient_lastDdlTime"})
_REPLACED_FIELDS = frozenset({"identifier", "storage", "schema", "partitionColumnNames", "createTime",
                              "properties", "tracksPartitionsInCatalog"})
_MANAGE_PARTITIONS = "spark.sql.hive.manageFilesourcePartitions"


@dataclass(frozen=True)
class TableTemplate:
    """What copies of a table CREATE TABLE made need, fetched from the JVM once."""

    entry: Any                        # its CatalogTable
    field_names: tuple[str, ...]      # CatalogTable's fields, in its constructor's order
    defaults: tuple[Any, ...]         # the entry's value of each field not replaced per table
    tracks_partitions: bool           # whether the catalog keeps a partitioned table's partitions
    catalog: CatalogHandles
    handles: dict[str, Any]           # JVM classes and helpers of tables' own


def copyable(columns: Sequence[tuple[str, str]], partitioned_by: Sequence[str]) -> bool:
    """Whether a table of `columns` (name, Spark type) partitioned by `partitioned_by` can be a copy.

    >>> copyable([("id", "bigint"), ("amount", "decimal(10, 2)"), ("ds", "string")], ["ds"])
    True
    >>> copyable([("id", "int"), ("ID", "int")], []), copyable([("tags", "array<string>")], [])
    (False, False)
    >>> copyable([("id", "int")], ["ds"]), copyable([("my id", "int")], []), copyable([("c", "varchar(3)")], [])
    (False, False, False)
    >>> copyable([("ds", "string")], ["ds"])
    False
    """
    names = [name.lower() for name, _ in columns]
    return (bool(columns) and len(set(names)) == len(names)
            and all(_PLAIN_NAME.fullmatch(name) and _SCALAR_TYPE.fullmatch(kind.strip()) for name, kind in columns)
            and len({name.lower() for name in partitioned_by}) == len(partitioned_by) < len(columns)
            and all(name.lower() in names for name in partitioned_by))


def read_template(session: "SparkSession", table: tuple[str, str]) -> TableTemplate | None:
    """The template for later copies: `table`'s entry in the session catalog, right after CREATE TABLE
    made it; None when it is not there (another catalog) or not a bare managed Parquet table."""
    try:
        jvm = session._jvm
        catalog = catalog_handles(session)
        handles = {
            "struct_type": jvm.org.apache.spark.sql.types.StructType,
            "empty_storage": scala_object(jvm.org.apache.spark.sql.catalyst.catalog, "CatalogStorageFormat").empty(),
            "nil": scala_object(jvm.scala.collection.immutable, "Nil"),
            "no_properties": scala_object(jvm.scala.collection.immutable, "Map").empty(),
            "array_list": jvm.java.util.ArrayList,
        }
        entry = catalog.entry(table)
        properties = set(str(key) for key in catalog.converters.asJava(entry.properties()).keySet())
        if (str(entry.tableType().name()) != "MANAGED" or str(entry.provider().getOrElse(None)).lower() != "parquet"
                or entry.bucketSpec().isDefined() or entry.comment().isDefined() or entry.stats().isDefined()
                or not properties <= _HIVE_OWN_PROPERTIES or not entry.storage().properties().isEmpty()):
            return None
        names = field_names(entry)
        if not _REPLACED_FIELDS <= set(names):
            return None
        defaults = copy_defaults(entry, names, _REPLACED_FIELDS)
        tracks = str(session.conf.get(_MANAGE_PARTITIONS, "true")).lower() == "true"
    except Exception:  # noqa: BLE001 - any surprise from the JVM side: tables keep CREATE TABLE
        return None
    return TableTemplate(entry=entry, field_names=names, defaults=defaults, tracks_partitions=tracks,
                         catalog=catalog, handles=handles)


def create_copy(template: TableTemplate, table: tuple[str, str], columns: Sequence[tuple[str, str]],
                partitioned_by: Sequence[str]) -> bool:
    """Create `table` if it does not exist (as CREATE TABLE IF NOT EXISTS would) from `template`, with
    `columns` in the catalog's order (partition columns last) and `partitioned_by` as named in
    `columns`; False, with nothing created, when the catalog refused the entry."""
    handles, catalog = template.handles, template.catalog
    try:
        ddl = ", ".join(f"`{name}` {kind}" for name, kind in columns)
        partitions = handles["nil"]
        if partitioned_by:
            names = handles["array_list"]()
            for name in partitioned_by:
                names.add(name)
            partitions = catalog.converters.asScala(names).toList()
        replaced = {
            "identifier": catalog.identifier(table),
            "storage": handles["empty_storage"],
            "schema": handles["struct_type"].fromDDL(ddl),
            "partitionColumnNames": partitions,
            "createTime": int(time.time() * 1000),
            "properties": handles["no_properties"],
            "tracksPartitionsInCatalog": bool(partitioned_by) and template.tracks_partitions,
        }
        arguments = [replaced[name] if name in replaced else default
                     for name, default in zip(template.field_names, template.defaults)]
        catalog.session_catalog.createTable(template.entry.copy(*arguments), True, True)
    except Exception:  # noqa: BLE001 - anything unexpected: CREATE TABLE decides, and says what is wrong
        return False
    return True

