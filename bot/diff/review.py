"""A PR's review against prod in one preview pass: each changed model's data diff and Spark plan comparison."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Protocol

from bot.diff.plan_regressions import ExplainedModel, PlanComparison, compare_plans
from bot.diff.prod_vs_pr import ComparedModel, compare_models
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
    concurrent_tasks: int | None = None   # comparisons and EXPLAINs at once on the one session (None: the gateway's)


@dataclass(frozen=True)
class ReviewResult:
    """One data diff per compared model, and one plan comparison per directly modified model (none
    unless asked)."""

    diffs: tuple[ModelDataDiff, ...] = ()
    plan_comparisons: tuple[PlanComparison, ...] = ()


class ReviewedModel(ComparedModel, ExplainedModel, Protocol):
    """A changed model's preview: both sides of its rows and, when asked, both versions' queries
    (bot.plan.preview_queries.PreviewTarget)."""


def review(engine: "SparkEngine", targets: Iterable[ReviewedModel], options: ReviewOptions) -> ReviewResult:
    """Compare the rows of each target and (with `options.plan_queries`) EXPLAIN both versions' queries,
    all while the one preview that built `targets` still holds its temporary views.

    The comparisons and the EXPLAINs are independent queries, so up to `options.concurrent_tasks` run at
    once (each model's comparison, and all the EXPLAINs as one more task): on a small PR each query's
    fixed cost (planning, scheduling, code generation) is most of its time. Results keep the targets' order.
    """
    targets = tuple(targets)
    workers = max(1, min(options.concurrent_tasks or 1, len(targets) + options.plan_queries))
    if workers == 1:
        diffs = compare_models(engine, targets, decimals=options.decimals, show_sample=options.show_sample,
                               limit=options.limit)
        return ReviewResult(diffs=diffs, plan_comparisons=compare_plans(engine, targets) if options.plan_queries else ())
    inherited = engine.job_properties()

    def in_pool(slot: int, work, *args):
        with engine.scheduler_pool(f"meshbot_review_{slot}", inherited):
            return work(*args)

    def compare(target: ReviewedModel):
        return compare_models(engine, (target,), decimals=options.decimals, show_sample=options.show_sample,
                              limit=options.limit)[0]

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="meshbot-review") as pool:
        plans = pool.submit(in_pool, 0, compare_plans, engine, targets) if options.plan_queries else None
        diffs = [pool.submit(in_pool, 1 + index % workers, compare, target) for index, target in enumerate(targets)]
        return ReviewResult(diffs=tuple(diff.result() for diff in diffs),
                            plan_comparisons=plans.result() if plans is not None else ())
