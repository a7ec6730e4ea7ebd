"""A PR's review against prod in one preview pass: each changed model's data diff and Spark plan comparison."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Protocol

from bot.diff.plan_regressions import ExplainedModel, PlanComparison, compare_plans
from bot.diff.previews import ComparedModel, compare_models
from bot.diff.table_diff import ModelDataDiff

if TYPE_CHECKING:
    from bot.spark.engine import SparkEngine


@dataclass(frozen=True)
class ReviewOptions:
    """What a review compares: the PR's rows computed from previews over the last `window_days` days
    (INCREMENTAL_BY_TIME_RANGE; other kinds whole, or not at all with `full_scope` `skip`), or a
    backfilled PR `environment`'s tables over the same windows; rows with `decimals`, `limit` sample
    rows of each kind with `show_sample`; and with `plan_queries` each directly modified model's Spark
    plan against prod's."""

    environment: str | None = None
    window_days: int = 7
    full_scope: str = "whole"
    decimals: int = 3
    show_sample: bool = False
    limit: int = 20
    plan_queries: bool = True


@dataclass(frozen=True)
class ReviewResult:
    """One data diff per compared model, and one plan comparison per directly modified model (none
    unless asked)."""

    diffs: tuple[ModelDataDiff, ...] = ()
    plan_comparisons: tuple[PlanComparison, ...] = ()


class ReviewedModel(ComparedModel, ExplainedModel, Protocol):
    """A changed model's preview: both sides of its rows and, when asked, both versions' queries
    (bot.plan.preview.PreviewTarget)."""


def review(engine: "SparkEngine", targets: Iterable[ReviewedModel], options: ReviewOptions) -> ReviewResult:
    """Compare the rows of each target, then (with `options.plan_queries`) EXPLAIN both versions' queries,
    all while the one preview that built `targets` still holds its temporary views."""
    targets = tuple(targets)
    diffs = compare_models(engine, targets, decimals=options.decimals, show_sample=options.show_sample,
                           limit=options.limit)
    plans = compare_plans(engine, targets) if options.plan_queries else ()
    return ReviewResult(diffs=diffs, plan_comparisons=plans)
