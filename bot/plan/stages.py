"""The stages of applying a plan, in order: the one list the evaluator runs and `plan --explain` describes."""

from __future__ import annotations

from dataclasses import dataclass

from bot.plan.definition import Plan


@dataclass(frozen=True)
class Stage:
    """One step of an apply; `checkpoint` is the fault point at its end (bot.faults), `holds` the leases
    and claims it takes beyond the environment lease held for the whole apply."""

    name: str
    does: str
    checkpoint: str | None = None
    holds: str = ""

    def runs_for(self, plan: Plan) -> bool:
        """Whether this plan has work for the stage (a stage with nothing to do is skipped)."""
        backfills = not plan.options.skip_backfill
        return {"check_parents": backfills, "restate": backfills and bool(plan.restatements),
                "backfill": backfills and bool(plan.backfills),
                "audit_existing": bool(plan.audit_only)}.get(self.name, True)


APPLY_STAGES: tuple[Stage, ...] = (
    Stage("finish_promotion", "finish a promotion a killed plan left unfinished (its views, then finalize)"),
    Stage("before_all", "run the config's before_all statements"),
    Stage("check_names", "check that Spark accepts every view name"),
    Stage("check_parents", "check that every batch's parents hold its interval"),
    Stage("claim_schemas", "check that this state owns the physical schemas, or claim them"),
    Stage("push_snapshots", "store the new snapshots in the state"),
    Stage("create_tables", "create the missing physical tables (a table whose intervals are recorded must exist)"),
    Stage("restate", "remove the restated intervals"),
    Stage("backfill", "compute the missing intervals, batch by batch, recording each at once",
          checkpoint="after-last-batch", holds="`version:<model>:<version>` around each batch"),
    Stage("stop_if_failed", "stop before promotion if a model failed (its table or a batch), naming each "
          "with its error and the models it kept from being built"),
    Stage("audit_existing", "audit the data of models whose audits changed"),
    Stage("promote", "replace the environment's row (one transaction)", checkpoint="after-state-write"),
    Stage("swap_views", "write the environment's views, drop those it no longer serves"),
    Stage("finalize", "mark the environment finalized", checkpoint="after-finalize"),
    Stage("after_all", "run the config's after_all statements"),
)
# a rollback serves snapshots whose tables hold their data already: the apply's own last three stages
PROMOTE_STAGES: tuple[Stage, ...] = tuple(s for s in APPLY_STAGES if s.name in ("promote", "swap_views", "finalize"))
ENVIRONMENT_LEASE = "`environment:<name>`, held from the first stage to the last"


def stages_for(plan: Plan) -> tuple[Stage, ...]:
    """The stages applying `plan` runs, in order.

    >>> from bot.plan.definition import PlanOptions
    >>> plan = Plan("p", "dev", True, None, None, {}, (), (), (), options=PlanOptions(skip_backfill=True))
    >>> [s.name for s in stages_for(plan)][:5]
    ['finish_promotion', 'before_all', 'check_names', 'claim_schemas', 'push_snapshots']
    """
    return tuple(stage for stage in APPLY_STAGES if stage.runs_for(plan))


def stage_lines(plan: Plan) -> list[str]:
    """`plan --explain`'s description of what applying the plan does."""
    lines = [f"Apply stages (holding {ENVIRONMENT_LEASE}):"]
    for index, stage in enumerate(stages_for(plan), start=1):
        holds = f"; holds {stage.holds}" if stage.holds else ""
        lines.append(f"  {index:>2}. {stage.name}: {stage.does}{holds}")
    return lines
