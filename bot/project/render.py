"""Render a model's SQL: expand macros, map table names, transpile to Spark SQL. (Interface stub; see loader helper.)"""

from __future__ import annotations

from typing import Any, Mapping

from sqlglot import exp

from bot.project.model import Model

# Fixed dates used to render queries for fingerprints and plan diffs, so that a query's hash does
# not depend on when the plan runs.
REFERENCE_START = 0                 # 1970-01-01 epoch ms
REFERENCE_END = 86_400_000          # 1970-01-02 epoch ms (exclusive)


def render_query(
    model: Model,
    *,
    start: int | None = None,
    end: int | None = None,
    execution_time: int | None = None,
    variables: Mapping[str, Any] | None = None,
    table_mapping: Mapping[str, str] | None = None,
    models: Mapping[str, Model] | None = None,
    gateway: str = "local",
) -> exp.Query:
    """The model's query as a Spark-dialect AST.

    start/end are epoch ms of the interval [start, end); None means the reference interval.
    `table_mapping` maps model names (`db.orders`) to the names to read (physical tables or views);
    `@this_model` resolves to table_mapping[model.name] when present. `models` lets EMBEDDED
    parents be inlined as subqueries.
    """
    assert model.query is not None, f"{model.name} has no SQL query"
    return model.query.copy()


def render_sql(model: Model, **kwargs: Any) -> str:
    """render_query(...) as Spark SQL text with every identifier quoted."""
    return render_query(model, **kwargs).sql(dialect="spark", identify=True)


def render_statements(model: Model, statements: tuple[exp.Expression, ...], **kwargs: Any) -> list[str]:
    """Pre/post statements rendered like the query (macros expanded, tables mapped), as Spark SQL."""
    return [s.sql(dialect="spark") for s in statements]
