"""Run a model's audits (built-in and custom) on Spark: count violating rows, fetch a sample when any."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import sqlglot
from sqlglot import exp

from bot.errors import ConfigError, EngineError
from bot.project.audit_parser import scoped_audit_key
from bot.project.loader import AuditDefinition
from bot.project.model import AuditRef, KindName, Model
from bot.project.render import render_expression
from bot.project.sqltext import parse_sql
from bot.quality.results import AuditResult, BuiltInAudit
from bot.quality.checks import BY_NAME
from bot.quality.checks._args import is_true
from bot.spark.engine import SparkEngine
from bot.spark.sql import spark_sql
from bot.spark.materialize.incremental_time import interval_condition

SAMPLE_SIZE = 5
NON_BLOCKING_SUFFIX = "_non_blocking"
THIS_MODEL = "__meshbot_this_model"   # placeholder table replaced by the audited relation


@dataclass(frozen=True)
class ResolvedAudit:
    """An audit reference bound to its definition: a built-in or a custom AUDIT, and its arguments."""

    name: str
    blocking: bool
    args: dict[str, exp.Expression]
    builtin: BuiltInAudit | None = None
    custom: AuditDefinition | None = None

    @property
    def source(self) -> str:
        """Where a custom audit is written (`audits/accepted.sql:1`); '' for a built-in one."""
        return f"{self.custom.path}:{self.custom.line}" if self.custom is not None else ""


def run_audits(*, engine: SparkEngine, model: Model,
               audit_defs: Mapping[str, AuditDefinition] | None = None, table: str,
               start: int | None = None, end: int | None = None, execution_time: int | None = None,
               variables: Mapping[str, Any] | None = None,
               table_mapping: Mapping[str, str] | None = None) -> list[AuditResult]:
    """Run every audit of `model` against `table` and return one AuditResult per audit, in order.

    `audit_defs` are the project's custom audits (Project.audits). start/end are epoch ms of the
    interval just computed: for an INCREMENTAL_BY_TIME_RANGE model `@this_model` is only the rows of
    [start, end). One query counts every audit's violations; the sample (≤5 rows) is fetched
    only when count > 0.
    Raises nothing for failed audits (see bot.quality.results.raise_for_audits); a Spark error is an
    EngineError naming the audit and model.

    `table_mapping` maps model names to the tables of the environment being planned: a custom
    audit's `FROM db.m` (or `catalog.db.m`) reads those, as the model's query does; the audited
    model's own name always reads `table` (the whole table, while `@this_model` is the interval).
    """
    relation = audited_relation(engine, model=model, table=table, start=start, end=end)
    table_mapping = {**(table_mapping or {}), model.name: table}
    pairs = []
    for ref in model.audits:
        audit = resolve_audit(ref, model=model, audit_defs=audit_defs or {})
        pairs.append((audit, audit_query(audit, model=model, relation=relation, start=start, end=end,
                                         execution_time=execution_time, variables=variables,
                                         table_mapping=table_mapping)))
    counts = _count_together(engine, [query for _, query in pairs]) or [None] * len(pairs)
    return [_evaluate(engine, audit, model, query, count=count)
            for (audit, query), count in zip(pairs, counts)]


def _count_together(engine: SparkEngine, queries: list[exp.Query]) -> list[int] | None:
    """Every audit's violation count from one UNION ALL query (one Spark action instead of one per
    audit); None when there is a single audit or the combined query fails, so that each audit then
    runs on its own and an error names the audit."""
    if len(queries) < 2:
        return None
    parts = [exp.select(exp.alias_(exp.Literal.number(index), "audit", quoted=True),
                        exp.alias_(exp.Count(this=exp.Star()), "violations", quoted=True))
             .from_(query.subquery(f"__audit{index}")) for index, query in enumerate(queries)]
    combined = parts[0]
    for part in parts[1:]:
        combined = exp.union(combined, part, distinct=False)
    try:
        rows = engine.fetch(spark_sql(combined), subject="running audits")
        by_index = {int(row["audit"]): int(row["violations"]) for row in rows}
        return [by_index[index] for index in range(len(queries))]
    except Exception:  # noqa: BLE001 - rerun one by one for a precise error
        return None


def _evaluate(engine: SparkEngine, audit: ResolvedAudit, model: Model, query: exp.Query, *,
              count: int | None = None) -> AuditResult:
    sql = spark_sql(query)
    written = f" ({audit.source})" if audit.source else ""
    subject = f"running audit {audit.name}{written} on model {model.name}"
    try:
        if count is None:
            count = _violations(engine, query, subject=subject)
        sample = engine.fetch(sql, limit=SAMPLE_SIZE, subject=subject) if count else []
    except EngineError:
        raise
    except Exception as error:  # noqa: BLE001 - whatever else the query raised: name the audit
        raise EngineError(f"{subject}: {error}") from error
    return AuditResult(audit=audit.name, model=model.name, blocking=audit.blocking,
                       violation_count=count, sample_rows=tuple(sample), query=sql, source=audit.source)


def _violations(engine: SparkEngine, query: exp.Query, *, subject: str) -> int:
    """How many rows the audit query returns (its violations)."""
    count = exp.select(exp.alias_(exp.Count(this=exp.Star()), "violations", quoted=True))
    row = engine.fetch_one(spark_sql(count.from_(query.subquery("__audit"))), subject=subject)
    return int(row["violations"])


def resolve_audit(ref: AuditRef, *, model: Model,
                  audit_defs: Mapping[str, AuditDefinition]) -> ResolvedAudit:
    """Find the audit `ref` names (custom first, then built-in) and parse its arguments.

    `<name>_non_blocking` and `blocking := false` make it non-blocking.
    """
    name, blocking = ref.name.lower(), ref.blocking
    args = {key.lower(): _parse_arg(text, ref, model) for key, text in ref.args}
    if name.endswith(NON_BLOCKING_SUFFIX) and name not in audit_defs and name not in BY_NAME \
            and scoped_audit_key(name, model.path) not in audit_defs:
        name, blocking = name[: -len(NON_BLOCKING_SUFFIX)], False
    flag = args.pop("blocking", None)
    if flag is not None:
        blocking = is_true(flag, True)
    custom = audit_defs.get(scoped_audit_key(name, model.path)) or audit_defs.get(name)
    if custom is not None:
        defaults = {k.lower(): _parse_default(text, custom) for k, text in custom.defaults}
        return ResolvedAudit(name=name, blocking=blocking and custom.blocking,
                             args={**defaults, **args}, custom=custom)
    builtin = BY_NAME.get(name)
    if builtin is None:
        raise ConfigError(f"model {model.name} uses unknown audit `{ref.name}`", path=model.path,
                          line=model.line)
    missing = [a for a in builtin.required if a not in args]
    unknown = [a for a in args if a not in builtin.required + builtin.optional]
    if missing or unknown:
        problem = (f"missing argument(s) {', '.join(missing)}" if missing
                   else f"unknown argument(s) {', '.join(unknown)}")
        raise ConfigError(f"audit `{name}` of model {model.name}: {problem}", path=model.path,
                          line=model.line)
    return ResolvedAudit(name=name, blocking=blocking, args=args, builtin=builtin)


def _parse_arg(text: str, ref: AuditRef, model: Model) -> exp.Expression:
    try:
        return sqlglot.parse_one(text, read="spark")
    except sqlglot.errors.ParseError as error:
        raise ConfigError(f"audit `{ref.name}` of model {model.name}: cannot parse argument "
                          f"{text!r}: {error}", path=model.path, line=model.line) from error


def _parse_default(text: str, audit: AuditDefinition) -> exp.Expression:
    parsed = parse_sql(text, audit.dialect)
    if len(parsed) != 1:
        raise ConfigError(f"audit `{audit.name}`: default {text!r} is not one expression",
                          path=audit.path, line=audit.line)
    return parsed[0]


def audit_query(audit: ResolvedAudit, *, model: Model, relation: exp.Expression,
                start: int | None = None, end: int | None = None, execution_time: int | None = None,
                variables: Mapping[str, Any] | None = None,
                table_mapping: Mapping[str, str] | None = None) -> exp.Query:
    """The violating-rows query of `audit` over `relation` (a table or an aliased subquery)."""
    if audit.builtin is not None:
        try:
            return audit.builtin.build(relation, **audit.args)
        except (ValueError, TypeError) as error:
            raise ConfigError(f"audit `{audit.name}` of model {model.name}: {error}",
                              path=model.path, line=model.line) from error
    assert audit.custom is not None
    rendered = render_expression(
        audit.custom.query, model=model, dialect=audit.custom.dialect, start=start, end=end,
        execution_time=execution_time, variables={**(variables or {}), **audit.args},
        table_mapping=table_mapping, this_model=THIS_MODEL, runtime_stage="auditing")
    if len(rendered) != 1 or not isinstance(rendered[0], exp.Query):
        raise ConfigError(f"audit `{audit.name}` must be one SELECT query", path=audit.custom.path,
                          line=audit.custom.line)
    return _substitute_this_model(rendered[0], relation)


def _substitute_this_model(query: exp.Query, relation: exp.Expression) -> exp.Query:
    for table in list(query.find_all(exp.Table)):
        if table.name == THIS_MODEL and not table.db:
            replacement = relation.copy()
            alias = table.args.get("alias")
            if alias is not None:
                replacement = (replacement.as_(alias.name, quoted=True, copy=False)
                               if isinstance(replacement, exp.Table) else replacement)
                if isinstance(replacement, exp.Subquery):
                    replacement.set("alias", alias.copy())
            table.replace(replacement)
    return query


def audited_relation(engine: SparkEngine, *, model: Model, table: str, start: int | None,
                     end: int | None) -> exp.Expression:
    """`table`, or for an INCREMENTAL_BY_TIME_RANGE model with an interval, its [start, end) slice
    (the rows a backfill of that interval writes)."""
    target = exp.to_table(table, dialect="spark")
    column = model.kind.time_column
    if model.kind.name is not KindName.INCREMENTAL_BY_TIME_RANGE or column is None \
            or start is None or end is None:
        return target
    types = {name.lower(): typ for name, typ in engine.columns(table)}
    condition = interval_condition(column, types.get(column.lower(), "TIMESTAMP"),
                                   fmt=model.kind.time_column_format, start=start, end=end)
    return exp.select(exp.Star()).from_(target).where(condition).subquery(THIS_MODEL)


def run_standalone_audits(engine: SparkEngine, *, audit_defs: Mapping[str, AuditDefinition],
                          table_mapping: Mapping[str, str], variables: Mapping[str, Any] | None = None,
                          execution_time: int | None = None) -> list[AuditResult]:
    """Run every `standalone true` audit once, its model references read from `table_mapping`
    (the environment's tables); the result's `model` is `standalone`."""
    from bot.project.model import Kind

    results = []
    for key, audit in audit_defs.items():
        if not audit.standalone or key != audit.name:   # an inline one is also under its scoped key
            continue
        owner = Model(name=f"standalone.{audit.name}", kind=Kind(), dialect=audit.dialect, path=audit.path,
                      line=audit.line)
        rendered = render_expression(audit.query, model=owner, dialect=audit.dialect,
                                     execution_time=execution_time, variables=variables or {},
                                     table_mapping=table_mapping, runtime_stage="auditing")
        if len(rendered) != 1 or not isinstance(rendered[0], exp.Query):
            raise ConfigError(f"audit `{audit.name}` must be one SELECT query", path=audit.path, line=audit.line)
        sql = spark_sql(rendered[0])
        subject = f"running standalone audit {audit.name}"
        count = _violations(engine, rendered[0], subject=subject)
        sample = engine.fetch(sql, limit=SAMPLE_SIZE, subject=subject) if count else []
        results.append(AuditResult(audit=audit.name, model="standalone", blocking=audit.blocking,
                                   violation_count=count, sample_rows=tuple(sample), query=sql))
    return results
