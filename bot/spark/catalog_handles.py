"""JVM handles shared by the modules that write entries straight into Spark's session catalog."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class CatalogHandles:
    """The session catalog and the JVM classes every entry copy needs; each use is a socket round trip,
    so they are fetched once per template."""

    session_catalog: Any  # the session's SessionCatalog
    some: Any             # scala.Some
    table_identifier: Any
    converters: Any       # scala.jdk.javaapi.CollectionConverters

    def identifier(self, parts: tuple[str, str]) -> Any:
        schema, name = parts
        return self.table_identifier(name, self.some(schema))

    def entry(self, parts: tuple[str, str]) -> Any:
        """The CatalogTable of `schema.name` (raises when there is none)."""
        return self.session_catalog.getTableMetadata(self.identifier(parts))


def catalog_handles(session: "SparkSession") -> CatalogHandles:
    jvm = session._jvm
    return CatalogHandles(session_catalog=session._jsparkSession.sessionState().catalog(), some=jvm.scala.Some,
                          table_identifier=jvm.org.apache.spark.sql.catalyst.TableIdentifier,
                          converters=jvm.scala.jdk.javaapi.CollectionConverters)


def field_names(entry: Any) -> tuple[str, ...]:
    """A CatalogTable's fields, in its constructor's (and `copy`'s) order."""
    return tuple(str(entry.productElementNames().toList().mkString("\x1f")).split("\x1f"))


def copy_defaults(entry: Any, names: tuple[str, ...], replaced: Collection[str]) -> tuple[Any, ...]:
    """`entry`'s value of each field for `copy`, None for the `replaced` ones (set per copy)."""
    return tuple(None if name in replaced else getattr(entry, f"copy$default${index + 1}")()
                 for index, name in enumerate(names))


def scala_object(package: Any, name: str) -> Any:
    """A Scala object (`name$.MODULE$`) of a JVM package."""
    return getattr(getattr(package, f"{name}$"), "MODULE$")
