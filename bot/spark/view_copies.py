"""New `SELECT * FROM table` views written straight to Spark's session catalog, as copies of one that CREATE VIEW made."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.spark.catalog_handles import CatalogHandles, catalog_handles, copy_defaults, field_names, scala_object

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Spark's CREATE VIEW reads its target through a full analysis (every view beneath it is read from the
# metastore and analyzed again) and makes ~15 metastore calls; a `SELECT * FROM table` view's entry
# is the target's schema plus properties that depend only on the session (captured SQL settings,
# current catalog and namespace) and on the output column names. So after one such view made by
# CREATE VIEW, the next ones copy its entry with their own name, text, schema and column names:
# 7 metastore calls (read the target, write the view) and no analysis. tests/test_view_copies.py compares a copy with the entry
# CREATE VIEW makes, field by field, so a Spark release that changes the entry fails there.
# Every call into the JVM is a socket round trip, so the handles and the session-level part of the
# entry are fetched once per template.

_PER_VIEW_PROPERTY_PREFIX = "view.query.out."
_HIVE_OWN_PROPERTIES = ("transient_lastDdlTime",)
# Spark rewrites CHAR/VARCHAR columns on their way into a view (their declared type stays in this
# metadata key): such views keep CREATE VIEW.
_CHAR_VARCHAR_MARK = "__CHAR_VARCHAR_TYPE_STRING"
_REPLACED_FIELDS = frozenset({"identifier", "schema", "properties", "viewText", "viewOriginalText", "createTime"})


@dataclass(frozen=True)
class ViewTemplate:
    """What copies of a `SELECT * FROM table` view CREATE VIEW made need, fetched from the JVM once."""

    entry: Any                        # its CatalogTable
    field_names: tuple[str, ...]      # CatalogTable's fields, in its constructor's order
    defaults: tuple[Any, ...]         # the entry's value of each field
    session_properties: str           # JSON of its properties that are not per view
    catalog: CatalogHandles
    handles: dict[str, Any]           # JVM classes and helpers of views' own


def read_template(session: "SparkSession", view: tuple[str, str]) -> ViewTemplate | None:
    """The template for later copies: `view`'s entry in the session catalog; None when it is not
    there (a view in another catalog) or not shaped the way this module knows."""
    try:
        jvm = session._jvm
        catalog = catalog_handles(session)
        handles = {
            "maps": scala_object(jvm.scala.collection.immutable, "Map"),
            "mapper": jvm.com.fasterxml.jackson.databind.ObjectMapper(),
            "hash_map": jvm.java.util.HashMap._java_lang_class,
        }
        entry = catalog.entry(view)
        if str(entry.tableType().name()) != "VIEW":
            return None
        names = field_names(entry)
        if not _REPLACED_FIELDS <= set(names):
            return None
        properties = json.loads(str(handles["mapper"].writeValueAsString(
            catalog.converters.asJava(entry.properties()))))
        kept = {key: value for key, value in properties.items()
                if not key.startswith(_PER_VIEW_PROPERTY_PREFIX) and key not in _HIVE_OWN_PROPERTIES}
        defaults = copy_defaults(entry, names, _REPLACED_FIELDS)
    except Exception:  # noqa: BLE001 - any surprise from the JVM side: views keep CREATE VIEW
        return None
    return ViewTemplate(entry=entry, field_names=names, defaults=defaults,
                        session_properties=json.dumps(kept), catalog=catalog, handles=handles)


def create_copy(session: "SparkSession", template: ViewTemplate, view: tuple[str, str],
                target: tuple[str, str], text: str) -> bool:
    """Create `view` as `text` (`SELECT * FROM target`) from `template`; False, with nothing created,
    when the view needs CREATE VIEW: it exists already, the target is missing, has CHAR/VARCHAR
    columns or evolves its schema, or the catalog refused the entry."""
    handles, catalog = template.handles, template.catalog
    try:
        target_entry = catalog.entry(target)
        schema = target_entry.schema()
        schema_json = str(schema.json())
        if _CHAR_VARCHAR_MARK in schema_json or "EVOLUTION" in str(target_entry.properties().get("view.schemaMode")):
            return False
        names = [field["name"] for field in json.loads(schema_json)["fields"]]
        properties = json.loads(template.session_properties)
        properties[f"{_PER_VIEW_PROPERTY_PREFIX}numCols"] = str(len(names))
        properties.update({f"{_PER_VIEW_PROPERTY_PREFIX}col.{index}": name for index, name in enumerate(names)})
        java_properties = handles["mapper"].readValue(json.dumps(properties), handles["hash_map"])
        replaced = {
            "identifier": catalog.identifier(view),
            "schema": schema,
            "properties": getattr(handles["maps"], "from")(catalog.converters.asScala(java_properties)),
            "viewText": catalog.some(text),
            "viewOriginalText": catalog.some(text),
            "createTime": int(time.time() * 1000),
        }
        arguments = [replaced[name] if name in replaced else default
                     for name, default in zip(template.field_names, template.defaults)]
        catalog.session_catalog.createTable(template.entry.copy(*arguments), False, True)
    except Exception:  # noqa: BLE001 - exists already, or anything unexpected: CREATE VIEW decides
        return False
    return True

