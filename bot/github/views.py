"""Engine results → the view-models the PR comment's templates render."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable, Mapping

from bot.diff.table_diff import ModelDataDiff
from bot.diff.gates import Finding, Level
from bot.diff.plan_regressions import PlanComparison, plan_rows, summary_line
from bot.diff.rows import ColumnProfile
from bot.github.base_changes import Origin
from bot.github.check_names import CheckName
from bot.plan.definition import BackfillKind, Plan
from bot.plan.estimate import BackfillEstimate, format_seconds, total_seconds
from bot.plan.impact import ColumnChange, ColumnImpact, Exposure, ModelImpact, ValueChange, column_impact
from bot.quality.results import TestSuiteResult
from bot.timeline.times import to_datetime
from bot.report.comment_state import (SECTION_ORDER, CheckState, Marker, checks_marker, kept_sections,
                                      plan_digest_marker, recorded_checks)
from bot.report.markdown import pluralize, render

HEAD_SECTIONS = ("tests", "pr_plan", "diffs", "prod_plan")   # what a run found for one head commit


@dataclass(frozen=True)
class ChangeView:
    name: str
    change: str             # added, removed, directly modified...
    category: str           # Breaking, Non-breaking... or ""
    kind: str
    diff: str = ""
    indirect: tuple[str, ...] = ()
    on_base: bool = False    # already on the PR's base branch, not yet in prod (not this PR's change)


@dataclass(frozen=True)
class BackfillView:
    model: str
    kind: str                # the model's kind as SQLMesh names it (FULL, INCREMENTAL_BY_TIME_RANGE...)
    intervals: int
    start: str
    end: str
    batches: int = 0
    estimate: str = ""       # "~12 min" from recorded batch times; "" when there are none
    executor: str = ""       # "~3.5 h" of Spark task time, from the batches that recorded it; "" when none did


@dataclass(frozen=True)
class PlanView:
    environment: str
    changes: tuple[ChangeView, ...] = ()
    backfills: tuple[BackfillView, ...] = ()
    skipped_backfill: bool = False
    omitted_changes: int = 0
    omitted_backfills: int = 0
    estimated: bool = False      # backfill estimates were asked for
    estimate_total: str = ""     # their serial sum; "" when no model has recorded batch times
    executor_total: str = ""     # the sum of their executor time; "" when no model has it recorded
    base_branch: str = ""        # set when changes were split by origin: the PR's base branch

    @property
    def has_changes(self) -> bool:
        return bool(self.changes) or self.omitted_changes > 0

    @property
    def own_changes(self) -> tuple[ChangeView, ...]:
        return tuple(c for c in self.changes if not c.on_base)

    @property
    def base_changes(self) -> tuple[ChangeView, ...]:
        return tuple(c for c in self.changes if c.on_base)


@dataclass(frozen=True)
class DeployedView:
    """A prod plan after its deploy: what it deployed and computed (its changes and backfills are the PlanView's)."""

    environment: str
    plan_id: str                 # the id `meshbot environments ENV --history` and `/rollback` name
    sha: str                     # the commit deployed
    changes: int
    batches: int                 # batches computed
    models: int                  # models they belong to
    took: str                    # wall time of the apply: "4 s"
    report: str = ""             # what else happened (drift, destructive changes, the run after, the merge)


@dataclass(frozen=True)
class FailureView:
    name: str
    message: str


@dataclass(frozen=True)
class TestsView:
    __test__ = False

    status: str             # passed, failed, error (could not run)
    total: int = 0
    failed: int = 0
    failures: tuple[FailureView, ...] = ()
    message: str = ""


@dataclass(frozen=True)
class SchemaChangeView:
    """A column added, removed or retyped from prod to the PR."""

    change: str          # added, removed or retyped
    column: str
    type: str            # the PR's type (prod's for a removed column)
    prod_type: str = ""  # retyped: the type in prod


@dataclass(frozen=True)
class SampleView:
    """Up to a few rows of one kind of difference (only when `table_diff_samples` is on)."""

    kind: str                               # only in prod, only in PR, changed
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class ProfileView:
    """One compared column, prod → PR: null share, approximate distinct values, min, max, mean."""

    column: str
    match: float | None      # % of the rows matched by key where the column is equal
    nulls: str
    distinct: str
    minimum: str = ""
    maximum: str = ""
    mean: str = ""
    type: str = ""           # the PR's column type ("" when not known)

    @property
    def not_profiled(self) -> str:
        """Why min, max or mean is empty: "n/a (string)" for a type they are not computed for, else ""."""
        return f"n/a ({self.type})" if self.type else "n/a"


@dataclass(frozen=True)
class DiffView:
    """One model compared with prod; prod is the base, the PR the change.

    Counts are disjoint: only in prod, only in PR, matched (same key, same values), changed (same key,
    some value differs). None when not known (no key, or not compared)."""

    model: str
    reason: str = ""                        # directly modified / breaking change upstream
    window: str = ""                        # "2024-01-02 – 2024-01-08 (7 days)" or "whole query"
    previewed: bool = False                 # the PR's rows were computed from a preview (nothing written)
    keys: tuple[str, ...] = ()
    prod_count: int | None = None
    pr_count: int | None = None
    prod_only: int | None = None
    pr_only: int | None = None
    matched: int | None = None
    changed: int | None = None
    columns: tuple[tuple[str, float], ...] = ()
    schema_changes: tuple[SchemaChangeView, ...] = ()
    samples: tuple[SampleView, ...] = ()
    note: str = ""
    gate_failed: bool = False               # a Data Diff gate at level fail fired on this model
    findings: tuple[Finding, ...] = ()      # what the gates said
    profiles: tuple[ProfileView, ...] = ()  # prod → PR per compared column

    @property
    def compared_by_key(self) -> bool:
        return self.matched is not None


@dataclass(frozen=True)
class PrEnvironmentView:
    """What this run did to the PR environment, and how to query it (the changes table is the prod preview's)."""

    name: str
    created: bool = False               # this run created the environment
    applied: int = 0                    # changes this run applied (0: it was already up to date)
    models: tuple[str, ...] = ()        # models that differ from prod
    views: tuple[str, ...] = ()         # their views in the PR environment
    omitted_views: int = 0
    skipped_backfill: bool = False
    backfills: tuple[BackfillView, ...] = ()


@dataclass(frozen=True)
class StatusView:
    """The status line's facts: explicit text, or derived from the checks (never "passed" with a failure)."""

    failed: tuple[CheckState, ...] = ()
    waiting: tuple[CheckState, ...] = ()     # required approval missing, or still in progress
    passed: tuple[CheckState, ...] = ()


@dataclass(frozen=True)
class ColumnChangeView:
    """One column of a model that the PR adds, removes, renames or re-types."""

    model: str
    column: str
    change: str                  # added, removed, renamed, retyped
    new_name: str = ""
    old_type: str = ""
    new_type: str = ""


@dataclass(frozen=True)
class ValueChangeView:
    """A column of a directly modified model whose values may change (bot.plan.impact.ValueChange)."""

    column: str
    why: str                     # expression, rows, opaque
    clauses: tuple[str, ...] = ()
    diff: str = ""               # what the data diff found: "1 of 4 rows changed"; "" when it did not compare


@dataclass(frozen=True)
class ColumnReadView:
    """A downstream model's column reading a changed column; `column` "" when read outside its outputs."""

    model: str
    column: str
    reads_model: str
    reads_column: str
    breaks: bool = False
    effect: str = "values"       # gone, type (breaks, or carries the new type on when not `breaks`), values
    old_type: str = ""           # type: the read column's types before and after
    new_type: str = ""
    diff: str = ""               # what the data diff found for `model.column`, as ValueChangeView.diff


@dataclass(frozen=True)
class ExposureView:
    name: str
    owner: str = ""
    url: str = ""                # http(s) only, else ""


@dataclass(frozen=True)
class ModelImpactView:
    """The column-level impact of one directly modified model (bot.plan.impact)."""

    model: str
    owner: str = ""
    traced: bool = True
    changes: tuple[ColumnChangeView, ...] = ()
    values: tuple[ValueChangeView, ...] = ()          # its columns whose values may change
    propagated: tuple[ColumnChangeView, ...] = ()     # downstream columns changing with it through `SELECT *`
    breaks: tuple[ColumnReadView, ...] = ()
    reads: tuple[ColumnReadView, ...] = ()            # impacted, not breaking
    omitted_reads: int = 0
    reached: int = 0                                  # downstream models reached
    owners: tuple[str, ...] = ()
    exposures: tuple[ExposureView, ...] = ()
    untraced: tuple[str, ...] = ()
    details: bool = True                              # False once shortened: the summary line only


@dataclass(frozen=True)
class ImpactView:
    models: tuple[ModelImpactView, ...] = ()
    omitted: int = 0
    deployed: bool = False     # after the deploy: what the review said, kept as it was said

    @property
    def breaking(self) -> int:
        return sum(1 for m in self.models if m.breaks)


@dataclass(frozen=True)
class PlanRegressionView:
    """One directly modified model's Spark plan, prod's version against the PR's (bot.diff.plan_regressions)."""

    model: str
    summary: str                                   # "lost partition pruning, more shuffles", "no regression"...
    window: str = ""
    failed: bool = False                           # cicd_bot.plan_regressions is fail and something regressed
    findings: tuple[str, ...] = ()
    rows: tuple[tuple[str, str, str], ...] = ()    # (what, prod, PR), folded
    note: str = ""


@dataclass(frozen=True)
class CommentView:
    """Everything the PR comment shows; each section may be None when it did not run."""

    marker: str
    status: str                                 # one-line status; "" derives it from `checks`
    environment: str | None = None
    notices: tuple[str, ...] = ()
    tests: TestsView | None = None
    pr_environment: PrEnvironmentView | None = None
    prod_plan: PlanView | None = None
    deployed: DeployedView | None = None        # set after the deploy: `prod_plan` is what it deployed
    impact: ImpactView | None = None            # column-level impact of the prod plan
    diffs: tuple[DiffView, ...] = ()
    omitted_diffs: int = 0
    plans: tuple[PlanRegressionView, ...] = ()  # Spark plans of the directly modified models against prod
    approval: str | None = None
    approval_status: str | None = None          # success, failure, skipped (the check's conclusion), or waiting
    deploy: str | None = None
    deploy_hint: str | None = None
    drift: str | None = None                    # prod changed by anything but the default branch's deploy
    queue: str | None = None                    # what the merge queue found on the PR's entry (QueueOutcome.text)
    plan_digest: str | None = None
    plan_models: str = ""                       # "name@identifier,..." of the prod plan, for later diffs
    gateway: str | None = None
    shortened: bool = False
    head_sha: str | None = None                 # the commit the checks ran on
    checks: tuple[CheckState, ...] = ()         # this run's checks merged with earlier ones on head_sha
    run_url: str | None = None                  # the workflow run
    approvers: tuple[str, ...] = ()             # who can approve: required approvers' logins
    approver_teams: tuple[str, ...] = ()        # and required teams
    drop: tuple[str, ...] = ()                  # sections of earlier runs that are stale now
    earlier: tuple[tuple[str, str], ...] = ()   # the earlier comment's sections this one keeps (kept_sections)

    @property
    def sections(self) -> tuple[str, ...]:
        """The sections this view writes itself (comment.md.j2 writes each one under this condition)."""
        writes = {"status": bool(self.status or self.notices or self.environment or self.checks or self.run_url),
                  "tests": self.tests is not None, "pr_plan": self.pr_environment is not None,
                  "diffs": bool(self.diffs or self.omitted_diffs or self.plans), "prod_plan": self.prod_plan is not None,
                  "approval": bool(self.approval), "deploy": bool(self.deploy), "hint": bool(self.deploy_hint),
                  "drift": bool(self.drift), "queue": bool(self.queue)}
        return tuple(name for name, written in writes.items() if written)

    def kept(self, name: str) -> str:
        """The earlier comment's section `name`, kept whole; "" when there is none."""
        return next((text for kept, text in self.earlier if kept == name), "")

    @property
    def kept_others(self) -> tuple[str, ...]:
        """Kept sections this release does not know (a newer one wrote them), after the known ones."""
        return tuple(text for name, text in self.earlier if name not in SECTION_ORDER)

    def after(self, old_body: str | None) -> CommentView:
        """This view as the comment that replaces `old_body`: its sections, and the earlier ones it keeps. What
        an earlier run found for another head commit (tests, PR environment, diffs, prod plan) is not kept: a
        review of a new head, or a sync whose preview failed, never shows the old head's preview as current."""
        recorded, _ = recorded_checks(old_body)
        stale = HEAD_SECTIONS if recorded and self.head_sha and recorded != self.head_sha else ()
        return replace(self, earlier=kept_sections(old_body, self.sections, drop=(*self.drop, *stale)))

    @property
    def derived_status(self) -> StatusView:
        failed = tuple(c for c in self.checks if c.failed and c.name != CheckName.APPROVAL)
        waiting = tuple(c for c in self.checks if c.conclusion is None
                        or (c.name == CheckName.APPROVAL and c.failed))
        passed = tuple(c for c in self.checks if c not in failed and c not in waiting)
        return StatusView(failed=failed, waiting=waiting, passed=passed)

    def check_icon(self, check: CheckState) -> str:
        """The status a check shows on the checks line: a required approval still missing is waiting, not failed."""
        if check in self.derived_status.waiting:
            return "in_progress"
        return check.conclusion or "in_progress"

    @property
    def checks_record(self) -> Marker:
        """The checks' hidden record, which later runs read (bot.report.comment_state.recorded_checks)."""
        return checks_marker(self.head_sha, self.checks)

    @property
    def plan_digest_record(self) -> Marker:
        """The prod plan digest's hidden record, which a deploy compares with (recorded_plan_digest)."""
        return plan_digest_marker(self.plan_digest or "", self.plan_models)


# -- building views from engine results ----------------------------------------------------------

def plan_view(plan: Plan, estimates: tuple[BackfillEstimate, ...] | None = None, *,
              origins: Mapping[str, Origin] | None = None, base_branch: str = "") -> PlanView:
    """The comment's view of a plan: its changes, the intervals and batches it backfills and, given
    `estimates` (bot.context.Context.backfill_estimates), how long that should take; given `origins`
    (bot.github.base_changes), which changes are already on `base_branch` rather than the PR's own."""
    changes = tuple(ChangeView(
        name=c.name, change=c.change.value.replace("_", " "),
        category=c.category.label if c.category is not None else "",
        kind=c.kind, diff=c.diff, indirect=c.indirect_children,
        on_base=(origins or {}).get(c.name) is Origin.BASE)
        for c in plan.changes)
    names = {s.snapshot_id: s.name for s in plan.snapshots.values()}
    kinds = {s.snapshot_id: s.kind for s in plan.snapshots.values()}
    timed = dict(zip((b.snapshot_id for b in plan.backfills), estimates)) if estimates is not None else {}
    backfills = tuple(BackfillView(
        model=names.get(b.snapshot_id, b.snapshot_id.name), kind=kinds.get(b.snapshot_id, ""),
        intervals=len(b.intervals), start=_ms(b.intervals[0][0]) if b.intervals else "",
        end=_ms(b.intervals[-1][1]) if b.intervals else "",
        batches=len(b.batches) if b.kind is BackfillKind.INTERVALS else 1,
        estimate=_about(timed[b.snapshot_id].seconds if b.snapshot_id in timed else None),
        executor=_about(timed[b.snapshot_id].executor_seconds if b.snapshot_id in timed else None))
        for b in plan.backfills)
    return PlanView(environment=plan.environment, changes=changes, backfills=backfills,
                    skipped_backfill=plan.options.skip_backfill, estimated=estimates is not None,
                    base_branch=base_branch if origins is not None else "",
                    estimate_total=_about(total_seconds(estimates) if estimates else None),
                    executor_total=_about(total_seconds(estimates, executor=True) if estimates else None))


def deployed_plan_view(plan: Plan, evaluated: tuple[tuple[str, int, int], ...]) -> PlanView:
    """The comment's view of `plan` once applied: its changes, and per model the batches the apply computed
    (`evaluated`: (model, start ms, end ms) per batch) with the span they covered; no estimates."""
    view = plan_view(plan)
    kinds = {s.name: s.kind for s in plan.snapshots.values()}
    planned = {b.model: b.intervals for b in view.backfills}
    spans: dict[str, list[tuple[int, int]]] = {}
    for model, start, end in evaluated:
        spans.setdefault(model, []).append((start, end))
    return replace(view, skipped_backfill=False, backfills=tuple(BackfillView(
        model=model, kind=kinds.get(model, ""), intervals=planned.get(model, 0), batches=len(done),
        start=_ms(min(s for s, _ in done)), end=_ms(max(e for _, e in done))) for model, done in spans.items()))


def _about(seconds: float | None) -> str:
    return f"~{format_seconds(seconds)}" if seconds is not None else ""


def tests_view(result: TestSuiteResult) -> TestsView:
    """The comment's view of a unit test run: how many ran, and each failure's message."""
    failures = tuple(FailureView(name=f.name, message=f.message) for f in result.failures)
    return TestsView(status="passed" if result.passed else "failed", total=len(result.results),
                     failed=len(failures), failures=failures)


def diff_view(result: ModelDataDiff, *, samples: bool = False, sample_rows: int = 10,
              findings: tuple[Finding, ...] = ()) -> DiffView:
    """The comment's view of one model's data diff: counts, per-column match % and profile, schema
    changes from prod to the PR, what the Data Diff gates found, and raw values only with `samples`."""
    schema, rows = result.schema, result.rows
    changes: tuple[SchemaChangeView, ...] = ()
    if schema is not None:
        changes = tuple([SchemaChangeView("added", c, t) for c, t in schema.added]
                        + [SchemaChangeView("removed", c, t) for c, t in schema.removed]
                        + [SchemaChangeView("retyped", c, b, a) for c, a, b in schema.modified])
    view = DiffView(model=result.model, reason=result.reason, window=result.window,
                    previewed=result.previewed, keys=result.keys,
                    prod_count=result.source_count, pr_count=result.target_count,
                    schema_changes=changes, note=result.note,
                    gate_failed=any(f.level is Level.FAIL for f in findings), findings=findings)
    if rows is None:
        return view
    types = {name.lower(): typ for name, typ in (schema.source + schema.target if schema is not None else ())}
    view = replace(view, prod_only=rows.source_only_count, pr_only=rows.target_only_count,
                   matched=rows.full_match_count, changed=rows.partial_match_count,
                   columns=tuple((str(k), float(v)) for k, v in rows.column_match_pct.items()),
                   profiles=tuple(_profile_view(name, rows.column_match_pct.get(name), source, target,
                                                rows.source_count, rows.target_count, types.get(name.lower(), ""))
                                  for name, (source, target) in rows.profiles.items()))
    if samples and rows.samples is not None:
        kinds = (("only in prod", rows.samples.source_only), ("only in PR", rows.samples.target_only),
                 ("changed", rows.samples.changed))
        view = replace(view, samples=tuple(_sample(kind, found[:sample_rows]) for kind, found in kinds if found))
    return view


def plan_regression_views(comparisons: tuple[PlanComparison, ...], *, level: str = "warn"
                          ) -> tuple[PlanRegressionView, ...]:
    """The comment's view of each model's plan comparison; `level` (cicd_bot.plan_regressions) marks
    regressions as failing the Data Diff check."""
    return tuple(PlanRegressionView(model=c.model, summary=summary_line(c), window=c.window,
                                    failed=level == "fail" and bool(c.regressions),
                                    findings=tuple(r.message for r in c.regressions), rows=plan_rows(c), note=c.note)
                 for c in comparisons)


def _profile_view(column: str, match: float | None, source: ColumnProfile, target: ColumnProfile,
                  source_rows: int, target_rows: int, type_: str = "") -> ProfileView:
    def share(nulls: int, total: int) -> str:
        return f"{100.0 * nulls / total:.1f}%" if total else "—"

    def both(a: object, b: object) -> str:
        if a is None and b is None:
            return ""
        left, right = _value(a), _value(b)
        return left if left == right else f"{left} → {right}"

    return ProfileView(column=column, match=match, nulls=both(share(source.nulls, source_rows), share(target.nulls, target_rows)),
                       distinct=both(source.distinct, target.distinct), minimum=both(source.minimum, target.minimum),
                       maximum=both(source.maximum, target.maximum), mean=both(source.mean, target.mean),
                       type=type_)


def _value(value: object) -> str:
    """A profile figure, short: 4 significant digits for floats.

    >>> _value(2.857142857), _value(None), _value(12)
    ('2.857', '—', '12')
    """
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _sample(kind: str, rows: tuple[Mapping[str, object], ...]) -> SampleView:
    columns = tuple(rows[0]) if rows else ()
    labels = tuple(_sample_label(c) for c in columns)
    return SampleView(kind=kind, columns=labels,
                      rows=tuple(tuple("NULL" if r.get(c) is None else str(r.get(c)) for c in columns)
                                 for r in rows))


def _sample_label(column: str) -> str:
    """Changed-row samples carry `s__col` (prod) and `t__col` (PR)."""
    if column.startswith("s__"):
        return f"{column[3:]} (prod)"
    if column.startswith("t__"):
        return f"{column[3:]} (PR)"
    return column


def _ms(value: int) -> str:
    return to_datetime(value).strftime("%Y-%m-%d %H:%M")


MAX_IMPACT_MODELS = 30
MAX_IMPACT_READS = 40


def impact_view(plan: Plan, exposures: tuple[Exposure, ...] = ()) -> ImpactView | None:
    """The comment's column-level impact of `plan` (bot.plan.impact.column_impact, sqlglot only): per directly
    modified model, its column changes, the downstream columns reading them (breaking ones first), and the
    owners and `cicd_bot.exposures` reached; None when no model changes a column."""
    models = tuple(_model_impact_view(m) for m in column_impact(plan, exposures=exposures)
                   if m.changes or m.values or m.impacts or not m.traced)
    if not models:
        return None
    models = tuple(sorted(models, key=lambda m: (not m.breaks, m.model)))
    return ImpactView(models=models[:MAX_IMPACT_MODELS], omitted=max(0, len(models) - MAX_IMPACT_MODELS))


def _model_impact_view(impact: ModelImpact) -> ModelImpactView:
    def change(c: ColumnChange) -> ColumnChangeView:
        return ColumnChangeView(model=c.model, column=c.column, change=c.change, new_name=c.new_name or "",
                                old_type=c.old_type or "", new_type=c.new_type or "")

    def read(i: ColumnImpact) -> ColumnReadView:
        old_type, new_type = i.types or ("", "")
        return ColumnReadView(model=i.model, column=i.column, reads_model=i.reads[0], reads_column=i.reads[1],
                              breaks=i.breaks, effect=i.effect, old_type=old_type, new_type=new_type)

    def value(v: ValueChange) -> ValueChangeView:
        return ValueChangeView(column=v.column, why=v.why, clauses=v.clauses)

    reads = tuple(read(i) for i in impact.impacts if not i.breaks)
    return ModelImpactView(
        model=impact.model, owner=impact.owner or "", traced=impact.traced,
        changes=tuple(change(c) for c in impact.changes), values=tuple(value(v) for v in impact.values),
        propagated=tuple(change(c) for c in impact.propagated),
        breaks=tuple(read(i) for i in impact.breaks), reads=reads[:MAX_IMPACT_READS],
        omitted_reads=max(0, len(reads) - MAX_IMPACT_READS), reached=len(impact.reached), owners=impact.owners,
        exposures=tuple(ExposureView(name=e.name, owner=e.owner or "", url=_http_url(e.url))
                        for e in impact.exposures),
        untraced=impact.untraced)


def impact_with_diffs(impact: ImpactView | None, diffs: tuple[DiffView, ...]) -> ImpactView | None:
    """`impact` with what the data diff found next to each column it says may change: "1 of 4 rows
    changed" where the diff compared that model by key (prod and PR rows joined on it) and that column."""
    found = {d.model: d for d in diffs if d.compared_by_key}
    if impact is None or not found:
        return impact

    def diff(model: str, column: str) -> str:
        view = found.get(model)
        if view is None or not column:
            return ""
        joined = (view.matched or 0) + (view.changed or 0)
        if column in {k.lower() for k in view.keys}:
            return f"key column: {view.prod_only} only in prod, {view.pr_only} only in PR"
        match = {name.lower(): pct for name, pct in view.columns}.get(column)
        if match is None:
            return ""
        return f"{round(joined * (100.0 - match) / 100.0)} of {pluralize(joined, 'row')} changed"

    return replace(impact, models=tuple(replace(
        m, values=tuple(replace(v, diff=diff(m.model, v.column)) for v in m.values),
        breaks=tuple(replace(r, diff=diff(r.model, r.column)) for r in m.breaks),
        reads=tuple(replace(r, diff=diff(r.model, r.column)) for r in m.reads)) for m in impact.models))


def _http_url(url: str | None) -> str:
    """A link target safe in Markdown: http(s), no space or parenthesis; "" otherwise."""
    if not url or not re.fullmatch(r"https?://[^\s()<>]+", url):
        return ""
    return url


@dataclass(frozen=True)
class CheckSummaryView:
    summary: str
    details: tuple[str, ...] = ()
    tests: TestsView | None = None
    plan: PlanView | None = None
    plan_title: str = "Plan"
