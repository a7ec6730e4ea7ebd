"""Apply a plan on Spark: the evaluator's stages, then the standalone audits; what the apply did."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Mapping

from bot.plan.definition import Plan, ProgressCallback, StageCallback
from bot.quality.results import AuditResult

if TYPE_CHECKING:
    from bot.plan.batch_runner import SparkWork
    from bot.plan.env_statements import EnvironmentStatements
    from bot.project.loader import AuditDefinition


@dataclass(frozen=True)
class ApplyResult:
    """What an apply did, for summaries and notifications."""

    plan_id: str
    environment: str
    evaluated: tuple[tuple[str, int, int], ...]   # (model, start ms, end ms) batches computed
    views_created: int
    skipped_backfill: bool = False
    audit_warnings: tuple[AuditResult, ...] = ()
    reused: tuple[tuple[str, int, int], ...] = ()   # batches another process recorded meanwhile


def catalog_only(plan: Plan, audits: Mapping[str, AuditDefinition]) -> bool:
    """True when applying `plan` runs no batch and no audit: only tables, views and state.
    (The config's before_all/after_all statements still run; they are taken to be small.)"""
    standalone = not plan.options.skip_backfill and any(audit.standalone for audit in audits.values())
    return not plan.backfills and not plan.audit_only and not standalone


def apply_plan(plan: Plan, work: SparkWork, *, statements: tuple[EnvironmentStatements, EnvironmentStatements],
               progress: ProgressCallback | None = None, stage_log: StageCallback | None = None) -> ApplyResult:
    """Apply `plan` (its stages in order: tables, backfill unless skipped, promotion, views, with the
    config's before_all and after_all `statements`), then, unless the backfill is skipped, the
    standalone audits on the environment's tables. `stage_log` gets a line as each stage starts and ends."""
    from bot.timeline.times import to_ms
    from bot.quality.audit_report import standalone_warnings

    evaluator, runner = work.evaluator(statements=statements, progress=progress), work.runner
    evaluator = replace(evaluator, stage_log=stage_log)
    log = evaluator.apply(plan)
    if not plan.options.skip_backfill:
        execution = plan.options.execution_time
        log.audit_warnings.extend(standalone_warnings(
            runner.engine, audit_defs=runner.audits, table_mapping=plan.tables(),
            variables=runner.config.variables, execution_time=to_ms(execution) if execution else None))
    return ApplyResult(plan_id=plan.plan_id, environment=plan.environment, evaluated=tuple(log.evaluated),
                       views_created=log.views_created, skipped_backfill=plan.options.skip_backfill,
                       audit_warnings=tuple(log.audit_warnings), reused=tuple(log.reused))
