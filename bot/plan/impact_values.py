"""Column-level impact of a plan, as values: columns added, removed, renamed, re-typed or computed differently, and the downstream columns, owners and exposures reading them (traced by bot.plan.impact)."""

from __future__ import annotations

from dataclasses import dataclass, field

ADDED, REMOVED, RENAMED, RETYPED = "added", "removed", "renamed", "retyped"
EXPRESSION, ROWS, OPAQUE = "expression", "rows", "opaque"     # why a column's values may change
GONE, TYPE, VALUES = "gone", "type", "values"                  # what a change does to its readers
ROWS_READ = "*"        # ColumnImpact.reads (model, "*"): the column may change because the model's rows may
Source = tuple[str, str]       # (model, column); model "" when the column could not be resolved


@dataclass(frozen=True)
class Exposure:
    """A declared consumer outside the project (cicd_bot.exposures): a dashboard, a report, an export."""

    name: str
    owner: str | None = None
    url: str | None = None
    depends_on: tuple[str, ...] = ()      # model names


@dataclass(frozen=True)
class ColumnChange:
    model: str
    column: str
    change: str                            # added | removed | renamed | retyped
    new_name: str | None = None            # renamed: the column's new name
    old_type: str | None = None            # retyped: the types before and after
    new_type: str | None = None

    @property
    def gone(self) -> bool:
        """The column's old name no longer exists: readers of it break."""
        return self.change in (REMOVED, RENAMED)


@dataclass(frozen=True)
class ValueChange:
    """A column on both sides, same name and type, whose values may change: its expression changed
    (`expression`), a clause deciding the model's rows changed (`rows`: every column, `clauses` say which),
    or the model is no query meshbot can compare (`opaque`: a Python model, a seed's new content)."""

    model: str
    column: str
    why: str                               # expression | rows | opaque
    clauses: tuple[str, ...] = ()          # rows: WHERE, JOIN, GROUP BY... (value_lineage.CLAUSES)


@dataclass(frozen=True)
class ColumnImpact:
    model: str                             # the downstream model
    column: str                            # its output column; "" when read outside the outputs (WHERE, JOIN...)
    reads: Source                          # the changed (or impacted) upstream column it reads
    breaks: bool = False                   # it reads a column that no longer exists
    effect: str = field(default=VALUES, compare=False)             # gone | type (both break) | values
    types: tuple[str, str] = field(default=(), compare=False)      # type: the read column's types, old → new


@dataclass(frozen=True)
class ModelImpact:
    """One directly modified model: its column changes and what they reach downstream."""

    model: str
    owner: str | None = None
    changes: tuple[ColumnChange, ...] = ()
    values: tuple[ValueChange, ...] = ()          # its columns whose values may change (not in `changes`)
    propagated: tuple[ColumnChange, ...] = ()     # downstream models' own columns changing with it (`SELECT *`)
    impacts: tuple[ColumnImpact, ...] = ()
    owners: tuple[str, ...] = ()                  # owners of the downstream models reached
    exposures: tuple[Exposure, ...] = ()          # exposures on the model or a downstream model reached
    untraced: tuple[str, ...] = ()                # downstream models whose columns could not be traced
    traced: bool = True                           # False: this model's own columns are unknown

    @property
    def breaks(self) -> tuple[ColumnImpact, ...]:
        return tuple(i for i in self.impacts if i.breaks)

    @property
    def reached(self) -> tuple[str, ...]:
        """Downstream models reached, in DAG order."""
        names = [i.model for i in self.impacts] + [c.model for c in self.propagated]
        return tuple(dict.fromkeys(names))
