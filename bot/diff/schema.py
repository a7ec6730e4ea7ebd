"""Schema comparison of two tables from their column type maps (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class SchemaDiff:
    """Columns only in the target (added), only in the source (removed), and with a changed type.

    `source` and `target` keep both full schemas in column order, as (name, type) pairs.
    """

    source: tuple[tuple[str, str], ...]
    target: tuple[tuple[str, str], ...]
    added: tuple[tuple[str, str], ...]
    removed: tuple[tuple[str, str], ...]
    modified: tuple[tuple[str, str, str], ...]

    @property
    def has_changes(self) -> bool:
        return bool(self.added or self.removed or self.modified)


def schema_diff(source: Iterable[tuple[str, str]], target: Iterable[tuple[str, str]]) -> SchemaDiff:
    """Compare two schemas given as (column, type) pairs; names compare case-insensitively.

    >>> d = schema_diff([("id", "int"), ("a", "string"), ("b", "int")],
    ...                 [("id", "bigint"), ("a", "string"), ("c", "date")])
    >>> d.added, d.removed, d.modified
    ((('c', 'date'),), (('b', 'int'),), (('id', 'int', 'bigint'),))
    """
    src = tuple((name, typ) for name, typ in source)
    tgt = tuple((name, typ) for name, typ in target)
    src_types = {name.lower(): typ for name, typ in src}
    tgt_types = {name.lower(): typ for name, typ in tgt}
    added = tuple((name, typ) for name, typ in tgt if name.lower() not in src_types)
    removed = tuple((name, typ) for name, typ in src if name.lower() not in tgt_types)
    modified = tuple(
        (name, typ, tgt_types[name.lower()])
        for name, typ in src
        if name.lower() in tgt_types and tgt_types[name.lower()].lower() != typ.lower()
    )
    return SchemaDiff(source=src, target=tgt, added=added, removed=removed, modified=modified)
