"""The audits of a whole environment: each audited model's audits on its table, and the standalone ones."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from bot.project.loader import AuditDefinition
from bot.project.model import Model
from bot.quality.api import AuditReport, AuditResult, raise_for_audits
from bot.quality.audits import run_audits, run_standalone_audits
from bot.spark.engine import SparkEngine


def audit_environment(engine: SparkEngine, *, models: Mapping[str, Model], names: Sequence[str],
                      table_of: Callable[[str], str], table_mapping: Mapping[str, str],
                      audit_defs: Mapping[str, AuditDefinition], variables: Mapping[str, Any],
                      start: int | None = None, end: int | None = None, standalone: bool = True) -> AuditReport:
    """Run the audits of the models `names` on their tables (`table_of`, looked up as each model's
    turn comes), then, with `standalone`, the standalone audits; `table_mapping` is what their
    queries read."""
    results = []
    for name in names:
        results += run_audits(engine=engine, model=models[name], audit_defs=audit_defs, table=table_of(name),
                              start=start, end=end, variables=variables, table_mapping=table_mapping)
    if standalone:
        results += run_standalone_audits(engine, audit_defs=audit_defs, table_mapping=table_mapping,
                                         variables=variables)
    return AuditReport(results=tuple(results))


def standalone_warnings(engine: SparkEngine, *, audit_defs: Mapping[str, AuditDefinition],
                        table_mapping: Mapping[str, str], variables: Mapping[str, Any],
                        execution_time: int | None = None) -> list[AuditResult]:
    """Run the `standalone true` audits on an environment's tables; a blocking failure raises
    QualityError, the non-blocking failures come back as warnings."""
    results = run_standalone_audits(engine, audit_defs=audit_defs, table_mapping=table_mapping,
                                    variables=variables, execution_time=execution_time)
    raise_for_audits(results)
    return [r for r in results if not r.passed]
