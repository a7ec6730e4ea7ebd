"""The engine's public API: one Context per project, with plan, apply, run, test, audit and table_diff."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from bot.plan.definition import Plan, PlanOptions
from bot.state.api import Environment


@dataclass(frozen=True)
class ApplyResult:
    plan_id: str
    environment: str
    evaluated: tuple[tuple[str, int, int], ...]   # (model, start ms, end ms) batches computed
    views_created: int
    skipped_backfill: bool = False


ProgressCallback = Callable[[str, int, int], None]   # (message, done, total)


class Context:
    """Composition root: loads the project lazily, builds state and Spark only when needed.

    Interface (implemented incrementally):
      plan(environment="prod", options=PlanOptions()) -> Plan           # never starts Spark
      apply(plan, progress=None) -> ApplyResult
      run(environment="prod", execution_time=None) -> ApplyResult
      test(patterns=(), files=()) -> bot.quality TestSuiteResult
      audit(models=(), start=None, end=None) -> bot.quality AuditReport
      table_diff(source, target, model, on=(), skip=(), where=None, decimals=3,
                 show_sample=False, limit=20) -> bot.diff TableDiffResult
      invalidate(environment, sync=False) -> None
      janitor(ignore_ttl=False) -> JanitorResult
      environments() -> list[Environment]
      fetchdf(sql) -> list[dict]
      render(model, start=None, end=None) -> str
      close() -> None
    """

    def __init__(self, path: str | Path = ".", *, gateway: str | None = None) -> None:
        self.path = Path(path).resolve()
        self.gateway_name = gateway

    def plan(self, environment: str = "prod", *, options: PlanOptions = PlanOptions()) -> Plan:
        raise NotImplementedError

    def apply(self, plan: Plan, *, progress: ProgressCallback | None = None) -> ApplyResult:
        raise NotImplementedError

    def environments(self) -> list[Environment]:
        raise NotImplementedError

    def invalidate(self, environment: str, *, sync: bool = False) -> None:
        raise NotImplementedError

    def table_diff(self, source: str, target: str, model: str, *, on: Sequence[str] = (),
                   skip: Sequence[str] = (), where: str | None = None, decimals: int = 3,
                   show_sample: bool = False, limit: int = 20) -> Any:
        raise NotImplementedError

    def test(self, *, patterns: Sequence[str] = (), files: Sequence[str] = ()) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        pass
