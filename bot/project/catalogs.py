"""Catalog-qualified names: the default catalog is mapped away (`jaffle_shop.main.orders` → `main.orders`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from sqlglot import exp

from bot.errors import ConfigError

SPARK_CATALOG = "spark_catalog"   # Spark's session catalog, where meshbot keeps every table and view


@dataclass(frozen=True)
class Catalogs:
    """The catalogs a project's table names may carry (lower-case, sorted: part of the parse cache key).

    `default`: SQLMesh's default catalog (`spark_catalog`, plus config.yaml's `default_catalog`, e.g.
    the DuckDB file name a project was written for); a name in it is the 2-part name.
    `spark`: other catalogs the gateways configure (`spark.sql.catalog.<name>`); a table read there
    keeps its catalog. A model is always in the default catalog.
    """

    default: tuple[str, ...] = (SPARK_CATALOG,)
    spark: tuple[str, ...] = ()

    def describe(self) -> str:
        return ", ".join(f"`{name}`" for name in self.default)

    def model_name(self, name: str, *, path: Path, line: int | None = None) -> str:
        """A normalized model name without its default catalog; another catalog is a ConfigError.

        >>> Catalogs(("jaffle_shop", "spark_catalog")).model_name("jaffle_shop.main.orders", path=Path("m.sql"))
        'main.orders'
        """
        parts = name.split(".")
        if len(parts) != 3:
            return name
        if parts[0] in self.default:
            return ".".join(parts[1:])
        raise ConfigError(f"model `{name}`: catalog `{parts[0]}` is not the default catalog ({self.describe()}; "
                          "set `default_catalog` in config.yaml to the catalog the project was written for): "
                          "meshbot keeps every model in Spark's session catalog", path=path, line=line)

    def reference(self, name: str, *, path: Path, owner: str, line: int | None = None) -> str:
        """A normalized table name (`depends_on`, an external model) without its default catalog; a
        catalog that is neither a default one nor a Spark catalog of a gateway is a ConfigError."""
        parts = name.split(".")
        if len(parts) != 3 or parts[0] in self.spark:
            return name
        if parts[0] in self.default:
            return ".".join(parts[1:])
        raise ConfigError(f"{owner} names `{name}`: {self._unknown(parts[0])}", path=path, line=line)

    def _unknown(self, catalog: str) -> str:
        return (f"catalog `{catalog}` is neither the default catalog ({self.describe()}; set `default_catalog` "
                "in config.yaml to the catalog the project was written for) nor a Spark catalog of a gateway "
                f"(`spark.sql.catalog.{catalog}`)")

    def strip(self, expressions: Iterable[exp.Expression], *, path: Path, owner: str, text: str = "",
              line: int = 1) -> None:
        """Drop the default catalog from every table (and 4-part column) in `expressions`, in place.

        A table's catalog that is neither a default one nor a Spark catalog of a gateway is a ConfigError naming
        the file, the owner (`model \`db.m\``) and the line (found in `text`, which starts at `line`).
        """
        for expression in expressions:
            for node in expression.find_all(exp.Table, exp.Column):
                catalog = node.args.get("catalog")
                if catalog is None or not isinstance(node.this, exp.Identifier):
                    continue
                name = catalog.name.lower()
                if name in self.default:
                    node.set("catalog", None)
                elif isinstance(node, exp.Table) and name not in self.spark:
                    raise ConfigError(f"{owner} reads `{node.sql()}`: {self._unknown(name)}", path=path,
                                      line=_line_of(text, name, line))


def _line_of(text: str, word: str, first: int) -> int:
    match = re.search(rf"\b{re.escape(word)}\b", text, re.I)
    return first + text.count("\n", 0, match.start()) if match else first


def catalogs_of(default_catalog: object, gateway_configs: Iterable[Iterable[tuple[str, str]]], *,
                path: Path) -> Catalogs:
    """Catalogs from config.yaml's `default_catalog` (a name or a list) and the gateways' Spark settings.

    >>> catalogs_of("Jaffle_Shop", [[("spark.sql.catalog.ice", "org.apache.iceberg.spark.SparkCatalog")]], path=Path("c"))
    Catalogs(default=('jaffle_shop', 'spark_catalog'), spark=('ice',))
    """
    names = [] if default_catalog is None else [default_catalog] if isinstance(default_catalog, str) \
        else default_catalog
    if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
        raise ConfigError("`default_catalog` must be a catalog name or a list of names", path=path)
    spark = {key.split(".")[3].lower() for conf in gateway_configs for key, _ in conf
             if key.lower().startswith("spark.sql.catalog.") and key.count(".") == 3}
    default = sorted({SPARK_CATALOG, *(n.strip().lower() for n in names)})
    return Catalogs(default=tuple(default), spark=tuple(sorted(spark - set(default))))
