"""The audits of a whole environment: each audited model's audits on its table, and the standalone ones."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from bot.project.loader import AuditDefinition
from bot.project.model import Model
from bot.quality.results import AuditReport, AuditResult, raise_for_audits
from bot.quality.audits import run_audits, run_standalone_audits
from bot.snapshot import SnapshotId
from bot.spark.engine import SparkEngine
from bot.state.protocol import StateSync


def audit_environment(engine: SparkEngine, *, models: Mapping[str, Model], names: Sequence[str],
                      table_of: Callable[[str], str], table_mapping: Mapping[str, str],
                      audit_defs: Mapping[str, AuditDefinition], variables: Mapping[str, Any],
                      start: int | None = None, end: int | None = None, standalone: bool = True,
                      skip_unbuilt: bool = False) -> AuditReport:
    """Run the audits of the models `names` on their tables (`table_of`, looked up as each model's
    turn comes), then, with `standalone`, the standalone audits; `table_mapping` is what their
    queries read. With `skip_unbuilt`, a model `table_mapping` lacks is skipped (AuditReport.skipped)."""
    results = []
    skipped = [name for name in names if skip_unbuilt and name not in table_mapping]
    for name in names:
        if name in skipped:
            continue
        results += run_audits(engine=engine, model=models[name], audit_defs=audit_defs, table=table_of(name),
                              start=start, end=end, variables=variables, table_mapping=table_mapping)
    if standalone:
        results += run_standalone_audits(engine, audit_defs=audit_defs, table_mapping=table_mapping,
                                         variables=variables)
    return AuditReport(results=tuple(results), skipped=tuple(skipped))


def built_tables(state: StateSync, engine: SparkEngine, versions: Mapping[str, str]) -> dict[str, str]:
    """Model name -> the table of its version in `versions` (what the project's files define), where a
    plan stored that version and built its table."""
    stored = state.get_snapshots([SnapshotId(name, version) for name, version in versions.items()])
    return {snapshot.name: snapshot.table_name for snapshot in stored.values()
            if engine.table_exists(snapshot.table_name)}


def standalone_warnings(engine: SparkEngine, *, audit_defs: Mapping[str, AuditDefinition],
                        table_mapping: Mapping[str, str], variables: Mapping[str, Any],
                        execution_time: int | None = None) -> list[AuditResult]:
    """Run the `standalone true` audits on an environment's tables; a blocking failure raises
    QualityError, the non-blocking failures come back as warnings."""
    results = run_standalone_audits(engine, audit_defs=audit_defs, table_mapping=table_mapping,
                                    variables=variables, execution_time=execution_time)
    raise_for_audits(results)
    return [r for r in results if not r.passed]
